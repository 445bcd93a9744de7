package bitstream

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// A field of a random record: its kind, its values and the format it
// uses, so that one op can be written and read through the per-field calls
// and through a record.
type recOp struct {
	kind     int
	v        uint64
	n        uint
	i, lo, h int64
	x        [4]float64
	fixed    *FixedFormat
	quant    *QuantizedFormat
	s        string        // a table string's, with maxLen in i
	tab      *StringTable  // nil: no table
	upd      *UpdateFormat // an update's (its parameters in lo, h, n, fixed, quant), with its mask in v
	pose     Pose
	end      bool // a run's update: its end (a 0 flag), not an update
}

const (
	recFlag = iota
	recBits
	recRanged
	recFixed
	recFixed3
	recQuant
	recQuant3
	recQuat
	recTable
	recUpdate
	recRunUpdate // WriteRunUpdate and ReadRunUpdate against a flag and an update
	recKinds
)

var (
	recFixedFormats = []FixedFormat{
		mustFixed(-2000, 2000, 0.01),                        // 19 bits: Write3 in 57
		mustFixed(-10000, 10000, 0.01),                      // 21 bits: 63
		mustFixed(-1e6, 1e6, 0.001),                         // 31 bits: three fields
		mustFixed(0, 1, 10),                                 // 0 bits
		mustFixed(-1, 1, 0.25),                              // 4 bits
		mustFixed(-math.SmallestNonzeroFloat64*0, 0.5, 0.5), // 1 bit
	}
	recTable16 = func() *StringTable {
		t := NewStringTable(16)
		_ = t.Set(0, "wolf")
		_ = t.Set(3, "elf_archer")
		_ = t.Set(15, "orc")
		return t
	}()
	recTableStrings = []string{"wolf", "elf_archer", "orc", "", "gg wp", "a literal of some thirty bytes", strings.Repeat("y", 60)} // at most 64 bytes an op (checkRecordWrite)
	recQuantFormats = []QuantizedFormat{
		mustQuantized(-50, 50, 12),
		mustQuantized(0, 1, 1),
		mustQuantized(-1, 1, 22), // three fields
		mustQuantized(-1e3, 1e3, 32),
		{}, // the zero format: only 0, in no bits
	}
)

// randFloat is a value in [lo, hi] mostly, sometimes just outside it or not
// a number, so that writes are refused too.
func randFloat(rng *rand.Rand, lo, hi float64) float64 {
	switch rng.IntN(40) {
	case 0:
		return math.NaN()
	case 1:
		return hi + 1
	case 2:
		return lo
	case 3:
		return hi
	}
	return lo + rng.Float64()*(hi-lo)
}

