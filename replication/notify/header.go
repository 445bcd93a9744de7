package notify

import (
	"math/bits"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// PacketType is the 2-bit type tag that opens every header (checklist PN-13).
type PacketType uint8

const (
	TypeData       PacketType = 0 // payload sections follow the header
	TypeAck        PacketType = 1 // ack-only / keepalive: no payload, still consumes a sequence number
	TypeDisconnect PacketType = 2 // payload: reason (upper layer)
	typeReserved   PacketType = 3 // decoding it is an error (ErrBadType)
)

func (t PacketType) String() string {
	switch t {
	case TypeData:
		return "data"
	case TypeAck:
		return "ack"
	case TypeDisconnect:
		return "disconnect"
	}
	return "reserved"
}

// maxBitmapWords holds the largest report range: AckWindow-1 ≤ MaxAckWindow-1 bits.
const maxBitmapWords = MaxAckWindow / 64

// Header is a decoded packet header: what ReadHeader found and Accept commits.
// Type and Seq are for the caller (Seq, reconstructed to 64 bits, is also the
// future AEAD nonce); the ack section stays unexported. The zero Header is not
// accepted (ErrNotDecoded). It is a plain value: copying it is cheap enough
// (about 170 bytes) and never allocates.
type Header struct {
	Type PacketType
	Seq  uint64

	valid  bool                   // set by a successful ReadHeader
	hasAck bool                   // ack section present, decoded against state and to be processed
	allOK  bool                   // every sequence in [R, L-1] accepted: no bitmap, no horizon
	delay  uint8                  // delay code, delayNone for no RTT sample
	nbits  uint16                 // m = L-R: bitmap bits
	ackL   uint64                 // L: newest of our sequences the peer accepted
	ackH   uint64                 // H: the peer's receive horizon (valid when !allOK)
	bitmap [maxBitmapWords]uint64 // bit i = the peer accepted L-1-i
}

// bitmapBit reports bit i of the ack bitmap.
// HasAck reports whether the header carried an ack section that
// AcceptHeader applies (the newest packet's; an older header's ack is read
// past but not used). Only such a header resolves packets as delivered.
func (h *Header) HasAck() bool { return h.hasAck }

func (h *Header) bitmapBit(i uint64) bool {
	return h.bitmap[i>>6]>>(i&63)&1 == 1
}

// Sequence-number width ladder (our sequence, reconstructed by the peer):
// unary code '0' → 7 bits, '10' → 16, '11' → 32, in stream order.
const (
	seqBits0 = 7
	seqBits1 = 16
	seqBits2 = 32
)

// seqWidth picks the narrowest width whose half-range exceeds span, where span
// = seq − largestAcked (QUIC, RFC 9000 §17.1: 2^(w-1) > seq − largest acked).
// code/codeLen is the unary prefix as a stream field.
func seqWidth(span uint64) (w uint, code uint64, codeLen uint, ok bool) {
	switch {
	case span < 1<<(seqBits0-1):
		return seqBits0, 0, 1, true
	case span < 1<<(seqBits1-1):
		return seqBits1, 1, 2, true // bits 1,0
	case span < 1<<(seqBits2-1):
		return seqBits2, 3, 2, true // bits 1,1
	}
	return 0, 0, 0, false
}

// Ack-field width ladder (L, the newest of the peer's sequences we accepted):
// '0' → 5 bits, '10' → 10, '110' → 32, '111' → no ack section at all.
const (
	ackBits0 = 5
	ackBits1 = 10
	ackBits2 = 32
)

// ackWidth picks the narrowest width with 2^w > span = L − confirmedL.
func ackWidth(span uint64) (w uint, code uint64, codeLen uint, ok bool) {
	switch {
	case span < 1<<ackBits0:
		return ackBits0, 0, 1, true
	case span < 1<<ackBits1:
		return ackBits1, 1, 2, true // bits 1,0
	case span < 1<<ackBits2:
		return ackBits2, 3, 3, true // bits 1,1,0
	}
	return 0, 0, 0, false
}

const ackNoneCode, ackNoneLen = 7, 3 // bits 1,1,1

// reconstructSeq expands the low w bits of a sequence number to the 64-bit value
// closest to expected (the receiver's newest accepted + 1), RFC 9000 Appendix
// A.3, written without signed arithmetic so it is wrap-safe at every width and
// never underflows near 0. The result lies in (expected − 2^(w-1), expected + 2^(w-1)].
func reconstructSeq(expected, trunc uint64, w uint) uint64 {
	win := uint64(1) << w
	hwin := win >> 1
	cand := expected&^(win-1) | trunc
	switch {
	case cand+hwin <= expected && cand <= ^uint64(0)-win:
		return cand + win
	case cand > expected+hwin && cand >= win:
		return cand - win
	}
	return cand
}

// reconstructAck expands the low w bits of an acknowledged sequence to the
// smallest value ≥ ref with those bits. ref is the decoder's largest L so far
// (or its first sequence); the encoder guarantees L ∈ [ref, ref + 2^w).
func reconstructAck(ref, trunc uint64, w uint) uint64 {
	mask := uint64(1)<<w - 1
	cand := ref&^mask | trunc
	if cand < ref {
		cand += mask + 1
	}
	return cand
}

// Ack-delay code (4 bits): code c < 15 means c·(c+3)/2 ms (0, 2, 5, 9, 14, 20,
// 27, 35, 44, 54, 65, 77, 90, 104, 119); 15 means ≥ 128 ms or unknown: no RTT
// sample. Steps grow with the value (≈ √(2v)), so short delays are precise.
const (
	delayNone     = 15
	delayCodeBits = 4
	delayMax      = 128 * time.Millisecond
)

func delayValue(c uint8) time.Duration {
	return time.Duration(int(c)*(int(c)+3)/2) * time.Millisecond
}

// encodeDelay quantizes d to a code. Between two table values it rounds up
// with probability proportional to the position (dithering driven by a hash of
// the packet's own sequence number), so the decoded delay is unbiased on
// average and the smoothed RTT does not inherit a quantization bias. This is
// the encoder's choice; decoders only need delayValue.
func encodeDelay(d time.Duration, seq uint64) uint8 {
	if d <= 0 {
		return 0
	}
	if d >= delayMax {
		return delayNone
	}
	// The code whose interval holds d, from its whole milliseconds: every
	// table value is a whole number of milliseconds, so lo ≤ d < hi holds
	// exactly when it holds for ⌊d⌋ ms (a search of the 15 values was
	// ≈ 130 instructions a header, every header carrying an ack).
	c := delayCodeAt[uint64(d)/uint64(time.Millisecond)&(delayMaxMs-1)]
	if c == delayNone-1 {
		return c // [119 ms, 128 ms): no upper neighbour to dither towards
	}
	lo, hi := delayValue(c), delayValue(c+1)
	frac := uint64(d-lo) << 32 / uint64(hi-lo) // < 2^32
	if splitmix64(seq)>>32 < frac {
		return c + 1
	}
	return c
}

// delayMaxMs is delayMax in whole milliseconds (a power of two: the
// index mask of delayCodeAt).
const delayMaxMs = uint64(delayMax / time.Millisecond)

// delayCodeAt[m] is the code c < delayNone with delayValue(c) ≤ m ms <
// delayValue(c+1) (the last code from 119 ms up).
var delayCodeAt = func() (t [delayMaxMs]uint8) {
	c := uint8(0)
	for m := range t {
		for c < delayNone-1 && delayValue(c+1) <= time.Duration(m)*time.Millisecond {
			c++
		}
		t[m] = c
	}
	return t
}()

// The mask in encodeDelay is the table's bound only if delayMax is a
// power of two of milliseconds: this fails to compile otherwise.
var _ = [1]struct{}{}[delayMaxMs&(delayMaxMs-1)]

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// bitWriter threads the first write error through a header so the encoder
// reads straight; it lives on the stack. It gathers the fields in a
// register and writes them to w in one WriteBits call per 56 bits (flush):
// a short header is 20–30 bits of six to ten fields, and a call per field
// was ≈ 45 instructions each (WriteBits is not inlined). Every field is at
// most 32 bits wide (seqBits2, ackBits2; the gamma codes at most 2·11+1
// for values ≤ MaxAckWindow), and v must fit in n bits, as for WriteBits:
// a wider v makes the flush fail with bitstream.ErrWidth.
type bitWriter struct {
	w   *bitstream.Writer
	err error
	acc uint64 // fields not yet written, the first in the low bits
	n   uint   // bits in acc
}

func (b *bitWriter) bits(v uint64, n uint) {
	if b.n+n > 56 {
		b.flush()
	}
	b.acc |= v << b.n
	b.n += n
}

// flush writes the gathered bits; the header is complete only after it.
// After an error nothing more is written (the caller rewinds w).
func (b *bitWriter) flush() {
	if b.n > 0 && b.err == nil && !b.w.TryWriteBits(b.acc, b.n) {
		b.err = b.w.WriteBits(b.acc, b.n)
	}
	b.acc, b.n = 0, 0
}

// gamma writes v ≥ 1 as an Elias-gamma code in stream order: z = ⌊log2 v⌋ zero
// bits, a one bit, then the low z bits of v as a z-bit field (the same layout
// as bitstream.WriteGamma, kept here so the notify wire format does not move
// with that package).
func (b *bitWriter) gamma(v uint64) {
	z := uint(bits.Len64(v)) - 1
	b.bits(1<<z, z+1)
	b.bits(v&^(1<<z), z)
}

// bitReader is bitWriter's twin for decoding.
type bitReader struct {
	r   *bitstream.Reader
	err error
}

func (b *bitReader) bits(n uint, field string) uint64 {
	if b.err != nil || n == 0 {
		return 0
	}
	if v, ok := b.r.TryReadBits(n); ok {
		return v // inlined: no call for the common case
	}
	v, err := b.r.ReadBits(n, field)
	b.err = err
	return v
}

func (b *bitReader) flag(field string) bool {
	if b.err != nil {
		return false
	}
	v, err := b.r.ReadFlag(field)
	b.err = err
	return v
}

// gamma reads a code written by bitWriter.gamma whose value may not exceed
// max; a longer prefix is rejected after at most bits.Len(max)+1 bits, so
// garbage cannot make the decoder scan.
func (b *bitReader) gamma(max uint64, field string) uint64 {
	zmax := uint(bits.Len64(max)) - 1
	z := uint(0)
	for !b.flag(field) {
		if b.err != nil {
			return 0
		}
		if z++; z > zmax {
			b.err = ErrBadAck
			return 0
		}
	}
	v := uint64(1)<<z | b.bits(z, field)
	if b.err == nil && v > max {
		b.err = ErrBadAck
	}
	return v
}
