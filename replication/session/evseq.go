package session

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/handshake"
)

// Per-player event numbering (docs/protocol.md §7.20). The event layer's
// ids belong to one connection; a client that follows a Redirect or fails
// over must send the ordered events its old connection left unconfirmed
// once more, and the player's zone must drop the ones it applied already.
// So every ordered event also has a number in its lane's per-player
// sequence (1, 2, 3, …), which a continuing client carries from
// connection to connection. Nothing per event goes on the wire: a
// connection's k-th ordered event on lane L is number base_L + k, and a
// continuing client sends the bases (and the numbering's generation) in
// an event base section until the server has them. The server reports
// back, per lane, the newest number the zone applied; the client keeps
// each event until then.

// maxKeptBytes bounds the payload a client keeps for resending after a
// Redirect (events the zone has not reported applied): far more than a
// failover's worth of chat-rate events. Beyond it the oldest are
// forgotten (counted: ClientStats.EventsUnkept); they still arrive on the
// connection they were sent on.
const maxKeptBytes = 256 << 10

// errBadBase: an event base or report section listing a lane twice or out
// of order (the writer lists them in increasing lane order).
var errBadBase = errors.New("session: event numbering section: lanes not increasing")

type keptEvent struct {
	seq     uint64
	payload []byte // a slice of its lane's keptLane.buf
}

// keptLane is one lane's kept events, oldest first: evs[head:], their
// payloads one after the other in buf[bhead:] (each event's payload a
// slice of buf, capacity clipped). Reports drop events from the front;
// sent appends at the back, moving the live ones down to the front when
// the dropped ones are at least half of a full array, else growing it —
// so a client that keeps a few events at a time allocates nothing an
// event (one copy a payload each was an allocation an ordered event,
// 1 in 60 of a loadtest bot's turns).
type keptLane struct {
	evs   []keptEvent
	head  int
	buf   []byte
	bhead int
}

// live is the lane's kept events, oldest first.
func (k *keptLane) live() []keptEvent { return k.evs[k.head:] }

// push keeps payload (copied) as number seq.
func (k *keptLane) push(seq uint64, payload []byte) {
	if len(k.evs) == cap(k.evs) && k.head >= len(k.evs)/2 && k.head > 0 {
		n := copy(k.evs, k.evs[k.head:])
		clear(k.evs[n:])
		k.evs, k.head = k.evs[:n], 0
	}
	if n := len(payload); len(k.buf)+n > cap(k.buf) {
		k.repack(n)
	}
	o := len(k.buf)
	k.buf = append(k.buf, payload...)
	k.evs = append(k.evs, keptEvent{seq: seq, payload: k.buf[o:len(k.buf):len(k.buf)]})
}

// repack makes room for n more payload bytes: the live payloads moved to
// the front of buf when that frees at least half of it, else to a larger
// buf; the kept events' slices follow them.
func (k *keptLane) repack(n int) {
	live := len(k.buf) - k.bhead
	nb := k.buf[:0]
	if live+n > cap(k.buf)/2 {
		nb = make([]byte, 0, max(2*(live+n), 64))
	}
	for i := k.head; i < len(k.evs); i++ {
		p := k.evs[i].payload
		o := len(nb)
		nb = append(nb, p...) // in place: o ≤ p's offset, copy moves down
		k.evs[i].payload = nb[o:len(nb):len(nb)]
	}
	k.buf, k.bhead = nb, 0
}

// pop forgets the oldest kept event.
func (k *keptLane) pop() {
	k.bhead += len(k.evs[k.head].payload)
	k.evs[k.head] = keptEvent{}
	k.head++
	if k.head == len(k.evs) {
		k.evs, k.head, k.buf, k.bhead = k.evs[:0], 0, k.buf[:0], 0
	}
}

// clientNumbering is the client's side: the numbers it gave, the events
// not yet reported applied, and this connection's bases.
type clientNumbering struct {
	gen      uint64
	next     []uint64 // per lane: the newest number given
	base     []uint64 // per lane: this connection's base
	applied  []uint64 // per lane: the newest the server reported applied
	kept     []keptLane
	keptSize int
	unkept   uint64
	// sendBase: this connection continues a numbering, so its data
	// packets carry the event base section until one of them is
	// delivered (baseFrom: the first that carried it).
	sendBase bool
	baseFrom uint64
	resent   uint64
}

