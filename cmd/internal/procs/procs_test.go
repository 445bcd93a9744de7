package procs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const step = 250 * time.Millisecond

// feed gives s readings every step from at for d, the process using
// cores of CPU throughout, and returns the time and CPU it ended at and
// the Ps after each reading.
func feed(s *Sizer, at, cpu time.Duration, cores float64, d time.Duration) (time.Duration, time.Duration, []int) {
	var ns []int
	for end := at + d; at < end; {
		at += step
		cpu += time.Duration(cores * float64(step))
		ns = append(ns, s.Observe(Reading{At: at, CPU: cpu}))
	}
	return at, cpu, ns
}

func newSizer(t *testing.T, max, n int) *Sizer {
	t.Helper()
	s, err := NewSizer(DefaultPolicy(max), n)
	if err != nil {
		t.Fatal(err)
	}
	s.Observe(Reading{}) // the baseline
	return s
}

// A node of 2,000 players as measured on the 2-core host: 0.69 cores with
// two Ps, 0.55 with one. The sizer goes to one P after the hold and stays.
func TestLowersAfterTheHoldAndStays(t *testing.T) {
	s := newSizer(t, 2, 2)
	at, cpu, ns := feed(s, 0, 0, 0.69, 10*time.Second-step)
	for i, n := range ns {
		if n != 2 {
			t.Fatalf("reading %d (%v): %d Ps before the hold ended", i, time.Duration(i+1)*step, n)
		}
	}
	at, cpu, ns = feed(s, at, cpu, 0.69, step)
	if ns[0] != 1 {
		t.Fatalf("after a hold of 10 s at 0.69 cores: %d Ps, want 1", ns[0])
	}
	_, _, ns = feed(s, at, cpu, 0.55, time.Minute)
	for i, n := range ns {
		if n != 1 {
			t.Fatalf("at 0.55 cores on one P, reading %d: %d Ps (flapped)", i, n)
		}
	}
}

// A load that would fill most of one P keeps two.
func TestKeepsPsTheLoadNeeds(t *testing.T) {
	s := newSizer(t, 2, 2)
	if _, _, ns := feed(s, 0, 0, 0.82, time.Minute); ns[len(ns)-1] != 2 {
		t.Fatalf("at 0.82 cores: %d Ps, want 2 (0.82 > Lower 0.8 × 1)", ns[len(ns)-1])
	}
}

// readTrace reads a measured trace of testdata: cores a reading.
func readTrace(t *testing.T, name string) []float64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var cores []float64
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		c, err := strconv.ParseFloat(line, 64)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cores = append(cores, c)
	}
	if len(cores) < 100 {
		t.Fatalf("%s: %d readings", name, len(cores))
	}
	return cores
}

// feedTrace gives s the trace's readings from at, round after round, for
// d, and returns the time and CPU it ended at and the Ps after each.
func feedTrace(s *Sizer, at, cpu time.Duration, trace []float64, d time.Duration) (time.Duration, time.Duration, []int) {
	var ns []int
	for i, end := 0, at+d; at < end; i++ {
		at += step
		cpu += time.Duration(trace[i%len(trace)] * float64(step))
		ns = append(ns, s.Observe(Reading{At: at, CPU: cpu}))
	}
	return at, cpu, ns
}

// The measured node of 2,000 players: 0.75 cores on average on two Ps,
// its readings scattered from 0.6 to 0.89, steps down to one P within two
// holds; on one P (0.65 on average, single readings up to 0.87) it stays
// there for minutes.
func TestMeasuredNodeStepsDownAndStays(t *testing.T) {
	s := newSizer(t, 2, 2)
	at, cpu, ns := feedTrace(s, 0, 0, readTrace(t, "node2000-2ps.txt"), 20*time.Second)
	down := -1
	for i, n := range ns {
		if n == 1 {
			down = i
			break
		}
	}
	if down < 0 {
		t.Fatalf("on two Ps at the measured 0.75 cores: still %d Ps after 20 s", s.N())
	}
	_, _, ns = feedTrace(s, at, cpu, readTrace(t, "node2000-1p.txt"), 5*time.Minute)
	for i, n := range ns {
		if n != 1 {
			t.Fatalf("on one P at the measured load, reading %d (%v): raised to %d", i, time.Duration(i+1)*step, n)
		}
	}
}

