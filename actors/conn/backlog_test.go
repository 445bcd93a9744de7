package conn

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
)

// maxBacklogBytes bounds what a shard that stopped for a second holds per
// connection: the datagrams its client sent meanwhile, as the gateway
// queues them (compact copies, at most Config.MaxInbound, the rest dropped
// and counted), the zone's Controls of twenty ticks (merged into one), and
// the inbox's room. Measured 1,897 B (also under -race) with the 352-byte
// Conn; 1,929 B (1,957 B under -race) with the 384-byte one and eight
// 160-byte copies; 1,641 B (also under -race) since a tiny copy is a
// 128-byte object (TinyDatagram 56): eight copies, one Control, the
// envelopes; before the bounds (MaxInbound 64, a Control per tick,
// 336-byte copies) 15,209 B, growing with the stall. A size check, not a
// timing one.
const maxBacklogBytes = 1700

// TestStalledShardBacklogFootprint: a shard that falls a second behind (an
// overloaded node) holds a bounded backlog per connection, not one that
// grows with how far behind it is; and its next round takes it all.
func TestStalledShardBacklogFootprint(t *testing.T) {
	const n, rate = 200, 30
	x := record(t, rate)
	s, cs := benchShard(t, x, n)
	inflight := make([]atomic.Int32, n)
	for i, c := range cs {
		c.inflight = &inflight[i]
	}
	st := s.pool.NewStager()
	dropped := 0
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	// A second of traffic with the shard not running: each client's
	// datagrams, routed as the gateway does (router.deliver: drop the
	// newest beyond MaxInbound, else a compact copy), between its zone's
	// Controls, one a tick.
	d := msg.NewDatagram()
	for k := range rate {
		for i, c := range cs {
			for _, p := range x.steps[k] {
				if int(inflight[i].Load()) >= s.pool.cfg.MaxInbound {
					dropped++
					continue
				}
				inflight[i].Add(1)
				d.N = copy(d.Buf, p)
				d.Addr = benchClient
				st.Stage(c, d.Compact())
			}
		}
		st.Flush()
		if k%3 != 2 { // 20 Hz ticks among 30 Hz datagrams
			for _, c := range cs {
				m := c.views.NewControl()
				m.Tick = uint64(k + 1)
				(procOf(c)).SendUserMessage(nil, m)
			}
		}
	}
	d.Release()
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	t.Logf("a second's backlog: %d B a connection, %d datagrams dropped", per, dropped)
	if per > maxBacklogBytes {
		t.Fatalf("a second's backlog holds %d B a connection, want ≤ %d", per, maxBacklogBytes)
	}
	if want := n * (rate - s.pool.cfg.MaxInbound); dropped < want {
		t.Fatalf("%d datagrams dropped, want ≥ %d", dropped, want)
	}
	s.round(time.Second)
	for i := range inflight {
		if v := inflight[i].Load(); v != 0 {
			t.Fatalf("connection %d: %d datagrams still counted in flight after the round", i, v)
		}
	}
	if len(s.inbox) != 0 {
		t.Fatalf("%d events left in the inbox", len(s.inbox))
	}
	runtime.KeepAlive(cs)
}
