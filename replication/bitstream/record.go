package bitstream

import (
	"encoding/binary"
	"io"
	"unsafe"
)

// Records: the fields of one record (a ghost update, a header) written or
// read through a small value that borrows the Writer's or Reader's position
// for them and gives it back at End. A Writer or Reader method returns an
// error from every field and keeps the position in the Writer, and most are
// calls around a few instructions of work; a record keeps its position and
// word in the caller's frame, its methods return no error (the first
// failure is remembered and End reports it, so the caller checks once), and
// they touch no memory but the record's and the buffer's, so they need no
// stack frame of their own. The bits and values are those of the matching
// per-field calls (TestRecordsMatchFieldCalls, FuzzRecords).

// recFail is a record's first failure, kept as a code rather than an error
// so that recording it is a byte store (an error is a pointer, and storing
// one through the record's pointer takes a write barrier and a frame).
type recFail uint8

const (
	recOK recFail = iota
	recOutOfRange
	recWidth
	recEOF
	recTooLong
)

func (f recFail) err() error {
	switch f {
	case recOutOfRange:
		return ErrOutOfRange
	case recWidth:
		return ErrWidth
	case recEOF:
		return io.ErrUnexpectedEOF
	case recTooLong:
		return ErrTooLong
	}
	return nil
}

// RecordWriter writes the fields of one record through a Writer: made by
// Writer.Begin, given back by End. Between the two, use only the record,
// not its Writer; the Writer's buffer holds the record's bits after End,
// and the record is spent. Keep it a local variable, and get it from Begin:
// the zero RecordWriter is not usable. Not safe for concurrent use.
//
// A record is written whole or not at all: when its fields do not fit in
// the buffer, End takes them all back, leaves the Writer at the record's
// start and fails with ErrOverflow (the Writer's Err too, cleared by a
// Truncate to that start, as for a field that did not fit). A caller that
// knows its record's largest size checks Remaining before Begin. A record
// that fits holds exactly the bits of the matching per-field calls. A field
// whose value its encoding refuses (ErrOutOfRange, ErrWidth) writes
// nothing, as its per-field call would, and End returns the first such
// failure.
//
// The record is an accumulator: its fields collect in a word, stored 8
// bytes at a time when it fills, and End writes the last, partial word. No
// field tests the buffer's end (End compares the record's length with it
// once). The Writer itself keeps no accumulator: see tryPut.
type RecordWriter struct {
	w    *Writer
	buf  []byte // where full words go: the Writer's buffer, or 8 bytes of scratch when that is shorter
	acc  uint64 // the stream's bits from byte pos on: fill of them, the higher bits zero
	fill uint   // 0..63
	pos  uint   // the byte where acc's word goes
	last uint   // len(buf) − 8: full words past it (an overflow) are stored there
	// saved is the buffer's last word when the record starts inside it,
	// put back by End if the record overflows (its full words, stored at
	// last, cover bytes before the record).
	saved   uint64
	restore bool
	bad     recFail
}

// Begin starts a record at the Writer's position. The Writer must not be
// used until the record's End.
func (w *Writer) Begin() RecordWriter {
	rw := RecordWriter{w: w, buf: w.buf, pos: uint(w.bit) >> 3, fill: uint(w.bit) & 7}
	if rw.fill != 0 {
		rw.acc = uint64(w.buf[rw.pos] & lowBits[rw.fill])
	}
	if len(w.buf) < 8 {
		rw.buf = make([]byte, 8) // every full word overflows such a buffer
	}
	rw.last = uint(len(rw.buf)) - 8
	if rw.pos >= rw.last && len(w.buf) >= 8 {
		rw.saved, rw.restore = binary.LittleEndian.Uint64(w.buf[rw.last:]), true
	}
	return rw
}

