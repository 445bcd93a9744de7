package bitstream

import (
	"encoding/binary"
	"io"
)

// Reader decodes bit fields from a caller-owned buffer. Every method checks
// bounds and returns a *ReadError naming the field on failure; none panics on
// any input. Every Read method is atomic: a failed read consumes nothing, so
// Pos still points at the start of the field that failed.
//
// The zero Reader reads an empty stream. Not safe for concurrent use; the
// connection actor owns it.
type Reader struct {
	buf   []byte
	bit   int // next bit to read; invariant 0 ≤ bit ≤ limit ≤ 8*len(buf)
	limit int // bits available
}

// NewReader returns a Reader over buf. Prefer a reused Reader and Reset on hot paths.
func NewReader(buf []byte) *Reader {
	r := &Reader{}
	r.Reset(buf)
	return r
}

// Reset starts reading buf from its first bit; all len(buf)*8 bits are readable,
// including the up to 7 zero padding bits at the end of a packet.
func (r *Reader) Reset(buf []byte) {
	r.buf = buf
	r.bit = 0
	r.limit = len(buf) * 8
}

// ResetBits starts reading the first nbits bits of buf, clamped to
// [0, 8*len(buf)]. Use it when the exact bit length is known (a record count
// or length field said so): a loop "while Remaining() > 0" then never decodes
// the byte padding as a phantom record (checklist BS-2).
func (r *Reader) ResetBits(buf []byte, nbits int) {
	r.Reset(buf)
	r.limit = min(max(nbits, 0), r.limit)
}

// Pos is the number of bits consumed.
func (r *Reader) Pos() int { return r.bit }

// Remaining is the number of unread bits (including any byte padding, unless
// ResetBits excluded it).
func (r *Reader) Remaining() int { return r.limit - r.bit }

func (r *Reader) errAt(field string, at int, err error) error {
	return &ReadError{Field: field, Bit: at, Err: err}
}

// fail rewinds to at (the field's start) and returns a *ReadError.
func (r *Reader) fail(field string, at int, err error) error {
	r.bit = at
	return &ReadError{Field: field, Bit: at, Err: err}
}

// ReadBits reads n bits (1 ≤ n ≤ 64) written by WriteBits.
func (r *Reader) ReadBits(n uint, field string) (uint64, error) {
	if v, ok := r.TryReadBits(n); ok {
		return v, nil
	}
	return r.readBitsSlow(n, field)
}

// TryReadBits is ReadBits's fast path for another package's decoder:
// small enough to inline (ReadBits is not: with its slow path it is over
// the inliner's budget, so every call paid ≈ 25 instructions of call and
// return around ≈ 12 of work). It reads 1 ≤ n ≤ 56 bits when the 8 bytes
// from the field's first byte are in the buffer and the field is within
// the limit; ok is false, and nothing is consumed, when ReadBits must run
// instead (it then reads the field or returns its error). The pattern:
//
//	v, ok := r.TryReadBits(n)
//	if !ok {
//		if v, err = r.ReadBits(n, field); err != nil { … }
//	}
//
// It is also the fast path of every read, small enough to inline into the typed
// readers: 1..56 bits at any bit offset lie inside one 8-byte window, and a
// single little-endian load serves them. It reports false, having consumed
// nothing, when the slow path must run (wide field, last 8 bytes, or error).
func (r *Reader) TryReadBits(n uint) (uint64, bool) {
	if i := uint(r.bit) >> 3; n-1 < 56 && r.bit+int(n) <= r.limit && i+8 <= uint(len(r.buf)) {
		v := binary.LittleEndian.Uint64(r.buf[i:i+8]) >> (uint(r.bit) & 7) & (1<<n - 1)
		r.bit += int(n)
		return v, true
	}
	return 0, false
}

// PeekWindow returns the next bits without consuming any, for another
// package's decoder that parses a short run of fields from one word: v holds
// n = min(56, Remaining()) bits, its higher bits zero. ok is false (and
// the caller takes its field-by-field path) when the 8 bytes from the
// current byte are not in the buffer. The caller consumes what it parsed
// with TryReadBits (1 ≤ k ≤ n bits: it then succeeds).
func (r *Reader) PeekWindow() (v uint64, n int, ok bool) {
	i := uint(r.bit) >> 3
	if i+8 > uint(len(r.buf)) {
		return 0, 0, false
	}
	n = min(56, r.limit-r.bit)
	return binary.LittleEndian.Uint64(r.buf[i:i+8]) >> (uint(r.bit) & 7) & (1<<uint(n) - 1), n, true
}

