package notify

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// checkInvariants verifies the internal consistency of c (PN-10 and the
// receiver's window invariants). It is the oracle of every property and fuzz test.
func checkInvariants(c *Conn) error {
	st := c.Stats() // Sent is nextSeq − localStart
	if st.Sent != st.Delivered+st.Dropped+uint64(c.InFlight()) {
		return fmt.Errorf("PN-10: sent %d != delivered %d + dropped %d + in flight %d",
			st.Sent, st.Delivered, st.Dropped, c.InFlight())
	}
	head, firstPending := c.seqOf(c.headLo), c.seqOf(c.firstPendingLo)
	if c.inRing() > uint64(c.cfg.MaxInFlight) {
		return fmt.Errorf("records [%d, %d) exceed MaxInFlight %d", head, c.nextSeq, c.cfg.MaxInFlight)
	}
	if firstPending < head {
		return fmt.Errorf("firstPending %d below head %d", firstPending, head)
	}
	first, pending := c.nextSeq, 0
	for s := head; s < c.nextSeq; s++ {
		if c.recs[s&c.recMask()].state == recPending {
			first = min(first, s)
			pending++
		}
	}
	if pending != c.InFlight() {
		return fmt.Errorf("InFlight %d, records say %d", c.InFlight(), pending)
	}
	if first != firstPending {
		return fmt.Errorf("firstPending %d, records say %d", firstPending, first)
	}
	if head < c.nextSeq && c.recs[head&c.recMask()].state != recPending && head == firstPending {
		return fmt.Errorf("head %d resolved but equals firstPending", head)
	}
	if c.hasPeerL && c.peerL >= c.nextSeq {
		return fmt.Errorf("peer acked %d, never sent (next %d)", c.peerL, c.nextSeq)
	}
	if c.hasRx() {
		if c.rxHBack > uint8(c.reorderK()-1) {
			return fmt.Errorf("horizon %d more than K-1 below newest %d", c.rxH(), c.rxL)
		}
		if !c.accepted(c.rxL) {
			return fmt.Errorf("newest %d not marked accepted", c.rxL)
		}
		if x := c.nextMissing(c.rxH(), c.rxL); !c.gapOpen && x != c.rxL {
			return fmt.Errorf("%d in [H %d, L %d) missing with no gap marked open", x, c.rxH(), c.rxL)
		}
		if c.confirmedL > c.rxL {
			return fmt.Errorf("confirmed L %d beyond newest %d", c.confirmedL, c.rxL)
		}
	}
	if c.confirmedFBack > uint8(c.reorderK()) {
		return fmt.Errorf("confirmed F %d more than K below confirmed L %d + 1", c.confirmedF(), c.confirmedL)
	}
	return nil
}

// snapshot captures the protocol state (not Stats) to prove "no state change".
type snapshot struct {
	scalars Conn
	recs    []record
	bits    []uint64
	gaps    []uint64
}

func takeSnapshot(c *Conn) snapshot {
	s := snapshot{scalars: *c}
	s.scalars.stats, s.scalars.rare, s.scalars.rttSamples = connStats{}, nil, 0
	s.scalars.recs, s.scalars.rxBits = nil, nil
	s.recs = append([]record(nil), c.recs...)
	s.bits = append([]uint64(nil), c.rxBits...)
	s.gaps = append([]uint64(nil), c.gaps()...)
	return s
}

func (s snapshot) equal(o snapshot) bool {
	return reflect.DeepEqual(s, o)
}

// endpoint wraps a Conn with the bookkeeping the tests check against: which of
// the peer's packets it accepted and which fates it reported.
type endpoint struct {
	name     string
	c        *Conn
	w        bitstream.Writer
	r        bitstream.Reader
	buf      [512]byte
	accepted map[uint64]bool // peer sequences accepted
	fates    []Fate
	nextFate uint64
	fateOf   map[uint64]bool // our sequence → delivered
	peer     *endpoint       // when set, every fate and accept is checked against it at once
	arrived  map[uint64]bool // peer sequences that reached us at least once (accepted or not)
	pops     int
}

// link makes a and b check each other incrementally (property tests).
func link(a, b *endpoint) { a.peer, b.peer = b, a }

// exempt reports whether a documented corner (WindowEvicted at the receiver,
// a forced drop at the sender) allows a false drop of a's packets.
func exempt(a, b *endpoint) bool {
	return b.c.Stats().WindowEvicted > 0 || a.c.Stats().ForcedDrops > 0
}

func newEndpoint(t testing.TB, name string, cfg Config, localStart, peerStart uint64) *endpoint {
	t.Helper()
	c, err := newConn(cfg, localStart, peerStart)
	if err != nil {
		t.Fatal(err)
	}
	return &endpoint{name: name, c: c, accepted: map[uint64]bool{}, arrived: map[uint64]bool{}, nextFate: localStart, fateOf: map[uint64]bool{}}
}

// send writes a packet of type typ and returns a copy of its bytes.
func (e *endpoint) send(t testing.TB, now time.Duration, typ PacketType) (uint64, []byte) {
	t.Helper()
	e.w.Reset(e.buf[:])
	seq, err := e.c.WriteHeader(&e.w, typ, now)
	if err != nil {
		t.Fatalf("%s: WriteHeader: %v", e.name, err)
	}
	if err := e.w.WriteBits(seq, 64); err != nil {
		t.Fatalf("%s: payload: %v", e.name, err)
	}
	return seq, append([]byte(nil), e.w.Bytes()...)
}

