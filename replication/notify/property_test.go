package notify

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/netsim"
)

// netRun drives two endpoints over a netsim.Pipe in 5 ms frames: deliver what
// is due, Tick, send on each side's schedule, pop fates. Every accept and every
// fate is checked against the other side at once (endpoint.peer), and the
// invariants after every frame.
type netRun struct {
	t            *testing.T
	a, b         *endpoint
	pipe         *netsim.Pipe
	ivA, ivB     time.Duration
	nextA, nextB time.Duration
	now          time.Duration
	frame        time.Duration
	maxHdrBits   int
}

func newNetRun(t *testing.T, cfg Config, ab, ba netsim.Config, ivA, ivB time.Duration) *netRun {
	t.Helper()
	pipe, err := netsim.NewPipe(ab, ba)
	if err != nil {
		t.Fatal(err)
	}
	a := newEndpoint(t, "A", cfg, 0, 0)
	b := newEndpoint(t, "B", cfg, 0, 0)
	link(a, b)
	return &netRun{t: t, a: a, b: b, pipe: pipe, ivA: ivA, ivB: ivB, nextB: ivB / 3, frame: 5 * ms}
}

func (n *netRun) deliver(l *netsim.Link, to *endpoint) {
	l.Deliver(n.now, func(p []byte) {
		if _, err := to.recv(n.t, n.now, p); err != nil && !expectedRejection(err) {
			n.t.Fatalf("%s at %v: unexpected rejection %v", to.name, n.now, err)
		}
	})
}

func (n *netRun) send(e *endpoint, l *netsim.Link) {
	bits := e.c.Stats().HeaderBits
	_, p := e.send(n.t, n.now, TypeData)
	n.maxHdrBits = max(n.maxHdrBits, int(e.c.Stats().HeaderBits-bits))
	l.Send(n.now, p)
}

// run advances until the virtual time reaches until.
func (n *netRun) run(until time.Duration) {
	t := n.t
	for ; n.now < until; n.now += n.frame {
		n.deliver(n.pipe.AtoB, n.b)
		n.deliver(n.pipe.BtoA, n.a)
		n.a.c.Tick(n.now)
		n.b.c.Tick(n.now)
		if n.now >= n.nextA {
			n.send(n.a, n.pipe.AtoB)
			n.nextA += n.ivA
		}
		if n.now >= n.nextB {
			n.send(n.b, n.pipe.BtoA)
			n.nextB += n.ivB
		}
		n.a.pop(t)
		n.b.pop(t)
		mustInvariants(t, n.a, n.b)
		for _, e := range []*endpoint{n.a, n.b} {
			if e.c.inRing() > uint64(e.c.cfg.MaxInFlight) {
				t.Fatalf("%s holds %d records", e.name, e.c.inRing())
			}
		}
	}
}

// drainAndCheck turns impairments off, keeps traffic flowing for d, then
// demands that every packet sent before the drain has its fate, and that the
// fates equal what the receiver accepted, exactly.
func (n *netRun) drainAndCheck(d time.Duration) {
	t := n.t
	sentA, sentB := n.a.c.NextSeq(), n.b.c.NextSeq()
	for _, l := range []*netsim.Link{n.pipe.AtoB, n.pipe.BtoA} {
		cfg := l.Config()
		cfg.Loss, cfg.Reorder, cfg.Duplicate, cfg.Burst = 0, 0, 0, nil
		if err := l.SetConfig(cfg); err != nil {
			t.Fatal(err)
		}
	}
	start := n.now
	n.run(n.now + d)
	for _, e := range []*endpoint{n.a, n.b} {
		want := sentA
		if e == n.b {
			want = sentB
		}
		if e.nextFate < want {
			t.Fatalf("%s: %v after the drain began, fates reach only seq %d of %d sent before it", e.name, n.now-start, e.nextFate, want)
		}
		st := e.c.Stats()
		if st.WindowEvicted != 0 || st.ForcedDrops != 0 || st.TooFar != 0 || st.BadHeader != 0 {
			t.Fatalf("%s: corner counters moved: %+v", e.name, st)
		}
	}
	checkAgreement(t, n.a, n.b)
	checkAgreement(t, n.b, n.a)
}

// falseDrops counts e's packets reported dropped although they reached the peer.
func falseDrops(e *endpoint) (false_, total int) {
	for s, d := range e.fateOf {
		total++
		if !d && e.peer.arrived[s] {
			false_++
		}
	}
	return
}

