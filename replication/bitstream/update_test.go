package bitstream

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// NewUpdateFormat refuses what the per-field calls would refuse on every
// update: an id range with min > max (ErrOutOfRange, as WriteRangedInt),
// a mask of no bits or wider than a uint (ErrWidth, as WriteBits).
func TestNewUpdateFormatRefusals(t *testing.T) {
	for _, tc := range []struct {
		name     string
		lo, hi   int64
		maskBits uint
		want     error
	}{
		{"min > max", 5, 4, 4, ErrOutOfRange},
		{"min > max with a one-bit width", math.MaxInt64, math.MinInt64, 4, ErrOutOfRange},
		{"a mask of no bits", 0, 1023, 0, ErrWidth},
		{"a mask of 65 bits", 0, 1023, 65, ErrWidth},
		{"the whole int64 range, a 64-bit mask", math.MinInt64, math.MaxInt64, 64, nil},
		{"an implied id", 7, 7, 1, nil},
	} {
		_, err := NewUpdateFormat(tc.lo, tc.hi, tc.maskBits, posFormat, velFormat)
		if err != tc.want {
			t.Errorf("%s: NewUpdateFormat(%d, %d, %d) = %v, want %v", tc.name, tc.lo, tc.hi, tc.maskBits, err, tc.want)
		}
	}
}

// The zero UpdateFormat has a mask of no bits: a write is refused with
// ErrWidth (as WriteBits(mask, 0)), a read fails with it.
func TestZeroUpdateFormat(t *testing.T) {
	var f UpdateFormat
	w := NewWriter(make([]byte, 64))
	rw := w.Begin()
	rw.WriteUpdate(&f, 0, 0, &Pose{})
	if err := rw.End(); err != ErrWidth {
		t.Fatalf("write: End %v, want ErrWidth", err)
	}
	r := NewReader(make([]byte, 64))
	rr := r.Begin("u")
	var p Pose
	if id, mask := rr.ReadUpdate(&f, &p); id != 0 || mask != 0 {
		t.Fatalf("read %d, %b from a zero format", id, mask)
	}
	if err := rr.End(); !errors.Is(err, ErrWidth) {
		t.Fatalf("read: End %v, want ErrWidth", err)
	}
}

// ReadUpdate at every stream length around an update of every group (the
// fast path's end test: the largest update must lie inside the stream):
// the values, the failure and the position of the per-field reads.
func TestReadUpdateAtEveryLimit(t *testing.T) {
	f := ghostFormat
	in := Pose{Pos: [3]float64{-1999.5, 3.25, 1500}, Rot: [4]float64{0.5, -0.5, 0.5, 0.5}, Vel: [3]float64{-49, 0, 12.5}}
	for pre := range 9 {
		w := NewWriter(make([]byte, 64))
		_ = w.WriteBits(0, uint(max(pre, 1)))
		start := w.BitLen()
		rw := w.Begin()
		rw.WriteUpdate(&f, 1000, UpdatePos|UpdateRot|UpdateVel|ghostState, &in)
		if err := rw.End(); err != nil {
			t.Fatal(err)
		}
		end := w.BitLen()
		for limit := start; limit <= end+2; limit++ {
			var rf, rr Reader
			rf.ResetBits(w.Bytes(), limit)
			rr.ResetBits(w.Bytes(), limit)
			_, _ = rf.ReadBits(uint(start), "pre")
			_, _ = rr.ReadBits(uint(start), "pre")
			var want Pose
			var m uint64
			wantID, wantErr := rf.ReadRangedInt(0, 1023, "u")
			if wantErr == nil {
				m, wantErr = rf.ReadBits(4, "u")
			}
			if wantErr == nil && m&1 != 0 {
				want.Pos[0], want.Pos[1], want.Pos[2], wantErr = posFormat.Read3(&rf, "u")
			}
			if wantErr == nil && m&2 != 0 {
				want.Rot, wantErr = rf.ReadQuat("u")
			}
			if wantErr == nil && m&4 != 0 {
				want.Vel[0], want.Vel[1], want.Vel[2], wantErr = velFormat.Read3(&rf, "u")
			}
			rec := rr.Begin("u")
			var got Pose
			id, mask := rec.ReadUpdate(&f, &got)
			gotErr := rec.End()
			if (gotErr == nil) != (wantErr == nil) || rr.Pos() != rf.Pos() {
				t.Fatalf("prefix %d, limit %d (update %d..%d): record %v at %d, fields %v at %d", pre, limit, start, end, gotErr, rr.Pos(), wantErr, rf.Pos())
			}
			if wantErr == nil && (id != wantID || mask != uint(m) || got != want) {
				t.Fatalf("prefix %d, limit %d: record %d %b %v, fields %d %b %v", pre, limit, id, mask, got, wantID, m, want)
			}
		}
	}
}