// End gives the position back to the Writer and returns the record's first
// failure: ErrOverflow when the record did not fit (nothing of it is
// written), else the first value a field refused, else nil. The Writer's
// Err keeps its own first failure, as with per-field calls.
func (rw *RecordWriter) End() error {
	w := rw.w
	if w == nil {
		return rw.bad.err()
	}
	rw.w = nil
	end := 8*rw.pos + rw.fill
	if end > uint(8*len(w.buf)) {
		if rw.restore {
			binary.LittleEndian.PutUint64(w.buf[rw.last:], rw.saved)
		}
		if off := w.bit & 7; off != 0 { // its full words may have changed the head byte's bits above the start
			w.buf[w.bit>>3] &= lowBits[off]
		}
		return w.fail(ErrOverflow)
	}
	if rw.fill != 0 { // the partial word: its bits above fill are zero
		if p := rw.pos; p+8 <= uint(len(w.buf)) {
			binary.LittleEndian.PutUint64(w.buf[p:p+8], rw.acc)
		} else {
			for k := uint(0); k < (rw.fill+7)>>3; k++ {
				w.buf[p+k] = byte(rw.acc >> (8 * k))
			}
		}
	}
	err := rw.bad.err()
	if err != nil && w.err == nil {
		w.err, w.errBit = err, w.bit
	}
	w.bit = int(end)
	return err
}

// BitLen is the stream's length in bits, counting the record's fields.
func (rw *RecordWriter) BitLen() int { return int(8*rw.pos + rw.fill) }

// Remaining is the number of bits that can still be written (negative once
// the record has outgrown the buffer).
func (rw *RecordWriter) Remaining() int { return 8*len(rw.buf) - rw.BitLen() }

// refuse remembers the first value a field refused.
func (rw *RecordWriter) refuse(f recFail) {
	if rw.bad == recOK {
		rw.bad = f
	}
}

// put writes the low n bits of v (1 ≤ n ≤ 63; v below 2^n). Small enough
// to inline into the fields. A full word is whole stream bits: inside the
// buffer unless the record has overflowed, when it goes to the buffer's
// last word (End says so and puts that word back), so the store needs no
// test of its own.
func (rw *RecordWriter) put(v uint64, n uint) {
	f := rw.fill
	acc := rw.acc | v<<(f&63)
	if f += n; f >= 64 {
		p := min(rw.pos, rw.last)
		binary.LittleEndian.PutUint64(rw.buf[p:p+8], acc)
		rw.pos += 8
		f -= 64
		acc = v >> ((n - f) & 63) // n − f = 64 − the old fill ∈ [1, 63]: the old fill is 0 only for n = 64
	}
	rw.acc, rw.fill = acc, f
}

// WriteFlag writes one bit, as Writer.WriteFlag.
func (rw *RecordWriter) WriteFlag(b bool) {
	var v uint64
	if b {
		v = 1
	}
	rw.put(v, 1)
}

// WriteBits writes the low n bits of v (1 ≤ n ≤ 64), as Writer.WriteBits:
// a v wider than n bits, or n outside 1..64, is refused with ErrWidth.
func (rw *RecordWriter) WriteBits(v uint64, n uint) {
	if n-1 >= 64 || n < 64 && v>>(n&63) != 0 {
		rw.refuse(recWidth)
		return
	}
	if n < 64 {
		rw.put(v, n)
		return
	}
	rw.put(v&(1<<32-1), 32)
	rw.put(v>>32, 32)
}

// WriteRangedInt writes v ∈ [min, max] as Writer.WriteRangedInt: the same
// bits, and ErrOutOfRange for v outside the range or min > max.
func (rw *RecordWriter) WriteRangedInt(v, min, max int64) {
	u := uint64(v) - uint64(min)
	if min > max || u > uint64(max)-uint64(min) {
		rw.refuse(recOutOfRange)
		return
	}
	if n := RangeBits(min, max); n-1 < 63 {
		rw.put(u, n)
	} else if n == 64 {
		rw.put(u&(1<<32-1), 32)
		rw.put(u>>32, 32)
	}
}

