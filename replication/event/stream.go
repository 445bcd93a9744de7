package event

import (
	"math/bits"
	"unsafe"
)

// pendEvent is a guaranteed event not yet cut entirely into units: its
// payload (a slab from the arena, as unit's pay and size keep it: 24
// bytes, not 40, so a ring of two is the 48-byte size class, not the
// 80-byte one), the bytes already cut into units and the units cut so far.
type pendEvent struct {
	pay   *byte
	size  int32
	off   int32
	index int32
}

// unit is one record of a guaranteed event on the wire (the whole event or one
// fragment) with its own id. Its transmission state:
//
//	queued ──Write──▶ in flight (refs > 0) ──delivered fate──▶ acked ──(refs = 0, lowest)──▶ freed
//	                      │  ▲
//	 dropped fate of this │  │Write (resend, front of the lane)
//	 round, none delivered▼  │
//	                    needs resend
//
// A round is one transmission and its redundant copies; first is its first
// packet. The first carrier of the round reported dropped requeues the unit:
// its later copies, sent a packet interval or two after it, are covered by
// the same ack and are lost too unless notify already knows one delivered
// (Sender.AckDelivered acknowledges the unit then, though that fate waits
// behind the older packet's), and waiting for their own verdicts would cost
// those intervals again. Drops of an older round's carriers only release
// their references.
type unit struct {
	// pay and size are the event's payload, a slab from the arena
	// (arena.get(size): its capacity follows from its length) shared by
	// all its fragments: a pointer and a length, not a slice header, so a
	// unit is 48 bytes, not 56 (a ring of two the 96-byte size class, not
	// the 112-byte one, held by every connection with an event in
	// flight). payload makes the slice again.
	pay     *byte
	lastSeq uint64 // newest packet it was written in
	first   uint64 // first packet of its current round
	size    int32  // len of the payload
	off, n  int32  // this unit's bytes: payload()[off : off+n]
	kind    unitKind
	acked   bool   // a packet carrying it was delivered
	copies  uint8  // packets it was written in since its (re)transmission began
	index   uint16 // fragment index (unordered records carry it)
	refs    uint16 // packets carrying it whose fate is unknown
}

// payload is the event's payload (nil when empty).
func (u *unit) payload() []byte { return unsafe.Slice(u.pay, u.size) }

// sendStream is the sender half of one ordered lane or of the unordered
// stream: a FIFO of events waiting to be cut, and a ring of units with ids in
// [base, next). Units are freed strictly from base upward, and only once
// acknowledged and carried by no packet in flight, which is what keeps every id
// on the wire within MaxInFlightPerLane of the receiver's window
// (docs: "Id encoding and reconstruction").
type sendStream struct {
	pend     []pendEvent // ring
	pendHead int32
	pendN    int32

	held int32 // events queued or with unfreed units (≤ MaxInFlightPerLane)

	base, next uint64
	units      []unit   // ring over [base, next); len a power of two ≥ minUnits, or nil while idle
	resend     []uint64 // bitmap over ring positions: unit needs a (re)transmission
	resendN    int32
	partials   int32 // unordered: fragmented events with unfreed units (≤ MaxPartial)

	pktLast uint64 // id of its latest record in the packet being written (Sender.inPkt)

	// Idle release (Sender.trim): used is set when a unit is cut, idle
	// counts the trims since the stream last held or cut anything.
	used bool
	idle uint8
}

// streamRef is a Sender's handle on one stream: the stream while it holds
// something, or, while it is idle (Sender.releaseIdle), only its next id —
// 16 bytes instead of the 128 of a sendStream for every lane a connection
// ever used.
type streamRef struct {
	st   *sendStream // nil: idle or never used
	next uint64      // the stream's next id while st is nil (base == next)
}

// The rings of a stream start small and double on use (a lane that carries
// a few events a second has one or two in flight, and an event waits to be
// cut only until the next packet); a stream that has been idle for
// idleTrims trims gives them back, so a burst does not keep its room for
// the connection's life. The ids (base, next) stay.
const (
	minUnits = 2 // 96 B
	minPend  = 2 // 48 B
)