func (n *clientNumbering) init(lanes int) {
	n.next = make([]uint64, lanes)
	n.base = make([]uint64, lanes)
	n.applied = make([]uint64, lanes)
	n.kept = make([]keptLane, lanes)
}

// sent numbers an ordered event the sender took and keeps it.
func (n *clientNumbering) sent(lane int, payload []byte) {
	n.next[lane]++
	n.kept[lane].push(n.next[lane], payload)
	n.keptSize += len(payload)
	for n.keptSize > maxKeptBytes {
		// Forget the oldest of the fullest lane.
		l := 0
		for i := range n.kept {
			if len(n.kept[i].live()) > len(n.kept[l].live()) {
				l = i
			}
		}
		n.keptSize -= len(n.kept[l].live()[0].payload)
		n.kept[l].pop()
		n.unkept++
	}
}

// report takes the server's report that lane's events up to seq were
// applied.
func (n *clientNumbering) report(lane int, seq uint64) {
	if lane >= len(n.applied) || seq <= n.applied[lane] {
		return
	}
	n.applied[lane] = seq
	k := &n.kept[lane]
	for k.head < len(k.evs) && k.evs[k.head].seq <= seq {
		n.keptSize -= len(k.evs[k.head].payload)
		k.pop()
	}
}

// onFate stops the base section once a packet that carried it arrived.
func (n *clientNumbering) onFate(seq uint64, delivered bool) {
	if n.sendBase && delivered && n.baseFrom != 0 && seq >= n.baseFrom {
		n.sendBase = false
	}
}

// writeBase writes the event base section (§7.20): present, then the
// generation and every lane with a nonzero base.
func (n *clientNumbering) writeBase(w *bitstream.Writer, pktSeq uint64) error {
	if !n.sendBase {
		return w.WriteFlag(false)
	}
	w.WriteFlag(true)
	w.WriteBits(n.gen, 64)
	lb := bitstream.RangeBits(0, int64(len(n.base)-1))
	for l, b := range n.base {
		if b == 0 {
			continue
		}
		w.WriteFlag(true)
		w.WriteBits(uint64(l), lb)
		w.WriteGamma(b + 1)
	}
	err := w.WriteFlag(false)
	if err == nil && n.baseFrom == 0 {
		n.baseFrom = pktSeq
	}
	return err
}

// readReport reads the server's events-applied section (§7.20).
func (n *clientNumbering) readReport(r *bitstream.Reader) error {
	has, err := r.ReadFlag("events.applied.present")
	if err != nil || !has {
		return err
	}
	var ll laneList
	if err := ll.read(r, len(n.applied), "events.applied", 0); err != nil {
		return err
	}
	for i := range ll.n {
		n.report(int(ll.lanes[i]), ll.vals[i])
	}
	return nil
}

// continueFrom takes prev's numbering: the same generation and numbers,
// its kept events (to be sent again, in order: the returned list, per
// lane), and bases just below them.
func (n *clientNumbering) continueFrom(prev *clientNumbering) [][]keptEvent {
	out := make([][]keptEvent, len(prev.kept))
	if prev.gen == 0 {
		// prev never connected: nothing it sent was numbered by a server,
		// so this connection starts the numbering (its events are resent
		// as the first ones of a fresh numbering).
		n.kept, n.keptSize = prev.kept, prev.keptSize
		for l := range n.kept {
			k := n.kept[l].live()
			for i := range k {
				k[i].seq = uint64(i + 1)
			}
			n.next[l] = uint64(len(k))
			out[l] = k
		}
		prev.kept, prev.keptSize = nil, 0
		return out
	}
	n.gen = prev.gen
	copy(n.next, prev.next)
	copy(n.applied, prev.applied)
	for l := range n.base {
		n.base[l] = prev.next[l]
		if k := prev.kept[l].live(); len(k) > 0 {
			n.base[l] = k[0].seq - 1
		}
		out[l] = prev.kept[l].live()
	}
	n.kept, n.keptSize, n.unkept = prev.kept, prev.keptSize, prev.unkept
	prev.kept, prev.keptSize = nil, 0
	n.sendBase = true
	return out
}

// connID64 is a connection id as a numbering generation.
func connID64(id handshake.ConnID) uint64 { return binary.LittleEndian.Uint64(id[:]) }

