package conn

import (
	"strconv"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
)

// BenchmarkZoneTickToShard (informative): a zone tick's messages to 1,024
// connections on one shard, as the zone sends them — each connection's
// view published, then its tick messages posted through its PID's process
// (tickMsgs: the Control carrying the view's nudge) — and the shard's
// round that takes them: per connection the view taken and applied, the
// control state handed to the session, the pump. One iteration is one
// tick for every connection; run under callgrind to compare builds.
func BenchmarkZoneTickToShard(b *testing.B) {
	const conns = 1024
	x := record(b, 1)
	s, cs := benchShard(b, x, conns)
	procs := make([]*proc, conns)
	for i, c := range cs {
		procs[i] = procOf(c)
		c.viewsFlow = true
	}
	timeTicks(b, s, cs, func(i int, m any) { procs[i].SendUserMessage(nil, m) }, nil)
}

// BenchmarkZoneTickToShardBatched (informative): BenchmarkZoneTickToShard
// with the Controls as a zone now posts them to connections that joined
// with a Port: gathered in a msg.ControlBatch and handed to the shard a
// MaxControlBatch at a time (PostControls), not one Send each. Compare
// it with BenchmarkZoneTickToShard of the build before.
func BenchmarkZoneTickToShardBatched(b *testing.B) {
	const conns = 1024
	x := record(b, 1)
	s, cs := benchShard(b, x, conns)
	ports := make([]msg.ControlPort, conns) // as their Joins name them
	for i, c := range cs {
		c.viewsFlow = true
		ports[i] = c.port()
	}
	var batch msg.ControlBatch
	timeTicks(b, s, cs, func(i int, m any) { batch.Add(&ports[i], m.(*msg.Control)) }, batch.Flush)
}

// BenchmarkZoneTickToShardBatchedWait (informative):
// BenchmarkZoneTickToShardBatched with the batch's wait bounded
// (msg.ControlBatch.Wait): on this one shard every list is Wait long
// (on a node's S shards, ≈ Wait/S). Compare the waits' instructions a
// Control.
func BenchmarkZoneTickToShardBatchedWait(b *testing.B) {
	for _, wait := range []int{8, 16, 32, 64} {
		b.Run("wait="+strconv.Itoa(wait), func(b *testing.B) {
			const conns = 1024
			x := record(b, 1)
			s, cs := benchShard(b, x, conns)
			ports := make([]msg.ControlPort, conns)
			for i, c := range cs {
				c.viewsFlow = true
				ports[i] = c.port()
			}
			batch := msg.ControlBatch{Wait: wait}
			timeTicks(b, s, cs, func(i int, m any) { batch.Add(&ports[i], m.(*msg.Control)) }, batch.Flush)
		})
	}
}

// timeTicks times zone ticks to the connections cs of shard s: each
// tick publishes every connection's view and hands its tick messages
// (tickMsgs) to post, then flush (if any), then runs the shard's round.
// Four ticks warm up; b.N are timed, reported as ns/conn.
func timeTicks(b *testing.B, s *shard, cs []*Conn, post func(i int, m any), flush func()) {
	now := time.Second
	tick := uint64(0)
	var buf []any
	run := func() {
		tick++
		now += 50 * time.Millisecond
		for i, c := range cs {
			v := msg.NewView()
			v.Player, v.Tick = c.player, tick
			nudge := c.views.Publish(v)
			buf = tickMsgs(buf[:0], c, tick, nudge)
			for _, m := range buf {
				post(i, m)
			}
		}
		if flush != nil {
			flush()
		}
		s.round(now)
	}
	for range 4 {
		run()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		run()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(cs)), "ns/conn")
}