// TestPropertyNetsim is the property test: many seeds, loss 0–50%, 10%
// reordering, 5% duplication, jitter; 100,000 packets in total. The sender's
// delivered set equals the receiver's accepted set exactly, fates come exactly
// once and in order, and nothing is ever falsely reported delivered.
func TestPropertyNetsim(t *testing.T) {
	const seeds = 20
	const perSeed = 100_000 / seeds
	var pkts, fd, fates int
	for i := 0; i < seeds; i++ {
		rng := rand.New(rand.NewPCG(uint64(i), 0x6e6f74))
		loss := 0.5 * float64(i) / (seeds - 1)
		ivB := []time.Duration{16 * ms, 33 * ms, 50 * ms, 100 * ms}[i%4]
		link := func() netsim.Config {
			c := netsim.DefaultConfig()
			c.Seed = rng.Uint64()
			c.Loss = loss
			c.Latency = time.Duration(20+rng.IntN(80)) * ms
			c.Jitter = time.Duration(2+rng.IntN(15)) * ms
			c.AllowJitterReorder = i%2 == 0
			c.Reorder = 0.10
			c.ReorderDelay = time.Duration(10+rng.IntN(70)) * ms
			c.Duplicate = 0.05
			return c
		}
		name := fmt.Sprintf("seed %d loss %.0f%% B every %v", i, 100*loss, ivB)
		t.Run(name, func(t *testing.T) {
			ab, ba := link(), link()
			n := newNetRun(t, DefaultConfig(), ab, ba, 50*ms, ivB)
			for int(n.a.c.NextSeq()+n.b.c.NextSeq()) < perSeed {
				n.run(n.now + time.Second)
			}
			n.drainAndCheck(3 * time.Second)
			pkts += int(n.a.c.NextSeq() + n.b.c.NextSeq())
			for _, e := range []*endpoint{n.a, n.b} {
				f, tot := falseDrops(e)
				fd += f
				fates += tot
			}
			if loss > 0 && n.a.c.Stats().Dropped == 0 {
				t.Fatal("lossy link but nothing dropped: the test is not exercising loss")
			}
		})
	}
	if pkts < 100_000 {
		t.Fatalf("exchanged %d packets, want ≥ 100000", pkts)
	}
	t.Logf("%d packets, %d fates; false drops (reached the peer, reported dropped: netsim reorder delays up to 80 ms): %d (%.3f%%)",
		pkts, fates, fd, 100*float64(fd)/float64(fates))
}

// TestDisplacementFalseDrops builds the displacement scenario
// explicitly: 10% of A's packets are held back and released right after the
// 1st–3rd later packet (counted in send order, lost or not). Bound: ≤ 0.5%
// false drops; by construction (K = 4, reorder time ≥ 5 intervals) it is 0.
func TestDisplacementFalseDrops(t *testing.T) {
	for _, tc := range []struct {
		name string
		loss float64
		n    int
	}{
		{"no loss", 0, 20000},
		{"10% loss", 0.10, 20000},
		{"30% loss", 0.30, 10000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(42, uint64(tc.loss*100)))
			a := newEndpoint(t, "A", DefaultConfig(), 0, 0)
			b := newEndpoint(t, "B", DefaultConfig(), 0, 0)
			link(a, b)
			var net wire
			type held struct {
				p    []byte
				seq  uint64
				left int
			}
			var holds []held
			const iv, lat = 50 * ms, 50 * ms
			displaced := 0
			now := time.Duration(0)
			for sent := 0; sent < tc.n; now += 5 * ms {
				net.deliverAll(t, now)
				a.c.Tick(now)
				b.c.Tick(now)
				if now%iv == 0 {
					seq, p := a.send(t, now, TypeData)
					sent++
					lost, hold := rng.Float64() < tc.loss, rng.Float64() < 0.10
					switch {
					case lost:
					case hold:
						holds = append(holds, held{p, seq, 1 + rng.IntN(3)})
						displaced++
					default:
						net.put(now+lat, b, seq, p)
					}
					for i := 0; i < len(holds); i++ {
						if h := &holds[i]; h.seq != seq {
							if h.left--; h.left == 0 {
								net.put(now+lat, b, h.seq, h.p) // right after this packet
								holds = append(holds[:i], holds[i+1:]...)
								i--
							}
						}
					}
				}
				if now%iv == iv/2 {
					seq, p := b.send(t, now, TypeData)
					if rng.Float64() >= tc.loss {
						net.put(now+lat, a, seq, p)
					}
				}
				a.pop(t)
				b.pop(t)
				mustInvariants(t, a, b)
			}
			fd, total := falseDrops(a)
			rate := float64(fd) / float64(total)
			t.Logf("%d packets, %d displaced, %d fates, false drops %d (%.3f%%)", tc.n, displaced, total, fd, 100*rate)
			if rate > 0.005 {
				t.Fatalf("false-drop rate %.3f%% > 0.5%%", 100*rate)
			}
			if displaced < int(float64(tc.n)*(1-tc.loss)*0.08) {
				t.Fatalf("only %d displaced packets", displaced)
			}
		})
	}
}