// recv feeds p to the endpoint: ReadHeader, payload check, Accept. It returns
// the rejection error, if any; a payload mismatch is fatal.
func (e *endpoint) recv(t testing.TB, now time.Duration, p []byte) (uint64, error) {
	t.Helper()
	e.r.Reset(p)
	h, err := e.c.ReadHeader(&e.r)
	if err == nil || expectedRejection(err) {
		e.arrived[h.Seq] = true
	}
	if err != nil {
		return h.Seq, err
	}
	got, perr := e.r.ReadBits(64, "test.seq")
	if perr != nil || got != h.Seq {
		t.Fatalf("%s: header decoded seq %d but payload says %d (err %v): header parse misaligned or misreconstructed", e.name, h.Seq, got, perr)
	}
	if err := e.c.Accept(h, now); err != nil {
		return h.Seq, err
	}
	if e.accepted[h.Seq] {
		t.Fatalf("%s: accepted seq %d twice", e.name, h.Seq)
	}
	if e.peer != nil {
		if d, ok := e.peer.fateOf[h.Seq]; ok && !d && !exempt(e.peer, e) {
			t.Fatalf("%s: accepted seq %d after %s reported it dropped", e.name, h.Seq, e.peer.name)
		}
	}
	e.accepted[h.Seq] = true
	// Received is derived (received), not counted: it must equal the
	// packets this endpoint saw accepted.
	if n := e.c.received(); n != uint64(len(e.accepted)) {
		t.Fatalf("%s: Received %d, accepted %d", e.name, n, len(e.accepted))
	}
	return h.Seq, nil
}

// pop collects fates and checks order and uniqueness. It takes them with
// PopFates or, every other call, one at a time with PopFate: the property
// tests hold both to the same rules.
func (e *endpoint) pop(t testing.TB) []Fate {
	t.Helper()
	n := len(e.fates)
	e.pops++
	if e.pops%2 == 0 {
		e.fates = e.c.PopFates(e.fates)
	} else {
		for f, ok := e.c.PopFate(); ok; f, ok = e.c.PopFate() {
			e.fates = append(e.fates, f)
		}
	}
	for _, f := range e.fates[n:] {
		if f.Seq != e.nextFate {
			t.Fatalf("%s: fate for seq %d, want %d (send order, exactly once)", e.name, f.Seq, e.nextFate)
		}
		e.nextFate++
		e.fateOf[f.Seq] = f.Delivered
		if e.peer != nil {
			if acc := e.peer.accepted[f.Seq]; f.Delivered && !acc {
				t.Fatalf("%s: seq %d reported delivered but %s never accepted it", e.name, f.Seq, e.peer.name)
			} else if !f.Delivered && acc && !exempt(e, e.peer) {
				t.Fatalf("%s: seq %d reported dropped but %s accepted it", e.name, f.Seq, e.peer.name)
			}
		}
	}
	return e.fates[n:]
}

// expectedRejection reports whether err is one a healthy connection produces
// for network duplicates and late packets.
func expectedRejection(err error) bool {
	return errors.Is(err, ErrDuplicate) || errors.Is(err, ErrStale)
}

// checkAgreement verifies, for every fate a has popped, that it matches what b
// accepted: no false delivered ever; no false dropped unless b reports a
// documented corner (WindowEvicted) or a forced drop happened.
func checkAgreement(t testing.TB, a, b *endpoint) {
	t.Helper()
	exempt := exempt(a, b)
	for _, f := range a.fates {
		acc := b.accepted[f.Seq]
		if f.Delivered && !acc {
			t.Fatalf("%s: seq %d reported delivered but %s never accepted it", a.name, f.Seq, b.name)
		}
		if !f.Delivered && acc && !exempt {
			t.Fatalf("%s: seq %d reported dropped but %s accepted it", a.name, f.Seq, b.name)
		}
	}
}

func mustInvariants(t testing.TB, es ...*endpoint) {
	t.Helper()
	for _, e := range es {
		if err := checkInvariants(e.c); err != nil {
			t.Fatalf("%s: %v", e.name, err)
		}
	}
}

// wire is a tiny deterministic network for unit tests: packets scheduled at
// absolute virtual times, delivered in (time, send order) order.
type wire struct {
	q     []wirePkt
	order int
}

type wirePkt struct {
	at    time.Duration
	order int
	to    *endpoint
	seq   uint64
	p     []byte
}

func (w *wire) put(at time.Duration, to *endpoint, seq uint64, p []byte) {
	w.order++
	w.q = append(w.q, wirePkt{at: at, order: w.order, to: to, seq: seq, p: p})
}

// next removes and returns the earliest packet due at or before now.
func (w *wire) next(now time.Duration) (wirePkt, bool) {
	best := -1
	for i, p := range w.q {
		if p.at <= now && (best < 0 || p.at < w.q[best].at || p.at == w.q[best].at && p.order < w.q[best].order) {
			best = i
		}
	}
	if best < 0 {
		return wirePkt{}, false
	}
	p := w.q[best]
	w.q = append(w.q[:best], w.q[best+1:]...)
	return p, true
}

// deliverAll delivers everything due by now, failing on unexpected errors.
func (w *wire) deliverAll(t testing.TB, now time.Duration) {
	t.Helper()
	for {
		p, ok := w.next(now)
		if !ok {
			return
		}
		if _, err := p.to.recv(t, now, p.p); err != nil && !expectedRejection(err) {
			t.Fatalf("%s: seq %d: %v", p.to.name, p.seq, err)
		}
	}
}

// setRxH sets the horizon of a Conn whose rxL a test has set.
func (c *Conn) setRxH(h uint64) { c.rxHBack = uint8(c.rxL - h) }

// setConfirmed sets confirmedL and confirmedF (at most K apart).
func (c *Conn) setConfirmed(l, f uint64) { c.confirmedL, c.confirmedFBack = l, uint8(l+1-f) }
