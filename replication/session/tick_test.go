package session_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/netsim"
)

// TestEveryTickLeavesInItsOwnPacket: a zone ticking at the send rate (20
// Hz) hands the connection one control state per tick, each reaching it
// 0–20 ms after its tick (the zone's own work, the mailbox, a busy shard);
// the client samples moves at 30 Hz. Every tick's new ack must reach the
// client, in a packet of its own, at once: none may be superseded by the
// next tick's while it waits for a send slot. Before SetControl opened the
// slot, the slot timer ran at the tick rate with a phase of its own, and
// where that phase met the ticks' arrival jitter some slots saw no new tick
// and the next one two: an update skipped, a 100 ms gap for the client —
// botswarm's handoff-hitch p99 of 100 ms in ordinary play. The server still
// sends at most SendRate data packets a second, one per tick.
func TestEveryTickLeavesInItsOwnPacket(t *testing.T) {
	runJitteredTicks(t, 99, func(phase time.Duration, r *tickRun) {
		if limit := uint64(r.runFor/(time.Second/20)) + 2; r.data > limit {
			t.Errorf("phase %v: %d data packets in %v: more than SendRate allows (%d)", phase, r.data, r.runFor, limit)
		}
	})
}

// runJitteredTicks runs runTicks at seven phases, each tick reaching the
// connection 0–20 ms after it (seeded by seed and the phase), checks that
// every tick's ack reached the client at once, and gives each run to more.
func runJitteredTicks(t *testing.T, seed uint64, more func(phase time.Duration, r *tickRun)) {
	t.Helper()
	for _, phase := range []time.Duration{0, 7, 13, 21, 29, 37, 44} {
		phase *= time.Millisecond
		rng := rand.New(seeded(uint64(phase) + seed))
		r := runTicks(t, phase, func(int) time.Duration { return time.Duration(rng.Int64N(int64(20 * time.Millisecond))) })
		r.check(t, phase, 0)
		more(phase, r)
	}
}

// TestAcksRideTheTicks: while the zone ticks, the server's acks ride its
// ticks' packets — no ack-only packet goes between two ticks, however the
// ticks' arrival jitters (0–20 ms here) — and every tick's ack still
// reaches the client at once. Sent at the plain send slot (rule 5), an ack
// went whenever a tick reached the connection a little after the slot, and
// that tick's packet followed it within milliseconds: 3 ack-only packets a
// player-second on top of the 20 ticks' at 1,000 players (cmd/capacity).
func TestAcksRideTheTicks(t *testing.T) {
	runJitteredTicks(t, 7, func(phase time.Duration, r *tickRun) {
		if r.acks != 0 {
			t.Errorf("phase %v: %d ack-only packets in %v of ticks (%d data packets): acks go with the ticks", phase, r.acks, r.runFor, r.data)
		}
	})
}

// TestAcksResumeWhenTicksStop: when the zone's ticks stop (a handoff, a
// zone paused) while the client streams moves, the server answers at its
// plain send rate again, the first answer at most 1.5 slots (tickGrace)
// after the last tick's packet: the acks held for the ticks are held no
// longer than events and ghosts are.
func TestAcksResumeWhenTicksStop(t *testing.T) {
	const tick = 50 * time.Millisecond
	link := netsim.Config{Latency: 5 * time.Millisecond}
	w := newWorld(t, withLink(link, link), withSeed(42))
	w.connect(time.Second)
	var (
		st       move.ControlState
		applied  uint64
		seen     int
		stopAt   = w.now + time.Second
		lastOut  time.Duration
		maxGap   time.Duration
		outAfter int
	)
	for end := stopAt + time.Second; w.now < end; {
		w.now += time.Millisecond
		for w.cli.InputDue(w.now) {
			if _, err := w.cli.Input(move.Move{Forward: 100}); err != nil {
				t.Fatal(err)
			}
		}
		for out, _ := w.cli.Poll(w.now, w.buf[:0]); len(out) > 0; out, _ = w.cli.Poll(w.now, w.buf[:0]) {
			w.pipe.AtoB.Send(w.now, out)
		}
		w.pipe.AtoB.Deliver(w.now, w.serverRecv)
		if w.now < stopAt && w.now%tick == 0 {
			if n := len(w.srvH.moves); n > seen {
				applied, seen = w.srvH.moves[n-1].Seq, n
			}
			w.srv.SetControl(applied, st)
		}
		before := w.srv.Stats().Counters.PacketsOut
		w.serverToClient()
		if w.srv.Stats().Counters.PacketsOut != before {
			if lastOut != 0 && w.now > stopAt {
				maxGap = max(maxGap, w.now-lastOut)
			}
			if w.now > stopAt {
				outAfter++
			}
			lastOut = w.now
		}
	}
	if maxGap > tick+tick/2+time.Millisecond {
		t.Errorf("after the ticks stopped the server was silent for %v (at most 1.5 slots: %v)", maxGap, tick+tick/2)
	}
	if outAfter < 18 {
		t.Errorf("the server sent %d packets in the second after the ticks stopped, want about 20 (its send rate)", outAfter)
	}
}

