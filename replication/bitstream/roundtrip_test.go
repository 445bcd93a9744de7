package bitstream

import (
	"bytes"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// roundTrip writes ops into a junk-filled buffer of bufLen bytes, skipping
// the writes it refuses (which must leave the stream untouched); before op k
// it writes and then truncates away a scrap field when undo has bit k%64 set.
// It then reads every accepted op back over exactly BitLen bits, checks each
// value against what its encoding allows, re-writes the decoded values into a
// fresh buffer, and requires the identical bits. It returns the first
// violation.
func roundTrip(ops []op, bufLen int, undo uint64) error {
	tab := newTestTable()
	buf := bytes.Repeat([]byte{0xA5}, bufLen) // writers must not rely on zeroed buffers
	var w Writer
	w.Reset(buf)
	var written []op
	var ends []int
	for k, o := range ops {
		if undo>>(k%64)&1 == 1 {
			mark := w.BitLen()
			_ = w.WriteBits(0x1ff, 9)
			_ = w.WriteFlag(true)
			w.Truncate(mark)
			if w.BitLen() != mark || !paddingZero(&w) {
				return fmt.Errorf("op %d: Truncate(%d) left BitLen %d, bytes %x", k, mark, w.BitLen(), w.Bytes())
			}
		}
		before := w.BitLen()
		err := writeOp(&w, tab, o)
		if err != nil {
			if !isWriteRefusal(err) {
				return fmt.Errorf("op %d %v: unexpected error %v", k, o, err)
			}
			if w.BitLen() != before {
				return fmt.Errorf("op %d %v: refused write (%v) moved BitLen %d → %d", k, o, err, before, w.BitLen())
			}
			if w.Err() == nil {
				return fmt.Errorf("op %d %v: refused write (%v) not recorded in Err", k, o, err)
			}
			continue
		}
		written = append(written, o)
		ends = append(ends, w.BitLen())
	}
	if !paddingZero(&w) {
		return fmt.Errorf("padding bits not zero: %x at %d bits", w.Bytes(), w.BitLen())
	}
	data, nbits := w.Bytes(), w.BitLen()

	var r Reader
	r.ResetBits(data, nbits)
	got := make([]op, len(written))
	for k, o := range written {
		g, err := readOp(&r, tab, o)
		if err != nil {
			return fmt.Errorf("op %d %v: read: %v", k, o, err)
		}
		if r.Pos() != ends[k] {
			return fmt.Errorf("op %d %v: read ended at bit %d, write at %d", k, o, r.Pos(), ends[k])
		}
		if err := checkOp(o, g); err != nil {
			return fmt.Errorf("op %d: %v", k, err)
		}
		got[k] = g
	}
	if r.Remaining() != 0 {
		return fmt.Errorf("%d bits left after the last op", r.Remaining())
	}

	var w2 Writer
	w2.Reset(bytes.Repeat([]byte{0x3C}, bufLen))
	for k, g := range got {
		if err := writeOp(&w2, tab, g); err != nil {
			return fmt.Errorf("op %d: re-writing decoded %v: %v", k, g, err)
		}
	}
	if w2.BitLen() != nbits || !bytes.Equal(w2.Bytes(), data) {
		return fmt.Errorf("re-written stream differs: %s", firstDiff(data, w2.Bytes(), ends, written, got))
	}
	return nil
}

// firstDiff names the op holding the first bit where a and b differ.
func firstDiff(a, b []byte, ends []int, ops, got []op) string {
	for i := 0; i < min(len(a), len(b)); i++ {
		if x := a[i] ^ b[i]; x != 0 {
			bit := 8*i + bits.TrailingZeros8(x)
			for k, e := range ends {
				if bit < e {
					return fmt.Sprintf("bit %d in op %d: wrote %v, decoded %v", bit, k, ops[k], got[k])
				}
			}
			return fmt.Sprintf("bit %d beyond the last op", bit)
		}
	}
	return fmt.Sprintf("lengths %d vs %d bytes", len(a), len(b))
}

// TestRoundTripProperty: random op sequences, mostly in small buffers so most
// fields land in the last 8 bytes (the slow path) or overflow, plus full
// 1200-byte packets for the fast path.
func TestRoundTripProperty(t *testing.T) {
	for seed := range uint64(4000) {
		rng := rand.New(rand.NewPCG(seed, 0xb175))
		e := rngEntropy{rng}
		bufLen := 1 + rng.IntN(48)
		nops := 1 + rng.IntN(40)
		if seed%8 == 0 {
			bufLen, nops = 1200, 200
		}
		ops := make([]op, nops)
		for i := range ops {
			ops[i] = genOp(e, rng.IntN(20) == 0)
		}
		if err := roundTrip(ops, bufLen, rng.Uint64()&rng.Uint64()); err != nil {
			t.Fatalf("seed %d, %d-byte buffer: %v", seed, bufLen, err)
		}
	}
}

// TestBitsRoundTripAtBufferEnds: (value, width 1..64) sequences written at
// every start offset of small buffers, against a bit-by-bit reference.
func TestBitsRoundTripAtBufferEnds(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for bufLen := 1; bufLen <= 24; bufLen++ {
		for start := 0; start < 8*bufLen; start++ {
			for n := uint(1); n <= 64 && start+int(n) <= 8*bufLen; n++ {
				v := rng.Uint64()
				if n < 64 {
					v &= 1<<n - 1
				}
				buf := bytes.Repeat([]byte{0xFF}, bufLen)
				w := NewWriter(buf)
				prefix := refBits{}
				for i := 0; i < start; i++ { // a prefix of alternating bits, one at a time
					b := uint64(i*5%3) & 1
					prefix.put(b, 1)
					if err := w.WriteBits(b, 1); err != nil {
						t.Fatal(err)
					}
				}
				if err := w.WriteBits(v, n); err != nil {
					t.Fatalf("len %d start %d n %d: %v", bufLen, start, n, err)
				}
				prefix.put(v, n)
				if got, want := w.Bytes(), prefix.bytes(); !bytes.Equal(got, want) {
					t.Fatalf("len %d start %d n %d v %#x: bytes %x, reference %x", bufLen, start, n, v, got, want)
				}
				r := NewReader(w.Bytes())
				for i := 0; i < start; i++ {
					if _, err := r.ReadBits(1, "prefix"); err != nil {
						t.Fatal(err)
					}
				}
				got, err := r.ReadBits(n, "v")
				if err != nil || got != v {
					t.Fatalf("len %d start %d n %d: read %#x, %v; want %#x", bufLen, start, n, got, err, v)
				}
				// One bit more than the buffer holds must overflow, atomically.
				if rem := w.Remaining(); rem < 64 {
					before := w.BitLen()
					if err := w.WriteBits(0, uint(rem+1)); !errors.Is(err, ErrOverflow) || w.BitLen() != before {
						t.Fatalf("len %d: writing %d bits with %d left: %v, BitLen %d→%d", bufLen, rem+1, rem, err, before, w.BitLen())
					}
				}
			}
		}
	}
}

// refBits is the obviously-correct model of the bit order: a list of bits,
// bit i of the stream in byte i/8 at position i%8.
type refBits struct{ b []byte }

func (r *refBits) put(v uint64, n uint) {
	for i := range n {
		r.b = append(r.b, byte(v>>i&1))
	}
}

func (r *refBits) bytes() []byte {
	out := make([]byte, (len(r.b)+7)/8)
	for i, b := range r.b {
		out[i/8] |= b << (i % 8)
	}
	return out
}

// TestRandomBitSequencesMatchReference: long random (value, width) sequences
// against the reference model, in buffers sized to end exactly at the data.
func TestRandomBitSequencesMatchReference(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 99))
		type field struct {
			v uint64
			n uint
		}
		fields := make([]field, 1+rng.IntN(100))
		total := 0
		for i := range fields {
			n := uint(1 + rng.IntN(64))
			v := rng.Uint64()
			if n < 64 {
				v &= 1<<n - 1
			}
			fields[i] = field{v, n}
			total += int(n)
		}
		buf := bytes.Repeat([]byte{0x5A}, (total+7)/8)
		w := NewWriter(buf)
		var ref refBits
		for _, f := range fields {
			if err := w.WriteBits(f.v, f.n); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			ref.put(f.v, f.n)
		}
		if !bytes.Equal(w.Bytes(), ref.bytes()) {
			t.Fatalf("seed %d: bytes %x, reference %x", seed, w.Bytes(), ref.bytes())
		}
		r := NewReader(w.Bytes())
		for i, f := range fields {
			v, err := r.ReadBits(f.n, "f")
			if err != nil || v != f.v {
				t.Fatalf("seed %d field %d: read %#x, %v; want %#x", seed, i, v, err, f.v)
			}
		}
	}
}
