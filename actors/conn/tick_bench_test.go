package conn

import (
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
		procs[i] = &proc{c: c}
		c.viewsFlow = true
	}
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
				procs[i].SendUserMessage(nil, m)
			}
		}
		s.round(now)
	}
	timeTicks(b, conns, run)
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
	now := time.Second
	tick := uint64(0)
	var buf []any
	var batch msg.ControlBatch
	run := func() {
		tick++
		now += 50 * time.Millisecond
		for i, c := range cs {
			v := msg.NewView()
			v.Player, v.Tick = c.player, tick
			nudge := c.views.Publish(v)
			buf = tickMsgs(buf[:0], c, tick, nudge)
			for _, m := range buf {
				batch.Add(&ports[i], m.(*msg.Control))
			}
		}
		batch.Flush()
		s.round(now)
	}
	timeTicks(b, conns, run)
}

// timeTicks runs a tick benchmark's run (one zone tick to conns
// connections) four times to warm up, then b.N times timed, and reports
// ns/conn.
func timeTicks(b *testing.B, conns int, run func()) {
	for range 4 {
		run()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		run()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*conns), "ns/conn")
}