// TestLateTickIsNotSuperseded: a tick more than half a slot late lets the
// events queued meanwhile go on their own (tickGrace); the late tick, when
// it comes, goes at once — counting the half-slot gap from that events-only
// packet would hold it until the next tick arrived and superseded it.
func TestLateTickIsNotSuperseded(t *testing.T) {
	for _, phase := range []time.Duration{0, 11, 23, 36} {
		phase *= time.Millisecond
		r := runTicks(t, phase, func(k int) time.Duration {
			if k%5 == 0 {
				return 40 * time.Millisecond // past tickGrace: the events went alone
			}
			return 0
		})
		// The tick after a late one arrives 10 ms after it: it waits for
		// the rest of the half slot (tickGap), no longer.
		r.check(t, phase, 25*time.Millisecond)
	}
}

type tickRun struct {
	sent    []uint64 // each tick's new ack, in order
	got     map[uint64]time.Duration
	setAt   map[uint64]time.Duration
	begin   time.Duration
	runFor  time.Duration
	latency time.Duration
	data    uint64 // data packets the server sent
	acks    uint64 // ack-only packets the server sent from the first tick on
	// superseded is the server's own count of the ticks' states it
	// replaced unsent (ServerStats.ControlsSuperseded).
	superseded uint64
}

// runTicks drives one connection for 10 s of virtual time: the client
// samples a move at 30 Hz, a zone ticks every 50 ms from phase, applying
// every move that reached it, and its control state reaches the server
// late(k) after tick k; an event is queued every 70 ms, out of step with
// the ticks (the echoes a zone sends as inputs arrive).
func runTicks(t *testing.T, phase time.Duration, late func(k int) time.Duration) *tickRun {
	t.Helper()
	const tick = 50 * time.Millisecond
	r := &tickRun{got: map[uint64]time.Duration{}, setAt: map[uint64]time.Duration{}, runFor: 10 * time.Second, latency: 5 * time.Millisecond}
	link := netsim.Config{Latency: r.latency}
	w := newWorld(t, withLink(link, link), withSeed(uint64(phase)+1))
	w.connect(time.Second)
	var (
		z        zone
		seen     int // moves of w.srvH.moves applied by z
		k        int
		nextTick = w.now - w.now%tick + tick + phase
		arrive   []pendingTick // ticks computed, not yet at the connection
		lastAck  uint64
	)
	start := w.srv.Stats().Counters.DataOut
	startAcks, ticking := uint64(0), false // ack-only packets counted from the first tick on
	r.begin = w.now
	for end := r.begin + r.runFor; w.now < end; {
		w.now += time.Millisecond
		for w.cli.InputDue(w.now) {
			if _, err := w.cli.Input(move.Move{Forward: 100, Yaw: uint16(w.now / time.Millisecond)}); err != nil {
				t.Fatal(err)
			}
		}
		for out, _ := w.cli.Poll(w.now, w.buf[:0]); len(out) > 0; out, _ = w.cli.Poll(w.now, w.buf[:0]) {
			w.pipe.AtoB.Send(w.now, out)
		}
		w.pipe.AtoB.Deliver(w.now, w.serverRecv)
		if w.now >= nextTick {
			for _, m := range w.srvH.moves[seen:] {
				z.apply(m)
			}
			seen = len(w.srvH.moves)
			arrive = append(arrive, pendingTick{at: nextTick + late(k), applied: z.applied, state: z.state})
			nextTick += tick
			k++
		}
		if w.now%(70*time.Millisecond) == 0 {
			if err := w.srv.SendEvent(0, []byte("echo")); err != nil {
				t.Fatal(err)
			}
		}
		for len(arrive) > 0 && arrive[0].at <= w.now {
			p := arrive[0]
			arrive = arrive[1:]
			if p.applied != 0 && (len(r.sent) == 0 || p.applied != r.sent[len(r.sent)-1]) {
				r.sent = append(r.sent, p.applied)
				r.setAt[p.applied] = w.now
			}
			if !ticking {
				startAcks, ticking = w.srv.Stats().Counters.AckOut, true
			}
			w.srv.SetControl(p.applied, p.state)
		}
		w.serverToClient()
		if a := w.cli.LastAck(); a != lastAck {
			r.got[a], lastAck = w.now, a
		}
		if d := w.srv.NextDeadline(w.now); d <= w.now {
			t.Fatalf("phase %v: server idle at %v with NextDeadline %v", phase, w.now, d)
		}
	}
	r.data = w.srv.Stats().Counters.DataOut - start
	r.acks = w.srv.Stats().Counters.AckOut - startAcks
	r.superseded = w.srv.Stats().ControlsSuperseded
	if len(r.sent) < int(r.runFor/tick)*9/10 {
		t.Fatalf("phase %v: only %d ticks acknowledged new moves", phase, len(r.sent))
	}
	return r
}

