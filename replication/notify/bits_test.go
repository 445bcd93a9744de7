package notify

import (
	"math/rand/v2"
	"testing"
)

// TestWordScansMatchBitScans: missing and nextMissing, which read the
// receive ring a word at a time, agree with a bit-at-a-time reference over
// random rings, for ranges anywhere in sequence space (wrapping the ring,
// starting and ending mid-word, empty, up to the whole ring; half of them
// at most 65 long, around missing's path for 64 and fewer).
func TestWordScansMatchBitScans(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, win := range []int{256, 300, 1024} {
		cfg := DefaultConfig()
		cfg.AckWindow = win
		c, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ring := uint64(len(c.rxBits) * 64)
		for trial := range 2000 {
			density := rng.Float64()
			for i := range c.rxBits {
				var w uint64
				for b := range 64 {
					if rng.Float64() < density {
						w |= 1 << b
					}
				}
				c.rxBits[i] = w
			}
			lo := rng.Uint64N(1 << 40)
			if trial%3 == 0 {
				lo = lo &^ 63 // word-aligned starts too
			}
			hi := lo + rng.Uint64N(ring+1)
			if trial%2 == 1 {
				hi = lo + rng.Uint64N(66) // within two words (missing's one-word path), up to 65
			}
			var wantN uint64
			wantNext := hi
			for s := lo; s < hi; s++ {
				if !c.accepted(s) {
					wantN++
					if wantNext == hi {
						wantNext = s
					}
				}
			}
			if got := c.missing(lo, hi); got != wantN {
				t.Fatalf("window %d: missing(%d, %d) = %d, want %d", win, lo, hi, got, wantN)
			}
			if got := c.nextMissing(lo, hi); got != wantNext {
				t.Fatalf("window %d: nextMissing(%d, %d) = %d, want %d", win, lo, hi, got, wantNext)
			}
		}
	}
}
