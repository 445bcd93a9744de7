package main

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/ghostwire/ghostwire/bench/hostcheck"
)

// probeSteps is the length of one probe burst in hostcheck.Wide steps:
// ≈ 50 µs on a quiet core of the Machine table's host, short enough that
// the node's one P waits no longer for it than for a GC assist, long
// enough that the clock's resolution does not matter.
const probeSteps = 48 << 10

// chainSteps is one burst's length in hostcheck.Chain steps, after the
// Wide burst: ≈ 45 µs at the ≈ 1.1 ns a step of a quiet core.
const chainSteps = 40 << 10

// maxProbes bounds a window's bursts kept (a 20 s window at the default
// 50 ms keeps 400).
const maxProbes = 1 << 16

// hostProbe times hostcheck.Wide in short bursts inside the node's own
// process while a window runs: on our shared hosts the node's CPU per
// player follows another tenant's load on the core's sibling thread
// (docs/capacity-passes.md, the fifty-sixth pass), and a wide loop's speed
// says how busy that sibling is. Each burst also times hostcheck.Chain,
// one dependency chain, which a sibling does not slow and a slower core
// clock does: a candidate for the host's slow hours that Wide does not
// see (2026-12-07, the node ≈ 6 % dearer with Wide at its quiet 0.88 ns),
// not yet shown to be one. The bursts' own
// CPU time (their thread's, where the clock has one) is what the window's
// CPU figure leaves out.
type hostProbe struct {
	every  time.Duration
	steps  int
	chainN int

	sink uint64 // the bursts' last result, kept so that none is dead code (run's alone)

	mu      sync.Mutex
	perStep []float64     // ns a step, a burst each
	chain   []float64     // Chain's ns a step, a burst each (none when chainN is 0)
	cpu     time.Duration // the bursts' CPU time
}

// run takes a burst every h.every until ctx ends. Its goroutine keeps
// its thread, so that the thread's CPU clock times only the bursts.
func (h *hostProbe) run(ctx context.Context) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t := time.NewTicker(h.every)
	defer t.Stop()
	x := h.sink
	for {
		select {
		case <-ctx.Done():
			h.sink = x
			return
		case <-t.C:
		}
		c0 := burstClock()
		t0 := time.Now()
		x = hostcheck.Wide(x, h.steps)
		d := time.Since(t0)
		var dc time.Duration
		if h.chainN > 0 {
			t1 := time.Now()
			x = hostcheck.Chain(x, h.chainN)
			dc = time.Since(t1)
		}
		c := burstClock() - c0
		if c <= 0 { // no thread clock here: the wall time, which is at least the CPU's
			c = d + dc
		}
		h.mu.Lock()
		if len(h.perStep) < maxProbes {
			h.perStep = append(h.perStep, float64(d.Nanoseconds())/float64(h.steps))
			if h.chainN > 0 {
				h.chain = append(h.chain, float64(dc.Nanoseconds())/float64(h.chainN))
			}
		}
		h.cpu += c
		h.mu.Unlock()
	}
}

// result returns the bursts' ns a step at the median and the 90th
// percentile, how many bursts, and their CPU time (zeros before the
// first burst).
func (h *hostProbe) result() (p50, p90 float64, n int, cpu time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.perStep) == 0 {
		return 0, 0, 0, h.cpu
	}
	s := slices.Clone(h.perStep)
	slices.Sort(s)
	at := func(q float64) float64 { return s[min(int(q*float64(len(s))), len(s)-1)] }
	return at(0.5), at(0.9), len(s), h.cpu
}

// chainP50 returns the bursts' median Chain ns a step (0 before the first
// burst).
func (h *hostProbe) chainP50() float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.chain) == 0 {
		return 0
	}
	s := slices.Clone(h.chain)
	slices.Sort(s)
	return s[len(s)/2]
}

// startProbe starts a hostProbe taking a burst every `every` (nil for 0)
// and returns it with the function that stops it and waits.
func startProbe(ctx context.Context, every time.Duration) (*hostProbe, func()) {
	if every <= 0 {
		return nil, func() {}
	}
	h := &hostProbe{every: every, steps: probeSteps, chainN: chainSteps}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.run(pctx)
	}()
	return h, func() { cancel(); <-done }
}

// serverCPU is the node's CPU over a window, used in all, less what the
// probe's bursts took of it (never below 0: a probe clock that read more
// than the process's is not the node's to lose).
func serverCPU(used, probe time.Duration) time.Duration {
	return max(used-probe, 0)
}

// hostLine says how fast the node's core ran the probe over the window.
func hostLine(s Step) string {
	return fmt.Sprintf("host: hostcheck.Wide %.2f ns a step p50, %.2f p90, over %d bursts (≈ 1.04 on a quiet core of the Machine table's host; higher: a busy sibling thread); hostcheck.Chain %.2f ns a step p50 (≈ 1.11 there; higher: a slower core clock); their %.1f ms of CPU left out of the node's",
		s.HostWideP50Ns, s.HostWideP90Ns, s.HostProbes, s.HostChainP50Ns, s.HostProbeCPUMs)
}