// WriteUpdate's fast path at the edges of its widths (an id of 31..34 bits
// and a mask of 24..32, the id and mask filling up to 66 bits), at every
// offset in the word: the bytes of the per-field calls.
func TestWriteUpdateWidestHead(t *testing.T) {
	in := Pose{Pos: [3]float64{-1999.5, 3.25, 1500}, Rot: [4]float64{0.5, -0.5, 0.5, 0.5}, Vel: [3]float64{-49, 0, 12.5}}
	for idBits := uint(31); idBits <= 34; idBits++ {
		for maskBits := uint(24); maskBits <= 32; maskBits++ {
			hi := int64(1)<<idBits - 1
			f, err := NewUpdateFormat(0, hi, maskBits, posFormat, velFormat)
			if err != nil {
				t.Fatal(err)
			}
			id, mask := hi-5, uint(1)<<(maskBits-1)|UpdatePos|UpdateRot|UpdateVel
			for pre := range 64 {
				wf, wr := NewWriter(make([]byte, 64)), NewWriter(make([]byte, 64))
				for _, w := range []*Writer{wf, wr} {
					if pre > 0 {
						_ = w.WriteBits(1<<(pre-1), uint(pre))
					}
				}
				_ = wf.WriteRangedInt(id, 0, hi)
				_ = wf.WriteBits(uint64(mask), maskBits)
				_ = posFormat.Write3(wf, in.Pos[0], in.Pos[1], in.Pos[2])
				_ = wf.WriteQuat(in.Rot)
				_ = velFormat.Write3(wf, in.Vel[0], in.Vel[1], in.Vel[2])
				rw := wr.Begin()
				rw.WriteUpdate(&f, id, mask, &in)
				if err := rw.End(); err != nil || wf.Err() != nil {
					t.Fatalf("id %d bits, mask %d, prefix %d: End %v, fields %v", idBits, maskBits, pre, err, wf.Err())
				}
				if wr.BitLen() != wf.BitLen() || !bytes.Equal(wr.Bytes(), wf.Bytes()) {
					t.Fatalf("id %d bits, mask %d, prefix %d: record %d bits, fields %d; first difference at byte %d", idBits, maskBits, pre, wr.BitLen(), wf.BitLen(), firstByteDiff(wr.Bytes(), wf.Bytes()))
				}
			}
		}
	}
}