// WriteFixed writes v as f.Write would (WriteFixed's bits and refusals).
func (rw *RecordWriter) WriteFixed(f *FixedFormat, v float64) {
	if !f.in(v) {
		rw.refuse(recOutOfRange)
		return
	}
	if f.bits > 0 {
		rw.put(f.code(v), f.bits) // bits ≤ 32
	}
}

// WriteFixed3 writes x, y and z as f.Write3 would: three values, all or
// nothing.
func (rw *RecordWriter) WriteFixed3(f *FixedFormat, x, y, z float64) {
	if !(f.in(x) && f.in(y) && f.in(z)) {
		rw.refuse(recOutOfRange)
		return
	}
	a, b, c, n := f.code(x), f.code(y), f.code(z), f.bits
	if n-1 < 21 { // 3n ≤ 63: one field
		rw.put(a|b<<(n&63)|c<<(2*n&63), 3*n)
		return
	}
	rw.put3(a, b, c, n)
}

// WriteQuantized writes v as f.Write would (WriteQuantized's bits and
// refusals).
func (rw *RecordWriter) WriteQuantized(f *QuantizedFormat, v float64) {
	if !f.in(v) {
		rw.refuse(recOutOfRange)
		return
	}
	if f.bits > 0 {
		rw.put(f.code(v), f.bits)
	}
}

// WriteQuantized3 writes x, y and z as f.Write3 would: all or nothing.
func (rw *RecordWriter) WriteQuantized3(f *QuantizedFormat, x, y, z float64) {
	if !(f.in(x) && f.in(y) && f.in(z)) {
		rw.refuse(recOutOfRange)
		return
	}
	a, b, c, n := f.code(x), f.code(y), f.code(z), f.bits
	if n-1 < 21 { // 3n ≤ 63: one field
		rw.put(a|b<<(n&63)|c<<(2*n&63), 3*n)
		return
	}
	rw.put3(a, b, c, n)
}

// put3 writes three n-bit codes (n ≤ 32) as three consecutive fields.
func (rw *RecordWriter) put3(a, b, c uint64, n uint) {
	switch {
	case n == 0:
	case n <= 21: // 3n ≤ 63: one field
		rw.put(a|b<<(n&63)|c<<(2*n&63), 3*n)
	default:
		rw.put(a, n)
		rw.put(b, n)
		rw.put(c, n)
	}
}

// WriteQuat writes a rotation as Writer.WriteQuat: 47 bits, ErrOutOfRange
// for a zero or non-finite q.
func (rw *RecordWriter) WriteQuat(q [4]float64) {
	c, ok := quatField(&q)
	if !ok {
		rw.refuse(recOutOfRange)
		return
	}
	rw.put(c, 2+3*QuatBits)
}

// WriteTableString writes s as Writer.WriteTableString: the same bits
// (flag 1 and the slot for a string t holds, else flag 0, the length and
// the bytes) and refusals (ErrOutOfRange for a negative maxLen,
// ErrTooLong for s longer than maxLen). A record carries a ghost's class
// name without giving the position back to its Writer around it.
func (rw *RecordWriter) WriteTableString(t *StringTable, s string, maxLen int) {
	if maxLen < 0 {
		rw.refuse(recOutOfRange)
		return
	}
	if len(s) > maxLen {
		rw.refuse(recTooLong)
		return
	}
	if t != nil {
		// find's common case first, without its call: s is the very
		// string (the same bytes, at the same address) its first probe's
		// slot holds, one constant or one interned name. As a call,
		// find's frame and this one's arguments, kept on the stack across
		// it, were ≈ 30 of a hit's ≈ 105 instructions. (In the zero table
		// the probe's mask is all ones, and no probe is below 0.)
		if h := uint(tableHash(s)>>(t.shift&63)) & uint(len(t.index)-1); h < uint(len(t.index)) {
			if e := uint(t.index[h]) - 1; e < uint(len(t.slots)) {
				if x := t.slots[e]; len(x) == len(s) && unsafe.StringData(x) == unsafe.StringData(s) {
					rw.put(1|uint64(e)<<1, 1+t.bits) // bits ≤ 12
					return
				}
			}
			// Else the rest of find, from this probe on.
			if slot, ok := t.findFrom(s, h); ok {
				rw.put(1|uint64(slot)<<1, 1+t.bits)
				return
			}
		}
	}
	rw.put(0, 1)
	if n := RangeBits(0, int64(maxLen)); n > 0 { // ≤ 63
		rw.put(uint64(len(s)), n)
	}
	for i := 0; i < len(s); i++ {
		rw.put(uint64(s[i]), 8)
	}
}

