package ghost

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/netsim"
)

// lossyLink is the proofs' network: 20% loss, jitter that reorders, held-back
// packets and duplicates, in both directions.
func lossyLink(seed uint64) netsim.Config {
	return netsim.Config{
		Loss:               0.2,
		Latency:            40 * time.Millisecond,
		Jitter:             15 * time.Millisecond,
		AllowJitterReorder: true,
		Reorder:            0.1,
		ReorderDelay:       60 * time.Millisecond,
		Duplicate:          0.05,
		MaxPacket:          MaxPacketBytes,
		Seed:               seed,
	}
}

// Proof: under netsim at 20% loss with reordering and duplication, once
// entities stop changing, every in-scope ghost on the client equals the
// server state within quantization within 1 s (virtual), over real notify.
func TestConvergesWithinOneSecondUnderLoss(t *testing.T) {
	for _, mode := range []struct {
		name string
		cfg  func(c *Config)
	}{
		{"defaults", func(c *Config) {}},
		// Only RL-5/RL-6 reacting to notify's fates: no speculative resends,
		// no confirm deadline.
		{"fates only", func(c *Config) { c.ResendInterval, c.ConfirmDeadline = 0, 0 }},
	} {
		t.Run(mode.name, func(t *testing.T) { convergeUnderLoss(t, mode.cfg) })
	}
}

func convergeUnderLoss(t *testing.T, mod func(c *Config)) {
	const tick = 50 * time.Millisecond
	worst := time.Duration(0)
	cfg := DefaultConfig()
	mod(&cfg)
	for seed := range uint64(8) {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			reg, pc, nc := newTestRegistry(t)
			net := newRealNet(t, lossyLink(seed), lossyLink(seed+100), 25*time.Millisecond)
			g := newRig(t, reg, cfg, net, MaxPacketBytes)
			w := newWorld(seed, reg, pc, nc)
			for range 150 {
				w.ents = append(w.ents, w.spawn())
			}
			now := time.Duration(0)
			for range 100 { // 5 s of changes
				now += tick
				for j := range w.ents {
					if w.rng.IntN(3) == 0 {
						w.mutate(j)
					}
				}
				g.tick(now, w.view())
			}
			stop := now
			converged := time.Duration(-1)
			for now < stop+time.Second {
				// Deliveries happen between ticks too: step in 5 ms.
				for range 9 {
					now += 5 * time.Millisecond
					g.pump(now)
				}
				now += 5 * time.Millisecond
				g.tick(now, w.view())
				if d := mismatch(reg, g.mir, w.ents); d == "" && converged < 0 {
					converged = now - stop
				} else if d != "" {
					converged = -1
				}
			}
			if d := mismatch(reg, g.mir, w.ents); d != "" {
				t.Fatalf("1 s after the last change the client still differs: %s (table %+v)", d, g.tab.Stats())
			}
			if net.rejected == 0 {
				t.Fatal("netsim produced no duplicates or stale packets: the scenario is too easy")
			}
			worst = max(worst, converged)
			t.Logf("converged %v after the last change; %d packets, %d rejected by notify", converged, g.pkts, net.rejected)
		})
	}
	t.Logf("slowest convergence: %v", worst)
}

