package zone

import (
	"testing"
	"time"
	"unsafe"
)

// TestLatencyRingBounded keeps a Latency's ring at latencyKeep samples of
// 4 bytes (64 KB; 512 KB as time.Durations) however many are added, and
// its quantiles over the most recent ones.
func TestLatencyRingBounded(t *testing.T) {
	var l Latency
	for range 3 * latencyKeep {
		l.Add(time.Millisecond)
	}
	for range latencyKeep {
		l.Add(2 * time.Millisecond) // the last latencyKeep: every old one overwritten
	}
	if got := l.Count(); got != 4*latencyKeep {
		t.Errorf("Count %d, want %d", got, 4*latencyKeep)
	}
	if b := uintptr(cap(l.samples)) * unsafe.Sizeof(l.samples[0]); cap(l.samples) != latencyKeep || b > 64<<10 {
		t.Errorf("the ring holds %d samples (%d B), want %d (≤ 64 KB)", cap(l.samples), b, latencyKeep)
	}
	if q := l.Quantiles(0, 0.5, 1); q[0] != 2*time.Millisecond || q[1] != 2*time.Millisecond || q[2] != 2*time.Millisecond {
		t.Errorf("quantiles %v after the ring turned over, want 2ms each", q)
	}
}

// TestLatencySamples: a sample is kept to the microsecond, a negative one
// as 0 and one past latencyMax as latencyMax (not wrapped to a small one).
func TestLatencySamples(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in, out time.Duration
	}{
		{name: "a tick's cost", in: 3456789 * time.Nanosecond, out: 3456 * time.Microsecond},
		{name: "under a microsecond", in: 999, out: 0},
		{name: "negative", in: -time.Second, out: 0},
		{name: "the longest kept", in: latencyMax, out: latencyMax},
		{name: "past the longest", in: 2 * latencyMax, out: latencyMax},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l Latency
			l.Add(tc.in)
			if got := l.Quantiles(0.5)[0]; got != tc.out {
				t.Errorf("Add(%v): kept %v, want %v", tc.in, got, tc.out)
			}
		})
	}
	var l Latency
	for i := range 1000 { // the ring grows by doubling below its bound
		l.Add(time.Duration(i) * time.Millisecond)
	}
	if q := l.Quantiles(0.5, 0.99); q[0] != 499*time.Millisecond || q[1] != 989*time.Millisecond {
		t.Errorf("p50, p99 of 0–999 ms: %v, want [499ms 989ms]", q)
	}
	if c := cap(l.samples); c != 1024 {
		t.Errorf("1,000 samples in a ring of %d, want 1,024", c)
	}
	l.Reset()
	if q := l.Quantiles(0.5); l.Count() != 0 || q[0] != 0 {
		t.Errorf("after Reset: count %d, p50 %v", l.Count(), q[0])
	}
}
