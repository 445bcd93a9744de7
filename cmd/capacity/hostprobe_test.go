package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The probe takes bursts while it runs and none after it is stopped; each
// burst times a positive ns a step, and their CPU, one thread's, is no
// more than the wall time they ran in.
func TestHostProbeTimesBurstsUntilStopped(t *testing.T) {
	start := time.Now()
	h, stop := startProbe(context.Background(), 2*time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, _, n, _ := h.result(); n >= 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("fewer than 10 bursts in 10 s at one every 2 ms")
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	elapsed := time.Since(start)
	p50, p90, n, cpu := h.result()
	if p50 <= 0 || p90 < p50 {
		t.Fatalf("p50 %v, p90 %v ns a step: want 0 < p50 ≤ p90", p50, p90)
	}
	if c := h.chainP50(); c <= 0 || len(h.chain) != n {
		t.Fatalf("Chain p50 %v ns a step over %d bursts of %d: want one positive reading a burst", c, len(h.chain), n)
	}
	if cpu <= 0 || cpu > elapsed {
		t.Fatalf("bursts' CPU %v, wall %v: want within (0, wall]", cpu, elapsed)
	}
	time.Sleep(20 * time.Millisecond)
	if _, _, n2, cpu2 := h.result(); n2 != n || cpu2 != cpu {
		t.Fatalf("after stop: %d bursts (%v CPU), was %d (%v)", n2, cpu2, n, cpu)
	}
}

// A stopped context stops the probe too; --host-probe 0 starts none.
func TestHostProbeEndsWithItsContextAndOff(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	h, stop := startProbe(ctx, time.Millisecond)
	cancel()
	done := make(chan struct{})
	go func() { stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the probe did not end with its context")
	}
	if h == nil {
		t.Fatal("no probe at 1 ms")
	}
	if h, stop := startProbe(context.Background(), 0); h != nil {
		stop()
		t.Fatal("a probe at 0")
	}
}

// result's quantiles are the sorted bursts' at 50 % and 90 %, whatever
// order they came in; none yet is zeros.
func TestHostProbeQuantiles(t *testing.T) {
	h := &hostProbe{}
	if p50, p90, n, _ := h.result(); p50 != 0 || p90 != 0 || n != 0 {
		t.Fatalf("no bursts: %v, %v, %d", p50, p90, n)
	}
	h.perStep = []float64{1.9, 1.0, 1.3, 1.1, 1.6, 1.2, 1.8, 1.5, 1.4, 1.7}
	h.cpu = 3 * time.Millisecond
	p50, p90, n, cpu := h.result()
	if p50 != 1.5 || p90 != 1.9 || n != 10 || cpu != 3*time.Millisecond {
		t.Fatalf("got p50 %v, p90 %v, %d bursts, %v; want 1.5, 1.9, 10, 3ms", p50, p90, n, cpu)
	}
	if h.perStep[0] != 1.9 {
		t.Fatal("result sorted the bursts in place")
	}
	if c := h.chainP50(); c != 0 {
		t.Fatalf("Chain p50 %v with no Chain readings, want 0", c)
	}
	h.chain = []float64{1.3, 1.1, 1.2}
	if c := h.chainP50(); c != 1.2 || h.chain[0] != 1.3 {
		t.Fatalf("Chain p50 %v (readings now %v), want 1.2 and the readings unsorted", c, h.chain)
	}
}

// The table gives each step's probe reading, and a dash for a step
// measured without one.
func TestTableShowsTheHostProbe(t *testing.T) {
	var b strings.Builder
	writeTable(&b, []Step{
		{Players: 250, Connected: 250, HostWideP50Ns: 1.0437, HostProbes: 400},
		{Players: 500, Connected: 500},
	})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 || !strings.HasSuffix(lines[0], "| host Wide p50 |") {
		t.Fatalf("table:\n%s", b.String())
	}
	if !strings.HasSuffix(lines[2], "| 1.04 ns |") || !strings.HasSuffix(lines[3], "| — |") {
		t.Fatalf("rows:\n%s\n%s", lines[2], lines[3])
	}
}

// The server's CPU leaves the bursts' out, and never goes below zero.
func TestServerCPULeavesTheProbeOut(t *testing.T) {
	for _, tc := range []struct{ used, probe, want time.Duration }{
		{3 * time.Second, 23 * time.Millisecond, 3*time.Second - 23*time.Millisecond},
		{3 * time.Second, 0, 3 * time.Second},
		{time.Millisecond, 2 * time.Millisecond, 0},
	} {
		if got := serverCPU(tc.used, tc.probe); got != tc.want {
			t.Errorf("serverCPU(%v, %v) = %v, want %v", tc.used, tc.probe, got, tc.want)
		}
	}
}

// A negative --host-probe is an error that names the flag, not a probe
// quietly off; 0 is off.
func TestHostProbeFlag(t *testing.T) {
	var out strings.Builder
	if _, err := parse([]string{"--host-probe", "-5ms"}, &out); err == nil || !strings.Contains(err.Error(), "--host-probe") {
		t.Fatalf("--host-probe -5ms: err %v, want one naming the flag", err)
	}
	o, err := parse([]string{"--host-probe", "0"}, &out)
	if err != nil || o.probeEvery != 0 {
		t.Fatalf("--host-probe 0: %v, %v", o.probeEvery, err)
	}
	if o, err := parse(nil, &out); err != nil || o.probeEvery != 50*time.Millisecond {
		t.Fatalf("default: %v, %v; want 50ms", o.probeEvery, err)
	}
}

// Every numeric flag out of its range is an error naming the flag, before
// anything is built or started; a --profile-at that is not a measured count
// would profile no window.
func TestFlagsOutOfRange(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ramp", "0"}, "--ramp"},
		{[]string{"--ramp", "NaN"}, "--ramp"},
		{[]string{"--warmup", "-1s"}, "--warmup"},
		{[]string{"--window", "0"}, "--window"},
		{[]string{"--npcs", "-1"}, "--npcs"},
		{[]string{"--gc-percent", "-1"}, "--gc-percent"},
		{[]string{"--mem-profile-rate", "0"}, "--mem-profile-rate"},
		{[]string{"--players", "1000,2000", "--profile-at", "1500"}, "--profile-at: 1500 is not one of --players"},
		{[]string{"--profile-at", "-1"}, "--profile-at"},
	} {
		var out strings.Builder
		if _, err := parse(tc.args, &out); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want one naming %q", tc.args, err, tc.want)
		}
	}
	var out strings.Builder
	o, err := parse([]string{"--players", "1000,2000", "--profile-at", "1000", "--warmup", "0"}, &out)
	if err != nil || o.profileAt != 1000 {
		t.Fatalf("--profile-at 1000 of 1000,2000: %v, %v", o.profileAt, err)
	}
	if o, err = parse([]string{"--players", "1000,2000"}, &out); err != nil || o.profileAt != 2000 {
		t.Fatalf("default --profile-at: %v, %v; want the largest, 2000", o.profileAt, err)
	}
}