// The update fast paths' windows at the widest formats they serve, every
// offset in the record's word and every buffer length from too short to
// well past the window: WriteUpdate's bytes are the per-field calls' (or
// the record overflows whole where they do not fit), and ReadUpdate's
// values and position are the per-field reads'. The writer's widest
// update (an id of 32 bits, a mask of 31, 21-bit codes) fills four words
// behind 63 bits already in the record's word; the reader's (a run's
// flag, 32, 24, 19-bit codes) starts its last group in the window's byte
// 21. Each as a lone update and as a run's (its flag first, written by
// WriteRunUpdate and read by ReadRunUpdate); a run's widest head on the
// writer's fast path is its flag, an id of 32 bits and a mask of 30.
func TestUpdateWindowsAtEveryEnd(t *testing.T) {
	in := Pose{Rot: randomQuat(rand.New(rand.NewPCG(3, 4))), Vel: [3]float64{-49, 0, 12.5}}
	for _, tc := range []struct {
		name     string
		maskBits uint
		pos      FixedFormat
		vel      QuantizedFormat
	}{
		{"writer's widest", 31, mustFixed(0, 2000, 0.001), mustQuantized(-50, 50, 21)},
		// A run's flag, the id and this mask are 63 bits: one field.
		{"run writer's widest", 30, mustFixed(0, 2000, 0.001), mustQuantized(-50, 50, 21)},
		{"reader's widest", 24, mustFixed(0, 500, 0.001), mustQuantized(-50, 50, 19)},
		// A run's flag, the id and this mask are 58 bits: past the 56 of
		// the head's word at a flag in the byte's last bit.
		{"past the reader's widest", 25, mustFixed(0, 500, 0.001), mustQuantized(-50, 50, 19)},
	} {
		for _, run := range []bool{false, true} {
			hi := int64(1)<<32 - 1
			f, err := NewUpdateFormat(0, hi, tc.maskBits, tc.pos, tc.vel)
			if err != nil {
				t.Fatal(err)
			}
			// The widest the fast paths serve, or this tests the per-field
			// path only.
			if tc.maskBits == 31 && f.wlim == 0 || tc.maskBits == 30 && f.wrlim == 0 || tc.maskBits == 24 && f.rlim == 0 {
				t.Fatalf("%s: not served by the fast path (wlim %d, wrlim %d, rlim %d)", tc.name, f.wlim, f.wrlim, f.rlim)
			}
			pose := in
			pose.Pos = [3]float64{tc.pos.max - 0.001, 3.25, tc.pos.max / 3}
			id, mask := hi-3, uint(1)<<(tc.maskBits-1)|UpdatePos|UpdateRot|UpdateVel
			size := int(f.rmax) + 64
			for pre := range 64 {
				for l := (pre+int(f.rmax))/8 - 2; l <= (pre+size)/8+48; l++ {
					// The per-field calls.
					wf := NewWriter(bytes.Repeat([]byte{0xa5}, l))
					if pre > 0 {
						_ = wf.WriteBits(1<<(pre-1), uint(pre))
					}
					if run {
						_ = wf.WriteFlag(true)
					}
					_ = wf.WriteRangedInt(id, 0, hi)
					_ = wf.WriteBits(uint64(mask), tc.maskBits)
					_ = tc.pos.Write3(wf, pose.Pos[0], pose.Pos[1], pose.Pos[2])
					_ = wf.WriteQuat(pose.Rot)
					_ = tc.vel.Write3(wf, pose.Vel[0], pose.Vel[1], pose.Vel[2])
					// The record.
					wr := NewWriter(bytes.Repeat([]byte{0xa5}, l))
					rw := wr.Begin()
					if pre > 0 {
						rw.WriteBits(1<<(pre-1), uint(pre))
					}
					if run {
						rw.WriteRunUpdate(&f, id, mask, &pose)
					} else {
						rw.WriteUpdate(&f, id, mask, &pose)
					}
					end := rw.End()
					if wf.Err() != nil {
						if end != ErrOverflow || wr.BitLen() != 0 {
							t.Fatalf("%s, prefix %d, %d bytes: the fields overflow, the record %v at %d", tc.name, pre, l, end, wr.BitLen())
						}
						continue
					}
					if end != nil || wr.BitLen() != wf.BitLen() || !bytes.Equal(wr.Bytes(), wf.Bytes()) {
						t.Fatalf("%s, prefix %d, %d bytes: record %v, %d bits, fields %d; first difference at byte %d", tc.name, pre, l, end, wr.BitLen(), wf.BitLen(), firstByteDiff(wr.Bytes(), wf.Bytes()))
					}
					// Read back from the whole buffer (the bytes past the
					// update are the fill pattern, as a later field's).
					buf := wf.buf
					var rf, rr Reader
					rf.Reset(buf)
					rr.Reset(buf)
					var want Pose
					if pre > 0 {
						_, _ = rf.ReadBits(uint(pre), "pre")
					}
					if run {
						if more, err := rf.ReadFlag("u"); !more || err != nil {
							t.Fatalf("%s, prefix %d, %d bytes: the run's flag %v, %v", tc.name, pre, l, more, err)
						}
					}
					wantID, err1 := rf.ReadRangedInt(0, hi, "u")
					m, err2 := rf.ReadBits(tc.maskBits, "u")
					want.Pos[0], want.Pos[1], want.Pos[2], err = tc.pos.Read3(&rf, "u")
					var err3, err4 error
					want.Rot, err3 = rf.ReadQuat("u")
					want.Vel[0], want.Vel[1], want.Vel[2], err4 = tc.vel.Read3(&rf, "u")
					if err := errors.Join(err, err1, err2, err3, err4); err != nil {
						t.Fatal(err)
					}
					rec := rr.Begin("u")
					if pre > 0 {
						_ = rec.ReadBits(uint(pre))
					}
					var got Pose
					var gotID int64
					var gotMask uint
					more := true
					if run {
						gotID, gotMask, more = rec.ReadRunUpdate(&f, &got)
					} else {
						gotID, gotMask = rec.ReadUpdate(&f, &got)
					}
					if err := rec.End(); err != nil || !more || rr.Pos() != rf.Pos() || gotID != wantID || gotMask != uint(m) || got != want {
						t.Fatalf("%s, run %v, prefix %d, %d bytes: record %d %b %v (%v) at %d, fields %d %b %v at %d", tc.name, run, pre, l, gotID, gotMask, got, err, rr.Pos(), wantID, m, want, rf.Pos())
					}
				}
			}
		}
	}
}

