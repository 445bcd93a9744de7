package event

import (
	"math/bits"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// Field widths of the event section (docs/protocol.md §4).
const (
	classBits   = 2
	fkindBits   = 2  // ordered fragment kind: 0 first, 1 middle, 2 last
	totalBits   = 16 // fragment "total − 1": events up to 64 KiB
	offsetBits  = 16 // unordered fragment byte offset
	versionBits = 16 // staggered version

	// staggerStale is how far behind the last delivered version a staggered
	// version may be and still be recognised as older (and ignored); anything
	// else that differs counts as newer. A copy can only be older than what the
	// receiver has by the number of packets that overtook it (at most notify's
	// ReorderThreshold−1 ≤ 31), so 1024 leaves a wide margin, and a receiver
	// that missed up to 64,511 versions of a key still resynchronises at once.
	staggerStale = 1024
)

// unitKind says which part of an event a unit (one record of a guaranteed
// event) carries.
type unitKind uint8

const (
	kindWhole unitKind = iota
	kindFirst
	kindMiddle
	kindLast
)

// idWidth is the wire width of a truncated event id: log2(m)+1, so that the
// receiver's half-range window [ref−m, ref+m) covers every id an honest sender
// can have in flight (docs: "Id encoding and reconstruction").
func idWidth(m int) uint { return uint(bits.Len(uint(m))) }

// reconstruct returns the id with low b bits t closest to ref: the unique
// value in [ref − 2^(b−1), ref + 2^(b−1)) (clamped at 0 from below).
func reconstruct(ref, t uint64, b uint) uint64 {
	win := uint64(1) << b
	half := win >> 1
	cand := ref&^(win-1) | t
	switch {
	case cand+half < ref:
		cand += win
	case cand >= ref+half && cand >= win:
		cand -= win
	}
	return cand
}

// gammaLen is the size of a payload length n on the wire: γ(n+1).
func gammaLen(n int) int { return bitstream.GammaBits(uint64(n) + 1) }

// fieldWriter writes a record's fields and keeps the first error, so a record
// is checked once (every record is sized before it is written, so an error
// means the caller's writer was already failing).
type fieldWriter struct {
	w   *bitstream.Writer
	err error
}

func (e *fieldWriter) keep(err error) {
	if e.err == nil {
		e.err = err
	}
}

func (e *fieldWriter) flag(b bool) { e.keep(e.w.WriteFlag(b)) }

// bits writes v in n bits; n = 0 writes nothing (an implied field).
func (e *fieldWriter) bits(v uint64, n uint) {
	if n > 0 {
		e.keep(e.w.WriteBits(v, n))
	}
}

func (e *fieldWriter) gamma(v uint64) { e.keep(e.w.WriteGamma(v)) }

// payload writes γ(len+1) and the bytes.
func (e *fieldWriter) payload(p []byte) {
	e.gamma(uint64(len(p)) + 1)
	if len(p) > 0 {
		e.keep(e.w.WriteBytes(p))
	}
}