func randRecOps(rng *rand.Rand, count int) []recOp {
	ops := make([]recOp, count)
	for k := range ops {
		op := recOp{kind: rng.IntN(recKinds)}
		switch op.kind {
		case recFlag:
			op.v = uint64(rng.IntN(2))
		case recBits:
			op.n = uint(1 + rng.IntN(64))
			if rng.IntN(30) == 0 {
				op.n = uint(rng.IntN(2)) * 65 // 0 or 65: refused
			}
			op.v = rng.Uint64()
			if op.n < 64 && rng.IntN(20) != 0 {
				op.v &= 1<<op.n - 1
			}
		case recRanged:
			op.lo = rng.Int64N(2000) - 1000
			op.h = op.lo + rng.Int64N(1<<uint(rng.IntN(40)))
			switch rng.IntN(25) {
			case 0:
				op.lo, op.h = math.MinInt64, math.MaxInt64 // 64 bits
			case 1:
				op.lo, op.h = op.h+1, op.lo // min > max
			case 2:
				op.h = op.lo // 0 bits
			}
			switch span := uint64(op.h) - uint64(op.lo); {
			case op.lo > op.h:
				op.i = op.h
			case span == math.MaxUint64:
				op.i = int64(rng.Uint64())
			default:
				op.i = int64(uint64(op.lo) + rng.Uint64N(span+1))
			}
			if rng.IntN(25) == 0 {
				op.i = op.h + 1
			}
		case recFixed, recFixed3:
			op.fixed = &recFixedFormats[rng.IntN(len(recFixedFormats))]
			for j := range 3 {
				op.x[j] = randFloat(rng, op.fixed.min, op.fixed.max)
			}
		case recQuant, recQuant3:
			op.quant = &recQuantFormats[rng.IntN(len(recQuantFormats))]
			for j := range 3 {
				op.x[j] = randFloat(rng, op.quant.min, op.quant.max)
			}
		case recQuat:
			op.x = randomQuat(rng)
			switch rng.IntN(30) {
			case 0:
				op.x = [4]float64{}
			case 1:
				op.x[2] = math.NaN()
			}
		case recUpdate, recRunUpdate:
			op.end = op.kind == recRunUpdate && rng.IntN(4) == 0
			// The format's parameters in the op: the id's range in lo and
			// h, the mask's width in n, the formats in fixed and quant.
			op.fixed = &recFixedFormats[rng.IntN(len(recFixedFormats))]
			op.quant = &recQuantFormats[rng.IntN(len(recQuantFormats))]
			op.n = []uint{4, 4, 4, 3, 1, 8, 20, 25, 26, 31, 32, 57, 60, 64}[rng.IntN(14)]
			op.lo = rng.Int64N(100) - 50
			switch rng.IntN(12) {
			case 0:
				op.h = op.lo // 0 bits
			case 1:
				op.lo, op.h = math.MinInt64, math.MaxInt64 // 64 bits
			case 2:
				op.h = op.lo + 1<<40 // 41 bits
			case 3:
				op.h = op.lo + 1<<32 - 1 // 32 bits
			case 4:
				op.h = op.lo + 1<<32 // 33 bits
			default:
				op.h = op.lo + rng.Int64N(1<<uint(rng.IntN(33)))
			}
			f, err := NewUpdateFormat(op.lo, op.h, op.n, *op.fixed, *op.quant)
			if err != nil {
				panic(err)
			}
			op.upd = &f
			if span := uint64(op.h) - uint64(op.lo); span == math.MaxUint64 { // the whole int64 range
				op.i = int64(rng.Uint64())
			} else {
				op.i = int64(uint64(op.lo) + rng.Uint64N(span+1))
			}
			if rng.IntN(20) == 0 && op.h != math.MaxInt64 {
				op.i = op.h + 1 // out of range: refused
			}
			op.v = rng.Uint64() & (1<<min(op.n, 63) - 1)
			if rng.IntN(20) == 0 {
				op.v = rng.Uint64() // sometimes wider than the mask: refused
			}
			for j := range 3 {
				op.pose.Pos[j] = randFloat(rng, op.fixed.min, op.fixed.max)
				op.pose.Vel[j] = randFloat(rng, op.quant.min, op.quant.max)
			}
			op.pose.Rot = randomQuat(rng)
			if rng.IntN(30) == 0 {
				op.pose.Rot[1] = math.Inf(-1)
			}
		case recTable:
			op.s, op.tab, op.i = recTableStrings[rng.IntN(len(recTableStrings))], recTable16, 200
			switch rng.IntN(12) {
			case 0:
				op.tab = nil
			case 1:
				op.i = 4 // some strings are too long
			case 2:
				op.i = -1
			}
		}
		ops[k] = op
	}
	return ops
}

