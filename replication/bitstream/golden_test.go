package bitstream

import (
	"encoding/hex"
	"testing"
)

// Golden vectors (checklist BS-16, BS-17): the exact bits of each encoding,
// also listed in docs/protocol.md §2. They were cross-checked
// against an independent reimplementation of that text (Python, binary64),
// so a change here is a wire-format change: bump the protocol version.
func TestGoldenVectors(t *testing.T) {
	table := NewStringTable(1024)
	if err := table.Set(34, "Hey"); err != nil {
		t.Fatal(err)
	}
	var rot [4]float64
	normalize(rot[:], []float64{0.1, -0.2, 0.3, 0.9})
	tests := []struct {
		name  string
		write func(w *Writer) error
		bits  int
		hex   string
	}{
		{"figure 4.9: bits 13/5, 52/6", func(w *Writer) error { _ = w.WriteBits(13, 5); return w.WriteBits(52, 6) }, 11, "8d06"},
		{"uint32 0x12345678", func(w *Writer) error { return w.WriteBits(0x12345678, 32) }, 32, "78563412"},
		{"flags 1,0,1,1", func(w *Writer) error {
			for _, f := range []bool{true, false, true, true} {
				_ = w.WriteFlag(f)
			}
			return nil
		}, 4, "0d"},
		{"ranged 17 in [0,32]", func(w *Writer) error { return w.WriteRangedInt(17, 0, 32) }, 6, "11"},
		{"ranged -3 in [-8,7]", func(w *Writer) error { return w.WriteRangedInt(-3, -8, 7) }, 4, "05"},
		{"unit float 0.45 in 5 bits", func(w *Writer) error { return w.WriteUnitFloat(0.45, 5) }, 5, "0e"},
		{"quantized 12.34 in [-50,50] 12 bits", func(w *Writer) error { return w.WriteQuantized(12.34, -50, 50, 12) }, 12, "f909"},
		{"fixed -1999.9 in [-2000,2000] at 0.1", func(w *Writer) error { return w.WriteFixed(-1999.9, -2000, 2000, 0.1) }, 16, "0100"},
		{"fixed 2000 in [-2000,2000] at 0.1", func(w *Writer) error { return w.WriteFixed(2000, -2000, 2000, 0.1) }, 16, "409c"},
		{"signed -0.5 in 8 bits (half away from zero)", func(w *Writer) error { return w.WriteSignedFloat(-0.5, 8) }, 8, "3f"},
		{"float32 -1.5", func(w *Writer) error { return w.WriteFloat32(-1.5) }, 32, "0000c0bf"},
		{"unit vector +z, 8 bits", func(w *Writer) error { return w.WriteUnitVector(0, 0, 1, 8) }, 16, "7f7f"},
		{"unit vector -z, 8 bits", func(w *Writer) error { return w.WriteUnitVector(0, 0, -1, 8) }, 16, "fefe"},
		{"unit vector (0.3,-0.4,-0.5), 12 bits", func(w *Writer) error { return w.WriteUnitVector(0.3, -0.4, -0.5, 12) }, 24, "540d20"},
		{"quaternion identity", func(w *Writer) error { return w.WriteQuat([4]float64{0, 0, 0, 1}) }, 47, "fffffe7fff3f"},
		{"quaternion (0.1,-0.2,0.3,0.9)/|q|", func(w *Writer) error { return w.WriteQuat(rot) }, 47, "2325db5ada5b"},
		{"quaternion tie (½,½,½,½): truncated", func(w *Writer) error { return w.WriteQuat([4]float64{0.5, 0.5, 0.5, 0.5}) }, 47, "fcb47fda3f6d"},
		{"string Hey, maxLen 64", func(w *Writer) error { return w.WriteString("Hey", 64) }, 31, "03a4b23c"},
		{"table hit slot 34 of 1024", func(w *Writer) error { return w.WriteTableString(table, "Hey", 64) }, 11, "4500"},
		{"table miss Hi, maxLen 64", func(w *Writer) error { return w.WriteTableString(table, "Hi", 64) }, 24, "044869"},
		{"gamma 5", func(w *Writer) error { return w.WriteGamma(5) }, 5, "0c"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWriter(make([]byte, 16))
			if err := tc.write(w); err != nil {
				t.Fatal(err)
			}
			if got := hex.EncodeToString(w.Bytes()); w.BitLen() != tc.bits || got != tc.hex {
				t.Fatalf("%d bits %s, want %d bits %s", w.BitLen(), got, tc.bits, tc.hex)
			}
		})
	}
}
