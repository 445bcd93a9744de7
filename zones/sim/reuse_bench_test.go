package sim

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/move"
)

// BenchmarkZoneTickReused (informative) is BenchmarkZoneTick with each
// tick's snapshot held as a zone actor's views hold it (actors/msg
// View.SetSnap: Retain, Release once the tables take the next tick's) and
// its replica batches released, as on a node, so the writer reuses its
// snapshots and the zone its batches (BenchmarkZoneTick's series nobody
// retains: a new snapshot every tick, on fresh memory).
func BenchmarkZoneTickReused(b *testing.B) {
	defer lockThread()()
	z, now := crowdZoneWith(b, 250, 0, nil)
	var mv []move.Move
	var refs []ghost.ViewRef
	var held *ghost.Snapshot
	tick := 0
	step := func() {
		now += 50 * time.Millisecond
		crowdInput(z, 250, now, tick, mv)
		out := z.Step(now)
		for _, v := range out.Views {
			refs = z.AppendViewRefs(refs[:0], v)
		}
		tick++
		held = releaseTick(z, out, held)
	}
	for range 40 {
		step()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		step()
	}
	b.StopTimer()
	if held != nil {
		held.Release()
	}
}

// releaseTick does with a tick's output what a zone actor's views and
// replicas do: it releases the replica batches and holds the tick's
// snapshot in place of held (released), so the writer reuses its
// snapshots and the zone its batches. It returns the snapshot now held.
func releaseTick(z *Zone, out *Output, held *ghost.Snapshot) *ghost.Snapshot {
	for i := range out.Replicas {
		out.Replicas[i].Release()
	}
	s := z.Snapshot()
	s.Retain()
	if held != nil {
		held.Release()
	}
	return s
}