func (op *recOp) writeField(w *Writer) {
	switch op.kind {
	case recFlag:
		_ = w.WriteFlag(op.v == 1)
	case recBits:
		_ = w.WriteBits(op.v, op.n)
	case recRanged:
		_ = w.WriteRangedInt(op.i, op.lo, op.h)
	case recFixed:
		_ = op.fixed.Write(w, op.x[0])
	case recFixed3:
		_ = op.fixed.Write3(w, op.x[0], op.x[1], op.x[2])
	case recQuant:
		_ = op.quant.Write(w, op.x[0])
	case recQuant3:
		_ = op.quant.Write3(w, op.x[0], op.x[1], op.x[2])
	case recQuat:
		_ = w.WriteQuat(op.x)
	case recTable:
		_ = w.WriteTableString(op.tab, op.s, int(op.i))
	case recUpdate, recRunUpdate:
		if op.kind == recRunUpdate {
			_ = w.WriteFlag(!op.end)
			if op.end {
				return
			}
		}
		p, mask := &op.pose, uint(op.v)
		_ = w.WriteRangedInt(op.i, op.lo, op.h)
		_ = w.WriteBits(uint64(mask), op.n)
		if mask&UpdatePos != 0 {
			_ = op.fixed.Write3(w, p.Pos[0], p.Pos[1], p.Pos[2])
		}
		if mask&UpdateRot != 0 {
			_ = w.WriteQuat(p.Rot)
		}
		if mask&UpdateVel != 0 {
			_ = op.quant.Write3(w, p.Vel[0], p.Vel[1], p.Vel[2])
		}
	}
}

func (op *recOp) writeRecord(rw *RecordWriter) {
	switch op.kind {
	case recFlag:
		rw.WriteFlag(op.v == 1)
	case recBits:
		rw.WriteBits(op.v, op.n)
	case recRanged:
		rw.WriteRangedInt(op.i, op.lo, op.h)
	case recFixed:
		rw.WriteFixed(op.fixed, op.x[0])
	case recFixed3:
		rw.WriteFixed3(op.fixed, op.x[0], op.x[1], op.x[2])
	case recQuant:
		rw.WriteQuantized(op.quant, op.x[0])
	case recQuant3:
		rw.WriteQuantized3(op.quant, op.x[0], op.x[1], op.x[2])
	case recQuat:
		rw.WriteQuat(op.x)
	case recTable:
		rw.WriteTableString(op.tab, op.s, int(op.i))
	case recUpdate:
		rw.WriteUpdate(op.upd, op.i, uint(op.v), &op.pose)
	case recRunUpdate:
		if op.end {
			rw.WriteFlag(false)
			return
		}
		rw.WriteRunUpdate(op.upd, op.i, uint(op.v), &op.pose)
	}
}

// readField reads op's field through the per-field calls: its values as
// four words, and the error.
func (op *recOp) readField(r *Reader) (got [4]float64, u uint64, err error) {
	switch op.kind {
	case recFlag:
		var b bool
		b, err = r.ReadFlag("f")
		if b {
			u = 1
		}
	case recBits:
		u, err = r.ReadBits(op.n, "f")
	case recRanged:
		var i int64
		i, err = r.ReadRangedInt(op.lo, op.h, "f")
		u = uint64(i)
	case recFixed:
		got[0], err = op.fixed.Read(r, "f")
	case recFixed3:
		got[0], got[1], got[2], err = op.fixed.Read3(r, "f")
	case recQuant:
		got[0], err = op.quant.Read(r, "f")
	case recQuant3:
		got[0], got[1], got[2], err = op.quant.Read3(r, "f")
	case recQuat:
		got, err = r.ReadQuat("f")
	case recTable:
		var str string
		str, err = r.ReadTableString(op.tab, int(op.i), "f")
		u = strKey(str)
	case recUpdate, recRunUpdate:
		var p Pose
		var m uint64
		var id int64
		if op.kind == recRunUpdate {
			more, e := r.ReadFlag("f")
			if e != nil || !more {
				return got, poseKey(0, 0, &p), e
			}
			u = 1 // more: the key differs from the run's end
		}
		if id, err = r.ReadRangedInt(op.lo, op.h, "f"); err == nil {
			m, err = r.ReadBits(op.n, "f")
		}
		if err == nil && uint(m)&UpdatePos != 0 {
			p.Pos[0], p.Pos[1], p.Pos[2], err = op.fixed.Read3(r, "f")
		}
		if err == nil && uint(m)&UpdateRot != 0 {
			p.Rot, err = r.ReadQuat("f")
		}
		if err == nil && uint(m)&UpdateVel != 0 {
			p.Vel[0], p.Vel[1], p.Vel[2], err = op.quant.Read3(r, "f")
		}
		u ^= poseKey(id, uint(m), &p)
	}
	return got, u, err
}