// TestHeavyLossRecovery: 95% loss both ways for 60 s of virtual time, then a
// clean link. Nothing breaks meanwhile (only duplicate/stale rejections,
// invariants and the in-flight bound hold every frame) and, once the loss
// stops, every packet sent during the outage is resolved within a few RTTs
// and fates flow again.
func TestHeavyLossRecovery(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			link := func(s uint64) netsim.Config {
				c := netsim.DefaultConfig()
				c.Seed = s
				c.Loss = 0.95
				c.Latency = 50 * ms
				c.Jitter = 5 * ms
				return c
			}
			n := newNetRun(t, DefaultConfig(), link(seed), link(seed+100), 50*ms, 50*ms)
			n.run(60 * time.Second)
			sentA, sentB := n.a.c.NextSeq(), n.b.c.NextSeq()
			outageHdr := n.maxHdrBits
			for _, l := range []*netsim.Link{n.pipe.AtoB, n.pipe.BtoA} {
				cfg := l.Config()
				cfg.Loss = 0
				if err := l.SetConfig(cfg); err != nil {
					t.Fatal(err)
				}
			}
			stop := n.now
			var resolvedAt time.Duration
			for resolvedAt == 0 && n.now < stop+5*time.Second {
				n.run(n.now + n.frame)
				if n.a.nextFate >= sentA && n.b.nextFate >= sentB {
					resolvedAt = n.now - stop
				}
			}
			const rtt = 100 * ms
			if resolvedAt == 0 || resolvedAt > 5*rtt {
				t.Fatalf("outage packets resolved after %v (0 = never), want within 5 RTTs", resolvedAt)
			}
			deliveredBefore := n.a.c.Stats().Delivered
			n.run(n.now + 2*time.Second)
			if n.a.c.Stats().Delivered < deliveredBefore+30 {
				t.Fatalf("fates did not resume: %d delivered in 2 s", n.a.c.Stats().Delivered-deliveredBefore)
			}
			stA := n.a.c.Stats()
			t.Logf("outage: A sent %d, delivered %d, dropped %d; largest header %d bits; resolved %v after loss stopped; srtt %v",
				sentA, stA.Delivered, stA.Dropped, outageHdr, resolvedAt, n.a.c.RTT())
			n.drainAndCheck(time.Second)
		})
	}
}

// TestLossStatistics is PN-10's acceptance: at 20% simulated loss the
// invariant holds every frame (netRun checks it), every packet the network lost
// is reported dropped and every other one delivered — exactly, so the loss
// metric equals the simulator's — and the smoothed LossRate tracks it.
func TestLossStatistics(t *testing.T) {
	cfg := func(seed uint64) netsim.Config {
		c := netsim.DefaultConfig()
		c.Seed, c.Loss, c.Latency = seed, 0.20, 50*ms
		return c
	}
	n := newNetRun(t, DefaultConfig(), cfg(5), cfg(6), 50*ms, 50*ms)
	var ewma float64
	var samples int
	for n.a.c.NextSeq() < 6000 {
		n.run(n.now + time.Second)
		if n.now > 10*time.Second {
			ewma += n.a.c.LossRate()
			samples++
		}
	}
	n.drainAndCheck(2 * time.Second)
	st, ls := n.a.c.Stats(), n.pipe.AtoB.Stats()
	if st.Dropped != ls.Dropped.Loss {
		t.Fatalf("A reported %d dropped, the network lost %d", st.Dropped, ls.Dropped.Loss)
	}
	rate := float64(st.Dropped) / float64(st.Dropped+st.Delivered)
	if rate < 0.19 || rate > 0.21 {
		t.Fatalf("loss rate %.4f, simulator setting 0.20 ± 0.01", rate)
	}
	if mean := ewma / float64(samples); mean < 0.17 || mean > 0.23 {
		t.Fatalf("mean LossRate() %.3f, want ≈ 0.20", mean)
	}
	t.Logf("dropped %d of %d (%.4f); mean LossRate %.4f", st.Dropped, st.Dropped+st.Delivered, rate, ewma/float64(samples))
}
