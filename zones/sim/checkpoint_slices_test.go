package sim

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/zones/handoff"
)

// Over a period every chunk is due exactly once, whatever the ratio of
// ticks to chunks.
func TestSlicesDueOncePerPeriod(t *testing.T) {
	for _, every := range []uint64{1, 3, 7, 10, 20, 40, 61} {
		for _, slices := range []uint64{1, 20, 32} {
			seen := make([]int, slices)
			for tick := uint64(1000); tick < 1000+every; tick++ {
				from, to := SlicesDue(tick, every, slices)
				if from > to || to > slices {
					t.Fatalf("every %d, slices %d, tick %d: [%d, %d)", every, slices, tick, from, to)
				}
				for k := from; k < to; k++ {
					seen[k]++
				}
			}
			for k, n := range seen {
				if n != 1 {
					t.Fatalf("every %d, slices %d: chunk %d due %d times in a period", every, slices, k, n)
				}
			}
		}
	}
}

// A slice's checkpoints are those of the owned players whose
// CheckpointSlice it is, no NPC among them, with the zone's state.
func TestSliceCheckpoints(t *testing.T) {
	z := oneZone(t, func(c *Config) { c.NPCs = 30 })
	const players, slices = 45, 20
	for i := range players {
		if err := z.Join(0, uint64(i+1), "c", "p", [3]float32{-500 + float32(i), 0, -500}, 0); err != nil {
			t.Fatal(err)
		}
	}
	z.Step(50 * time.Millisecond)
	seen := map[uint64]int{}
	var buf []Checkpoint
	for k := range uint64(slices) {
		buf = z.AppendSliceCheckpoints(buf[:0], slices, k)
		for _, cp := range buf {
			if handoff.CheckpointSlice(cp.Entity, slices) != k || IsNPC(cp.Entity) {
				t.Fatalf("slice %d has entity %#x", k, cp.Entity)
			}
			if info, _ := z.Entity(cp.Entity); cp.Control != info.State {
				t.Fatalf("checkpoint of %d: %+v, zone holds %+v", cp.Entity, cp.Control, info.State)
			}
			seen[cp.Entity]++
		}
	}
	if len(seen) != players {
		t.Fatalf("%d of %d players in the slices", len(seen), players)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("player %d in %d slices", id, n)
		}
	}
}