// RecordReader reads the fields of one record through a Reader: made by
// Reader.Begin, given back by End. Between the two, use only the record,
// not its Reader. Keep it a local variable. Not safe for concurrent use.
//
// Each Read method returns its field's value. A field that fails (the
// stream ends within it, or its code is one its encoding forbids) returns
// 0, and so does every field after it; End then returns a *ReadError that
// names the record and the failing field's bit, wrapping the error the
// per-field read would have returned there, and leaves the Reader at that
// field's start, where the per-field reads would have stopped. After End
// the record is spent. The zero RecordReader reads nothing: every field
// fails.
type RecordReader struct {
	r      *Reader
	buf    []byte
	bit    uint
	limit  uint // 0 once a field failed
	last   uint // len(buf) − 8: a field in the last 8 bytes is read from there
	name   string
	errBit uint
	bad    recFail
}

// Begin starts a record named name (for its errors) at the Reader's
// position. The Reader must not be used until the record's End.
func (r *Reader) Begin(name string) RecordReader {
	rr := RecordReader{r: r, buf: r.buf, bit: uint(r.bit), limit: uint(r.limit), name: name}
	if len(r.buf) < 8 {
		rr.buf = make([]byte, 8) // zero-padded: the limit keeps the reads inside the stream
		copy(rr.buf, r.buf)
	}
	rr.last = uint(len(rr.buf)) - 8
	return rr
}

// End gives the position back to the Reader and returns the record's first
// failure (a *ReadError), or nil.
func (rr *RecordReader) End() error {
	r := rr.r
	rr.r = nil
	if rr.bad != recOK {
		if r != nil {
			r.bit = int(rr.errBit)
		}
		return &ReadError{Field: rr.name, Bit: int(rr.errBit), Err: rr.bad.err()}
	}
	if r != nil {
		r.bit = int(rr.bit)
	}
	return nil
}

// Err is the record's first failure so far (the error its *ReadError will
// wrap), or nil.
func (rr *RecordReader) Err() error { return rr.bad.err() }

// Pos is the number of bits consumed, counting the record's fields.
func (rr *RecordReader) Pos() int { return int(rr.bit) }

// Remaining is the number of unread bits (0 once a field failed).
func (rr *RecordReader) Remaining() int { return max(int(rr.limit)-int(rr.bit), 0) }

// stop fails the record at the field starting at bit at: every later field
// fails too, and End reports this one.
func (rr *RecordReader) stop(at uint, f recFail) {
	if rr.bad == recOK {
		rr.bad, rr.errBit, rr.limit = f, at, 0
	}
}

// get reads n bits (1 ≤ n ≤ 56), or fails with io.ErrUnexpectedEOF. Small
// enough to inline into the fields.
func (rr *RecordReader) get(n uint) uint64 {
	if b := rr.bit; b+n <= rr.limit {
		i := min(b>>3, rr.last) // in the last 8 bytes, the field lies in the buffer's last word
		rr.bit = b + n
		return binary.LittleEndian.Uint64(rr.buf[i:i+8]) >> ((b - 8*i) & 63) & (1<<(n&63) - 1)
	}
	rr.stop(rr.bit, recEOF)
	return 0
}

