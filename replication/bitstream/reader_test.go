package bitstream

import (
	"errors"
	"io"
	"testing"
)

var errEOF = io.ErrUnexpectedEOF

// mixedPacket writes one field of every kind and returns the bytes and the
// ops, for truncation tests.
func mixedPacket(t *testing.T) ([]byte, []op, *StringTable) {
	t.Helper()
	tab := newTestTable()
	ops := []op{
		{kind: opFlag, b: true},
		{kind: opRanged, i: 17, lo: 0, hi: 32},
		{kind: opBits, u: 0xdeadbeefcafe, n: 48},
		{kind: opBits, u: 1<<63 | 5, n: 64},
		{kind: opQuant, f: 0.45, fmin: 0, fmax: 1, n: 5},
		{kind: opFixed, f: -1999.9, fmin: -2000, fmax: 2000, prec: 0.1},
		{kind: opSigned, f: -0.25, n: 9},
		{kind: opUnit, f: 0.5, n: 7},
		{kind: opFloat32, f32: 3.25},
		{kind: opVec, v: [3]float64{0.3, -0.4, -0.5}, n: 11},
		{kind: opQuat, q: [4]float64{0.1, 0.7, -0.2, 0.3}, n: QuatBits},
		{kind: opString, s: "Fuzzy", maxLen: 128},
		{kind: opTable, s: "fireball", maxLen: 32},
		{kind: opTable, s: "not in table", maxLen: 32},
		{kind: opGamma, u: 1000},
		{kind: opBytes, raw: []byte{1, 2, 3}},
		{kind: opGamma, u: 1 << 40},
	}
	w := NewWriter(make([]byte, 256))
	for _, o := range ops {
		if err := writeOp(w, tab, o); err != nil {
			t.Fatalf("%v: %v", o, err)
		}
	}
	return w.Bytes(), ops, tab
}

// BS-2: every truncation of a packet fails at the field that runs off the
// end, with a *ReadError naming it, and consumes nothing of that field.
func TestTruncatedInputNamesTheField(t *testing.T) {
	data, ops, tab := mixedPacket(t)
	// Where each field starts, from a clean read.
	starts := make([]int, len(ops)+1)
	r := NewReader(data)
	for i, o := range ops {
		starts[i] = r.Pos()
		if _, err := readOp(r, tab, o); err != nil {
			t.Fatalf("clean read of %v: %v", o, err)
		}
	}
	starts[len(ops)] = r.Pos()
	for nbits := 0; nbits < starts[len(ops)]; nbits++ {
		r.ResetBits(data, nbits)
		for i, o := range ops {
			_, err := readOp(r, tab, o)
			if starts[i+1] <= nbits {
				if err != nil {
					t.Fatalf("%d bits: field %v fits but failed: %v", nbits, o, err)
				}
				continue
			}
			var re *ReadError
			if !errors.As(err, &re) {
				t.Fatalf("%d bits: field %v: err %v, want a *ReadError", nbits, o, err)
			}
			if re.Field != o.kind.String() || re.Bit != starts[i] || !errors.Is(err, errEOF) {
				t.Fatalf("%d bits: field %v: %+v, want field %q at bit %d, unexpected EOF", nbits, o, re, o.kind, starts[i])
			}
			if r.Pos() != starts[i] {
				t.Fatalf("%d bits: failed read of %v consumed bits: pos %d, field at %d", nbits, o, r.Pos(), starts[i])
			}
			break
		}
	}
}

