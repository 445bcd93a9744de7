package event

import (
	"encoding/hex"
	"testing"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// TestReconstruct checks the half-range rule at every width we use, across
// the truncation wrap: every id in [ref−2^(b−1), ref+2^(b−1)) comes back.
func TestReconstruct(t *testing.T) {
	for _, b := range []uint{15, 16, 21} {
		win := uint64(1) << b
		half := win / 2
		for _, ref := range []uint64{0, 1, half - 1, half, win - 1, win, win + 1, 3*win - 5, 1 << 40, 1<<40 + half} {
			lo := uint64(0)
			if ref > half {
				lo = ref - half
			}
			for _, id := range []uint64{lo, lo + 1, ref, ref + 1, ref + half - 1, (lo + ref) / 2} {
				if got := reconstruct(ref, id&(win-1), b); got != id {
					t.Errorf("b=%d ref=%d id=%d: reconstructed %d", b, ref, id, got)
				}
			}
		}
	}
	// Brute force a small width: the result always lies in the window.
	const b = 4
	for ref := uint64(0); ref < 64; ref++ {
		for low := uint64(0); low < 16; low++ {
			got := reconstruct(ref, low, b)
			if got&15 != low {
				t.Fatalf("ref %d low %d: %d has the wrong low bits", ref, low, got)
			}
			if ref >= 8 && (got < ref-8 || got >= ref+8) {
				t.Fatalf("ref %d low %d: %d outside [ref-8, ref+8)", ref, low, got)
			}
		}
	}
}

// TestGoldenSection pins the wire layout (docs/protocol.md §4,
// worked example): the bytes the Sender writes for a fixed set of events, and
// the same section built field by field from the spec.
func TestGoldenSection(t *testing.T) {
	cfg := DefaultConfig()
	s, err := NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	must(t, s.SendOrdered(3, []byte("hi")))
	must(t, s.SendOrdered(3, []byte("yo")))
	must(t, s.SendUnordered([]byte{0xAB}))
	must(t, s.SendStaggered(5, []byte{7}, 0))
	must(t, s.SendUnguaranteed(nil))
	buf := make([]byte, 64)
	var w bitstream.Writer
	w.Reset(buf)
	if _, err := s.Write(&w, 1, 0); err != nil {
		t.Fatal(err)
	}

	// The same section by hand. Round-robin starts at lane 0: the first round
	// takes lane 3's first event and the unordered one, the second round
	// lane 3's second event.
	var x bitstream.Writer
	x.Reset(make([]byte, 64))
	f := func(v uint64, n uint) { must(t, x.WriteBits(v, n)) }
	g := func(v uint64) { must(t, x.WriteGamma(v)) }
	bytes := func(p string) { must(t, x.WriteBytes([]byte(p))) }
	f(1, 1)
	f(uint64(Ordered), 2)
	f(3, 3)  // lane
	f(0, 15) // id 0 (first record of lane 3 in this packet: no next flag)
	f(0, 1)  // whole
	g(3)     // len 2
	bytes("hi")
	f(1, 1)
	f(uint64(Unordered), 2)
	f(0, 15) // id 0
	f(0, 1)
	g(2) // len 1
	bytes("\xab")
	f(1, 1)
	f(uint64(Ordered), 2)
	f(3, 3)
	f(1, 1) // next: id = 0+1
	f(0, 1)
	g(3)
	bytes("yo")
	f(1, 1)
	f(uint64(Staggered), 2)
	f(5, 8)  // key
	f(0, 16) // version 0
	g(2)
	bytes("\x07")
	f(1, 1)
	f(uint64(Unguaranteed), 2)
	g(1) // len 0
	f(0, 1)

	if got, want := hex.EncodeToString(w.Bytes()), hex.EncodeToString(x.Bytes()); got != want {
		t.Fatalf("section\n got %s\nwant %s", got, want)
	}
	if w.BitLen() != x.BitLen() {
		t.Fatalf("bit length %d, want %d", w.BitLen(), x.BitLen())
	}
	const golden = "1d0080d1d20600a0d52ee7bdbd0000400709"
	if got := hex.EncodeToString(w.Bytes()); got != golden {
		t.Errorf("golden bytes changed:\n got %s\nwant %s (update the doc's worked example too)", got, golden)
	}
	t.Logf("%d bits: %s", w.BitLen(), hex.EncodeToString(w.Bytes()))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