// ReadFlag reads one bit, as Reader.ReadFlag.
func (rr *RecordReader) ReadFlag() bool {
	if b := rr.bit; b < rr.limit {
		rr.bit = b + 1
		return rr.buf[b>>3]>>(b&7)&1 != 0
	}
	rr.stop(rr.bit, recEOF)
	return false
}

// get63 reads n bits (1 ≤ n ≤ 63), or fails with io.ErrUnexpectedEOF: get
// with the ninth byte a field past 56 bits may reach.
func (rr *RecordReader) get63(n uint) uint64 {
	if b := rr.bit; b+n <= rr.limit {
		i := min(b>>3, rr.last)
		s := (b - 8*i) & 63
		// In the last word the ninth byte is the word's own last one, and
		// lands above the field; elsewhere it is the next byte.
		hi := uint64(rr.buf[min(i+8, rr.last+7)])
		rr.bit = b + n
		return (binary.LittleEndian.Uint64(rr.buf[i:i+8])>>s | hi<<1<<(63-s)) & (1<<(n&63) - 1)
	}
	rr.stop(rr.bit, recEOF)
	return 0
}

// ReadBits reads n bits (1 ≤ n ≤ 64), as Reader.ReadBits; n outside 1..64
// fails with ErrWidth.
func (rr *RecordReader) ReadBits(n uint) uint64 {
	if n-1 < 56 {
		return rr.get(n)
	}
	if n-1 < 63 {
		return rr.get63(n)
	}
	if n != 64 {
		rr.stop(rr.bit, recWidth)
		return 0
	}
	if rr.bit+64 > rr.limit {
		rr.stop(rr.bit, recEOF)
		return 0
	}
	lo := rr.get(32)
	return lo | rr.get(32)<<32
}

// ReadRangedInt reads an integer written by WriteRangedInt(v, min, max),
// as Reader.ReadRangedInt: a code above max−min, or min > max, fails with
// ErrOutOfRange.
func (rr *RecordReader) ReadRangedInt(min, max int64) int64 {
	// The fast path (a field of 1..56 bits inside the stream, a code in
	// the range) is one load; everything else is rangedIntSlow's, so this
	// frame stays small. With min and max constants at the call, the width
	// and the span are constants too.
	span := uint64(max) - uint64(min)
	n := RangeBits(min, max)
	if b := rr.bit; n-1 < 56 && b+n <= rr.limit && min <= max {
		if u := rr.word(b) & (1<<(n&63) - 1); u <= span {
			rr.bit = b + n
			return int64(uint64(min) + u)
		}
	}
	return rr.rangedIntSlow(min, max)
}

// word is the stream's bits from bit b on, the higher ones belonging to
// later fields or past the buffer's end: get without its tests. b must be
// below 8·len(buf), and it serves a field of up to 57 bits within the
// buffer: from byte b>>3 the field starts at bit b&7 ≤ 7 of the word, so
// 57 bits end by its last; in the buffer's last word the field lies in
// that word.
func (rr *RecordReader) word(b uint) uint64 {
	i := min(b>>3, rr.last) // in the last 8 bytes, the field lies in the buffer's last word
	return binary.LittleEndian.Uint64(rr.buf[i:i+8]) >> ((b - 8*i) & 63)
}

// rangedIntSlow is ReadRangedInt's every other case: min > max, a width of
// 0 or past 56 bits, the stream's end, a code above the range.
func (rr *RecordReader) rangedIntSlow(min, max int64) int64 {
	at := rr.bit
	if min > max {
		rr.stop(at, recOutOfRange)
		return 0
	}
	n := RangeBits(min, max)
	if n == 0 {
		return min
	}
	var u uint64
	if n-1 < 56 {
		u = rr.get(n)
	} else {
		u = rr.ReadBits(n)
	}
	if rr.bad != recOK {
		return 0
	}
	if u > uint64(max)-uint64(min) {
		rr.stop(at, recOutOfRange)
		return 0
	}
	return int64(uint64(min) + u)
}

