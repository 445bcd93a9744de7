package bitstream

import (
	"testing"
)

// Steady state allocates nothing: every Write and Read, on a reused Writer
// and Reader, at 0 allocations (ReadString's one string is the documented
// exception and is pinned at exactly 1).
func TestNoAllocations(t *testing.T) {
	tab := newTestTable()
	buf := make([]byte, 256)
	var w Writer
	var r Reader
	dst := make([]byte, 0, 64)
	raw := make([]byte, 12)
	q := [4]float64{0.1, -0.7, 0.3, 0.6}
	type step struct {
		name  string
		write func() error
		read  func()
	}
	steps := []step{
		{"Bits", func() error { return w.WriteBits(0x1234, 13) }, func() { _, _ = r.ReadBits(13, "f") }},
		{"Bits64", func() error { return w.WriteBits(1<<63, 64) }, func() { _, _ = r.ReadBits(64, "f") }},
		{"Flag", func() error { return w.WriteFlag(true) }, func() { _, _ = r.ReadFlag("f") }},
		{"RangedInt", func() error { return w.WriteRangedInt(-3, -10, 10) }, func() { _, _ = r.ReadRangedInt(-10, 10, "f") }},
		{"Bytes", func() error { return w.WriteBytes(raw) }, func() { _ = r.ReadBytes(raw, "f") }},
		{"Quantized", func() error { return w.WriteQuantized(12.5, -50, 50, 12) }, func() { _, _ = r.ReadQuantized(-50, 50, 12, "f") }},
		{"Fixed", func() error { return w.WriteFixed(-1999.9, -2000, 2000, 0.1) }, func() { _, _ = r.ReadFixed(-2000, 2000, 0.1, "f") }},
		{"SignedFloat", func() error { return w.WriteSignedFloat(-0.3, 10) }, func() { _, _ = r.ReadSignedFloat(10, "f") }},
		{"UnitFloat", func() error { return w.WriteUnitFloat(0.45, 5) }, func() { _, _ = r.ReadUnitFloat(5, "f") }},
		{"Float32", func() error { return w.WriteFloat32(3.5) }, func() { _, _ = r.ReadFloat32("f") }},
		{"UnitVector", func() error { return w.WriteUnitVector(0.1, -0.2, 0.9, 16) }, func() { _, _, _, _ = r.ReadUnitVector(16, "f") }},
		{"Quat", func() error { return w.WriteQuat(q) }, func() { _, _ = r.ReadQuat("f") }},
		{"QuatTie", func() error { return w.WriteQuat([4]float64{0.5, 0.5, 0.5, 0.5}) }, func() { _, _ = r.ReadQuat("f") }},
		{"StringBytes", func() error { return w.WriteString("fireball", 64) }, func() { dst, _ = r.ReadStringBytes(dst, 64, "f") }},
		{"EmptyString", func() error { return w.WriteString("", 64) }, func() { _, _ = r.ReadString(64, "f") }},
		{"TableHit", func() error { return w.WriteTableString(tab, "player_spawn", 64) }, func() { _, _ = r.ReadTableString(tab, 64, "f") }},
		{"TableMissBytes", func() error { return w.WriteTableString(tab, "frostbolt", 64) }, func() { dst, _ = r.ReadTableStringBytes(tab, dst, 64, "f") }},
		{"FixedFormat", func() error { return posFormat.Write(&w, -1999.9) }, func() { _, _ = posFormat.Read(&r, "f") }},
		{"FixedFormat3", func() error { return posFormat.Write3(&w, -1999.9, 3, 1999) }, func() { _, _, _, _ = posFormat.Read3(&r, "f") }},
		{"QuantizedFormat", func() error { return velFormat.Write(&w, 12.5) }, func() { _, _ = velFormat.Read(&r, "f") }},
		{"QuantizedFormat3", func() error { return velFormat.Write3(&w, 12.5, -50, 50) }, func() { _, _, _, _ = velFormat.Read3(&r, "f") }},
		{"Gamma", func() error { return w.WriteGamma(1000) }, func() { _, _ = r.ReadGamma("f") }},
		{"GammaWide", func() error { return w.WriteGamma(1 << 50) }, func() { _, _ = r.ReadGamma("f") }},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			// A small buffer filled to overflow, so the fast path, the
			// buffer's tail and the overflow refusal all run.
			small := buf[:24]
			n := 0
			if a := testing.AllocsPerRun(100, func() {
				w.Reset(small)
				n = 0
				for range 200 {
					if s.write() != nil {
						break
					}
					n++
				}
			}); a != 0 {
				t.Errorf("write: %v allocs", a)
			}
			if n == 0 || w.Err() == nil {
				t.Fatalf("%d writes, Err %v: the buffer never filled", n, w.Err())
			}
			data := w.Bytes()
			if a := testing.AllocsPerRun(100, func() {
				r.Reset(data)
				for range n {
					s.read()
				}
			}); a != 0 {
				t.Errorf("read: %v allocs", a)
			}
		})
	}
	t.Run("ReadString allocates its string once", func(t *testing.T) {
		w.Reset(buf)
		_ = w.WriteFlag(true) // unaligned: the stack-buffer path
		_ = w.WriteString("a string of moderate length", 64)
		_ = w.WriteString("aligned?", 64)
		data := w.Bytes()
		if a := testing.AllocsPerRun(100, func() {
			r.Reset(data)
			_, _ = r.ReadFlag("f")
			_, _ = r.ReadString(64, "f")
		}); a != 1 {
			t.Errorf("%v allocs, want 1", a)
		}
	})
	t.Run("Truncate", func(t *testing.T) {
		if a := testing.AllocsPerRun(100, func() {
			w.Reset(buf)
			_ = w.WriteBits(7, 9)
			w.Truncate(3)
		}); a != 0 {
			t.Errorf("%v allocs", a)
		}
	})
}
