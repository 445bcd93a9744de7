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
// array per connection was 512 bytes of the Server. Once grown it stays,
// so the steady state allocates nothing. The client decides which moves
// carry a CRC, but not how many the ring holds: at most crcWindow.
type crcFIFO struct {
	buf     []moveCRC // ring, len a power of two; nil until the first CRC
	head, n uint32
}

// crcMin is the ring's first size (32 bytes).
const crcMin = 4

func (q *crcFIFO) at(i uint32) *moveCRC { return &q.buf[(q.head+i)&uint32(len(q.buf)-1)] }

func (q *crcFIFO) pop() { q.head, q.n = (q.head+1)&uint32(len(q.buf)-1), q.n-1 }

// push remembers the CRC of move seq; moves come in sequence order. The
// ones crcWindow or more behind it go.
func (q *crcFIFO) push(seq uint64, crc uint32) {
	s := uint32(seq)
	for q.n > 0 && s-q.at(0).seq >= crcWindow {
		q.pop()
	}
	if q.n == uint32(len(q.buf)) {
		q.grow()
	}
	*q.at(q.n) = moveCRC{seq: s, crc: crc}
	q.n++
}

// grow doubles the ring (at most crcWindow: push dropped every entry
// crcWindow behind, so a full ring of that size cannot be asked to grow).
func (q *crcFIFO) grow() {
	n := max(crcMin, 2*len(q.buf))
	nb := make([]moveCRC, n)
	for i := range q.n {
		nb[i] = *q.at(i)
	}
	q.buf, q.head = nb, 0
}

// find returns the CRC of move seq, the newest move the zone applied, if
// it carried one and is within crcWindow of the newest. Entries below seq
// go: the zone reports its moves in order, so none is asked for again.
func (q *crcFIFO) find(seq uint64) (uint32, bool) {
	s := uint32(seq)
	for q.n > 0 && int32(q.at(0).seq-s) < 0 {
		q.pop()
	}
	if q.n > 0 && q.at(0).seq == s {
		return q.at(0).crc, true
	}
	return 0, false
}