func (r *Reader) readBitsSlow(n uint, field string) (uint64, error) {
	if n-1 > 63 {
		return 0, r.errAt(field, r.bit, ErrWidth)
	}
	if int(n) > r.limit-r.bit {
		return 0, r.errAt(field, r.bit, io.ErrUnexpectedEOF)
	}
	return r.get(n), nil
}

// get reads 1 ≤ n ≤ 64 bits already known to be in bounds.
func (r *Reader) get(n uint) uint64 {
	idx := r.bit >> 3
	off := uint(r.bit & 7)
	r.bit += int(n)
	var v uint64
	if idx+9 <= len(r.buf) {
		v = binary.LittleEndian.Uint64(r.buf[idx:]) >> off
		if off+n > 64 {
			v |= uint64(r.buf[idx+8]) << (64 - off)
		}
	} else if e := len(r.buf) - 8; e >= 0 {
		// Near the end (fewer than 9 bytes from idx, so e ≤ idx ≤ e+7):
		// the buffer's last 8 bytes, shifted down to byte idx. The field
		// lies in those bytes (the caller's bounds check), so off+n ≤ 64.
		// No copy: a read of a short packet's last fields ends here often.
		v = binary.LittleEndian.Uint64(r.buf[e:]) >> (8 * uint(idx-e) & 63) >> off
	} else {
		// A buffer of fewer than 8 bytes: stage it in a zero-padded window.
		var win [8]byte
		copy(win[:], r.buf[idx:])
		v = binary.LittleEndian.Uint64(win[:]) >> off
	}
	if n < 64 {
		v &= uint64(1)<<n - 1
	}
	return v
}

// peek returns the next n ≤ 64 bits without consuming them; the caller has
// checked that they are in bounds.
func (r *Reader) peek(n uint) uint64 {
	at := r.bit
	v := r.get(n)
	r.bit = at
	return v
}

// ReadFlag reads one bit.
func (r *Reader) ReadFlag(field string) (bool, error) {
	if r.bit < r.limit {
		b := r.buf[uint(r.bit)>>3] >> (uint(r.bit) & 7) & 1
		r.bit++
		return b == 1, nil
	}
	return false, r.errAt(field, r.bit, io.ErrUnexpectedEOF)
}

// ReadRangedInt reads an integer written by WriteRangedInt(v, min, max). A wire
// value beyond max (possible when the range is not a power of two) is rejected
// with ErrOutOfRange, which makes the range double as input validation; so is
// min > max.
func (r *Reader) ReadRangedInt(min, max int64, field string) (int64, error) {
	if min > max {
		return 0, r.errAt(field, r.bit, ErrOutOfRange)
	}
	n := RangeBits(min, max)
	at := r.bit
	u, ok := r.TryReadBits(n) // false for n = 0: nothing to read
	if !ok && n > 0 {
		var err error
		if u, err = r.readBitsSlow(n, field); err != nil {
			return 0, err
		}
	}
	if u > uint64(max)-uint64(min) {
		return 0, r.fail(field, at, ErrOutOfRange)
	}
	return int64(uint64(min) + u), nil
}

// ReadBytes fills dst with len(dst) whole bytes written by WriteBytes.
func (r *Reader) ReadBytes(dst []byte, field string) error {
	if len(dst) > (r.limit-r.bit)>>3 {
		return r.errAt(field, r.bit, io.ErrUnexpectedEOF)
	}
	r.readData(dst)
	return nil
}

// readData fills dst from the stream; the caller has checked the bounds.
func (r *Reader) readData(dst []byte) {
	if r.bit&7 == 0 {
		copy(dst, r.buf[r.bit>>3:])
		r.bit += 8 * len(dst)
		return
	}
	for len(dst) >= 8 {
		binary.LittleEndian.PutUint64(dst, r.get(64))
		dst = dst[8:]
	}
	// The last 1..7 bytes from one field (writeData's).
	if n := len(dst); n > 0 {
		v := r.get(uint(8 * n))
		for i := range dst {
			dst[i] = byte(v)
			v >>= 8
		}
	}
}
