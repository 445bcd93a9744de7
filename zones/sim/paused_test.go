package sim

import (
	"time"

	"testing"

	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// A paused zone (no Step) runs its handoff timers through HandoffTimers:
// a lost Offer is resent every RetryInterval (resend) or not at all
// (without), and aborted at OfferTimeout either way, its player owned
// here again; meanwhile nothing else of a tick runs — no entity moves
// (players with queued moves, NPCs), no move is applied, the tick count
// stays.
func TestHandoffTimersWhilePaused(t *testing.T) {
	for _, resend := range []bool{true, false} {
		t.Run(map[bool]string{true: "resend", false: "give-ups only"}[resend], func(t *testing.T) {
			z := oneZone(t, func(c *Config) { c.NPCs = 4 })
			hc := handoff.DefaultConfig()
			if err := z.Join(0, 1, "c1", "a", [3]float32{-500, 0, -500}, 0); err != nil {
				t.Fatal(err)
			}
			now := z.Period()
			z.Step(now)
			if err := z.Teleport(now, 1, [3]float32{600, 0, 600}); err != nil {
				t.Fatal(err)
			}
			if p := z.Pending(); len(p) != 1 || p[0].Kind != handoff.KindOffer {
				t.Fatalf("pending after the teleport: %+v, want one Offer (lost)", p)
			}
			z.Input(now, 1, []move.Move{fwd(1, 0), fwd(2, 0)}) // buffered: frozen
			before := positions(z)
			tick := z.Tick()
			offers, aborts := 0, 0
			for now += hc.RetryInterval; now <= z.Period()+hc.OfferTimeout; now += hc.RetryInterval {
				z.HandoffTimers(now, resend)
				for _, m := range z.Pending() {
					switch m.Kind {
					case handoff.KindOffer:
						offers++
					case handoff.KindAbort:
						aborts++
					}
				}
				if err := z.checkRolesAgree(); err != nil {
					t.Fatal(err)
				}
			}
			if want := map[bool]int{true: 9, false: 0}[resend]; offers != want {
				t.Errorf("%d Offers resent while paused, want %d", offers, want)
			}
			if aborts != 1 || z.Handoffs().InFlight() != 0 {
				t.Fatalf("%d Aborts, %d in flight by OfferTimeout while paused, want 1, 0", aborts, z.Handoffs().InFlight())
			}
			e, _ := z.Entity(1)
			if !e.Owned || e.Frozen || e.LastApplied != 0 || e.Queued != 2 {
				t.Fatalf("player after the abort %+v, want owned, not frozen, its 2 moves queued, none applied", e)
			}
			if z.Tick() != tick {
				t.Errorf("tick %d after the paused timers, want %d", z.Tick(), tick)
			}
			if after := positions(z); len(after) != len(before) {
				t.Fatalf("%d entities, were %d", len(after), len(before))
			} else {
				for id, p := range before {
					if after[id] != p {
						t.Errorf("entity %d moved from %v to %v while paused", id, p, after[id])
					}
				}
			}
			z.Step(now) // the ticks back: the moves are applied
			if e, _ := z.Entity(1); e.LastApplied != 2 {
				t.Fatalf("last applied %d after the first tick, want 2", e.LastApplied)
			}
		})
	}
}

// positions maps every owned entity of z to its position.
func positions(z *Zone) map[uint64][3]float32 {
	m := map[uint64][3]float32{}
	z.Entities(func(e EntityInfo) {
		if e.Owned {
			m[e.ID] = e.State.Pos
		}
	})
	return m
}

// BenchmarkHandoffTimersPaused (informative): one run of a paused zone's
// handoff timers (a zone actor's, every tick period while paused) in
// BenchmarkZoneTick's zone, with nothing in flight: what a pause costs a
// zone that has no handoff to settle.
func BenchmarkHandoffTimersPaused(b *testing.B) {
	z, now := crowdZoneWith(b, 250, 0, nil)
	for range 5 {
		now += 50 * time.Millisecond
		z.Step(now)
	}
	b.ReportAllocs()
	for b.Loop() {
		now += 50 * time.Millisecond
		z.HandoffTimers(now, true)
	}
}
