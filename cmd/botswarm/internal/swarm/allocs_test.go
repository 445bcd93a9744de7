// Not under -race: the detector and sync.Pool's deliberate drops there
// allocate on their own.
//go:build !race

package swarm

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/fakezone"
)

// TestSteadyStateAllocations: once the bots are connected, datagrams in and
// out allocate (almost) nothing. The whole process is counted — the fake
// zone beside the bots too — so the bound leaves room for what is not per
// packet: reads that time out, the once-a-second sampling, and what the
// replication packages still allocate now and then (measured 0.02–0.05
// per datagram, most of it the fake zone's ghost tables and fate slices).
// Before batchudp read with recvmmsg directly it was 0.54: x/net made a
// source address per message and an error per empty read, and a method
// value per wait. Garbage per packet would make the collector a share of
// every bot's CPU.
func TestSteadyStateAllocations(t *testing.T) {
	checkNoLeaks(t)
	z := newFakeZone(t, fakezone.Options{Peers: 8}) // as fakeserver's default
	cfg := testConfig(z, 100, 4*time.Second)
	cfg.Ramp = 1000
	cfg.Observers = 0.1
	sw, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sw.Run(context.Background())
	}()
	packets := func() uint64 {
		var n uint64
		for _, s := range sw.shards {
			s.Mu.Lock()
			n += s.C.PacketsIn + s.C.PacketsOut
			s.Mu.Unlock()
		}
		return n
	}
	var m0, m1 runtime.MemStats
	time.Sleep(1500 * time.Millisecond) // connected: the ramp takes 0.1 s
	runtime.ReadMemStats(&m0)
	p0 := packets()
	time.Sleep(2 * time.Second)
	runtime.ReadMemStats(&m1)
	p1 := packets()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the swarm did not end")
	}
	n := p1 - p0
	if n < 1000 {
		t.Fatalf("only %d datagrams in the window: the bots did not play", n)
	}
	per := float64(m1.Mallocs-m0.Mallocs) / float64(n)
	t.Logf("%d allocations over %d datagrams: %.4f per datagram", m1.Mallocs-m0.Mallocs, n, per)
	if per > 0.2 {
		t.Errorf("%.3f allocations per datagram in steady state, want ≈ 0", per)
	}
}
