package handshake

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestReplayWindow(t *testing.T) {
	type op struct {
		seq    uint64
		commit bool // Commit (else Check only)
		want   error
	}
	tests := []struct {
		name string
		ops  []op
	}{
		{"first packet may be 0", []op{{0, true, nil}, {0, false, ErrDuplicate}, {1, true, nil}}},
		{"duplicate refused by Check and Commit", []op{{5, true, nil}, {5, false, ErrDuplicate}, {5, true, ErrDuplicate}}},
		{"late packet inside the window accepted once", []op{{100, true, nil}, {50, true, nil}, {50, true, ErrDuplicate}}},
		{"edge of the window", []op{
			{2000, true, nil},
			{2000 - ReplayWindowSize + 1, true, nil},
			{2000 - ReplayWindowSize, false, ErrStale},
		}},
		{"jump beyond the ring clears it", []op{{10, true, nil}, {10 + 5*ReplayWindowSize, true, nil}, {10 + 5*ReplayWindowSize - 1, true, nil}, {10, false, ErrStale}}},
		{"ring wraps across every word", func() []op {
			var ops []op
			for s := uint64(0); s < 3*64*replayWords; s += 63 {
				ops = append(ops, op{s, true, nil}, op{s, false, ErrDuplicate})
			}
			return ops
		}()},
		{"slot reused after the window passes", []op{
			{64 * replayWords, true, nil}, // same ring word as 0
			{0, false, ErrStale},
			{64*replayWords + 64*replayWords, true, nil},
			{64 * replayWords, false, ErrStale},
		}},
		{"forged far-future sequence only checked, never committed", []op{
			{7, true, nil},
			{math.MaxUint64 - 3, false, nil}, // would pass Check; its tag fails, so no Commit
			{8, true, nil},
			{6, true, nil},
		}},
		{"top of the sequence space", []op{{math.MaxUint64 - 1, true, nil}, {math.MaxUint64, true, nil}, {math.MaxUint64, false, ErrDuplicate}, {math.MaxUint64 - 1, false, ErrDuplicate}, {math.MaxUint64 - 2, true, nil}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var w ReplayWindow
			for i, o := range tc.ops {
				var err error
				if o.commit {
					err = w.Commit(o.seq)
				} else {
					err = w.Check(o.seq)
				}
				if !errors.Is(err, o.want) || (o.want == nil) != (err == nil) {
					t.Fatalf("op %d (seq %d, commit %v): err %v, want %v", i, o.seq, o.commit, err, o.want)
				}
			}
		})
	}
}

// TestReplayWindowModel runs random Check/Commit sequences — in order,
// reordered, duplicated, far behind, far ahead — against a reference model that
// remembers every committed sequence number exactly.
func TestReplayWindowModel(t *testing.T) {
	for seed := range uint64(10) {
		rng := rand.New(rand.NewPCG(seed, 99))
		var w ReplayWindow
		seen := map[uint64]bool{}
		var newest uint64
		any := false
		start := rng.Uint64() >> 1
		if seed == 0 {
			start = 0
		}
		next := start
		for range 10000 {
			var s uint64
			switch r := rng.IntN(10); {
			case r < 5:
				s = next
				next += uint64(1 + rng.IntN(3))
			case r < 8:
				s = next - min(next-start, uint64(rng.IntN(2*ReplayWindowSize)))
			case r < 9:
				s = next + uint64(rng.IntN(4*ReplayWindowSize))
			default:
				s = next - min(next-start, uint64(rng.IntN(100000)))
			}
			want := error(nil)
			switch {
			case any && s <= newest && newest-s >= ReplayWindowSize:
				want = ErrStale
			case seen[s]:
				want = ErrDuplicate
			}
			if err := w.Check(s); err != want {
				t.Fatalf("seed %d: Check(%d) = %v, want %v (newest %d)", seed, s, err, want, newest)
			}
			if rng.IntN(4) == 0 {
				continue // authentication failed: no commit
			}
			if err := w.Commit(s); err != want {
				t.Fatalf("seed %d: Commit(%d) = %v, want %v", seed, s, err, want)
			}
			if want == nil {
				seen[s] = true
				if !any || s > newest {
					newest = s
				}
				any = true
				next = max(next, s+1)
			}
		}
	}
}
