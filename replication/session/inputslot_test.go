package session_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/netsim"
	"github.com/ghostwire/ghostwire/replication/session"
)

// TestEveryMoveLeavesInItsOwnPacket: the client samples moves at 30 Hz and
// sends at 30 Hz; the game's frame that takes a sample runs 0–4 ms late
// (a busy host), and its input clock started at some phase against the
// connection's send slot. Every data packet must carry exactly one new
// move, each leaving when it is sampled. Before the send slot followed the
// input clock, a slot just after the sample's nominal time raced the late
// frame: some packets carried no new move and the next two, so the zone met
// ticks with no new move (an acknowledgement skipped: botswarm's 100 ms
// handoff hitch, ordinary play's 100 ms control gaps).
func TestEveryMoveLeavesInItsOwnPacket(t *testing.T) {
	for _, phase := range []time.Duration{0, 1, 3, 8, 15, 22, 29, 32, 33} {
		phase *= time.Millisecond
		rng := rand.New(seeded(uint64(phase) + 5))
		link := netsim.Config{Latency: 5 * time.Millisecond}
		w := newWorld(t, withLink(link, link), withSeed(uint64(phase)+3))
		w.connect(time.Second)
		var (
			z         zone
			seen      int
			nextTick  = w.now + 50*time.Millisecond
			sampleAt  = w.now + phase // the frame that takes the first sample
			inputs    uint64          // moves sampled
			atData    uint64          // inputs when the previous data packet left
			sampledAt = map[uint64]time.Duration{}
			none, two int // data packets with no new move, with more than one
			slowest   time.Duration
			data      uint64
		)
		begin := w.now
		settle := begin + 500*time.Millisecond
		const runFor = 10 * time.Second
		for end := begin + runFor; w.now < end; {
			w.now += time.Millisecond
			if w.now >= sampleAt {
				for w.cli.InputDue(w.now) {
					inputs++
					sampledAt[inputs] = w.now
					if _, err := w.cli.Input(move.Move{Forward: 100, Yaw: uint16(inputs)}); err != nil {
						t.Fatal(err)
					}
				}
				// The next frame that samples: the sample's nominal time
				// (the input clock's) plus this frame's lateness.
				sampleAt = begin + phase + time.Duration(inputs)*time.Second/30 + time.Duration(rng.Int64N(int64(5*time.Millisecond)))
			}
			for {
				before := w.cli.Stats().Counters.DataOut
				out, err := w.cli.Poll(w.now, w.buf[:0])
				if err != nil {
					t.Fatal(err)
				}
				if len(out) == 0 {
					break
				}
				if w.cli.Stats().Counters.DataOut > before {
					data++
					if w.now >= settle {
						switch n := inputs - atData; {
						case n == 0:
							none++
						case n > 1:
							two++
						}
						slowest = max(slowest, w.now-sampledAt[inputs])
					}
					atData = inputs
				}
				w.pipe.AtoB.Send(w.now, out)
			}
			w.pipe.AtoB.Deliver(w.now, w.serverRecv)
			if w.now >= nextTick {
				for _, m := range w.srvH.moves[seen:] {
					z.apply(m)
				}
				seen = len(w.srvH.moves)
				w.srv.SetControl(z.applied, z.state)
				nextTick += 50 * time.Millisecond
			}
			w.serverToClient()
			if d := w.cli.NextDeadline(w.now); d <= w.now {
				t.Fatalf("phase %v: client idle at %v with NextDeadline %v", phase, w.now, d)
			}
		}
		if none > 0 || two > 0 {
			t.Errorf("phase %v: of %d data packets, %d carried no new move and %d more than one (input and send slot out of step)",
				phase, data, none, two)
		}
		if slowest > time.Millisecond {
			t.Errorf("phase %v: a move waited %v after its sample for a packet", phase, slowest)
		}
		if limit := uint64(runFor/(time.Second/30)) + 3; data > limit {
			t.Errorf("phase %v: %d data packets in %v: more than SendRate allows (%d)", phase, data, runFor, limit)
		}
		if got := uint64(len(w.srvH.moves)); got+5 < inputs {
			t.Errorf("phase %v: %d of %d moves reached the server", phase, got, inputs)
		}
	}
}

// TestInputOutsideTheClockKeepsTheSendRate: a game that calls Input every
// 60 Hz frame without InputDue (its own pacing) keeps the plain send slots:
// a new move opens the slot only when the input clock paces the moves, or
// such a client would send up to twice SendRate.
func TestInputOutsideTheClockKeepsTheSendRate(t *testing.T) {
	w := newWorld(t, withZone())
	w.connect(time.Second)
	start := w.cli.Stats().Counters.DataOut
	const runFor = 5 * time.Second
	for end := w.now + runFor; w.now < end; {
		if w.now%(50*time.Millisecond/3) < time.Millisecond { // every 16.7 ms
			if _, err := w.cli.Input(move.Move{Forward: 50, Dt: 8}); err != nil {
				t.Fatal(err)
			}
		}
		w.step(time.Millisecond)
	}
	if sent, limit := w.cli.Stats().Counters.DataOut-start, uint64(runFor/(time.Second/30))+2; sent > limit {
		t.Fatalf("%d data packets in %v with moves at 60 Hz: more than SendRate allows (%d)", sent, runFor, limit)
	}
}

// TestContinuedStreamPast32768OnANewConnection: a client that played for
// over 18 minutes (40,000 moves) continues its move stream on a new
// connection (a Redirect or a failover). The new server has applied
// nothing, so a 16-bit sequence could not reach 40,000: every move section
// was rejected and the player stood still after the switch. The sections
// carry the whole sequence until a packet with one is delivered, then the
// short form follows, and every move arrives once, in order.
func TestContinuedStreamPast32768OnANewConnection(t *testing.T) {
	s, err := move.NewStream(move.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := move.NewPredictor(s, move.Walk, move.ControlState{})
	if err != nil {
		t.Fatal(err)
	}
	for s.Newest() < 40000 {
		if _, err := p.Predict(move.Move{Dt: 32, Forward: 60}); err != nil {
			t.Fatal(err)
		}
		s.Ack(max(s.Newest(), 5) - 5) // the old server acknowledged all but the newest 5
	}
	link := netsim.Config{Latency: 5 * time.Millisecond}
	w := newWorld(t, withLink(link, link), withZone())
	session.ContinueMovesFrom(w.cli, s, p)
	w.connect(time.Second)
	for end := w.now + 2*time.Second; w.now < end; {
		for w.cli.InputDue(w.now) {
			if _, err := w.cli.Input(move.Move{Forward: 60}); err != nil {
				t.Fatal(err)
			}
		}
		w.step(time.Millisecond)
	}
	got := w.srvH.moves
	if len(got) < 50 || got[0].Seq != 39996 {
		t.Fatalf("the new server took %d moves, the first %v: want from 39996 on", len(got), got)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Seq != got[i-1].Seq+1 {
			t.Fatalf("moves %d then %d", got[i-1].Seq, got[i].Seq)
		}
	}
	if session.MovesLong(w.cli) {
		t.Fatal("still sending whole sequences after 2 s of delivered packets")
	}
	if st := w.srv.Stats(); st.Counters.ProtocolErrors != 0 {
		t.Fatalf("%d packets the server could not read", st.Counters.ProtocolErrors)
	}
}