// serverNumbering is the server's side: the connection's numbering
// (learned from the client's first data packet) and the zone's reports.
// Per-lane state is kept only for the lanes that have a base, an event or
// a report (most connections use one or two of the eight), in lane order:
// five per-lane arrays made up front were ~0.45 KB per connection.
type serverNumbering struct {
	// lanes first: only a packet with events or a report reads them, and
	// they share the Server's line with the endpoint's send counters, a
	// line a datagram without events leaves cold (Server).
	lanes []laneNumbers
	gen   uint64
	// rptPkt: the low 32 bits of the newest packet that carried a report
	// (onFate compares it with packets' fates, which notify reports once
	// each and in order: none is 2^32 packets later while it is open).
	rptPkt uint32
	nlanes uint8 // Config.Lanes (≤ event.MaxLanes): the lane field's range
	flags  numFlags
	// empty: the Server's count of its client's empty event sections
	// (Server.readEvents), here for the word's two spare bytes, in the
	// Server's line that readBase reads for every data packet anyway.
	empty emptySections
}

// numFlags are a serverNumbering's flags, in one byte (with the 32-bit
// rptPkt and nlanes, one word: the Server's CRCs in the Server itself,
// crcFIFO, took the eight bytes).
type numFlags uint8

const (
	// numKnown: the connection's numbering is fixed (its first data packet).
	numKnown numFlags = 1 << iota
	// numRptAny: a report is in flight, in packet rptPkt.
	numRptAny
	// numDue and numFresh are reportDue and reportNew, kept up to date
	// where applied, acked, rpt and numRptAny change (setApplied,
	// writeReport, onFate): every Poll asks reportNew (hasContent) and
	// every data packet reportDue (writeReport), and the lanes are an
	// object of their own — a cache miss a send on a loaded server, to
	// learn that nothing is due.
	numDue
	numFresh
	// numEvsIdle: not the numbering's but the Server's event Sender's
	// (event.Sender.FatesIdle, as of the Server's last call into it), in
	// the byte's spare bits, on the line processFates reads anyway: while
	// set, delivered fates skip the Sender.
	numEvsIdle
	// numCtlHeld: the Server's ControlWriter holds a full state in flight
	// (not move.ControlWriter.FatesIdle, as of the Server's last Write or
	// OnFate; clear in a new Server, as the writer starts idle): while
	// clear, fates skip the writer, a line of its own. Force and Check
	// never start a hold; AckOnly's HoldTimeout may end one, leaving the
	// bit set until the next fate clears it: late, never wrong.
	numCtlHeld
)

func (n *serverNumbering) is(f numFlags) bool { return n.flags&f != 0 }

func (n *serverNumbering) set(f numFlags, on bool) {
	if on {
		n.flags |= f
	} else {
		n.flags &^= f
	}
}

// laneNumbers is one lane's numbering on the server.
type laneNumbers struct {
	base  uint64
	count uint64 // ordered events delivered on this connection
	// applied: the newest the zone reported; acked: the newest a delivered
	// packet carried to the client; rpt: what the newest packet that carried
	// a report said.
	applied, acked, rpt uint64
	lane                int
}

func (n *serverNumbering) init(lanes int) { n.nlanes = uint8(lanes) }

// lane returns lane's state, made on first use (lane < nlanes: a lane
// number from the wire was range-checked, so at most nlanes are made).
func (n *serverNumbering) lane(lane int) *laneNumbers {
	i := 0
	for i < len(n.lanes) && n.lanes[i].lane < lane {
		i++
	}
	if i == len(n.lanes) || n.lanes[i].lane != lane {
		n.lanes = slices.Insert(n.lanes, i, laneNumbers{lane: lane})
	}
	return &n.lanes[i]
}

// noBase fixes the connection's numbering as new: its first data packet
// carried no base (generation = the connection id, bases 0).
func (n *serverNumbering) noBase(id handshake.ConnID) {
	n.set(numKnown, true)
	n.gen = connID64(id)
}

// readBase reads the client's event base section; the first data packet
// fixes the connection's numbering: continued (the section is present)
// or new (absent: noBase).
func (n *serverNumbering) readBase(r *bitstream.Reader, id handshake.ConnID) error {
	has, err := r.ReadFlag("events.base.present")
	if err != nil {
		return err
	}
	if !has {
		if !n.is(numKnown) {
			n.noBase(id)
		}
		return nil
	}
	gen, err := r.ReadBits(64, "events.base.gen")
	if err != nil {
		return err
	}
	var ll laneList // on the stack: read only for this packet
	if err := ll.read(r, int(n.nlanes), "events.base", 1); err != nil {
		return err
	}
	if n.is(numKnown) {
		return nil // fixed by an earlier packet (the copies say the same)
	}
	n.set(numKnown, true)
	n.gen = gen
	for i := range ll.n {
		n.lane(int(ll.lanes[i])).base = ll.vals[i]
	}
	return nil
}