// release gives back the rings of a stream that holds nothing (the
// smallest to their pools). The resend bitmap of a ring of up to 64 units
// (one word, zero: resendN is 0) stays for the next ring of that size.
func (st *sendStream) release() {
	pendRings.put(st.pend, minPend)
	unitRings.put(st.units, minUnits)
	st.pend, st.pendHead = nil, 0
	st.units = nil
	if len(st.resend) != 1 {
		st.resend = nil
	}
}

// empty reports that the stream holds no event and no unit.
func (st *sendStream) empty() bool {
	return st.held == 0 && st.pendN == 0 && st.base == st.next && st.resendN == 0
}

func (st *sendStream) unit(id uint64) *unit { return &st.units[id&uint64(len(st.units)-1)] }

func (st *sendStream) pushPend(buf []byte) {
	if int(st.pendN) == len(st.pend) {
		n := max(minPend, 2*len(st.pend))
		var p []pendEvent
		if n == minPend {
			p = pendRings.get(n)
		} else {
			p = make([]pendEvent, n)
		}
		for i := range int(st.pendN) {
			p[i] = st.pend[(int(st.pendHead)+i)%len(st.pend)]
		}
		pendRings.put(st.pend, minPend)
		st.pend, st.pendHead = p, 0
	}
	st.pend[(int(st.pendHead)+int(st.pendN))%len(st.pend)] = pendEvent{pay: unsafe.SliceData(buf), size: int32(len(buf))}
	st.pendN++
}

func (st *sendStream) front() *pendEvent { return &st.pend[st.pendHead] }

func (st *sendStream) popPend() {
	st.pend[st.pendHead] = pendEvent{}
	st.pendHead = (st.pendHead + 1) % int32(len(st.pend))
	st.pendN--
}

// room reports whether a new id can be assigned: the ring is grown on demand
// (only when a new high-water mark is reached) up to limit units.
func (st *sendStream) room(limit int) bool {
	span := int(st.next - st.base)
	if span < len(st.units) {
		return true
	}
	if span >= limit {
		return false
	}
	n := max(minUnits, 2*len(st.units))
	if st.units == nil && st.base == st.next { // idle until now: nothing to copy (base == next)
		st.units = unitRings.get(n)
		if len(st.resend) != (n+63)/64 {
			st.resend = make([]uint64, (n+63)/64)
		}
		return true
	}
	u := make([]unit, n)
	rs := make([]uint64, (n+63)/64)
	for id := st.base; id < st.next; id++ {
		p := id & uint64(n-1)
		u[p] = *st.unit(id)
		if st.needsResend(id) {
			rs[p>>6] |= 1 << (p & 63)
		}
	}
	unitRings.put(st.units, minUnits)
	st.units, st.resend = u, rs
	return true
}

func (st *sendStream) needsResend(id uint64) bool {
	p := id & uint64(len(st.units)-1)
	return st.resend[p>>6]&(1<<(p&63)) != 0
}

// setResend returns how it changed resendN (the Sender keeps the sum in
// work).
func (st *sendStream) setResend(id uint64, on bool) int {
	p := id & uint64(len(st.units)-1)
	bit := uint64(1) << (p & 63)
	was := st.resend[p>>6]&bit != 0
	switch {
	case on && !was:
		st.resend[p>>6] |= bit
		st.resendN++
		return 1
	case !on && was:
		st.resend[p>>6] &^= bit
		st.resendN--
		return -1
	}
	return 0
}

// firstResend returns the lowest id ≥ from that needs a transmission.
func (st *sendStream) firstResend(from uint64) (uint64, bool) {
	if st.resendN == 0 {
		return 0, false
	}
	n := uint64(len(st.units))
	mask := n - 1
	for id := max(from, st.base); id < st.next; {
		p := id & mask
		if w := st.resend[p>>6] >> (p & 63); w != 0 {
			id += uint64(bits.TrailingZeros64(w))
			if id < st.next {
				return id, true
			}
			return 0, false
		}
		// To the next word, or, in a ring smaller than a word, to its wrap.
		id += min(64-p&63, n-p)
	}
	return 0, false
}
