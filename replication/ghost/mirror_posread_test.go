package ghost

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// posReadCase is one position update to read: a history of refs values
// before stamp ms, near an edge of the box or not, and the bits that follow
// (data from bit off, nbits readable).
type posReadCase struct {
	refs  int
	edge  bool
	ms    int64
	data  []byte
	off   int
	nbits int
	seed  uint64
}

// checkPosRead reads c with readPosUpdate (its one-window path where it
// takes it) and with readPosFields (field by field) into two mirrors with
// the same history, and reports how they differ: the value, ok and rest,
// the bits consumed, the error (field and bit) and the unreferenced count.
// window is whether the bits were a windowed value the window read.
func checkPosRead(t testing.TB, reg *Registry, c posReadCase) (window bool, diff string) {
	rng := rand.New(rand.NewPCG(c.seed, 1))
	var hist history
	hist.reset(&reg.q)
	lim := reg.q.lim
	for i := range c.refs {
		var q [3]uint32
		for a := range 3 {
			if c.edge {
				q[a] = uint32(rng.IntN(40))
				if rng.IntN(2) == 0 {
					q[a] = lim[a] - q[a]
				}
			} else {
				q[a] = lim[a]/2 + uint32(rng.IntN(2000)) - 1000
			}
		}
		hist.insert(snapshot{ms: c.ms - int64(30*(c.refs-i)) - int64(rng.IntN(20)), q: q})
	}
	var ms [2]*Mirror
	for i := range ms {
		m, err := NewMirror(reg, DefaultMirrorConfig())
		if err != nil {
			t.Fatal(err)
		}
		ms[i] = m
	}
	var rs [2]bitstream.Reader
	for i := range rs {
		rs[i].ResetBits(c.data, c.nbits)
		if c.off > 0 {
			rs[i].ReadBits(uint(c.off), "junk")
		}
	}
	h0, h1 := hist, hist
	q0, ok0, rest0, err0 := ms[0].readPosUpdate(&rs[0], &h0, c.ms)
	q1, ok1, rest1, err1 := ms[1].readPosFields(&rs[1], &h1, c.ms)
	e0, e1 := fmt.Sprint(err0), fmt.Sprint(err1)
	if e0 != e1 || rs[0].Pos() != rs[1].Pos() || ms[0].stats != ms[1].stats ||
		(err0 == nil && (q0 != q1 || ok0 != ok1 || rest0 != rest1)) {
		return false, fmt.Sprintf("window read %v ok %v rest %v to bit %d, err %s, %+v; fields %v ok %v rest %v to bit %d, err %s, %+v",
			q0, ok0, rest0, rs[0].Pos(), e0, ms[0].stats, q1, ok1, rest1, rs[1].Pos(), e1, ms[1].stats)
	}
	// A windowed value (k ≠ 0) read whole and valid: what the window
	// takes (readPosUpdate falls back only at the end of the packet, on an
	// absolute value or a value out of the box).
	k := 0
	if c.nbits-c.off >= kcodeBits {
		var r bitstream.Reader
		r.ResetBits(c.data, c.nbits)
		if c.off > 0 {
			r.ReadBits(uint(c.off), "junk")
		}
		kk, _ := r.ReadBits(kcodeBits, "k")
		k = int(kk)
	}
	return err0 == nil && k != 0, ""
}

// TestPosUpdateWindowReadsAsFields: the one-window read of a position
// update gives what the field-by-field read gives — the value, ok, rest,
// the bits consumed, the error and where, the unreferenced count — for
// random bits at any offset, packets cut anywhere, histories of 0 to 3
// references in the middle of the box and at its edges (values out of the
// box); and most valid windowed values are read.
func TestPosUpdateWindowReadsAsFields(t *testing.T) {
	reg, _, _ := newTestRegistry(t)
	rng := rand.New(rand.NewPCG(7, 8))
	windowed := 0
	for i := range 30000 {
		data := make([]byte, 1+rng.IntN(16))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		c := posReadCase{refs: rng.IntN(4), edge: rng.IntN(3) == 0, ms: 5000 + int64(rng.IntN(100)),
			data: data, nbits: 8 * len(data), seed: uint64(i)}
		if rng.IntN(4) == 0 {
			c.nbits = rng.IntN(c.nbits + 1)
		}
		c.off = rng.IntN(min(c.nbits, 20) + 1)
		w, diff := checkPosRead(t, reg, c)
		if diff != "" {
			t.Fatalf("case %d (%d refs, edge %v, %x from bit %d of %d): %s", i, c.refs, c.edge, c.data, c.off, c.nbits, diff)
		}
		if w {
			windowed++
		}
	}
	t.Logf("%d of 30000 valid windowed values", windowed)
	if windowed < 6000 {
		t.Fatalf("%d valid windowed values: the test checked the fallback only", windowed)
	}
}