func (op *recOp) readRecord(rr *RecordReader) (got [4]float64, u uint64) {
	switch op.kind {
	case recFlag:
		if rr.ReadFlag() {
			u = 1
		}
	case recBits:
		u = rr.ReadBits(op.n)
	case recRanged:
		u = uint64(rr.ReadRangedInt(op.lo, op.h))
	case recFixed:
		got[0] = rr.ReadFixed(op.fixed)
	case recFixed3:
		got[0], got[1], got[2] = rr.ReadFixed3(op.fixed)
	case recQuant:
		got[0] = rr.ReadQuantized(op.quant)
	case recQuant3:
		got[0], got[1], got[2] = rr.ReadQuantized3(op.quant)
	case recQuat:
		got = rr.ReadQuat()
	case recTable:
		u = strKey(rr.ReadTableString(op.tab, int(op.i)))
	case recUpdate:
		var p Pose
		id, m := rr.ReadUpdate(op.upd, &p)
		u = poseKey(id, m, &p)
	case recRunUpdate:
		var p Pose
		id, m, more := rr.ReadRunUpdate(op.upd, &p)
		if u = poseKey(id, m, &p); more {
			u ^= 1
		}
	}
	return got, u
}

// poseKey stands for an update's id, mask and values among a read's
// values: their bits hashed (FNV-1a over the words).
func poseKey(id int64, mask uint, p *Pose) uint64 {
	h := uint64(14695981039346656037)
	for _, x := range [...]float64{p.Pos[0], p.Pos[1], p.Pos[2], p.Rot[0], p.Rot[1], p.Rot[2], p.Rot[3], p.Vel[0], p.Vel[1], p.Vel[2]} {
		h = (h ^ math.Float64bits(x)) * 1099511628211
	}
	h = (h ^ uint64(mask)) * 1099511628211
	return (h ^ uint64(id)) * 1099511628211
}

// strKey stands for a string among a read's values: its FNV-1a hash.
func strKey(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return h ^ uint64(len(s))
}

// checkRecordWrite writes ops after a prefix of pre bits into a buffer of
// size bytes (filled with junk), once field by field and once as a record,
// and compares the streams and the errors.
func checkRecordWrite(t *testing.T, rng *rand.Rand, ops []recOp, size, pre int) {
	t.Helper()
	junk := make([]byte, size)
	for i := range junk {
		junk[i] = byte(rng.Uint32())
	}
	prefix := rng.Uint64()
	bufF, bufR := bytes.Clone(junk), bytes.Clone(junk)
	wf, wr := NewWriter(bufF), NewWriter(bufR)
	for _, w := range []*Writer{wf, wr} {
		for k := 0; k < pre; k += 8 {
			_ = w.WriteBits(prefix>>(k%64)&0xff>>(8-min(8, pre-k)), uint(min(8, pre-k)))
		}
	}
	start, startErr := wr.BitLen(), wr.Err()
	before := bytes.Clone(wr.Bytes())
	for k := range ops {
		ops[k].writeField(wf)
	}
	rw := wr.Begin()
	for k := range ops {
		ops[k].writeRecord(&rw)
	}
	if rw.BitLen() < start {
		t.Fatalf("record BitLen %d before its start %d", rw.BitLen(), start)
	}
	endErr := rw.End()
	// Did the per-field writes lose a field to the buffer's end? Then the
	// record must be taken back whole.
	lost := false
	{
		w := NewWriter(make([]byte, size+64*len(ops)))
		for k := 0; k < pre; k += 8 {
			_ = w.WriteBits(0, uint(min(8, pre-k)))
		}
		for k := range ops {
			ops[k].writeField(w)
		}
		lost = w.BitLen() > 8*size
	}
	if lost {
		if !errors.Is(endErr, ErrOverflow) {
			t.Fatalf("record outgrew the buffer: End %v, want ErrOverflow", endErr)
		}
		if wr.BitLen() != start || !bytes.Equal(wr.Bytes(), before) {
			t.Fatalf("overflowed record (size %d, prefix %d) left %d bits (started at %d), bytes %x, want %x", size, pre, wr.BitLen(), start, wr.Bytes(), before)
		}
		if startErr == nil && wr.Err() != ErrOverflow {
			t.Fatalf("Writer's Err %v after an overflowed record, want ErrOverflow", wr.Err())
		}
		wr.Truncate(start)
		if wr.Err() != startErr {
			t.Fatalf("Truncate to the record's start left Err %v", wr.Err())
		}
		return
	}
	if wf.BitLen() != wr.BitLen() || !bytes.Equal(wf.Bytes(), wr.Bytes()) {
		t.Fatalf("record wrote %d bits %x, fields %d bits %x (first difference at byte %d)", wr.BitLen(), wr.Bytes(), wf.BitLen(), wf.Bytes(), firstByteDiff(wr.Bytes(), wf.Bytes()))
	}
	if wf.Err() != wr.Err() {
		t.Fatalf("record: Writer's Err %v, fields' %v", wr.Err(), wf.Err())
	}
	wantEnd := wf.Err()
	if startErr != nil {
		wantEnd = firstRefusal(ops)
	}
	if endErr != wantEnd {
		t.Fatalf("End %v, want %v", endErr, wantEnd)
	}
	// The padding of the last byte stays zero.
	if b := wr.BitLen(); b&7 != 0 && bufR[b>>3]>>(b&7) != 0 {
		t.Fatalf("bits above the end of the record in byte %d: %08b", b>>3, bufR[b>>3])
	}
}