// check fails the test if a tick's ack never reached the client, or took
// longer than the link, a millisecond step of the loop and wait.
func (r *tickRun) check(t *testing.T, phase, wait time.Duration) {
	t.Helper()
	skipped, slowest := 0, time.Duration(0)
	for _, a := range r.sent[:len(r.sent)-1] { // the newest may still be on its way
		at, ok := r.got[a]
		if !ok {
			skipped++
			continue
		}
		if r.setAt[a] >= r.begin+time.Second/2 { // the connection's first packets aside
			slowest = max(slowest, at-r.setAt[a])
		}
	}
	if r.superseded != uint64(skipped) {
		t.Errorf("phase %v: the server counted %d superseded control states, the client missed %d acks", phase, r.superseded, skipped)
	}
	if skipped > 0 {
		t.Errorf("phase %v: %d of %d ticks' acks never reached the client (superseded by the next tick's while waiting for a send slot)",
			phase, skipped, len(r.sent))
	}
	if slowest > r.latency+time.Millisecond+wait {
		t.Errorf("phase %v: a tick's ack took %v from the connection to the client (link %v)", phase, slowest, r.latency)
	}
}

type pendingTick struct {
	at      time.Duration
	applied uint64
	state   move.ControlState
}

// TestControlsSupersededCounted: a tick's state replaced by the next one
// before any packet carried it is an update the client never gets; the
// server counts it (the gateway exports it as
// ghostwire_gateway_conn_events_total{event="controls_superseded"}).
func TestControlsSupersededCounted(t *testing.T) {
	w := newWorld(t)
	w.connect(time.Second)
	poll := func() {
		for out, _ := w.srv.Poll(w.now, w.buf[:0], nil); len(out) > 0; out, _ = w.srv.Poll(w.now, w.buf[:0], nil) {
		}
	}
	var st move.ControlState
	w.srv.SetControl(1, st)
	poll() // sent
	w.now += 100 * time.Millisecond
	w.srv.SetControl(2, st)
	w.srv.SetControl(3, st) // replaces 2 unsent
	w.srv.SetControl(3, st) // the same ack again: nothing lost
	poll()
	if got := w.srv.Stats().ControlsSuperseded; got != 1 {
		t.Fatalf("ControlsSuperseded = %d, want 1", got)
	}
}

// TestServerChecksEveryCRC: each client packet's newest move carries the
// client's CRC, and each zone report of a new move compares it — the
// moves handed over in order, the CRC remembered until the report —
// whether the zone keeps up or reports three moves late (the moves then
// arrive with the unacknowledged ones repeated before them). A matching
// prediction corrects nothing.
func TestServerChecksEveryCRC(t *testing.T) {
	for _, lag := range []int{0, 3} {
		t.Run(fmt.Sprintf("lag %d", lag), func(t *testing.T) {
			p := newPairN(t, 0)
			p.lag, p.dt = lag, p.dt+1 // a move every round (BenchmarkServerPacketLagged)
			for range 20 {
				p.step(t)
			}
			c0, m0 := p.srv.Stats().Control, p.srv.Stats().Moves
			const rounds = 200
			for range rounds {
				p.step(t)
			}
			c1, m1 := p.srv.Stats().Control, p.srv.Stats().Moves
			if got := m1.Applied - m0.Applied; got != rounds {
				t.Fatalf("%d moves applied in %d rounds, want one a round", got, rounds)
			}
			if lag > 0 && m1.Duplicates-m0.Duplicates != uint64(lag*rounds) {
				t.Fatalf("%d redundant copies in %d rounds, want %d a round", m1.Duplicates-m0.Duplicates, rounds, lag)
			}
			if got := c1.Checks - c0.Checks; got != rounds {
				t.Fatalf("%d CRCs compared in %d rounds, want one a round", got, rounds)
			}
			if c1.Mismatches != c0.Mismatches || c1.Corrections != c0.Corrections {
				t.Fatalf("%d mismatches, %d corrections: the zone walks the client's moves", c1.Mismatches-c0.Mismatches, c1.Corrections-c0.Corrections)
			}
		})
	}
}