// A load past Raise × n in two readings in a row doubles n, up to Max; a
// single reading past it does not.
func TestRaisesOnTwoReadings(t *testing.T) {
	s := newSizer(t, 8, 1)
	at, cpu, ns := feed(s, 0, 0, 0.9, step)
	if ns[0] != 1 {
		t.Fatalf("one reading of 0.9 cores on one P: %d Ps, want 1", ns[0])
	}
	at, cpu, _ = feed(s, at, cpu, 0.5, step) // not in a row
	at, cpu, ns = feed(s, at, cpu, 0.9, step)
	if ns[0] != 1 {
		t.Fatalf("0.9, 0.5, 0.9 cores on one P: %d Ps, want 1", ns[0])
	}
	at, cpu, ns = feed(s, at, cpu, 0.9, step)
	if ns[0] != 2 || s.RaisedOnLag() {
		t.Fatalf("0.9 cores twice in a row on one P: %d Ps (on lag: %v), want 2 on the CPU", ns[0], s.RaisedOnLag())
	}
	at, cpu, ns = feed(s, at, cpu, 1.8, 2*step)
	if ns[0] != 2 || ns[1] != 4 {
		t.Fatalf("1.8 cores on two Ps: %v, want 2 then 4", ns)
	}
	_, _, ns = feed(s, at, cpu, 3.9, 4*step)
	if ns[1] != 8 || ns[3] != 8 {
		t.Fatalf("3.9 cores on four Ps: %v, want 8 and no more (Max)", ns)
	}
}

// Each step down waits a hold of its own, decided on the hold's mean.
func TestStepsDownOneHoldAtATime(t *testing.T) {
	s := newSizer(t, 4, 4)
	_, _, ns := feed(s, 0, 0, 0.3, 30*time.Second)
	want := map[time.Duration]int{10 * time.Second: 3, 20 * time.Second: 2, 30 * time.Second: 1}
	for i, n := range ns {
		when := time.Duration(i+1) * step
		if w, ok := want[when]; ok && n != w {
			t.Fatalf("at %v: %d Ps, want %d", when, n, w)
		}
		if when == 10*time.Second-step && n != 4 {
			t.Fatalf("just before the first hold ended: %d Ps", n)
		}
	}

	// A hold whose mean is 0.9 cores (0.5, then 1.3) keeps two Ps; the
	// next hold, at 0.3, steps down at its end and not before.
	s = newSizer(t, 2, 2)
	at, cpu, _ := feed(s, 0, 0, 0.5, 5*time.Second)
	at, cpu, ns = feed(s, at, cpu, 1.3, 5*time.Second)
	if ns[len(ns)-1] != 2 {
		t.Fatalf("a hold of mean 0.9 cores: %d Ps, want 2", ns[len(ns)-1])
	}
	_, _, ns = feed(s, at, cpu, 0.3, 10*time.Second)
	for i, n := range ns[:len(ns)-1] {
		if n != 2 {
			t.Fatalf("%v into the second hold: %d Ps, it did not wait for its end", time.Duration(i+1)*step, n)
		}
	}
	if ns[len(ns)-1] != 1 {
		t.Fatalf("the end of a hold at 0.3 cores: %d Ps, want 1", ns[len(ns)-1])
	}
}

// A raise within the hold after a step down doubles the next hold, up to
// MaxBounceHolds × Hold; a step down that stands its hold sets it back.
func TestBouncesBackOff(t *testing.T) {
	s := newSizer(t, 2, 2)
	at, cpu, _ := feed(s, 0, 0, 0.5, 10*time.Second)
	if s.N() != 1 {
		t.Fatalf("after a hold at 0.5 cores: %d Ps", s.N())
	}
	want := 10 * time.Second
	for bounce := 1; bounce <= 6; bounce++ {
		at, cpu, _ = feed(s, at, cpu, 0.95, 2*step) // right after the step down: a bounce
		if s.N() != 2 {
			t.Fatalf("bounce %d: %d Ps after two readings at 0.95 on one P", bounce, s.N())
		}
		want = min(2*want, MaxBounceHolds*10*time.Second)
		if s.Hold() != want {
			t.Fatalf("after bounce %d: hold %v, want %v", bounce, s.Hold(), want)
		}
		var ns []int
		at, cpu, ns = feed(s, at, cpu, 0.5, want)
		for i, n := range ns[:len(ns)-1] {
			if n != 2 {
				t.Fatalf("bounce %d: stepped down %v into a hold of %v", bounce, time.Duration(i+1)*step, want)
			}
		}
		if ns[len(ns)-1] != 1 {
			t.Fatalf("bounce %d: %d Ps at the end of a hold of %v", bounce, ns[len(ns)-1], want)
		}
	}
	// This step down stands its hold: the hold is Policy.Hold again, and a
	// raise after it is no bounce.
	at, cpu, _ = feed(s, at, cpu, 0.5, want)
	at, cpu, _ = feed(s, at, cpu, 0.95, 2*step)
	if s.N() != 2 || s.Hold() != 10*time.Second {
		t.Fatalf("a raise after a step down that stood: %d Ps, hold %v; want 2 and 10s", s.N(), s.Hold())
	}
	if _, _, ns := feed(s, at, cpu, 0.5, 10*time.Second); ns[len(ns)-1] != 1 {
		t.Fatalf("a hold of 10 s after the back-off reset: %d Ps", ns[len(ns)-1])
	}
}

