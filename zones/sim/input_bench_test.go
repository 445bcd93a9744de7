package sim

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/move"
)

// BenchmarkZoneInput1000 (informative): a zone's inputs where its slots,
// players and queues do not fit in the cache, as on a server whose
// connection shards run between the zone's inputs: 1,000 players in one
// zone (and 200 NPCs), every one sending a tick's moves (1, 2, 1, 2, …
// at 30 Hz input, 20 Hz ticks), then the tick (Step, no views). One
// iteration is one tick. To count an input's cost alone, run it under
// callgrind with --toggle-collect='*sim.(*Zone).InputBatch' (and
// --cache-sim=yes for its misses): per input = the difference between two
// counts of iterations over 1,000 × their difference. The border replica
// batches are released (as their receivers do), so a tick allocates
// nothing.
func BenchmarkZoneInput1000(b *testing.B) {
	defer lockThread()()
	const players = 1000
	z, now := crowdZone(b, players)
	var mv []move.Move
	tick := 0
	for range 20 { // queues and interest sets at their steady size
		now += 50 * time.Millisecond
		crowdInput(z, players, now, tick, mv)
		release(z.Step(now))
		tick++
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		now += 50 * time.Millisecond
		crowdInput(z, players, now, tick, mv)
		release(z.Step(now))
		tick++
	}
}

// release releases out's replica batches, as their receivers do.
func release(out *Output) {
	for i := range out.Replicas {
		out.Replicas[i].Release()
	}
}
