package sim

import (
	"slices"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/move"
)

// A zone that itself stalls (no tick for longer than ReplicaTTL: a starved
// goroutine or host) while its neighbour kept sending must not expire the
// neighbour's replicas on its first tick after the stall: the neighbour's
// batches are waiting in the zone's mailbox behind that tick (the timer's
// tick is posted as the zone resumes, the batches come after it). On the
// wall clock every replica of every neighbour expired at once, and each
// viewer's ghost of them was killed and re-created under a new ghost id
// when the waiting batches were read a moment later
// (actors/node TestClusterThreeNodesAcrossBorders on a loaded host: 223
// replicas expired together, 30 ghost ids changed). The silence counts
// only over time the zone was live; a neighbour that really went quiet is
// still dropped within ReplicaTTL of the zone's live time.
func TestStalledZoneKeepsNeighboursReplicas(t *testing.T) {
	z := oneZone(t, nil)
	ttl, period := z.Config().ReplicaTTL, z.Period()
	batch := func() *ReplicaBatch {
		b := &ReplicaBatch{From: "x1z0", To: "x0z0"}
		for _, id := range []uint64{7, 8} {
			b.Entities = append(b.Entities, Replica{ID: id, Kind: KindNPC, Epoch: 1,
				State: move.ControlState{Pos: [3]float32{10, 0, -500}}})
		}
		return b
	}
	z.Join(0, 1, "c1", "viewer", [3]float32{-10, 0, -500}, 0)
	now := time.Duration(0)
	// The actor's order: the tick, then the batches that came since.
	tick := func(batches int) {
		now += period
		z.Step(now)
		for range batches {
			z.Replicas(now+period/2, batch())
		}
	}
	type slotGen struct {
		slot int32
		gen  uint8
	}
	where := func(id uint64) (slotGen, bool) {
		s, ok := z.byID.get(id)
		if !ok || z.ents[s].role != roleReplica {
			return slotGen{}, false
		}
		return slotGen{s, z.ents[s].gen}, true
	}
	for range 20 {
		tick(1)
	}
	was, ok := where(7)
	if !ok || !slices.Contains(z.InterestIDs(1), 7) {
		t.Fatalf("no replica of entity 7 in view before the stall (replica: %v, interest %v)", ok, z.InterestIDs(1))
	}

	// The stall: no tick for 3 × ReplicaTTL; the neighbour's batches of
	// that time wait in the mailbox and are read after the first tick.
	now += 3 * ttl
	tick(3 * int(ttl/period))
	tick(1)
	if st := z.Stats(); st.ReplicasExpired != 0 {
		t.Fatalf("the first tick after a %v stall expired %d replicas whose batches were waiting", 3*ttl, st.ReplicasExpired)
	}
	if at, ok := where(7); !ok || at != was || !slices.Contains(z.InterestIDs(1), 7) {
		t.Fatalf("entity 7 after the stall: replica %v at %+v (was %+v), in view %v: re-created, its viewers' ghost ids change",
			ok, at, was, slices.Contains(z.InterestIDs(1), 7))
	}

	// The bound: a neighbour that really went quiet (no batch after this
	// one) is dropped after ReplicaTTL of ticks, as on the wall clock.
	ticks := 0
	for ; ticks < 100; ticks++ {
		if _, ok := where(7); !ok {
			break
		}
		tick(0)
	}
	if want := int(ttl / period); ticks < want || ticks > want+2 {
		t.Fatalf("a silent neighbour's replica dropped after %d ticks on time, want %d to %d (ReplicaTTL %v)", ticks, want, want+2, ttl)
	}

	// A neighbour that went quiet during the stall: dropped within
	// ReplicaTTL of live time after the zone resumed.
	tick(1)
	now += 3 * ttl
	ticks = 0
	for ; ticks < 100; ticks++ {
		if _, ok := where(7); !ok {
			break
		}
		tick(0)
	}
	if most := int(ttl/period) + 2; ticks > most || ticks < most-2-replicaStallTicks-1 {
		t.Fatalf("after a stall a silent neighbour's replica dropped after %d ticks, want at most %d (ReplicaTTL %v of live time) and at least %d",
			ticks, most, ttl, most-2-replicaStallTicks-1)
	}
}
