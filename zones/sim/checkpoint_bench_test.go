package sim

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/move"
)

// BenchmarkZoneTickCheckpoints (informative): BenchmarkZoneTick with the
// tick's checkpoints taken after it, as a zone actor with
// Params.Checkpoint does (every 20 ticks a player: the default second at
// 20 Hz). One iteration is one tick. To count the checkpoints' walk
// alone, run it under callgrind with
// --toggle-collect='*sim.(*Zone).AppendCheckpoints' (and --cache-sim=yes
// for its misses).
func BenchmarkZoneTickCheckpoints(b *testing.B) {
	defer lockThread()()
	z, now := crowdZone(b, 250)
	var mv []move.Move
	var refs []ghost.ViewRef
	var cps []Checkpoint
	tick := 0
	for range 40 {
		now += 50 * time.Millisecond
		refs = crowdTick(z, 250, now, tick, mv, refs)
		cps = z.AppendCheckpoints(cps[:0], 20)
		tick++
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		now += 50 * time.Millisecond
		refs = crowdTick(z, 250, now, tick, mv, refs)
		cps = z.AppendCheckpoints(cps[:0], 20)
		tick++
	}
	b.ReportMetric(float64(len(cps)), "checkpoints/tick")
}