// firstRefusal is the first error a per-field write of ops returns that is
// not an overflow.
func firstRefusal(ops []recOp) error {
	w := NewWriter(make([]byte, 64*len(ops)+8))
	for k := range ops {
		ops[k].writeField(w)
		if w.Err() != nil {
			return w.Err()
		}
	}
	return nil
}

// checkRecordRead reads ops from stream (its first nbits bits, after skip
// bits) field by field, stopping at the first error, and as a record, and
// compares the values, the error and where the Reader stopped.
func checkRecordRead(t *testing.T, ops []recOp, stream []byte, nbits, skip int) {
	t.Helper()
	var rf, rr Reader
	rf.ResetBits(stream, nbits)
	rr.ResetBits(stream, nbits)
	if skip > 0 {
		if _, err := rf.ReadBits(uint(skip), "skip"); err != nil {
			return
		}
		_, _ = rr.ReadBits(uint(skip), "skip")
	}
	rec := rr.Begin("rec")
	var fieldErr error
	for k := range ops {
		wantX, wantU, err := ops[k].readField(&rf)
		gotX, gotU := ops[k].readRecord(&rec)
		if err != nil {
			fieldErr = err
			break
		}
		if gotU != wantU || !sameFloats(gotX, wantX) {
			t.Fatalf("op %d (kind %d): record read %v %d, fields %v %d", k, ops[k].kind, gotX, gotU, wantX, wantU)
		}
	}
	endErr := rec.End()
	if fieldErr == nil {
		if endErr != nil {
			t.Fatalf("record failed (%v) where the fields read", endErr)
		}
	} else {
		var want, got *ReadError
		if !errors.As(fieldErr, &want) || !errors.As(endErr, &got) {
			t.Fatalf("fields failed with %v, record with %v", fieldErr, endErr)
		}
		if got.Bit != want.Bit || got.Err != want.Err || got.Field != "rec" {
			t.Fatalf("record failed at bit %d with %v (%q), fields at %d with %v", got.Bit, got.Err, got.Field, want.Bit, want.Err)
		}
	}
	if rr.Pos() != rf.Pos() {
		t.Fatalf("record left the Reader at %d, fields at %d", rr.Pos(), rf.Pos())
	}
}

func sameFloats(a, b [4]float64) bool {
	for j := range a {
		if math.Float64bits(a[j]) != math.Float64bits(b[j]) {
			return false
		}
	}
	return true
}

