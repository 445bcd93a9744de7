package session

import "unsafe"

// crcWindow is how far back, in moves, the server remembers a CRC for
// SetControl: more than a zone tick's worth at any sane input rate (64
// moves: two seconds at 30 Hz; 32 would skip the check whenever a zone
// lags a second).
const crcWindow = 64

// moveCRC is what SetControl needs of a CRC-carrying move: its sequence
// (low 32 bits: the window spans 64 moves) and the client's CRC.
type moveCRC struct {
	seq uint32
	crc uint32
}

// crcFIFO holds the CRCs of the moves handed to the zone that SetControl
// may still ask for: oldest first, none more than crcWindow moves behind
// the newest, none at or below the newest move the zone reported applied.
// A connection whose zone keeps up holds one to three (a tick's worth: a
// 20 Hz zone against 30 Hz moves), so they live in the Server itself
// (inl); a zone that lags (an overloaded host: its moves wait for their
// time credit) moves them to a slice of their own (spill), which grows on
// use through crcSpillSizes up to crcWindow. Once every crcTrimEvery finds
// the slice shrinks to the smallest of those a quarter above the most held
// in this and the previous period when that is smaller, and goes when inl
// holds that many, so a lag's room goes back after it and steady lag
// allocates nothing. The entries sit from index 0 on, oldest first: the
// ones a push or find drops are at the front, and the rest move down
// (three at most while inline). The client decides which moves carry a
// CRC, but not how many are held: at most crcWindow.
//
// The ring on the heap it replaced (four entries at first) was 32 bytes
// of every connection and a cache miss for each move and each tick's
// find, in a line of its own.
type crcFIFO struct {
	inl [crcInline]moveCRC
	// spill: the first of spillN entries on the heap, nil while the
	// entries fit in inl. A pointer and a length in the word's spare
	// byte, one allocation a resize: a *[]moveCRC was two, the array and
	// a 24-byte slice header (the 24-byte size class), on every
	// connection whose zone lags (most, in cmd/capacity at 1,000).
	spill *moveCRC
	n     uint8 // ≤ crcWindow
	// Sizing by use (trim): the most held in this and the previous
	// period, and the finds in this one.
	peak, peakPrev uint8
	finds          uint8
	spillN         uint8 // ≤ crcWindow
}

// crcInline is how many entries the Server holds itself.
const crcInline = 3

// crcSpillMin is the spill slice's first length (64 bytes).
const crcSpillMin = 8

// crcSpillSizes are the spill slice's lengths, smallest first: each fills
// a size class of the allocator (64 to 256 bytes by 16, then to 512 by
// 32). Powers of two (8 to 64) held a steady lag's entries in up to 2.5
// times their room (a quarter above the peak, then doubled), 113 B a
// player on a node behind at 1,500 (thirty-fifth pass). A push that finds
// the slice full takes the next size (≤ 512 bytes a copy: a lag's onset
// reallocates more often than when it doubled, a steady lag still never).
var crcSpillSizes = [...]uint8{crcSpillMin, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 36, 40, 44, 48, 52, 56, 60, crcWindow}

// crcSpillFor is the smallest of crcSpillSizes of at least n entries
// (n ≤ crcWindow).
func crcSpillFor(n int) int {
	for _, z := range crcSpillSizes {
		if int(z) >= n {
			return int(z)
		}
	}
	return crcWindow
}

// crcTrimEvery is the sizing period in finds (zone ticks with a new
// applied move: about 3 s at 20 Hz).
const crcTrimEvery = 64

// entries is where the entries are: inl, or the spill slice (its whole
// length; the first n are held).
func (q *crcFIFO) entries() []moveCRC {
	if q.spill != nil {
		return unsafe.Slice(q.spill, q.spillN)
	}
	return q.inl[:]
}

// drop forgets the k oldest of the entries b (entries()[:n]), moving the
// rest down: a loop, not a copy, for the one or two of a zone that keeps
// up (memmove's call cost more than the moves).
func (q *crcFIFO) drop(b []moveCRC, k int) {
	if k == 0 {
		return
	}
	for i := k; i < len(b); i++ {
		b[i-k] = b[i]
	}
	q.n -= uint8(k)
}

// push remembers the CRC of move seq; moves come in sequence order. The
// ones crcWindow or more behind it go.
func (q *crcFIFO) push(seq uint64, crc uint32) {
	s := uint32(seq)
	// A zone that keeps up: room inline and nothing to drop (the oldest
	// within the window), without the slice entries() makes.
	if n := q.n; q.spill == nil && n < crcInline && (n == 0 || s-q.inl[0].seq < crcWindow) {
		q.inl[n] = moveCRC{seq: s, crc: crc}
		q.n = n + 1
		q.peak = max(q.peak, n+1)
		return
	}
	b := q.entries()
	k := 0
	for k < int(q.n) && s-b[k].seq >= crcWindow {
		k++
	}
	q.drop(b[:q.n], k)
	if int(q.n) == len(b) {
		q.resize(crcSpillFor(len(b) + 1)) // the next size
		b = q.entries()
	}
	b[q.n] = moveCRC{seq: s, crc: crc}
	q.n++
	q.peak = max(q.peak, q.n)
}

// resize moves the entries to inl (n ≤ crcInline) or to a spill slice of
// n (n ≥ q.n, one of crcSpillSizes; at most crcWindow: push dropped every
// entry crcWindow behind, so a full slice of that size is never asked to
// grow).
func (q *crcFIFO) resize(n int) {
	old := q.entries()[:q.n]
	if n <= crcInline {
		copy(q.inl[:], old)
		q.spill, q.spillN = nil, 0
		return
	}
	nb := make([]moveCRC, n)
	copy(nb, old)
	q.spill, q.spillN = &nb[0], uint8(n)
}

// trim applies crcTrimEvery's rule and starts a new period.
func (q *crcFIFO) trim() {
	peak := int(max(q.peak, q.peakPrev))
	q.peakPrev, q.peak, q.finds = q.peak, q.n, 0
	if q.spill == nil {
		return
	}
	if peak <= crcInline {
		q.resize(crcInline)
		return
	}
	want := crcSpillFor(min(peak+peak/4+1, crcWindow))
	if want < int(q.spillN) && int(q.n) <= want {
		q.resize(want)
	}
}

// find returns the CRC of move seq, the newest move the zone applied, if
// it carried one and is within crcWindow of the newest. It and the
// entries below it go: the zone reports its moves in order, and
// SetControl asks once per move (a repeated report returns before).
func (q *crcFIFO) find(seq uint64) (uint32, bool) {
	s := uint32(seq)
	// A zone that keeps up reports the newest move it got, the newest
	// held: it and every one below it go, without entries()' slice and
	// the drop loop.
	if n := q.n; q.spill == nil && n > 0 && q.inl[n-1].seq == s {
		crc := q.inl[n-1].crc
		q.n = 0
		if q.finds++; q.finds >= crcTrimEvery {
			q.trim()
		}
		return crc, true
	}
	b := q.entries()[:q.n]
	k := 0
	for k < len(b) && int32(b[k].seq-s) < 0 {
		k++
	}
	var crc uint32
	ok := k < len(b) && b[k].seq == s
	if ok {
		crc = b[k].crc
		k++
	}
	q.drop(b, k)
	if q.finds++; q.finds >= crcTrimEvery {
		q.trim()
	}
	return crc, ok
}
