package session

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
// the newest, none below the newest move the zone reported applied. A
// connection whose zone keeps up holds two or three (a tick's worth), so
// the ring starts at crcMin and doubles on use up to crcWindow; a 64-slot
// array per connection was 512 bytes of the Server. A zone that lags (an
// overloaded host: its moves wait for their time credit) grows it; once
// every crcTrimEvery finds it shrinks to a quarter above the most it held
// in this and the previous period, when that halves it (notify's sender
// ring does the same), so a lag's room goes back after it and steady lag
// allocates nothing. The client decides which moves carry a CRC, but not
// how many the ring holds: at most crcWindow.
type crcFIFO struct {
	buf     []moveCRC // ring, len a power of two; nil until the first CRC
	head, n uint8     // ≤ crcWindow
	// Sizing by use (trim): the most held in this and the previous
	// period, and the finds in this one.
	peak, peakPrev uint8
	finds          uint8
}

// crcTrimEvery is the ring's sizing period in finds (zone ticks with a new
// applied move: about 3 s at 20 Hz).
const crcTrimEvery = 64

// crcMin is the ring's first size (32 bytes).
const crcMin = 4

func (q *crcFIFO) at(i uint8) *moveCRC { return &q.buf[(int(q.head)+int(i))&(len(q.buf)-1)] }

func (q *crcFIFO) pop() { q.head, q.n = uint8((int(q.head)+1)&(len(q.buf)-1)), q.n-1 }

// push remembers the CRC of move seq; moves come in sequence order. The
// ones crcWindow or more behind it go.
func (q *crcFIFO) push(seq uint64, crc uint32) {
	s := uint32(seq)
	for q.n > 0 && s-q.at(0).seq >= crcWindow {
		q.pop()
	}
	if int(q.n) == len(q.buf) {
		q.resize(max(crcMin, 2*len(q.buf)))
	}
	*q.at(q.n) = moveCRC{seq: s, crc: crc}
	q.n++
	q.peak = max(q.peak, q.n)
}

// resize moves the entries to a ring of n (n ≥ q.n; at most crcWindow:
// push dropped every entry crcWindow behind, so a full ring of that size
// is never asked to grow).
func (q *crcFIFO) resize(n int) {
	nb := make([]moveCRC, n)
	for i := range q.n {
		nb[i] = *q.at(i)
	}
	q.buf, q.head = nb, 0
}

// trim applies crcTrimEvery's rule and starts a new period.
func (q *crcFIFO) trim() {
	peak := int(max(q.peak, q.peakPrev))
	q.peakPrev, q.peak, q.finds = q.peak, q.n, 0
	want := crcMin
	for want < peak+peak/4+1 {
		want *= 2
	}
	if 2*want <= len(q.buf) && int(q.n) <= want {
		q.resize(want)
	}
}

// find returns the CRC of move seq, the newest move the zone applied, if
// it carried one and is within crcWindow of the newest. Entries below seq
// go: the zone reports its moves in order, so none is asked for again.
func (q *crcFIFO) find(seq uint64) (uint32, bool) {
	s := uint32(seq)
	for q.n > 0 && int32(q.at(0).seq-s) < 0 {
		q.pop()
	}
	if q.finds++; q.finds >= crcTrimEvery && q.buf != nil {
		q.trim()
	}
	if q.n > 0 && q.at(0).seq == s {
		return q.at(0).crc, true
	}
	return 0, false
}