// WriteUpdate's rotation away from unit length: scaled (its squared norm
// more than 2^-40 from 1, so divided by its norm), at the edges of that
// band, zero, too large to square, not finite, subnormal. The bytes and
// the refusal are the per-field calls' (WriteQuat's), at every mask of
// the pose groups.
func TestWriteUpdateRotationsOffUnit(t *testing.T) {
	u := randomQuat(rand.New(rand.NewPCG(5, 6)))
	scaled := func(k float64) [4]float64 { return [4]float64{u[0] * k, u[1] * k, u[2] * k, u[3] * k} }
	rots := [][4]float64{
		u, scaled(3), scaled(1e-3), scaled(1 + 0x1p-42), scaled(1 - 0x1p-42), scaled(1 + 0x1p-30), scaled(1e150), scaled(1e160),
		scaled(0x1p-540), {0x1p-1074, 0, 0, 0}, {}, {1, 0, 0, math.NaN()}, {math.Inf(1), 0, 0, 0},
		{math.Sqrt(1 + 0x1p-40), 0, 0, 0}, {math.Sqrt(1 - 0x1p-40), 0, 0, 0}, {0.5, 0.5, 0.5, 0.5000001},
	}
	for k, rot := range rots {
		for mask := range uint(16) {
			in := Pose{Pos: [3]float64{-1999.5, 3.25, 1500}, Rot: rot, Vel: [3]float64{-49, 0, 12.5}}
			wf, wr := NewWriter(make([]byte, 64)), NewWriter(make([]byte, 64))
			_ = wf.WriteBits(1, 3)
			_ = wf.WriteRangedInt(700, 0, 1023)
			_ = wf.WriteBits(uint64(mask), 4)
			if mask&UpdatePos != 0 {
				_ = posFormat.Write3(wf, in.Pos[0], in.Pos[1], in.Pos[2])
			}
			var rotErr error
			if mask&UpdateRot != 0 {
				rotErr = wf.WriteQuat(in.Rot)
			}
			if mask&UpdateVel != 0 {
				_ = velFormat.Write3(wf, in.Vel[0], in.Vel[1], in.Vel[2])
			}
			rw := wr.Begin()
			rw.WriteBits(1, 3)
			rw.WriteUpdate(&ghostFormat, 700, mask, &in)
			if err := rw.End(); err != rotErr {
				t.Fatalf("rotation %d %v, mask %b: End %v, WriteQuat %v", k, rot, mask, err, rotErr)
			}
			if wr.BitLen() != wf.BitLen() || !bytes.Equal(wr.Bytes(), wf.Bytes()) {
				t.Fatalf("rotation %d %v, mask %b: record %d bits, fields %d; first difference at byte %d", k, rot, mask, wr.BitLen(), wf.BitLen(), firstByteDiff(wr.Bytes(), wf.Bytes()))
			}
		}
	}
}