// ReadFixed reads a value as f.Read would.
func (rr *RecordReader) ReadFixed(f *FixedFormat) float64 {
	if f.bits == 0 {
		return f.min
	}
	at := rr.bit
	q := rr.get(f.bits)
	if rr.bad != recOK {
		return 0
	}
	if q > f.steps {
		rr.stop(at, recOutOfRange)
		return 0
	}
	return f.value(q)
}

// ReadFixed3 reads three values as f.Read3 would: all or nothing.
func (rr *RecordReader) ReadFixed3(f *FixedFormat) (x, y, z float64) {
	n, at := f.bits, rr.bit
	var a, b, c uint64
	if n-1 < 19 && at+3*n <= rr.limit { // 3n ≤ 57: one word
		a, b, c = codes3(rr.word(at), n)
		rr.bit = at + 3*n
	} else if n-1 < 21 && at+3*n <= rr.limit { // 3n ≤ 63: a word and the byte after it
		a, b, c = codes3(rr.window(3*n), n)
	} else {
		if n == 0 {
			return f.min, f.min, f.min
		}
		if a, b, c = rr.get3Slow(n); rr.bad != recOK {
			return 0, 0, 0
		}
	}
	if a > f.steps || b > f.steps || c > f.steps {
		rr.stop(at, recOutOfRange)
		return 0, 0, 0
	}
	return f.value(a), f.value(b), f.value(c)
}

// ReadQuantized reads a value as f.Read would.
func (rr *RecordReader) ReadQuantized(f *QuantizedFormat) float64 {
	if f.bits == 0 {
		return f.min
	}
	q := rr.get(f.bits)
	if rr.bad != recOK {
		return 0
	}
	return f.value(q)
}

// ReadQuantized3 reads three values as f.Read3 would: all or nothing.
func (rr *RecordReader) ReadQuantized3(f *QuantizedFormat) (x, y, z float64) {
	var a, b, c uint64
	if n, at := f.bits, rr.bit; n-1 < 19 && at+3*n <= rr.limit { // 3n ≤ 57: one word
		a, b, c = codes3(rr.word(at), n)
		rr.bit = at + 3*n
	} else if n-1 < 21 && at+3*n <= rr.limit { // 3n ≤ 63: a word and the byte after it
		a, b, c = codes3(rr.window(3*n), n)
	} else {
		if n == 0 {
			return f.min, f.min, f.min
		}
		if a, b, c = rr.get3Slow(n); rr.bad != recOK {
			return 0, 0, 0
		}
	}
	return f.value(a), f.value(b), f.value(c)
}

// codes3 splits a window into three n-bit codes.
func codes3(v uint64, n uint) (a, b, c uint64) {
	mask := uint64(1)<<(n&63) - 1
	return v & mask, v >> (n & 63) & mask, v >> (2 * n & 63) & mask
}

// window consumes n ≤ 63 bits known to be in the stream and returns the
// stream's bits from the first of them (those past n belong to later
// fields): get63 without its test.
func (rr *RecordReader) window(n uint) uint64 {
	b := rr.bit
	i := min(b>>3, rr.last)
	s := (b - 8*i) & 63
	hi := uint64(rr.buf[min(i+8, rr.last+7)]) // see get63
	rr.bit = b + n
	return binary.LittleEndian.Uint64(rr.buf[i:i+8])>>s | hi<<1<<(63-s)
}

// get3Slow reads three n-bit codes (1 ≤ n ≤ 32), all or nothing: the vector
// readers' path for wide codes and streams too short for them.
func (rr *RecordReader) get3Slow(n uint) (a, b, c uint64) {
	if rr.bit+3*n > rr.limit {
		rr.stop(rr.bit, recEOF)
		return 0, 0, 0
	}
	if n <= 21 {
		return codes3(rr.window(3*n), n)
	}
	return rr.get(n), rr.get(n), rr.get(n)
}