// Proof: random scope churn — thousands of entities entering, leaving and
// re-entering under random loss — never produces an id collision, leaks no
// id, and the client's live set converges to the interest set.
func TestScopeChurn(t *testing.T) {
	const tick = 50 * time.Millisecond
	for seed := range uint64(3) {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			reg, pc, nc := newTestRegistry(t)
			link := lossyLink(seed)
			link.Loss = 0.1 + 0.1*float64(seed)
			up := lossyLink(seed + 50)
			net := newRealNet(t, link, up, 25*time.Millisecond)
			g := newRig(t, reg, DefaultConfig(), net, MaxPacketBytes)
			w := newWorld(seed+10, reg, pc, nc)
			rng := rand.New(rand.NewPCG(seed, 77))
			var gone []ViewEntry // entities that left and may come back
			for range 200 {
				w.ents = append(w.ents, w.spawn())
			}
			entered := len(w.ents)
			now := time.Duration(0)
			check := func() {
				t.Helper()
				if err := checkInvariants(g.tab); err != nil {
					t.Fatalf("at %v: %v", now, err)
				}
				for gh := range g.mir.All() {
					if !g.tab.inUse(gh.ID) {
						t.Fatalf("at %v: client ghost %d holds entity %d; on the server that id is free", now, gh.ID, gh.Entity)
					}
					if s := g.tab.slotOf(gh.ID); g.tab.entityOf(g.tab.recOf(gh.ID)) != gh.Entity {
						e := g.tab.entityOf(g.tab.recOf(gh.ID))
						t.Fatalf("at %v: client ghost %d holds entity %d; on the server that id is phase %d entity %d",
							now, gh.ID, gh.Entity, s.phase, e)
					}
				}
				if r := g.mir.Stats().Replaced; r != 0 {
					t.Fatalf("at %v: %d creates landed on an id holding another entity", now, r)
				}
			}
			for k := range 600 { // 30 s of churn
				now += tick
				for range rng.IntN(16) { // leave
					if len(w.ents) == 0 {
						break
					}
					i := rng.IntN(len(w.ents))
					gone = append(gone, w.ents[i])
					w.ents[i] = w.ents[len(w.ents)-1]
					w.ents = w.ents[:len(w.ents)-1]
				}
				for range rng.IntN(16) { // enter: new, or back from before
					if len(gone) > 0 && rng.IntN(3) == 0 {
						i := rng.IntN(len(gone))
						w.ents = append(w.ents, gone[i])
						gone[i] = gone[len(gone)-1]
						gone = gone[:len(gone)-1]
					} else {
						w.ents = append(w.ents, w.spawn())
					}
					entered++
				}
				for j := range w.ents {
					if rng.IntN(4) == 0 {
						w.mutate(j)
					}
				}
				g.tick(now, w.view())
				if k%5 == 0 {
					check()
				}
			}
			if entered < 2000 {
				t.Fatalf("only %d entries: not churn", entered)
			}
			stop := now
			for now < stop+3*time.Second {
				for range 9 {
					now += 5 * time.Millisecond
					g.pump(now)
				}
				now += 5 * time.Millisecond
				g.tick(now, w.view())
				check()
			}
			if d := mismatch(reg, g.mir, w.ents); d != "" {
				t.Fatalf("3 s after the churn stopped: %s", d)
			}
			if g.tab.Len() != len(w.ents) {
				t.Fatalf("table holds %d ids for %d entities in scope: leaked ids", g.tab.Len(), len(w.ents))
			}
			st := g.tab.Stats()
			if st.Kills == 0 || st.KillsLost == 0 || st.CreatesLost == 0 {
				t.Fatalf("kills %d, lost kills %d, lost creates %d: the churn did not exercise retries", st.Kills, st.KillsLost, st.CreatesLost)
			}
			t.Logf("%d entries, %d ids assigned, table %+v", entered, st.GhostsAssigned, st)
		})
	}
}

// The in-flight record ring starts small and doubles while packets are in
// flight, mid-packet included. Under a long round trip (fates late, so
// thousands of records in flight) and loss, the client still converges and
// every fate lands on the records it belongs to.
func TestRecordRingGrowsInFlight(t *testing.T) {
	const tick = 20 * time.Millisecond
	reg, pc, nc := newTestRegistry(t)
	slow := lossyLink(3)
	slow.Latency = 400 * time.Millisecond
	net := newRealNet(t, slow, lossyLink(4), 25*time.Millisecond)
	g := newRig(t, reg, DefaultConfig(), net, MaxPacketBytes)
	w := newWorld(3, reg, pc, nc)
	for range 600 {
		w.ents = append(w.ents, w.spawn())
	}
	now := time.Duration(0)
	for range 100 { // 2 s of changes, ~20 packets always in flight
		now += tick
		for j := range w.ents {
			if w.rng.IntN(2) == 0 {
				w.mutate(j)
			}
		}
		g.tick(now, w.view())
	}
	if st := g.tab.Stats(); st.RecordGrowths == 0 {
		t.Fatalf("the record ring never grew (stats %+v): the test does not exercise growth", st)
	}
	for range 150 { // 3 s without changes
		now += tick
		g.tick(now, w.view())
	}
	if d := mismatch(reg, g.mir, w.ents); d != "" {
		t.Fatalf("after growth the client differs: %s (table %+v)", d, g.tab.Stats())
	}
	if g.tab.InFlight() > 0 && g.tab.Stats().Stalls > 0 {
		t.Logf("stalls %d", g.tab.Stats().Stalls)
	}
}