// BS-2: records of 3 bits with 1..7 bits of byte padding. Knowing the exact
// bit length (ResetBits) a "while Remaining() > 0" loop sees no phantom
// record; reading the padded bytes (Reset) would see one whenever ≥ 3 pad
// bits remain — which is why the exact length must travel with the data.
func TestPaddingYieldsNoPhantomRecord(t *testing.T) {
	for records := 1; records <= 16; records++ {
		w := NewWriter(make([]byte, 8))
		for i := range records {
			_ = w.WriteBits(uint64(i%8), 3)
		}
		pad := 8*w.Len() - w.BitLen()
		var r Reader
		r.ResetBits(w.Bytes(), w.BitLen())
		got := 0
		for r.Remaining() > 0 {
			v, err := r.ReadBits(3, "record")
			if err != nil {
				t.Fatalf("%d records: %v", records, err)
			}
			if v != uint64(got%8) {
				t.Fatalf("%d records: record %d = %d", records, got, v)
			}
			got++
		}
		if got != records {
			t.Fatalf("%d records, %d pad bits: decoded %d", records, pad, got)
		}
		r.Reset(w.Bytes())
		phantom := 0
		for r.Remaining() >= 3 {
			_, _ = r.ReadBits(3, "record")
			phantom++
		}
		if want := records + pad/3; phantom != want {
			t.Fatalf("%d records, %d pad bits, padded read: %d records, want %d", records, pad, phantom, want)
		}
	}
}

func TestResetBitsClamps(t *testing.T) {
	buf := []byte{0xFF, 0xFF}
	tests := []struct {
		name  string
		nbits int
		want  int
	}{
		{"negative is empty", -5, 0},
		{"zero", 0, 0},
		{"inside", 9, 9},
		{"exact", 16, 16},
		{"beyond the buffer", 100, 16},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r Reader
			r.ResetBits(buf, tc.nbits)
			if r.Remaining() != tc.want || r.Pos() != 0 {
				t.Fatalf("Remaining %d Pos %d, want %d, 0", r.Remaining(), r.Pos(), tc.want)
			}
			if _, err := r.ReadBits(uint(tc.want+1), "over"); tc.want < 64 && !errors.Is(err, errEOF) {
				t.Fatalf("reading %d bits: %v", tc.want+1, err)
			}
		})
	}
}

func TestReaderEdgeCases(t *testing.T) {
	var zero Reader
	if zero.Remaining() != 0 {
		t.Fatal("zero Reader has bits")
	}
	if _, err := zero.ReadBits(1, "x"); !errors.Is(err, errEOF) {
		t.Fatalf("zero Reader: %v", err)
	}
	r := NewReader(make([]byte, 16))
	for _, n := range []uint{0, 65, 1000} {
		_, err := r.ReadBits(n, "w")
		var re *ReadError
		if !errors.As(err, &re) || !errors.Is(err, ErrWidth) || re.Field != "w" {
			t.Fatalf("ReadBits(%d): %v", n, err)
		}
	}
	if r.Pos() != 0 {
		t.Fatalf("failed reads moved Pos to %d", r.Pos())
	}
	if _, err := r.ReadBits(64, "full"); err != nil {
		t.Fatal(err)
	}
	if got := (&ReadError{Field: "ghost.id", Bit: 137, Err: errEOF}).Error(); got != "bitstream: reading ghost.id at bit 137: unexpected EOF" {
		t.Fatalf("Error() = %q", got)
	}
}

// TestPeekWindow: the window is the next min(56, Remaining()) bits, the
// bits past the limit zero, nothing consumed; ok only with 8 bytes in the
// buffer from the current byte.
func TestPeekWindow(t *testing.T) {
	buf := []byte{0xff, 0xa5, 0x5a, 0x0f, 0xf0, 0x33, 0xcc, 0x81, 0x7e, 0xff, 0xff}
	for limit := 0; limit <= 8*len(buf); limit += 5 {
		for at := 0; at <= limit; at += 3 {
			var r Reader
			r.ResetBits(buf, limit)
			if at > 0 {
				r.get(uint(at))
			}
			v, n, ok := r.PeekWindow()
			if want := at/8+8 <= len(buf); ok != want {
				t.Fatalf("limit %d at %d: ok %v, want %v", limit, at, ok, want)
			}
			if !ok {
				continue
			}
			if r.Pos() != at {
				t.Fatalf("limit %d at %d: PeekWindow consumed %d bits", limit, at, r.Pos()-at)
			}
			if wantN := min(56, limit-at); n != wantN {
				t.Fatalf("limit %d at %d: n %d, want %d", limit, at, n, wantN)
			}
			var want uint64
			if n > 0 {
				want = r.peek(uint(n))
			}
			if v != want {
				t.Fatalf("limit %d at %d: window %#x, want %#x", limit, at, v, want)
			}
		}
	}
}