func checkRecordSeed(t *testing.T, seed uint64, garbage []byte) {
	rng := rand.New(rand.NewPCG(seed, 77))
	ops := randRecOps(rng, 1+rng.IntN(24))
	size := 8 + rng.IntN(80)
	if rng.IntN(8) == 0 {
		size = rng.IntN(8) // a buffer shorter than a word
	}
	pre := rng.IntN(min(8*size, 70) + 1)
	checkRecordWrite(t, rng, ops, size, pre)

	// Read back what the fields wrote, whole and cut short, and garbage.
	w := NewWriter(make([]byte, 64*len(ops)+8))
	for k := range ops {
		ops[k].writeField(w)
	}
	stream := w.Bytes()
	checkRecordRead(t, ops, stream, w.BitLen(), 0)
	checkRecordRead(t, ops, stream, rng.IntN(w.BitLen()+1), 0)
	checkRecordRead(t, ops, stream[:rng.IntN(len(stream)+1)], 1<<30, 0)
	if len(garbage) == 0 {
		garbage = make([]byte, rng.IntN(40))
		for i := range garbage {
			garbage[i] = byte(rng.Uint32())
		}
	}
	checkRecordRead(t, ops, garbage, 8*len(garbage), rng.IntN(min(8*len(garbage), 56)+1))
}