// Timer wakes that wait for a P raise n whatever the CPU; a lag above
// half the bound holds n up.
func TestLagRaisesAndHolds(t *testing.T) {
	s := newSizer(t, 2, 1)
	if n := s.Observe(Reading{At: step, CPU: step / 4, Lag: 6 * time.Millisecond}); n != 2 {
		t.Fatalf("0.25 cores, wakes 6 ms late: %d Ps, want 2", n)
	}
	if !s.RaisedOnLag() {
		t.Fatal("a raise at 0.25 cores is not the lag's")
	}
	cpu := step / 4
	for at := 2 * step; at <= time.Minute; at += step {
		cpu += step / 4
		if n := s.Observe(Reading{At: at, CPU: cpu, Lag: 3 * time.Millisecond}); n != 2 {
			t.Fatalf("at %v, wakes 3 ms late: stepped down to %d", at, n)
		}
	}
	at := time.Minute
	for end := at + 10*time.Second; at < end; {
		at += step
		cpu += step / 4
		s.Observe(Reading{At: at, CPU: cpu, Lag: time.Millisecond}) // as on one P at 2,000 players
	}
	if s.N() != 1 {
		t.Fatalf("a hold of low CPU and short lags: %d Ps, want 1", s.N())
	}
}

// Readings out of order (a clock or a CPU count that went back) set a new
// baseline and change nothing.
func TestBackwardReadingsAreBaselines(t *testing.T) {
	s, err := NewSizer(DefaultPolicy(2), 1)
	if err != nil {
		t.Fatal(err)
	}
	s.Observe(Reading{At: time.Second, CPU: time.Second})                       // the baseline
	if n := s.Observe(Reading{At: time.Second, CPU: 5 * time.Second}); n != 1 { // no time passed
		t.Fatalf("a reading at the same time raised to %d", n)
	}
	if n := s.Observe(Reading{At: 2 * time.Second, CPU: time.Second}); n != 1 { // CPU went back
		t.Fatalf("a CPU count that went back raised to %d", n)
	}
	if n := s.Observe(Reading{At: 3 * time.Second, CPU: 2 * time.Second}); n != 1 {
		t.Fatalf("one reading of a full core after the new baseline: %d Ps, want 1", n)
	}
	if n := s.Observe(Reading{At: 4 * time.Second, CPU: 3 * time.Second}); n != 2 {
		t.Fatalf("a second reading of a full core: %d Ps, want 2", n)
	}
}

func TestPolicyAndSettingValidate(t *testing.T) {
	for _, p := range []Policy{
		{Max: 0, Raise: 0.85, Lower: 0.7},
		{Max: 2, Raise: 0, Lower: 0.7},
		{Max: 2, Raise: 1.5, Lower: 0.7},
		{Max: 2, Raise: 0.85, Lower: 0.9},
		{Max: 2, Raise: 0.85, Lower: 0},
		{Max: 2, Raise: 0.85, Lower: 0.7, Hold: -time.Second, LagRaise: time.Millisecond},
		{Max: 2, Raise: 0.85, Lower: 0.7, Hold: time.Second},
	} {
		if _, err := NewSizer(p, 1); err == nil {
			t.Errorf("NewSizer(%+v) accepted", p)
		}
	}
	if s, err := NewSizer(DefaultPolicy(2), 9); err != nil || s.N() != 2 {
		t.Errorf("NewSizer at 9 Ps of a Max of 2: %v, %v", s, err)
	}
	for in, want := range map[string]Setting{"auto": {Auto: true}, "AUTO": {Auto: true}, "1": {N: 1}, "16": {N: 16}} {
		if got, err := ParseSetting(in); err != nil || got != want {
			t.Errorf("ParseSetting(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-2", "two", "1.5"} {
		if _, err := ParseSetting(in); err == nil {
			t.Errorf("ParseSetting(%q) accepted", in)
		}
	}
}

// Apply: the environment's GOMAXPROCS wins; a count is set at once; auto
// asks for Run.
func TestApply(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(before)
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "GOMAXPROCS" {
				return v
			}
			return ""
		}
	}
	if Apply(Setting{Auto: true}, env("3"), nil) || Apply(Setting{N: 1}, env("3"), nil) {
		t.Fatal("Apply asked for the sizer with GOMAXPROCS set")
	}
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Fatalf("with GOMAXPROCS set, Apply changed the Ps to %d", got)
	}
	if Apply(Setting{N: before + 1}, env(""), nil) {
		t.Fatal("a fixed count asked for the sizer")
	}
	if got := runtime.GOMAXPROCS(0); got != before+1 {
		t.Fatalf("Apply(%d) left %d Ps", before+1, got)
	}
	if !Apply(Setting{Auto: true}, env(""), nil) {
		t.Fatal("auto did not ask for the sizer")
	}
}

