package move

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/netsim"
	"github.com/ghostwire/ghostwire/replication/notify"
)

const ms = time.Millisecond

// inputGen produces a plausible player's input: sticks that change every
// second or so, mouse turning in bursts, rare pitch changes, occasional jumps.
type inputGen struct {
	rng     *rand.Rand
	m       Move
	turn    int
	turning bool
}

func newInputGen(seed uint64) *inputGen {
	return &inputGen{rng: rand.New(rand.NewPCG(seed, 0x6d6f7665))}
}

func (g *inputGen) next(dt uint8) Move {
	r := g.rng
	g.m.Dt = dt
	if r.IntN(30) == 0 {
		axes := [...]int8{-127, 0, 0, 127, 127, 90, -90}
		g.m.Forward = axes[r.IntN(len(axes))]
		g.m.Strafe = axes[r.IntN(len(axes))]
	}
	if r.IntN(20) == 0 {
		g.turning = !g.turning
		g.turn = r.IntN(1200) - 600
	}
	if g.turning {
		g.m.Yaw += uint16(int16(g.turn + r.IntN(41) - 20))
	}
	if r.IntN(60) == 0 {
		g.m.Pitch = int16(r.IntN(2*PitchMax+1) - PitchMax)
	}
	g.m.Buttons &^= ButtonJump
	if r.IntN(90) == 0 {
		g.m.Buttons |= ButtonJump
	}
	return g.m
}

// simConfig describes one client–server run over netsim.
type simConfig struct {
	up, down  netsim.Config // client→server, server→client
	stream    Config
	control   ControlConfig
	moves     int           // moves the client samples while active
	tail      time.Duration // idle sampling after that, so everything settles
	interval  time.Duration // packet interval of each side (default 50 ms)
	budget    int           // client packet bytes for the move section (default 1200)
	noFates   bool          // do not feed fates to the ControlWriter
	seed      uint64
	perturb   func(seq uint64) bool // server-side surprise after applying seq
	calmAfter int                   // if > 0: make both links perfect once this many moves were sampled
	spawn     ControlState          // server's initial state (client starts at zero)
}

// simResult is what a run observed.
type simResult struct {
	sampled      int    // moves the client created
	applied      int    // moves the server applied
	lostTruth    int    // created moves ≤ the server's last applied that it never applied
	acks         int    // control sections the client processed
	ackMismatch  int    // acks at which the predicted state differed from the server's state
	lastMismatch uint64 // highest move seq at which an ack showed a difference
	mismatchAt   []uint64
	final        bool // at the last ack checked, the predicted state equalled the server's
	stream       StreamStats
	applier      ApplierStats
	control      ControlStats
	pred         PredictorStats
	upBits       uint64 // move-section bits sent
	downBits     uint64 // control-section bits sent
	upPkts       uint64
	downPkts     uint64
	upLink       netsim.Stats
	downLink     netsim.Stats
}

type pendingFate struct {
	pkt uint64
}

