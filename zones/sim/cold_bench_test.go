package sim

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/move"
)

// evictBuf is written a line at a time between the cold benchmark's
// ticks: more than a node's last-level cache, so that the zone's players
// have left every cache by the next tick, as on a loaded node, where the
// connections' work between two ticks runs through tens of megabytes.
// It is made by the benchmark's first call, not with the package's other
// tests.
var evictBuf []byte

func evictCaches() {
	if evictBuf == nil {
		evictBuf = make([]byte, 96<<20)
	}
	for i := 0; i < len(evictBuf); i += 64 {
		evictBuf[i]++
	}
}

// BenchmarkZoneTickCold (informative) is BenchmarkZoneTick at the shape
// of one zone of cmd/capacity's default world at 2,000 players (500
// players, 100 NPCs) with the caches emptied after each tick's inputs and
// before its step, so that what the tick reads of each player (its
// record, its move queue, its interest set) is a trip to memory, as on a
// loaded node: wall time judges the zone's prefetches (stepSlots,
// updateInterest), which instruction counts do not see. ns/op is one
// tick and its views; the inputs, the eviction and the releases are
// outside the timer.
func BenchmarkZoneTickCold(b *testing.B) {
	defer lockThread()()
	const players = 500
	z, now := crowdZoneWith(b, players, 0, nil)
	var mv []move.Move
	var refs []ghost.ViewRef
	var held *ghost.Snapshot
	tick := 0
	step := func(cold bool) {
		now += 50 * time.Millisecond
		crowdInput(z, players, now, tick, mv)
		if cold {
			evictCaches()
			b.StartTimer()
		}
		out := z.Step(now)
		for _, v := range out.Views {
			refs = z.AppendViewRefs(refs[:0], v)
		}
		if cold {
			b.StopTimer()
		}
		tick++
		held = releaseTick(z, out, held)
	}
	for range 40 {
		step(false)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.StopTimer()
	for range b.N {
		step(true)
	}
	if held != nil {
		held.Release()
	}
}
