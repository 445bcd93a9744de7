package notify

import (
	"testing"
	"time"
)

// TestGapTimesPerSequence: each missing sequence keeps the time its first
// later packet arrived (the gap times share rxBits' backing array), so the
// time threshold gives up an older gap while a newer one still waits.
func TestGapTimesPerSequence(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ReorderThreshold = 8 // no gap here reaches the count threshold
	const p = 1000
	c, err := newConn(cfg, 0, p)
	if err != nil {
		t.Fatal(err)
	}
	t1, t2 := 100*time.Millisecond, 20*time.Second
	c.receive(p, 0)
	c.receive(p+2, t1) // p+1 missing since t1
	c.receive(p+4, t2) // p+3 missing since t2
	tau := c.reorderTime()
	if tau >= t2-t1 {
		t.Fatalf("reorder time %v: the gaps must be further apart", tau)
	}
	c.Tick(t1 + tau)
	if c.rxH() != p+2 {
		t.Fatalf("horizon %d after the first gap's time threshold, want %d (p+1 given up, p+3 waiting)", c.rxH()-p, 2)
	}
	c.Tick(t2 + tau)
	if c.rxH() != p+4 {
		t.Fatalf("horizon %d after the second gap's time threshold, want %d", c.rxH()-p, 4)
	}
}

// TestRTTFirstSampleReplacesInitial: the first sample sets the smoothed
// RTT (RFC 6298 §2.2); later ones blend in.
func TestRTTFirstSampleReplacesInitial(t *testing.T) {
	var e rttEstimator
	e.init(300 * time.Millisecond)
	e.sample(40*time.Millisecond, 0)
	if e.srtt != 40*time.Millisecond || e.rttvar != 20*time.Millisecond {
		t.Fatalf("after the first sample srtt %v rttvar %v, want 40ms 20ms", e.srtt, e.rttvar)
	}
	e.sample(48*time.Millisecond, 0)
	if want := (7*40*time.Millisecond + 48*time.Millisecond) / 8; e.srtt != want {
		t.Fatalf("after the second sample srtt %v, want %v", e.srtt, want)
	}
}

// TestGapRoomOnFirstGap: a Conn that has seen no gap holds no gap times
// (rxBits ends at the ack bits); the first gap gives it room for
// nextPow2(ReorderThreshold), keeps the accepted bits, and the gap's time
// then gives the sequence up on time as before.
func TestGapRoomOnFirstGap(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ReorderThreshold = 8 // the gap below never reaches the count threshold
	const p = 70             // past a word of the ring: the copy must keep every word
	c, err := newConn(cfg, 0, p)
	if err != nil {
		t.Fatal(err)
	}
	for s := uint64(p); s < p+10; s++ {
		c.receive(s, time.Duration(s-p)*time.Millisecond)
	}
	if n := cap(c.rxBits) - len(c.rxBits); n != 0 {
		t.Fatalf("%d words of gap room before any gap, want 0", n)
	}
	t1 := 20 * time.Millisecond
	c.receive(p+11, t1) // p+10 missing since t1
	if n := cap(c.rxBits) - len(c.rxBits); n != nextPow2(cfg.ReorderThreshold) {
		t.Fatalf("%d words of gap room after the first gap, want %d", n, nextPow2(cfg.ReorderThreshold))
	}
	for s := uint64(p); s < p+12; s++ {
		if want := s != p+10; c.accepted(s) != want {
			t.Fatalf("sequence %d accepted %v after the gap room was made, want %v", s-p, c.accepted(s), want)
		}
	}
	tau := c.reorderTime()
	c.Tick(t1 + tau - 1)
	if c.rxH() > p+10 {
		t.Fatalf("horizon %d before the gap's time threshold, want ≤ 10", c.rxH()-p)
	}
	c.Tick(t1 + tau)
	if c.rxH() != p+11 {
		t.Fatalf("horizon %d at the gap's time threshold, want 11", c.rxH()-p)
	}
}