// Run on a fake process: idle, it steps down to one P after the hold;
// busy, it raises again; it stops with its context. The runtime's Ps are
// not touched (Set is the test's).
func TestRunSizesAndStops(t *testing.T) {
	var busy atomic.Bool
	var cpu, last atomic.Int64 // the fake's CPU so far and its last reading (ns since start)
	start := time.Now()
	fake := func() (time.Duration, error) {
		now := time.Since(start)
		prev := time.Duration(last.Swap(int64(now)))
		if busy.Load() {
			cpu.Add(int64(2 * (now - prev))) // two cores: past Raise × 1
		}
		return time.Duration(cpu.Load()), nil
	}
	var set atomic.Int64
	stats := &Stats{}
	// A lag bound no wake reaches on a loaded test machine: the CPU drives.
	pol := Policy{Max: 2, Raise: 0.85, Lower: 0.7, Hold: 50 * time.Millisecond, LagRaise: time.Minute}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Interval: 5 * time.Millisecond, Policy: &pol,
			CPU: fake, Set: func(n int) { set.Store(int64(n)) }, Stats: stats, Probe: time.Millisecond})
	}()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); {
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 10 s (set %d, raises %d, lowers %d)", what, set.Load(), stats.Raises.Load(), stats.Lowers.Load())
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	if runtime.GOMAXPROCS(0) >= 2 {
		waitFor("step down to one P", func() bool { return set.Load() == 1 && stats.Lowers.Load() == 1 })
	} else { // a one-core machine starts at its one P
		set.Store(1)
	}
	busy.Store(true)
	waitFor("raise to two Ps", func() bool { return set.Load() == 2 && stats.Raises.Load() >= 1 })
	if stats.Wakes.Load() == 0 || stats.Ps.Load() != 2 {
		t.Errorf("the probe woke %d times; Stats.Ps %d, want 2", stats.Wakes.Load(), stats.Ps.Load())
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop with its context")
	}
}

func TestRunRefusesAPolicyAndAClockThatFail(t *testing.T) {
	one := DefaultPolicy(1)
	calls := 0
	if err := Run(context.Background(), Config{Policy: &one, CPU: func() (time.Duration, error) { calls++; return 0, nil }}); err != nil || calls != 0 {
		t.Fatalf("Run with a Max of 1 P: %v after %d readings, want nil at once", err, calls)
	}
	bad := Policy{Max: 0}
	if err := Run(context.Background(), Config{Policy: &bad, CPU: func() (time.Duration, error) { return 0, nil }}); err == nil {
		t.Fatal("Run accepted a policy of no Ps")
	}
	pol := DefaultPolicy(2)
	err := Run(context.Background(), Config{Policy: &pol, CPU: func() (time.Duration, error) { return 0, ErrNoCPUClock }})
	if !errors.Is(err, ErrNoCPUClock) {
		t.Fatalf("Run with no CPU clock: %v", err)
	}
}

// The process's CPU clock counts this goroutine's work.
func TestProcessCPUCounts(t *testing.T) {
	a, err := ProcessCPU()
	if err != nil {
		t.Fatal(err)
	}
	x := 1.0
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
		for range 1000 {
			x = x*1.0000001 + 1e-9
		}
	}
	b, err := ProcessCPU()
	if err != nil {
		t.Fatal(err)
	}
	if b-a < 10*time.Millisecond {
		t.Fatalf("50 ms of spinning counted %v of CPU (x %v)", b-a, x)
	}
}