// The record API writes the bits of the per-field calls and reads their
// values, errors and positions, for random sequences of every kind of field
// (refused values, buffers ending mid-record and shorter than a word,
// truncated and garbage streams among them).
func TestRecordsMatchFieldCalls(t *testing.T) {
	for seed := range uint64(4000) {
		checkRecordSeed(t, seed, nil)
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
}

func FuzzRecords(f *testing.F) {
	f.Add(uint64(0), []byte{})
	f.Add(uint64(1), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add(uint64(7), []byte{0x00, 0x80, 0x7f})
	f.Add(uint64(12345), bytes.Repeat([]byte{0xa5}, 40))
	f.Fuzz(func(t *testing.T, seed uint64, garbage []byte) {
		checkRecordSeed(t, seed, garbage)
	})
}

// A record's fields allocate nothing (its Begin over a buffer shorter than
// a word aside).
func TestRecordsAllocateNothing(t *testing.T) {
	buf := make([]byte, benchMTU)
	in := newBenchPacket(3, 200)
	out := &benchPacket{events: make([]benchEvent, 0, 8), ghosts: make([]benchGhost, 0, 256)}
	chat := make([]byte, 0, 128)
	var w Writer
	var r Reader
	allocs := testing.AllocsPerRun(50, func() {
		w.Reset(buf)
		if _, err := writePacket(&w, in); err != nil {
			t.Fatal(err)
		}
		r.Reset(w.Bytes())
		var err error
		if chat, err = readPacket(&r, out, chat); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations a packet", allocs)
	}
}

// RecordReader.ReadRangedInt reads one load on its fast path and hands
// every other case to rangedIntSlow: each case here returns the per-field
// read's value, error and position, whichever path it takes.
func TestRecordReadRangedIntPaths(t *testing.T) {
	for _, tc := range []struct {
		name     string
		min, max int64
		code     uint64 // the field's bits
		n        uint   // written width
		at       int    // the field's first bit
		size     int    // buffer bytes
	}{
		{name: "10 bits mid-buffer", min: 0, max: 1023, code: 517, n: 10, at: 13, size: 64},
		{name: "a code above max", min: 0, max: 1000, code: 1023, n: 10, at: 13, size: 64},
		{name: "negative range", min: -40, max: -1, code: 39, n: 6, at: 3, size: 64},
		{name: "min > max with a one-bit width", min: math.MaxInt64, max: math.MinInt64, code: 1, n: 1, at: 5, size: 64},
		{name: "min > max", min: 5, max: 4, code: 0, n: 1, at: 5, size: 64},
		{name: "an empty range", min: 7, max: 7, code: 0, n: 1, at: 5, size: 64},
		{name: "60 bits", min: 0, max: 1<<60 - 1, code: 1<<59 | 12345, n: 60, at: 9, size: 64},
		{name: "in the buffer's last word", min: 0, max: 1023, code: 700, n: 10, at: 8*20 - 12, size: 20},
		{name: "the stream ends inside the field", min: 0, max: 1023, code: 0xff, n: 8, at: 8*20 - 8, size: 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := make([]byte, tc.size)
			w := NewWriter(buf)
			for k := 0; k < tc.at; k += 8 {
				if err := w.WriteBits(0, uint(min(8, tc.at-k))); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.WriteBits(tc.code, tc.n); err != nil {
				t.Fatal(err)
			}
			var want, got Reader
			want.Reset(buf)
			got.Reset(buf)
			for k := 0; k < tc.at; k += 8 {
				_, _ = want.ReadBits(uint(min(8, tc.at-k)), "pad")
				_, _ = got.ReadBits(uint(min(8, tc.at-k)), "pad")
			}
			wv, werr := want.ReadRangedInt(tc.min, tc.max, "f")
			rec := got.Begin("f")
			gv := rec.ReadRangedInt(tc.min, tc.max)
			gerr := rec.End()
			if gv != wv || (werr == nil) != (gerr == nil) || got.Pos() != want.Pos() {
				t.Fatalf("record: %d, %v at bit %d; per-field: %d, %v at bit %d", gv, gerr, got.Pos(), wv, werr, want.Pos())
			}
			var re, we *ReadError
			if werr != nil && (!errors.As(gerr, &re) || !errors.As(werr, &we) || !errors.Is(gerr, we.Err) || re.Bit != we.Bit) {
				t.Fatalf("record error %v, per-field %v", gerr, werr)
			}
		})
	}
}

// ReadFixed3 and ReadQuantized3 read three codes of up to 19 bits (57 in
// all) from one word: at every bit offset of a byte, mid-buffer and in the
// buffer's last word, they return the values of three per-field reads.
func TestRecordRead3OneWordAtEveryOffset(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 7))
	for _, n := range []uint{12, 18, 19, 20, 21} {
		fixed := mustFixed(0, float64(uint64(1)<<n-1), 1) // n-bit codes, every one valid
		quant := mustQuantized(-1, 1, n)
		for _, size := range []int{9, 10, 16, 40} {
			for at := range 8*size - int(3*n) + 1 {
				buf := make([]byte, size)
				for i := range buf {
					buf[i] = byte(rng.Uint32())
				}
				var pad, got Reader
				pad.Reset(buf)
				for k := 0; k < at; k += 8 {
					_, _ = pad.ReadBits(uint(min(8, at-k)), "pad")
				}
				want := pad // three per-field reads from here
				var w [3]float64
				for j := range w {
					w[j], _ = fixed.Read(&want, "x")
				}
				got = pad
				rec := got.Begin("v")
				x, y, z := rec.ReadFixed3(&fixed)
				if err := rec.End(); err != nil || [3]float64{x, y, z} != w || got.Pos() != want.Pos() {
					t.Fatalf("n %d, %d bytes, bit %d: ReadFixed3 %v, %v at %d; per field %v at %d", n, size, at, [3]float64{x, y, z}, err, got.Pos(), w, want.Pos())
				}
				want = pad
				for j := range w {
					w[j], _ = quant.Read(&want, "x")
				}
				got = pad
				rec = got.Begin("v")
				x, y, z = rec.ReadQuantized3(&quant)
				if err := rec.End(); err != nil || [3]float64{x, y, z} != w || got.Pos() != want.Pos() {
					t.Fatalf("n %d, %d bytes, bit %d: ReadQuantized3 %v, %v at %d; per field %v at %d", n, size, at, [3]float64{x, y, z}, err, got.Pos(), w, want.Pos())
				}
			}
		}
	}
}

// A record's table strings are the Writer's and Reader's: the same bits
// and refusals on write, the same values, errors and positions on read.
func TestRecordTableStringMatchesFieldCalls(t *testing.T) {
	tab := NewStringTable(16)
	_ = tab.Set(3, "elf_archer")
	_ = tab.Set(0, "wolf")
	long := strings.Repeat("x", 200)
	for _, tc := range []struct {
		name   string
		t      *StringTable
		s      string // written, then read back
		maxLen int
		size   int    // buffer bytes
		stream []byte // read instead of what was written, when set
		bits   int    // the stream's length in bits, with stream
	}{
		{name: "a hit", t: tab, s: "elf_archer", maxLen: 32, size: 16},
		{name: "a hit on slot 0", t: tab, s: "wolf", maxLen: 32, size: 16},
		{name: "a literal", t: tab, s: "gg wp", maxLen: 32, size: 16},
		{name: "an empty literal", t: tab, s: "", maxLen: 32, size: 16},
		{name: "a literal without a table", t: nil, s: "wolf", maxLen: 32, size: 16},
		{name: "a literal longer than the stack buffer", t: tab, s: long, maxLen: 255, size: 260},
		{name: "a string over maxLen", t: tab, s: "elf_archer", maxLen: 4, size: 16},
		{name: "a negative maxLen", t: tab, s: "wolf", maxLen: -1, size: 16},
		{name: "the string does not fit", t: tab, s: "gg wp", maxLen: 32, size: 2},
		{name: "a hit on an empty slot", t: tab, maxLen: 32, stream: []byte{1 | 5<<1}, bits: 5},
		{name: "a hit read without a table", t: nil, maxLen: 32, stream: []byte{1 | 3<<1}, bits: 5},
		{name: "a hit over maxLen", t: tab, maxLen: 4, stream: []byte{1 | 3<<1}, bits: 5},
		{name: "the stream ends inside the slot", t: tab, maxLen: 32, stream: []byte{1 | 3<<1}, bits: 3},
		{name: "a literal's length over maxLen", t: tab, maxLen: 3, stream: []byte{7 << 1}, bits: 3},
		{name: "the stream ends inside the literal", t: tab, maxLen: 32, stream: []byte{5 << 1, 'g', 'g'}, bits: 22},
		{name: "an empty stream", t: tab, maxLen: 32, stream: []byte{}, bits: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stream, nbits := tc.stream, tc.bits
			if stream == nil {
				wf := NewWriter(make([]byte, tc.size))
				_ = wf.WriteFlag(true)
				errF := wf.WriteTableString(tc.t, tc.s, tc.maxLen)
				wr := NewWriter(make([]byte, tc.size))
				_ = wr.WriteFlag(true)
				rec := wr.Begin()
				rec.WriteTableString(tc.t, tc.s, tc.maxLen)
				errR := rec.End()
				if !errors.Is(errR, errF) || (errF == nil) != (errR == nil) || wr.BitLen() != wf.BitLen() || !bytes.Equal(wr.Bytes(), wf.Bytes()) {
					t.Fatalf("record wrote %x (%d bits), %v; Writer %x (%d bits), %v", wr.Bytes(), wr.BitLen(), errR, wf.Bytes(), wf.BitLen(), errF)
				}
				stream, nbits = wf.Bytes(), wf.BitLen()
			} else {
				stream, nbits = append([]byte{0}, stream...), nbits+8 // behind a byte of padding
			}
			var ref, got Reader
			ref.ResetBits(stream, nbits)
			got.ResetBits(stream, nbits)
			_, _ = ref.ReadBits(uint(min(nbits, 1+7*btoi(tc.stream != nil))), "pad")
			_, _ = got.ReadBits(uint(min(nbits, 1+7*btoi(tc.stream != nil))), "pad")
			want, werr := ref.ReadTableString(tc.t, tc.maxLen, "s")
			rec := got.Begin("s")
			s := rec.ReadTableString(tc.t, tc.maxLen)
			err := rec.End()
			var re, we *ReadError
			if s != want || (err == nil) != (werr == nil) || got.Pos() != ref.Pos() ||
				werr != nil && (!errors.As(err, &re) || !errors.As(werr, &we) || !errors.Is(err, we.Err) || re.Bit != we.Bit) {
				t.Fatalf("record read %q, %v at bit %d; Reader %q, %v at bit %d", s, err, got.Pos(), want, werr, ref.Pos())
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
