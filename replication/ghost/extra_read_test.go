package ghost

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// extraValue is a random extra integer: zero most often, a move stamp's
// size, or anything up to 2^32 − 1 (codes too long for one window).
func extraValue(rng *rand.Rand) uint32 {
	switch rng.IntN(4) {
	case 0:
		return 0
	case 1:
		return rng.Uint32N(1 << 12)
	case 2:
		return rng.Uint32N(1 << 27)
	}
	return rng.Uint32()
}

// TestExtraGroupDecodeReadsAsGammas: ExtraGroup(n)'s Decode reads what its
// Encode wrote exactly as the codes read one ReadGamma at a time do — the
// same values, the same bits consumed, an error where that errs — at any
// bit offset, from packets cut short anywhere, for n = 1..4; and it takes
// its one-window path (extrasInWindow) for the usual values (a move stamp
// and zeros), which reads nothing when it declines.
func TestExtraGroupDecodeReadsAsGammas(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	fast := 0
	for n := 1; n <= 4; n++ {
		g := ExtraGroup(n)
		for i := range 20000 {
			var in State
			for k := range n {
				in.Extra[k] = extraValue(rng)
			}
			buf := make([]byte, 64)
			w := bitstream.NewWriter(buf)
			off := rng.IntN(40)
			for range off {
				w.WriteFlag(rng.IntN(2) == 0)
			}
			if err := g.Encode(w, &in); err != nil {
				t.Fatal(err)
			}
			end := w.BitLen()
			for range rng.IntN(80) { // what follows the group in the packet
				w.WriteFlag(rng.IntN(2) == 0)
			}
			nbits := w.BitLen()
			if rng.IntN(4) == 0 {
				nbits = off + rng.IntN(end-off+1) // cut short: the group may not fit
			}
			data := w.Bytes()
			if rng.IntN(2) == 0 {
				data = append(data, make([]byte, rng.IntN(9))...) // room past the limit
			}
			var rs, rf, rw bitstream.Reader
			for _, r := range []*bitstream.Reader{&rs, &rf, &rw} {
				r.ResetBits(data, nbits)
				if off > 0 {
					r.ReadBits(uint(off), "junk")
				}
			}
			var ss, sf, sw State
			sf.Extra = [4]uint32{9, 9, 9, 9}
			ss.Extra, sw.Extra = sf.Extra, sf.Extra
			es := readExtrasPlain(&rs, &ss, n)
			ef := g.Decode(&rf, &sf)
			if (es == nil) != (ef == nil) || rs.Pos() != rf.Pos() || (es == nil && sf != ss) {
				t.Fatalf("n %d case %d (%v at bit %d of %d): Decode read %v, to bit %d, err %v; the gammas %v, to bit %d, err %v",
					n, i, in.Extra[:n], off, nbits, sf.Extra[:n], rf.Pos(), ef, ss.Extra[:n], rs.Pos(), es)
			}
			if es == nil && !slices.Equal(ss.Extra[:n], in.Extra[:n]) && nbits >= end {
				t.Fatalf("n %d case %d: read %v, wrote %v", n, i, ss.Extra, in.Extra)
			}
			if extrasInWindow(&rw, &sw, n) {
				fast++
				if es != nil || rw.Pos() != rs.Pos() || sw != ss {
					t.Fatalf("n %d case %d: the window read %v to bit %d; the gammas %v to bit %d, err %v",
						n, i, sw.Extra[:n], rw.Pos(), ss.Extra[:n], rs.Pos(), es)
				}
			} else if rw.Pos() != off || sw.Extra != [4]uint32{9, 9, 9, 9} {
				t.Fatalf("n %d case %d: the window declined but read to bit %d (from %d), set %v", n, i, rw.Pos(), off, sw.Extra)
			}
		}
	}
	t.Logf("%d of 80000 groups read from one window", fast)
	if fast < 10000 {
		t.Fatalf("the one-window path read %d of 80000 groups: the test checked the fallback only", fast)
	}
}
