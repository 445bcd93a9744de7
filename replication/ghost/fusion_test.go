package ghost

import (
	"testing"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// TestDecodeRoundsEveryOperation pins the decoders to docs/protocol.md
// § 6.4: "the product rounded, then the sum". Go may fuse x*y + z into one
// FMA (arm64, ppc64, s390x; amd64 with GOAMD64=v3), which rounds once and
// changes the last bit of some decoded values, so a client in another
// language could never match the conformance vectors there. On amd64 the
// compiler happened not to fuse these (memory operands); on arm64 it did
// (GOARCH=arm64 go build -gcflags=-S ./replication/ghost showed FMADDD for
// both lines), so this test guards arm64 builds.
func TestDecodeRoundsEveryOperation(t *testing.T) {
	q := newQuant(DefaultBounds())
	for c := uint32(0); c <= q.lim[0]; c += 7 {
		got := q.value([3]uint32{c, c % (q.lim[1] + 1), c})
		for a := range 3 {
			cc := c
			if a == 1 {
				cc = c % (q.lim[1] + 1)
			}
			prod := float64(float64(cc) * q.prec)
			if want := q.min[a] + prod; got[a] != want {
				t.Fatalf("position axis %d code %d: %v, want %v (product rounded, then the sum)", a, cc, got[a], want)
			}
		}
	}
	const max, nbits = 32.0, 10
	g := VelGroup(max, nbits)
	l := uint64(1)<<nbits - 1
	var buf [8]byte
	for code := range l + 1 {
		w := bitstream.NewWriter(buf[:])
		if err := w.WriteBits(code|code<<nbits|code<<(2*nbits), 3*nbits); err != nil {
			t.Fatal(err)
		}
		var s State
		if err := g.Decode(bitstream.NewReader(w.Bytes()), &s); err != nil {
			t.Fatal(err)
		}
		quot := float64(code) / float64(l)
		prod := float64(quot * (2 * max))
		if want := prod - max; s.Vel[0] != want {
			t.Fatalf("velocity code %d: %v, want %v (each operation rounded)", code, s.Vel[0], want)
		}
	}
}