// ReadQuat reads a rotation as Reader.ReadQuat; a field no encoder sends
// fails with ErrOutOfRange.
func (rr *RecordReader) ReadQuat() (q [4]float64) {
	at := rr.bit
	c := rr.get(2 + 3*QuatBits)
	if rr.bad != recOK {
		return q
	}
	k0, k1, k2 := quatUnpack(c, quatM, QuatBits)
	if !quatFill(&q, c&3, k0, k1, k2, quatM, quatStep[QuatBits]) {
		rr.stop(at, recOutOfRange)
		return [4]float64{}
	}
	return q
}

// ReadTableString reads a string written by WriteTableString with an
// identical table and the same maxLen, as Reader.ReadTableString: a hit
// returns the table's string without allocating, a literal allocates it.
// A negative maxLen or a hit on an empty slot (or with no table) fails
// with ErrOutOfRange, a string longer than maxLen with ErrTooLong, a
// stream that ends inside the field with io.ErrUnexpectedEOF, all at the
// field's first bit.
func (rr *RecordReader) ReadTableString(t *StringTable, maxLen int) string {
	// A hit, the common case: its flag and slot from one word, in a frame
	// of a few words. Anything else (a literal, an empty slot, a string
	// over maxLen, the stream's end) reads again from the field's first
	// bit in readTableStringSlow, which says what failed: its literal's
	// 128-byte buffer made every hit pay for a large frame and its stack
	// check: 92 instructions a hit, against 63.
	if b := rr.bit; t != nil {
		if n := 1 + t.bits; b+n <= rr.limit { // n ≤ 13: a word holds it
			if v := rr.word(b) & (1<<(n&63) - 1); v&1 != 0 {
				if s, ok := t.Get(int(v >> 1)); ok && len(s) <= maxLen {
					rr.bit = b + n
					return s
				}
			}
		}
	}
	return rr.readTableStringSlow(t, maxLen)
}

// readTableStringSlow is ReadTableString's every case, from the field's
// first bit.
func (rr *RecordReader) readTableStringSlow(t *StringTable, maxLen int) string {
	at := rr.bit
	if maxLen < 0 {
		rr.stop(at, recOutOfRange)
		return ""
	}
	if at >= rr.limit {
		rr.stop(at, recEOF)
		return ""
	}
	if rr.ReadFlag() { // a hit
		var bits uint
		if t != nil {
			bits = t.bits
		}
		var slot uint64
		if bits > 0 {
			if rr.bit+bits > rr.limit {
				rr.stop(at, recEOF)
				return ""
			}
			slot = rr.get(bits)
		}
		if t == nil {
			rr.stop(at, recOutOfRange)
			return ""
		}
		s, ok := t.Get(int(slot))
		if !ok {
			rr.stop(at, recOutOfRange)
			return ""
		}
		if len(s) > maxLen {
			rr.stop(at, recTooLong)
			return ""
		}
		return s
	}
	var l uint64
	if n := RangeBits(0, int64(maxLen)); n > 0 {
		if rr.bit+n > rr.limit {
			rr.stop(at, recEOF)
			return ""
		}
		l = rr.ReadBits(n)
	}
	if l > uint64(maxLen) {
		rr.stop(at, recTooLong)
		return ""
	}
	if l > uint64(rr.limit-rr.bit)>>3 {
		rr.stop(at, recEOF)
		return ""
	}
	if l == 0 {
		return ""
	}
	var tmp [128]byte // stays on the stack; string() below is the one allocation
	b := tmp[:0]
	if l > uint64(len(tmp)) {
		b = make([]byte, 0, l)
	}
	b = b[:l]
	for i := range b {
		b[i] = byte(rr.get(8))
	}
	return string(b)
}