// runSim drives a Stream+Predictor client against an Applier+ControlWriter
// server through two netsim links. It fails the test on any violation of
// exactly-once in-order application or of move content integrity.
func runSim(t testing.TB, c simConfig) simResult {
	t.Helper()
	if c.interval == 0 {
		c.interval = 50 * ms
	}
	if c.budget == 0 {
		c.budget = 1200
	}
	up, err := netsim.NewLink(c.up)
	if err != nil {
		t.Fatal(err)
	}
	down, err := netsim.NewLink(c.down)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := NewStream(c.stream)
	if err != nil {
		t.Fatal(err)
	}
	pred, err := NewPredictor(stream, Walk, ControlState{})
	if err != nil {
		t.Fatal(err)
	}
	cw, err := NewControlWriter(c.control)
	if err != nil {
		t.Fatal(err)
	}
	var (
		ap         Applier
		server     = c.spawn
		gen        = newInputGen(c.seed)
		created    = []Move{{}} // created[seq]
		serverAt   = []ControlState{c.spawn}
		appliedSet = []bool{false}
		res        simResult
		buf        [1500]byte
		w          bitstream.Writer
		r          bitstream.Reader
		// Notify, modelled at the harness level: the client echoes the
		// highest server packet it received; the server resolves the fates
		// of its packets up to that echo (delivered iff the client got it).
		serverPkt   uint64
		received    = map[uint64]bool{}
		highestRecv uint64
		fates       []pendingFate
	)
	dt := stream.Config().Dt()
	sampleEnd := time.Duration(c.moves) * time.Second / time.Duration(stream.Config().InputRate)
	idleEnd := sampleEnd + c.tail
	end := idleEnd + time.Second // drain: no sampling, packets keep flowing
	nextClientSend, nextServerSend := time.Duration(0), c.interval/2
	calm := false

	serverRecv := func(now time.Duration, p []byte) {
		r.Reset(p)
		echo, err := r.ReadBits(64, "echo")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, f := range fates {
			if f.pkt <= echo {
				if !c.noFates {
					cw.OnFate(notify.Fate{Seq: f.pkt, Delivered: received[f.pkt]})
				}
				n++
			} else {
				break
			}
		}
		fates = fates[n:]
		prev := ap.LastApplied()
		err = ap.Read(&r, func(m Move) {
			if m.Seq <= prev {
				t.Fatalf("move %d applied after %d: not in order / applied twice", m.Seq, prev)
			}
			if m.Seq >= uint64(len(created)) || !sameInput(&m, &created[m.Seq]) {
				t.Fatalf("move %d applied with content %+v, client created %+v", m.Seq, m, created[min(m.Seq, uint64(len(created)-1))])
			}
			prev = m.Seq
			appliedSet[m.Seq] = true
			res.applied++
			server = Walk(server, m, m.Seconds())
			if c.perturb != nil && c.perturb(m.Seq) {
				server.Pos[0] += 0.5 // a collision the client cannot know about
				server.Vel[2] = 0
			}
			cw.Check(m, &server)
			serverAt[m.Seq] = server
		})
		if err != nil {
			t.Fatalf("server Read: %v", err)
		}
	}
	clientRecv := func(now time.Duration, p []byte) {
		r.Reset(p)
		pkt, err := r.ReadBits(64, "pkt")
		if err != nil {
			t.Fatal(err)
		}
		received[pkt] = true
		highestRecv = max(highestRecv, pkt)
		u, err := ReadControl(&r, stream.Newest())
		if err != nil {
			t.Fatalf("client ReadControl: %v", err)
		}
		if u.Ack > 0 && u.Ack >= pred.acked {
			if st, ok := pred.StateAt(u.Ack); ok {
				res.acks++
				res.final = st == serverAt[u.Ack]
				if !res.final {
					res.ackMismatch++
					res.lastMismatch = max(res.lastMismatch, u.Ack)
					res.mismatchAt = append(res.mismatchAt, u.Ack)
				}
			}
		}
		pred.Apply(u)
	}

	for now := time.Duration(0); now <= end; {
		// Deliveries first, then sampling, then sends.
		down.Deliver(now, func(p []byte) { clientRecv(now, p) })
		up.Deliver(now, func(p []byte) { serverRecv(now, p) })
		for now < idleEnd && stream.Due(now) {
			var m Move
			if now < sampleEnd {
				m = gen.next(dt)
			} else {
				m = Move{Dt: dt, Yaw: gen.m.Yaw, Pitch: gen.m.Pitch} // idle
			}
			if _, err := pred.Predict(m); err != nil {
				t.Fatal(err)
			}
			m.Seq = stream.Newest()
			created = append(created, m)
			serverAt = append(serverAt, ControlState{})
			appliedSet = append(appliedSet, false)
			res.sampled++
			if !calm && c.calmAfter > 0 && res.sampled >= c.calmAfter {
				calm = true
				perfect := netsim.Config{Latency: c.up.Latency, Seed: c.up.Seed}
				if err := up.SetConfig(perfect); err != nil {
					t.Fatal(err)
				}
				perfect.Seed = c.down.Seed
				if err := down.SetConfig(perfect); err != nil {
					t.Fatal(err)
				}
			}
		}
		if now >= nextClientSend {
			w.Reset(buf[:c.budget])
			w.WriteBits(highestRecv, 64)
			at := w.BitLen()
			if _, err := stream.Write(&w); err != nil {
				t.Fatal(err)
			}
			res.upBits += uint64(w.BitLen() - at)
			res.upPkts++
			up.Send(now, w.Bytes())
			nextClientSend += c.interval
		}
		if now >= nextServerSend {
			serverPkt++
			w.Reset(buf[:])
			w.WriteBits(serverPkt, 64)
			at := w.BitLen()
			if _, err := cw.Write(&w, serverPkt, now, ap.LastApplied(), &server); err != nil {
				t.Fatal(err)
			}
			res.downBits += uint64(w.BitLen() - at)
			res.downPkts++
			fates = append(fates, pendingFate{pkt: serverPkt})
			down.Send(now, w.Bytes())
			nextServerSend += c.interval
		}
		// Advance to the next event.
		next := min(nextClientSend, nextServerSend)
		if now < idleEnd {
			next = min(next, stream.next)
		}
		if d, ok := up.NextDelivery(); ok {
			next = min(next, d)
		}
		if d, ok := down.NextDelivery(); ok {
			next = min(next, d)
		}
		now = max(next, now+1)
	}
	last := ap.LastApplied()
	for seq := uint64(1); seq <= last; seq++ {
		if !appliedSet[seq] {
			res.lostTruth++
		}
	}
	res.stream, res.applier, res.control, res.pred = stream.Stats(), ap.Stats(), cw.Stats(), pred.Stats()
	res.upLink, res.downLink = up.Stats(), down.Stats()
	return res
}

const pi = 3.141592653589793

func nan() float64 { z := 0.0; return z / z }