// number gives an ordered event delivered on lane its per-player number.
func (n *serverNumbering) number(lane int) uint64 {
	if lane < 0 || lane >= int(n.nlanes) {
		return 0
	}
	l := n.lane(lane)
	l.count++
	return l.base + l.count
}

// setApplied takes the zone's report for lane.
func (n *serverNumbering) setApplied(lane int, seq uint64) {
	if lane < 0 || lane >= int(n.nlanes) || seq == 0 {
		return
	}
	if l := n.lane(lane); seq > l.applied {
		l.applied = seq
		if seq > l.acked { // and past rpt, a value applied had before
			n.set(numDue|numFresh, true)
		}
	}
}

// reportDue: the zone applied events the client has not been told of.
func (n *serverNumbering) reportDue() bool { return n.is(numDue) }

// reportNew: the zone applied events no report in flight or delivered
// covers yet (worth a data packet of its own).
func (n *serverNumbering) reportNew() bool { return n.is(numFresh) }

// scanDue is reportDue from the lanes (due's definition).
func (n *serverNumbering) scanDue() bool {
	for i := range n.lanes {
		if l := &n.lanes[i]; l.applied > l.acked {
			return true
		}
	}
	return false
}

// writeReport writes the events-applied section: every lane whose
// report the client may lack, in lane order.
func (n *serverNumbering) writeReport(w *bitstream.Writer, pktSeq uint64) error {
	if !n.reportDue() {
		return w.WriteFlag(false)
	}
	w.WriteFlag(true)
	lb := bitstream.RangeBits(0, int64(n.nlanes)-1)
	for i := range n.lanes {
		l := &n.lanes[i]
		if l.applied <= l.acked {
			continue
		}
		w.WriteFlag(true)
		w.WriteBits(uint64(l.lane), lb)
		w.WriteGamma(l.applied)
	}
	err := w.WriteFlag(false)
	if err == nil {
		n.rptPkt = uint32(pktSeq)
		n.set(numRptAny, true)
		for i := range n.lanes {
			n.lanes[i].rpt = n.lanes[i].applied
		}
		n.set(numFresh, false) // rpt = applied on every lane
	}
	return err
}

// onFate: a delivered packet that carried the newest report tells the
// client what it said.
func (n *serverNumbering) onFate(seq uint64, delivered bool) {
	if n.is(numRptAny) && uint32(seq) == n.rptPkt {
		n.reportFate(delivered)
	}
}

// reportFate is onFate for the packet that carried the newest report.
func (n *serverNumbering) reportFate(delivered bool) {
	n.set(numRptAny, false)
	if delivered {
		for i := range n.lanes {
			l := &n.lanes[i]
			l.acked = max(l.acked, l.rpt)
		}
		n.set(numDue, n.scanDue())
	}
	n.set(numFresh, n.is(numDue)) // no report in flight: every lane due is new
}

// laneList is what one event base or report section lists: at most one
// entry per lane. A value read per packet, on the caller's stack.
type laneList struct {
	n     int
	lanes [event.MaxLanes]uint8
	vals  [event.MaxLanes]uint64
}

// read reads { more:1 lane value:γ(v+off) } 0 into ll, lanes strictly
// increasing and below lanes, so a list holds each lane at most once.
func (ll *laneList) read(r *bitstream.Reader, lanes int, field string, off uint64) error {
	ll.n = 0
	lb := bitstream.RangeBits(0, int64(lanes-1))
	for {
		more, err := r.ReadFlag(field + ".more")
		if err != nil {
			return err
		}
		if !more {
			return nil
		}
		l, err := r.ReadBits(lb, field+".lane")
		if err != nil {
			return err
		}
		if int(l) >= lanes || ll.n > 0 && int(l) <= int(ll.lanes[ll.n-1]) {
			return fmt.Errorf("%w: lane %d", errBadBase, l)
		}
		v, err := r.ReadGamma(field + ".seq")
		if err != nil {
			return err
		}
		ll.lanes[ll.n], ll.vals[ll.n] = uint8(l), v-off
		ll.n++
	}
}
