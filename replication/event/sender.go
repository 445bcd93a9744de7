package event

import (
	"fmt"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/internal/freelist"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// maxTxPackets bounds the transmission records (packets with guaranteed units
// whose fate has not arrived): notify resolves every packet within its
// MaxInFlight (≤ 65536), so only a caller that stops feeding fates reaches it;
// Write then stops sending guaranteed units until OnFate catches up.
const maxTxPackets = 1 << 16

// txEntry names one unit written into a packet: its stream in the top
// bits, its id below (8 bytes instead of 16: a stream's ids count its
// units from 0 and stay far below 2^57).
type txEntry uint64

const txIDBits = 57 // streams ≤ MaxLanes+1 = 65 fit the 7 bits above

func newTxEntry(si int, id uint64) txEntry { return txEntry(uint64(si)<<txIDBits | id) }
func (e txEntry) stream() int              { return int(e >> txIDBits) }
func (e txEntry) id() uint64               { return uint64(e) & (1<<txIDBits - 1) }

// txPacket is the transmission record of one packet: its n entries
// follow those of the packets before it in the entry ring, so the head
// packet's start at eHead and each later one's where the one before it
// ends. The start is not kept: 16 bytes a record, not 24 (the ring of
// four a Sender with a unit in flight holds is the 64-byte size class,
// not the 96-byte one: on a node whose fates run late nearly every
// connection holds one).
type txPacket struct {
	seq   uint64
	n     uint32 // ≤ the records of one packet
	acked bool   // AckDelivered acknowledged its units ahead of its fate
}

// staggerKey is the seed-001 schedule of one staggered key.
type staggerKey struct {
	buf      []byte        // the newest payload (a slab), nil when idle
	stagger  time.Duration // seed sendStaggerTime: the gap before the next send
	next     time.Duration // seed nextSendTime
	lastSend time.Duration
	version  uint16 // version of buf; +1 for an action after it was sent
	sent     bool   // buf went out at least once
	used     bool   // the key has seen an action
	active   bool   // in Sender.active
}

// SenderStats counts what a Sender did; a plain value.
type SenderStats struct {
	Units        uint64 // first transmissions of guaranteed units (whole events or fragments)
	Fragments    uint64 // of which fragments
	Resent       uint64 // retransmissions after a dropped fate (RL-2 "prepended")
	Redundant    uint64 // proactive copies written while the unit's fate was unknown
	Requeued     uint64 // units requeued because a packet of their current round was dropped and none delivered
	Unguaranteed uint64 // unguaranteed events written
	UnguarDrops  uint64 // unguaranteed events dropped without being written (no room)
	Staggered    uint64 // staggered records written (every repeat counts)
	MissedFates  uint64 // transmission records resolved as dropped because their fate was skipped
	Sections     uint64 // Write calls that wrote a section
}

// Sender is the sending half of the event layer for one connection: it queues
// events, fills each packet's event section, and keeps a transmission record
// per packet so that notify's fates drive retransmission (checklist RL-2,
// PN-9). Guaranteed events are retransmitted only when a packet carrying them
// was reported dropped and none delivered — never on a timer; while a unit's
// fate is still unknown it also rides, as a redundant copy, in the following
// Redundancy() packets when RedundancyBytes allows (more copies the lossier
// the path, Config.ResidualLoss).
//
// Per packet the caller (the connection actor) does:
//
//	seq, _ := conn.WriteHeader(w, notify.TypeData, now)
//	s.Write(w, seq, now)          // after the header, before ghosts
//	for _, f := range conn.PopFates(fates[:0]) { s.OnFate(f) }
//	s.AckDelivered(delivered) // notify's deliveries whose fates still wait
//
// Memory is bounded by Config (MaxQueuedBytes of payload, MaxInFlightPerLane
// units per stream); rings grow only up to those bounds, so the steady state
// allocates nothing. The zero Sender is not usable; use NewSender. Not safe for
// concurrent use; the connection actor owns it.
type Sender struct {
	cfg              *Config // shared (interned), never written
	idBits, laneBits uint8
	keyBits          uint8
	wrote            bool  // lastSeq is set
	quiet            uint8 // trims in a row with nothing in flight or queued
	rr               uint8 // round-robin start for fairness between streams (< MaxLanes+1)
	lossN            uint8 // fates in the loss estimate, up to lossWindow; | lossZero while it is 0
	redund           uint8 // extra copies per unit, from loss (≤ MaxRedundancy; see Config.ResidualLoss)
	arena            arena
	// queuedBytes ≤ MaxMaxQueuedBytes (2^30) and work (below) fit 32 bits:
	// together one word.
	queuedBytes int32
	// work is Σ pendN + resendN over the streams: 0 lets Write skip the
	// guaranteed streams without touching them (a client sends a section
	// per packet and almost never has an event: the scan of cold streams
	// was ≈ 10 % of a bot's CPU in botswarm).
	work int32
	// The first 64 bytes hold what a packet reads while nothing is queued
	// or in flight, both ways: a received datagram (OnFate on a clean
	// link, AckDelivered, HasPending, HasRedundant, Outstanding) and a
	// Write of the empty section (lastSeq, trimAt, sections), so a
	// connection's packet reads one cold line of its Sender, not two
	// (TestSenderLayout). streams, which only a Sender with something
	// queued or in flight reads, is in the second.
	x *senderX // unguaranteed and staggered events: made on the first
	// *txState: the transmission records and lists, only while a
	// guaranteed unit is queued or in flight (nil: pN = 0).
	*txState
	lastSeq  uint64
	trimAt   time.Duration // next trim (Write)
	sections uint64        // SenderStats.Sections: Write calls that wrote a section

	streams []streamRef // ordered lanes 0..Lanes-1, then the unordered stream; the slice as long as the highest used
	stats   txStats
	rare    *SenderStats // the counters of what most connections never see: made on the first
	loss    float64      // estimated packet loss rate (adaptive redundancy)
}

// section is what one Write keeps while it fills a packet's section: the
// writer, the section's bit budgets and which streams have a record in
// it already. It lives on Write's stack (each write path takes it where
// it took the writer): kept in the Sender between packets, these were 24
// bytes of every connection (144 → 120 B, the 128-byte size class).
type section struct {
	*bitstream.Writer
	has               [2]uint64 // bit per stream: a record of it is already in this packet (its id: sendStream.pktLast)
	redundBits, avail int32     // bits of the packet's section
}

// txState is what a Sender keeps while guaranteed units are queued or in
// flight: the transmission record of each packet that carried some, and
// the units of the previous packet for the redundant copies. Taken from a
// pool when a unit is queued (Write) and given back with the last fate
// (releaseIdle): 160 bytes of every connection whose events are rare,
// which is nearly every connection, otherwise. The positions count in 32
// bits, modulo 2^32 (both rings' lengths are powers of two, far below it:
// pN < maxTxPackets), so that a Sender with a unit in flight holds the
// 160-byte size class, not the 176-byte one.
type txState struct {
	pkts         []txPacket // ring
	pHead, pN    uint32
	entries      []txEntry // ring over positions [eHead, eTail), modulo 2^32
	eHead, eTail uint32
	prev, cur    []txEntry // units of the previous / current packet (redundancy)
	carry        []txEntry // units the copy budget left out of the previous packet, still due a copy
	cand         []redundCand
}

var txStates = freelist.List[txState]{Max: maxPooledRings, Trim: true}

// inFlight is pN, 0 without a txState.
func (s *Sender) inFlight() uint32 {
	if s.txState == nil {
		return 0
	}
	return s.pN
}

// senderX is what a Sender keeps for unguaranteed and staggered events,
// made on the first one (most connections send only guaranteed events):
// 88 bytes of every Sender otherwise.
type senderX struct {
	ug          [][]byte // unguaranteed queue (ring)
	ugHead, ugN int
	keys        []staggerKey
	active      []uint16 // keys with a schedule running
}

// ext returns the unguaranteed and staggered state, made on first use.
func (s *Sender) ext() *senderX {
	if s.x == nil {
		s.x = new(senderX)
	}
	return s.x
}

// lossWindow is the estimator's memory in fates: a running mean over the
// first lossWindow, then an exponential average with α = 1/lossWindow —
// about 3 s at 20 packets/s, slow enough that the copy count does not follow
// every lost packet, fast enough to follow a path that turns bad.
const lossWindow = 64

// NewSender returns a Sender for cfg.
func NewSender(cfg Config) (*Sender, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Sender{
		cfg:      interned(cfg),
		idBits:   uint8(idWidth(cfg.MaxInFlightPerLane)),
		laneBits: uint8(bitstream.RangeBits(0, int64(cfg.Lanes-1))),
		keyBits:  uint8(bitstream.RangeBits(0, int64(cfg.StaggerKeys-1))),
		redund:   uint8(cfg.Redundancy),
		lossN:    lossZero, // the estimate 0, the copies Redundancy
	}
	return s, nil
}

// Config returns the configuration the Sender was built with.
func (s *Sender) Config() Config {
	c := *s.cfg
	if c.receiverTrim == trimSections {
		c.receiverTrim = 0 // interned's default: the Config as given
	}
	return c
}

// Stats returns the counters so far.
func (s *Sender) Stats() SenderStats {
	var st SenderStats
	if s.rare != nil {
		st = *s.rare
	}
	st.Units, st.Redundant, st.Sections = s.stats.Units, s.stats.Redundant, s.sections
	return st
}

// txStats are the counters of SenderStats that a connection sending
// guaranteed events counts all the time.
type txStats struct{ Units, Redundant uint64 }

// rareStats returns the other counters (fragments, resends, the other
// classes, missed fates), made on first use: 56 bytes of every Sender
// otherwise.
func (s *Sender) rareStats() *SenderStats {
	if s.rare == nil {
		s.rare = new(SenderStats)
	}
	return s.rare
}

// QueuedBytes is the payload the Sender holds (every class), ≤ MaxQueuedBytes.
func (s *Sender) QueuedBytes() int { return int(s.queuedBytes) }

// Outstanding reports whether any stream holds an event (queued or not
// yet acknowledged): InFlight(l) > 0 for some l in [0, Lanes], from the
// streams used alone (the slice reaches only as far as the highest),
// not a call a lane.
func (s *Sender) Outstanding() bool {
	if s.work == 0 && s.txState == nil {
		// Nothing queued (work) and nothing in flight (txState): no
		// stream holds an event, and streams, in the second line, is
		// not read.
		return false
	}
	for i := range s.streams {
		if st := s.streams[i].st; st != nil && st.held > 0 {
			return true
		}
	}
	return false
}

// InFlight is the number of events lane holds (queued or not yet
// acknowledged); lane = Lanes means the unordered stream.
func (s *Sender) InFlight(lane int) int {
	if lane < 0 || lane > s.cfg.Lanes {
		return 0
	}
	if lane >= len(s.streams) {
		return 0
	}
	if st := s.streams[lane].st; st != nil {
		return int(st.held)
	}
	return 0
}

// SendOrdered queues payload (copied) on an ordered lane. It fails with
// ErrBadLane, ErrTooLarge (> MaxEventSize), ErrLaneFull (the lane holds
// MaxInFlightPerLane events) or ErrQueueFull (MaxQueuedBytes).
func (s *Sender) SendOrdered(lane int, payload []byte) error {
	if lane < 0 || lane >= s.cfg.Lanes {
		return fmt.Errorf("%w: %d (Lanes %d)", ErrBadLane, lane, s.cfg.Lanes)
	}
	return s.sendGuaranteed(lane, payload)
}

// SendUnordered queues payload (copied) as a guaranteed-unordered event. Errors
// as SendOrdered.
func (s *Sender) SendUnordered(payload []byte) error {
	return s.sendGuaranteed(s.cfg.Lanes, payload)
}

func (s *Sender) sendGuaranteed(si int, payload []byte) error {
	if si >= len(s.streams) {
		// The slice reaches only as far as the highest stream used: lane 0
		// alone needs one slot of the nine.
		ns := make([]streamRef, si+1)
		copy(ns, s.streams)
		s.streams = ns
	}
	st := s.streams[si].st
	if st == nil {
		// Per-stream state only for the streams a connection uses (most
		// use one or two of the nine), and only while they hold something
		// (releaseIdle): the ids go on from the reference.
		st = streamStructs.Get()
		st.base, st.next = s.streams[si].next, s.streams[si].next
		s.streams[si].st = st
	}
	switch {
	case len(payload) > s.cfg.MaxEventSize:
		return ErrTooLarge
	case int(st.held) >= s.cfg.MaxInFlightPerLane:
		return ErrLaneFull
	case int(s.queuedBytes)+len(payload) > s.cfg.MaxQueuedBytes:
		return ErrQueueFull
	}
	buf := s.arena.get(len(payload))
	copy(buf, payload)
	st.pushPend(buf)
	s.work++
	st.held++
	s.queuedBytes += int32(len(payload))
	return nil
}

// SendUnguaranteed queues payload (copied) for the next packet only: if that
// packet has no room left after the guaranteed events, the event is dropped
// and counted (RL-4). It keeps no transmission record. Errors: ErrTooLarge
// (> MaxFragment), ErrQueueFull.
func (s *Sender) SendUnguaranteed(payload []byte) error {
	s.ext()
	switch {
	case len(payload) > s.cfg.MaxFragment:
		return ErrTooLarge
	case s.x.ugN >= s.cfg.MaxUnguaranteed || int(s.queuedBytes)+len(payload) > s.cfg.MaxQueuedBytes:
		return ErrQueueFull
	}
	if s.x.ugN == len(s.x.ug) {
		s.growUG()
	}
	buf := s.arena.get(len(payload))
	copy(buf, payload)
	s.x.ug[(s.x.ugHead+s.x.ugN)%len(s.x.ug)] = buf
	s.x.ugN++
	s.queuedBytes += int32(len(payload))
	return nil
}

// SendStaggered records an action on key whose current state is payload
// (copied; it replaces any pending state of the key). The state is sent on the
// seed-001 schedule — at the first packet, then 100 and 300 ms later with the
// defaults — and the receiver delivers it only if it is newer than what it
// delivered for key (RL-8, RL-9). Errors: ErrBadKey, ErrTooLarge (>
// MaxFragment), ErrQueueFull.
//
// Seed rule: sendStaggerTime = base; if nextSendTime+base < now, nextSendTime =
// now. It coalesces actions: actions at 0 and 20 ms go out at 0, 100, 200 and
// 400 ms. Fix (checklist RL-8 edge case): an action that arrives while a long
// gap is pending is sent no later than max(now, last send + 2·base) — the seed
// would wait for the pending send (an action at 310 ms after one at 0 would
// first go out at 700 ms; here at 400 ms, then 500 and 700 ms).
func (s *Sender) SendStaggered(key uint16, payload []byte, now time.Duration) error {
	if int(key) >= s.cfg.StaggerKeys {
		return fmt.Errorf("%w: %d (StaggerKeys %d)", ErrBadKey, key, s.cfg.StaggerKeys)
	}
	if int(key) >= len(s.ext().keys) {
		s.growKeys(int(key))
	}
	k := &s.x.keys[key]
	switch {
	case len(payload) > s.cfg.MaxFragment:
		return ErrTooLarge
	case int(s.queuedBytes)-len(k.buf)+len(payload) > s.cfg.MaxQueuedBytes:
		return ErrQueueFull
	}
	s.setStaggerBuf(k, payload)
	if k.sent {
		k.version++
		k.sent = false
	}
	base := s.cfg.StaggerBase
	k.stagger = base
	switch {
	case !k.used || k.next+base < now:
		k.next = now
	default:
		if lim := max(now, k.lastSend+2*base); k.next > lim {
			k.next = lim
		}
	}
	k.used = true
	if !k.active {
		k.active = true
		s.x.active = append(s.x.active, key)
	}
	return nil
}

func (s *Sender) setStaggerBuf(k *staggerKey, payload []byte) {
	if k.buf != nil && cap(k.buf) >= len(payload) && slabClass(len(payload)) == slabClass(cap(k.buf)) {
		s.queuedBytes += int32(len(payload) - len(k.buf))
		k.buf = k.buf[:len(payload)]
		copy(k.buf, payload)
		return
	}
	s.queuedBytes -= int32(len(k.buf))
	s.arena.put(k.buf)
	k.buf = s.arena.get(len(payload))
	copy(k.buf, payload)
	s.queuedBytes += int32(len(payload))
}

// HasPending reports whether a Write at now would have something to send
// besides redundant copies: queued or requeued guaranteed units, unguaranteed
// events, or a staggered send that is due.
func (s *Sender) HasPending(now time.Duration) bool {
	// work counts the streams' queued and requeued units: no stream is
	// touched (a connection's streams are cold by the time its next
	// packet is due; their scan was 2 % of the server's CPU).
	if s.work > 0 {
		return true
	}
	if s.x == nil {
		return false
	}
	if s.x.ugN > 0 {
		return true
	}
	for _, key := range s.x.active {
		if k := &s.x.keys[key]; k.next <= now {
			return true
		}
	}
	return false
}

// Redundancy is the number of extra copies the next Write gives a unit:
// Config.Redundancy, raised by the loss estimate when Config.ResidualLoss is
// set.
func (s *Sender) Redundancy() int { return int(s.redund) }

// LossEstimate is the packet loss rate the adaptive redundancy works from.
func (s *Sender) LossEstimate() float64 { return s.loss }

// redundCand is a unit due a copy, with what orders it (writeRedundant).
type redundCand struct {
	e      txEntry
	copies uint8
	first  uint64
}

// maxCarry bounds the units that wait for room in the copy budget: beyond
// it a unit's copies end early and a loss verdict repairs it (as every unit
// once did). A burst larger than this with its copies unacknowledged is a
// link that has stopped working, where copies do not help anyway.
const maxCarry = 64

// HasRedundant reports whether a Write would carry redundant copies: a unit
// of the previous packet (or one the copy budget left out of it) whose fate
// is unknown and whose copies are not used up. A connection that would otherwise send nothing (or an ack-only packet)
// in its next send slot should send a data packet then, or the copies — the
// repair of a lost packet one interval later — never go out.
func (s *Sender) HasRedundant() bool {
	if s.redund == 0 || s.txState == nil || s.pN >= maxTxPackets {
		return false // inlined: nothing in flight, nearly always
	}
	return s.hasRedundant()
}

// hasRedundant is HasRedundant with packets in flight.
func (s *Sender) hasRedundant() bool {
	limit := uint8(1 + s.redund)
	// Two calls, not a range over [2][]txEntry{carry, prev}: that copied
	// both slice headers into a fresh array on every call (Poll asks on
	// every send slot).
	return s.redundantIn(s.carry, limit) || s.redundantIn(s.prev, limit)
}

// redundantIn is HasRedundant for one list of entries.
func (s *Sender) redundantIn(l []txEntry, limit uint8) bool {
	for _, e := range l {
		st := s.streams[e.stream()].st
		if st == nil || e.id() < st.base || e.id() >= st.next {
			continue
		}
		if u := st.unit(e.id()); !u.acked && u.copies < limit && !st.needsResend(e.id()) {
			return true
		}
	}
	return false
}

// Write fills w with the event section of packet seq (the sequence number
// notify.Conn.WriteHeader returned for it), using at most w.Remaining() bits,
// and records which guaranteed units went into it. Priority: guaranteed units
// (round-robin over the streams; in each, retransmissions at the front),
// due staggered sends, unguaranteed events, then redundant copies. It returns the
// number of records written. It always writes at least the section's end bit;
// ErrNoRoom when even that does not fit, ErrSeqOrder when seq does not grow.
func (s *Sender) Write(w *bitstream.Writer, seq uint64, now time.Duration) (int, error) {
	if s.wrote && seq <= s.lastSeq {
		return 0, ErrSeqOrder
	}
	if w.Remaining() < 1 {
		return 0, ErrNoRoom
	}
	s.wrote, s.lastSeq = true, seq
	if now >= s.trimAt {
		s.trim()
		s.trimAt = now + s.cfg.trimPeriod()
	}
	if s.txState == nil && s.work > 0 {
		s.txState = txStates.Get()
	}
	if s.txState == nil && s.x == nil {
		// Nothing queued, in flight, staggered or unguaranteed — nearly
		// every packet: the end bit alone, no section to size.
		if err := w.WriteFlag(false); err != nil {
			return 0, err // unreachable: checked the room above
		}
		s.advanceRR()
		s.sections++
		return 0, nil
	}
	start := w.BitLen()
	sw := &section{
		Writer:     w,
		avail:      int32(w.Remaining() - 1), // keep the end bit
		redundBits: int32(8 * s.cfg.RedundancyBytes),
	}
	if s.txState == nil {
		return s.writeIdle(sw, start, now)
	}
	s.cur = s.cur[:0]
	records := 0
	guaranteed := s.pN < maxTxPackets
	var err error
	n := 0
	if guaranteed && s.work > 0 {
		n, err = s.writeGuaranteed(sw)
		records += n
	}
	if err == nil {
		n, err = s.writeStaggered(sw, now)
		records += n
	}
	if err == nil {
		n, err = s.writeUnguaranteed(sw)
		records += n
	}
	if err == nil && guaranteed {
		n, err = s.writeRedundant(sw)
		records += n
	}
	if err == nil {
		err = w.WriteFlag(false)
	}
	if err != nil {
		// Unreachable in practice: every record was sized before it was
		// written. Leave no half section behind, and treat the units already
		// marked as carried by a dropped packet, so they go out again.
		w.Truncate(start)
		for _, e := range s.cur {
			s.settle(e, seq, false)
		}
		s.cur = s.cur[:0]
		s.advanceAll()
	}
	if len(s.cur) > 0 {
		s.pushPacket(seq)
	}
	s.prev, s.cur = s.cur, s.prev
	s.advanceRR() // over every stream, made or not: the order is the wire's
	s.sections++
	return records, err
}

// WriteEmpty is Write for a caller that writes the empty section's end bit
// itself, fused with the fields around it (a server's usual packet): when
// nothing is queued, in flight, staggered or unguaranteed it does Write's
// bookkeeping for packet seq (the sequence check, the trim, the
// round-robin start, Sections) and returns true, and the caller writes one
// 0 bit; otherwise it returns false, having done nothing, and the caller
// calls Write. The caller checks the room first.
func (s *Sender) WriteEmpty(seq uint64, now time.Duration) bool {
	if s.txState != nil || s.work > 0 || s.x != nil || s.wrote && seq <= s.lastSeq {
		return false
	}
	s.wrote, s.lastSeq = true, seq
	if now >= s.trimAt {
		s.trim()
		s.trimAt = now + s.cfg.trimPeriod()
	}
	s.advanceRR()
	s.sections++
	return true
}

// writeIdle is Write without a txState: nothing guaranteed is queued or in
// flight, so only staggered and unguaranteed records can go (s.x is set).
func (s *Sender) writeIdle(w *section, start int, now time.Duration) (int, error) {
	records, err := s.writeStaggered(w, now)
	if err == nil {
		var n int
		n, err = s.writeUnguaranteed(w)
		records += n
	}
	if err == nil {
		err = w.WriteFlag(false)
	}
	if err != nil {
		w.Truncate(start) // unreachable in practice, as in Write
	}
	s.advanceRR()
	s.sections++
	return records, err
}

// advanceRR moves the round-robin start to the next stream, Lanes + 1 of
// them: rr only ever comes from here, so it is at most Lanes, and a
// compare does what the remainder's division did (every section, most of
// them empty).
func (s *Sender) advanceRR() {
	if int(s.rr) >= s.cfg.Lanes {
		s.rr = 0
	} else {
		s.rr++
	}
}

// inPkt reports whether this packet has a record of stream si already.
func (w *section) inPkt(si int) bool { return w.has[si>>6]&(1<<(si&63)) != 0 }

// fits reserves b bits of the section budget.
func (w *section) fits(b int) bool {
	if b > int(w.avail) {
		return false
	}
	w.avail -= int32(b)
	return true
}

// unitBits is the size of the record for unit u with id in stream si, in
// the section w.
func (s *Sender) unitBits(w *section, si int, id uint64, u *unit) int {
	b := 1 + classBits + 1 + gammaLen(int(u.n)) + 8*int(u.n)
	if si < s.cfg.Lanes {
		b += int(s.laneBits)
	}
	if w.inPkt(si) {
		b++
		if id != s.streams[si].st.pktLast+1 {
			b += int(s.idBits)
		}
	} else {
		b += int(s.idBits)
	}
	if u.kind != kindWhole {
		if si < s.cfg.Lanes {
			b += fkindBits
			if u.kind == kindFirst {
				b += totalBits
			}
		} else {
			b += bitstream.GammaBits(uint64(u.index)+1) + totalBits + offsetBits
		}
	}
	return b
}

// writeUnit writes the record of unit u (already sized by unitBits) and adds
// it to the packet's transmission record.
func (s *Sender) writeUnit(w *section, si int, id uint64, u *unit) error {
	class := Ordered
	if si == s.cfg.Lanes {
		class = Unordered
	}
	e := fieldWriter{w: w.Writer}
	e.flag(true)
	e.bits(uint64(class), classBits)
	if class == Ordered {
		e.bits(uint64(si), uint(s.laneBits))
	}
	st := s.streams[si].st
	next := w.inPkt(si) && id == st.pktLast+1
	if w.inPkt(si) {
		e.flag(next)
	}
	if !next {
		e.bits(id&(1<<s.idBits-1), uint(s.idBits))
	}
	e.flag(u.kind != kindWhole)
	if u.kind != kindWhole {
		total := int(u.size)
		if class == Ordered {
			e.bits(uint64(u.kind-kindFirst), fkindBits)
			if u.kind == kindFirst {
				e.bits(uint64(total-1), totalBits)
			}
		} else {
			e.gamma(uint64(u.index) + 1)
			e.bits(uint64(total-1), totalBits)
			e.bits(uint64(u.off), offsetBits)
		}
	}
	e.payload(u.payload()[u.off : u.off+u.n])
	if e.err != nil {
		return e.err
	}
	w.has[si>>6] |= 1 << (si & 63)
	st.pktLast = id
	u.refs++
	if u.copies == 0 {
		u.first = s.lastSeq
	}
	u.copies++
	u.lastSeq = s.lastSeq
	s.cur = append(s.cur, newTxEntry(si, id))
	return nil
}

// writeGuaranteed writes guaranteed units round-robin over the streams, one
// unit per stream per round, so that every lane gets its share of the packet
// whatever the backlog of another (RL-14: a loss on lane A, which puts A's
// units back in its queue, never delays lane B). Within a stream, units whose
// every carrying packet was dropped go first, lowest id first — the front of
// the lane (RL-2: "prepended to the queue") — then new units are cut from the
// queued events. A stream whose next unit does not fit sends nothing more in
// this packet, so a lane's order is kept.
func (s *Sender) writeGuaranteed(w *section) (int, error) {
	n := 0
	var blocked [MaxLanes + 1]bool
	var from [MaxLanes + 1]uint64 // resend search cursor per stream
	for si := range s.streams {
		if st := s.streams[si].st; st != nil {
			from[si] = st.base
		}
	}
	for progress := true; progress; {
		progress = false
		for k := range s.cfg.Lanes + 1 {
			si := (int(s.rr) + k) % (s.cfg.Lanes + 1)
			if si >= len(s.streams) {
				continue
			}
			st := s.streams[si].st
			if blocked[si] || st == nil {
				continue
			}
			if id, ok := st.firstResend(from[si]); ok {
				u := st.unit(id)
				if !w.fits(s.unitBits(w, si, id, u)) {
					blocked[si] = true
					continue
				}
				if err := s.writeUnit(w, si, id, u); err != nil {
					return n, err
				}
				s.work += int32(st.setResend(id, false))
				s.rareStats().Resent++
				from[si] = id + 1
				n++
				progress = true
				continue
			}
			ok, err := s.cutUnit(w, si)
			if err != nil {
				return n, err
			}
			if !ok {
				blocked[si] = true
				continue
			}
			n++
			progress = true
		}
	}
	return n, nil
}

// cutUnit cuts the next unit of stream si's front event to fit the packet and
// writes it; false when nothing (more) can go.
func (s *Sender) cutUnit(w *section, si int) (bool, error) {
	st := s.streams[si].st
	if st.pendN == 0 || !st.room(s.cfg.MaxInFlightPerLane) {
		return false, nil
	}
	ev := st.front()
	id := st.next
	total := int(ev.size)
	u := unit{pay: ev.pay, size: ev.size, off: ev.off, kind: kindWhole, n: ev.size, index: uint16(ev.index)}
	if ev.off > 0 || total > s.cfg.MaxFragment || s.unitBits(w, si, id, &u) > int(w.avail) {
		if !s.fragment(w, si, id, &u, int(ev.off), total) {
			return false, nil
		}
	}
	w.avail -= int32(s.unitBits(w, si, id, &u))
	st.next++
	p := st.unit(id)
	*p = u
	ev.off += u.n
	ev.index++
	st.used = true
	if int(ev.off) == total {
		st.popPend()
		s.work--
	}
	if u.kind == kindFirst && si == s.cfg.Lanes {
		st.partials++
	}
	s.stats.Units++
	if u.kind != kindWhole {
		s.rareStats().Fragments++
	}
	return true, s.writeUnit(w, si, id, p)
}

// fragment sizes u as the largest fragment of the event's bytes [off, total)
// that fits the packet: false when that is below min(MinFragment, rest), so
// small events never fragment and no sliver is cut.
func (s *Sender) fragment(w *section, si int, id uint64, u *unit, off, total int) bool {
	rest := total - off
	n := min(rest, s.cfg.MaxFragment)
	if off == 0 {
		if si == s.cfg.Lanes && int(s.streams[si].st.partials) >= s.cfg.MaxPartial {
			return false // the receiver reassembles at most MaxPartial at once
		}
		u.kind = kindFirst
		n = min(n, total-1) // a first fragment is smaller than its event
	}
	for n > 0 {
		u.n = int32(n)
		if off > 0 {
			u.kind = kindMiddle
			if n == rest {
				u.kind = kindLast
			}
		}
		b := s.unitBits(w, si, id, u)
		if b <= int(w.avail) {
			break
		}
		n -= (b - int(w.avail) + 7) / 8 // γ(n+1) only shrinks with n
	}
	return n > 0 && n >= min(s.cfg.MinFragment, rest)
}

// writeStaggered sends every staggered key whose next send is due (seed 001
// update loop: if sendStaggerTime <= limit && nextSendTime <= now: send;
// sendStaggerTime *= 2; nextSendTime = now + sendStaggerTime).
func (s *Sender) writeStaggered(w *section, now time.Duration) (int, error) {
	n := 0
	if s.x == nil {
		return 0, nil
	}
	for i := 0; i < len(s.x.active); {
		key := s.x.active[i]
		k := &s.x.keys[key]
		if k.next > now {
			i++
			continue
		}
		b := 1 + classBits + int(s.keyBits) + versionBits + gammaLen(len(k.buf)) + 8*len(k.buf)
		if !w.fits(b) {
			i++
			continue // still due: the next packet takes it
		}
		e := fieldWriter{w: w.Writer}
		e.flag(true)
		e.bits(uint64(Staggered), classBits)
		e.bits(uint64(key), uint(s.keyBits))
		e.bits(uint64(k.version), versionBits)
		e.payload(k.buf)
		if e.err != nil {
			return n, e.err
		}
		n++
		s.rareStats().Staggered++
		k.sent = true
		k.lastSend = now
		k.stagger *= 2
		k.next = now + k.stagger
		if k.stagger > s.cfg.StaggerLimit {
			// Schedule done: drop the state (the receiver has it or gave up).
			s.queuedBytes -= int32(len(k.buf))
			s.arena.put(k.buf)
			k.buf = nil
			k.active = false
			s.x.active[i] = s.x.active[len(s.x.active)-1]
			s.x.active = s.x.active[:len(s.x.active)-1]
			continue
		}
		i++
	}
	return n, nil
}

// The unguaranteed ring and the stagger keys start empty and grow on demand
// (doubling, capped at MaxUnguaranteed and StaggerKeys): preallocated at
// their maximum they were ~20 KB per connection that most connections never
// touch. Once grown they stay, so steady state allocates nothing.
const minGrow = 16

// growUG doubles the unguaranteed ring, unwrapping it to index 0.
func (s *Sender) growUG() {
	n := min(max(minGrow, 2*len(s.x.ug)), s.cfg.MaxUnguaranteed)
	ug := make([][]byte, n)
	for i := 0; i < s.x.ugN; i++ {
		ug[i] = s.x.ug[(s.x.ugHead+i)%len(s.x.ug)]
	}
	s.x.ug, s.x.ugHead = ug, 0
}

// growKeys makes s.x.keys cover key (< StaggerKeys). Keys are indexed by their
// number, so the slice grows to a prefix; no pointer into it outlives a call.
func (s *Sender) growKeys(key int) {
	n := max(minGrow, 2*len(s.x.keys))
	for n <= key {
		n *= 2
	}
	keys := make([]staggerKey, min(n, s.cfg.StaggerKeys))
	copy(keys, s.x.keys)
	s.x.keys = keys
}

// writeUnguaranteed writes queued unguaranteed events that fit, in order, and
// drops the rest: they had their packet (RL-4).
func (s *Sender) writeUnguaranteed(w *section) (int, error) {
	n := 0
	if s.x == nil {
		return 0, nil
	}
	var err error
	for ; s.x.ugN > 0; s.x.ugN-- {
		buf := s.x.ug[s.x.ugHead]
		s.x.ug[s.x.ugHead] = nil
		s.x.ugHead = (s.x.ugHead + 1) % len(s.x.ug)
		if err == nil && w.fits(1+classBits+gammaLen(len(buf))+8*len(buf)) {
			e := fieldWriter{w: w.Writer}
			e.flag(true)
			e.bits(uint64(Unguaranteed), classBits)
			e.payload(buf)
			err = e.err
			n++
			s.rareStats().Unguaranteed++
		} else {
			s.rareStats().UnguarDrops++
		}
		s.queuedBytes -= int32(len(buf))
		s.arena.put(buf)
	}
	return n, err
}

// writeRedundant copies units of the previous packet whose fate is unknown into
// this one, up to Redundancy() extra copies each and RedundancyBytes per packet:
// if that packet is lost, this one repairs it one packet interval later,
// instead of after notify's loss detection (a receiver-side reorder threshold
// plus the ack's trip back). The lost-packet rule still applies: a unit is
// requeued when a packet of its round is reported dropped and none delivered.
//
// When the budget does not hold every due copy, the units with the fewest
// copies so far go first (a unit sent once is lost with probability p, one
// sent three times with p³), oldest first among equals, and the units left
// out stay due for the next packet instead of dropping out of the chain —
// which left a burst's units with fewer copies than the loss rate asks for.
func (s *Sender) writeRedundant(w *section) (int, error) {
	n := 0
	limit := uint8(1 + s.redund)
	cand := s.cand[:0]
	for _, l := range [2][]txEntry{s.carry, s.prev} {
		for _, e := range l {
			st := s.streams[e.stream()].st
			if st == nil || e.id() < st.base || e.id() >= st.next {
				continue
			}
			u := st.unit(e.id())
			if u.acked || u.copies >= limit || u.lastSeq == s.lastSeq || st.needsResend(e.id()) {
				continue
			}
			cand = append(cand, redundCand{e: e, copies: u.copies, first: u.first})
		}
	}
	// Insertion sort: a handful of units (at most maxCarry + one packet's).
	for i := 1; i < len(cand); i++ {
		c := cand[i]
		j := i
		for ; j > 0 && (cand[j-1].copies > c.copies || cand[j-1].copies == c.copies && cand[j-1].first > c.first); j-- {
			cand[j] = cand[j-1]
		}
		cand[j] = c
	}
	s.cand = cand
	s.carry = s.carry[:0]
	for _, c := range cand {
		si := c.e.stream()
		u := s.streams[si].st.unit(c.e.id())
		b := s.unitBits(w, si, c.e.id(), u)
		if b > int(w.redundBits) || !w.fits(b) {
			if len(s.carry) < maxCarry {
				s.carry = append(s.carry, c.e)
			}
			continue
		}
		w.redundBits -= int32(b)
		if err := s.writeUnit(w, si, c.e.id(), u); err != nil {
			return n, err
		}
		s.stats.Redundant++
		n++
	}
	return n, nil
}

// The transmission rings start small and double on use: a connection that
// sends an event or two a second has a handful of packets with units in
// flight (one per packet until the unit's ack). trim gives them back.
const (
	minEntries = 8 // 64 B
	minPkts    = 4 // 64 B
)

// Idle release: once per trimEvery (of Write's now), a stream that neither
// held nor cut anything for idleTrims trims in a row drops its rings, and a
// Sender with nothing in flight or queued for as long drops its
// transmission rings and scratch lists. A burst
// grows them (allocating); steady traffic, even an event every second or
// two, keeps them, so the steady state still allocates nothing.
const (
	trimEvery = time.Second
	idleTrims = 3
)

// trim releases what idle streams and an idle Sender hold (see idleTrims).
// Nothing it drops holds state: ids, stagger schedules and the loss
// estimate stay.
func (s *Sender) trim() {
	busy := s.inFlight() > 0 || s.work > 0 || s.x != nil && (s.x.ugN > 0 || len(s.x.active) > 0)
	for i := range s.streams {
		st := s.streams[i].st
		if st == nil {
			continue
		}
		if st.used || !st.empty() {
			st.used, st.idle = false, 0
			busy = true
			continue
		}
		if st.idle < idleTrims {
			st.idle++
			continue
		}
		if st.units != nil || st.pend != nil {
			st.release()
		}
		if s.inFlight() == 0 && s.work == 0 {
			s.dropStream(i)
		}
	}
	if busy {
		s.quiet = 0
		return
	}
	if s.quiet < idleTrims {
		s.quiet++
		return
	}
	s.dropTx()
	if s.x != nil { // the keys stay: they hold the stagger versions
		s.x.ug, s.x.ugHead = nil, 0
		s.x.active = nil
	}
}

// maxPooledList is the longest scratch list a pooled txState keeps (a
// burst's longer lists go to the garbage collector with it).
const maxPooledList = 16

// dropTx gives the txState back (pN == 0 and nothing to resend: every
// record resolved, so eHead == eTail and no unit is carried by a packet in
// flight; prev and carry name only acknowledged units, which copies skip):
// its smallest rings to their pools, short lists kept with it.
func (s *Sender) dropTx() {
	t := s.txState
	if t == nil {
		return
	}
	s.releaseTx()
	keep := func(l []txEntry) []txEntry {
		if cap(l) > maxPooledList {
			return nil
		}
		return l[:0]
	}
	t.prev, t.cur, t.carry = keep(t.prev), keep(t.cur), keep(t.carry)
	if cap(t.cand) > maxPooledList {
		t.cand = nil
	}
	t.cand = t.cand[:0]
	s.txState = nil
	txStates.Put(t)
}

// releaseTx gives back the transmission rings (pN == 0: every record
// resolved, so eHead == eTail and no unit is carried by a packet in
// flight).
func (s *Sender) releaseTx() {
	entryRings.put(s.entries, minEntries)
	pktRings.put(s.pkts, minPkts)
	s.entries, s.eHead, s.eTail = nil, 0, 0
	s.pkts, s.pHead = nil, 0
}

// releaseIdle gives back, once the last packet in flight is resolved, the
// rings of every stream that holds nothing and, when nothing waits to be
// sent either, the transmission rings, to the shared pools (ringPool), so
// the next event takes them again without allocating: only rings still at
// their first size. A ring a burst grew waits for the delayed trim
// (idleTrims), so bursts that come back keep their room; the scratch lists
// stay until the trim too. With nothing to send or resend, a stream left
// with no rings goes back to its pool as well, its next id kept in the
// streamRef: prev and carry then name only acknowledged units (every
// packet's fate is in, and none is due a resend), which copies skip, so
// they are emptied with it.
func (s *Sender) releaseIdle() {
	idle := s.work == 0
	for i := range s.streams {
		st := s.streams[i].st
		if st == nil || !st.empty() || len(st.units) > minUnits || len(st.pend) > minPend {
			continue
		}
		if st.units != nil || st.pend != nil {
			st.release()
		}
		if idle {
			s.dropStream(i)
		}
	}
	if idle && s.txState != nil && len(s.entries) <= minEntries && len(s.pkts) <= minPkts {
		s.dropTx()
	}
}

// dropStream gives stream i's state back to its pool, keeping its next id
// in the streamRef: the stream holds nothing and has no rings, and the
// Sender has no packet in flight and nothing to resend (see releaseIdle).
func (s *Sender) dropStream(i int) {
	st := s.streams[i].st
	if st.partials != 0 || st.units != nil || st.pend != nil {
		return
	}
	s.streams[i] = streamRef{next: st.next}
	*st = sendStream{resend: st.resend} // a ring of ≤ 64 units' word, zero (resendN is 0), or nil
	streamStructs.Put(st)
	if s.txState != nil {
		s.prev, s.carry = s.prev[:0], s.carry[:0]
	}
}

func (s *Sender) pushPacket(seq uint64) {
	// Entries of this packet are s.cur; append them to the entry ring.
	held := s.eTail - s.eHead
	need := uint64(held) + uint64(len(s.cur))
	if need > uint64(len(s.entries)) {
		n := uint64(max(minEntries, len(s.entries)))
		for n < need {
			n *= 2
		}
		var e []txEntry
		if n == minEntries {
			e = entryRings.get(minEntries)
		} else {
			e = make([]txEntry, n)
		}
		for k := range held {
			i := uint64(s.eHead + k)
			e[i&(n-1)] = s.entries[i&uint64(len(s.entries)-1)]
		}
		entryRings.put(s.entries, minEntries)
		s.entries = e
	}
	mask := uint64(len(s.entries) - 1)
	for _, e := range s.cur {
		s.entries[uint64(s.eTail)&mask] = e
		s.eTail++
	}
	if uint64(s.pN) == uint64(len(s.pkts)) {
		n := uint64(max(minPkts, 2*len(s.pkts)))
		var p []txPacket
		if n == minPkts {
			p = pktRings.get(minPkts)
		} else {
			p = make([]txPacket, n)
		}
		for k := range s.pN {
			i := uint64(s.pHead + k)
			p[i&(n-1)] = s.pkts[i&uint64(len(s.pkts)-1)]
		}
		pktRings.put(s.pkts, minPkts)
		s.pkts = p
	}
	s.pkts[uint64(s.pHead+s.pN)&uint64(len(s.pkts)-1)] = txPacket{seq: seq, n: uint32(len(s.cur))}
	s.pN++
}

// OnFate applies notify's verdict on packet f.Seq. Feed it every fate
// notify.Conn.PopFates returns, in order; fates of packets without guaranteed
// units only feed the loss estimate. Delivered: the units it carried are
// acknowledged. Dropped: each unit it carried that is not acknowledged goes
// back to the front of its lane (RL-2) if the packet belongs to the unit's
// current round (its latest transmission and the copies after it), even
// while copies of that round are still in flight: they followed the dropped
// packet by an interval or two and the verdict's ack covers them (see unit).
// A record older than f.Seq whose fate never came is resolved as dropped
// (counted in Stats.MissedFates): a resend is safe, the receiver discards
// duplicates by id.
func (s *Sender) OnFate(f notify.Fate) {
	s.observe(f.Delivered)
	for s.inFlight() > 0 {
		p := s.pkts[uint64(s.pHead)&uint64(len(s.pkts)-1)]
		if p.seq > f.Seq {
			return
		}
		if p.seq < f.Seq {
			s.rareStats().MissedFates++
		}
		s.resolve(p, p.seq == f.Seq && f.Delivered)
		s.pHead++
		s.pN--
		if s.pN == 0 {
			s.releaseIdle() // may drop the txState
			return
		}
		if p.seq == f.Seq {
			return
		}
	}
}

// FatesIdle reports whether a delivered fate would change nothing in s
// (OnFate) and AckDelivered would find nothing to do: no packet with
// units in flight, and the loss estimate 0 over a full window, which
// delivered fates no longer count into. Until s's next Send*, Write,
// WriteEmpty or OnFate, it then needs only its lost fates: a Server holds
// back the delivered ones, so most datagrams it receives do not touch its
// Sender (a cache miss a datagram on a loaded server).
func (s *Sender) FatesIdle() bool { return s.txState == nil && s.lossN == lossZero|lossWindow }

// AckDelivered acknowledges, ahead of their fates, the units of every packet
// in flight that delivered (notify.Conn.Delivered) reports delivered. Fates
// come in send order, so one lost packet holds back the delivered fates of
// every later packet until the peer gives it up; a unit whose round started
// in the lost packet would meanwhile be requeued on that packet's verdict
// though a later copy arrived (a duplicate the receiver discards, about
// loss² of the units). Call it after feeding OnFate; the packets' own fates
// still come later and release the units. It allocates nothing.
func (s *Sender) AckDelivered(delivered func(seq uint64) bool) {
	if s.txState == nil {
		return
	}
	mask := uint64(len(s.pkts) - 1)
	emask := uint64(len(s.entries) - 1)
	first := s.eHead // of the packet at i (see txPacket)
	for i := range s.pN {
		p := &s.pkts[uint64(s.pHead+i)&mask]
		start := first
		first += p.n
		if p.acked || !delivered(p.seq) {
			continue
		}
		p.acked = true
		for k := range p.n {
			e := s.entries[uint64(start+k)&emask]
			st := s.streams[e.stream()].st
			if e.id() < st.base || e.id() >= st.next {
				continue
			}
			st.unit(e.id()).acked = true
			s.work += int32(st.setResend(e.id(), false))
		}
	}
}

// lossZero is a flag in lossN: the estimate is 0 (no fate so far was a
// loss, or the estimate fell below lossFloor) and the copy count is what
// 0 gives, Config.Redundancy. A delivered fate then only counts itself
// into the window, and observe returns at once.
const lossZero = 0x80

// lossFloor: an estimate below it, where it leaves the copy count at
// Config.Redundancy, is 0. Without it one lost packet kept the estimate
// above 0 for good (it decays by 63/64 a fate and stops at the smallest
// denormal), and every later fate took the whole computation; this way a
// link is clean again ≈ 1,050 delivered fates after a loss (≈ 50 s at 20
// packets/s).
const lossFloor = 1e-9

// observe folds one fate into the loss estimate and updates the copy count:
// the smallest r ≥ Redundancy with loss^(r+1) ≤ ResidualLoss. Inlined: a
// delivered fate while the estimate is 0 (lossZero, nearly every fate)
// reads and writes one byte of the Sender's first line, not the Config or
// the estimate.
func (s *Sender) observe(delivered bool) {
	if delivered && s.lossN&lossZero != 0 {
		if s.lossN < lossZero|lossWindow {
			s.lossN++
		}
		return
	}
	s.observeFate(delivered)
}

// observeFate is observe when the fate can change the estimate.
func (s *Sender) observeFate(delivered bool) {
	if s.cfg.ResidualLoss == 0 {
		return
	}
	s.lossN &^= lossZero
	x := 0.0
	if !delivered {
		x = 1
	}
	if s.lossN < lossWindow {
		s.lossN++
	}
	s.loss += (x - s.loss) / float64(s.lossN)
	r := s.cfg.Redundancy
	if r == 0 {
		s.markZero(r)
		return // copies off altogether
	}
	all := s.loss // P(a unit and its r copies are all lost), Bernoulli
	for i := 0; i < r; i++ {
		all *= s.loss
	}
	for all > s.cfg.ResidualLoss && r < MaxRedundancy {
		all *= s.loss
		r++
	}
	s.redund = uint8(r)
	s.markZero(r)
}

// markZero sets lossZero when the estimate is below lossFloor with r, the
// copy count it gave, at Config.Redundancy (what 0 gives): the estimate is
// then 0, and delivered fates change nothing but the count until the next
// loss.
func (s *Sender) markZero(r int) {
	if s.loss < lossFloor && r == s.cfg.Redundancy {
		s.loss = 0
		s.lossN |= lossZero
	}
}

func (s *Sender) resolve(p txPacket, delivered bool) {
	mask := uint64(len(s.entries) - 1)
	for k := range p.n { // the head packet's entries start at eHead
		s.settle(s.entries[uint64(s.eHead+k)&mask], p.seq, delivered)
	}
	s.eHead += p.n
	s.advanceAll()
}

// settle applies the fate of packet seq to one unit it carried.
func (s *Sender) settle(e txEntry, seq uint64, delivered bool) {
	st := s.streams[e.stream()].st
	if e.id() < st.base || e.id() >= st.next {
		return // cannot happen: a unit with refs > 0 is never freed
	}
	u := st.unit(e.id())
	if u.refs > 0 {
		u.refs--
	}
	switch {
	case delivered:
		u.acked = true
		s.work += int32(st.setResend(e.id(), false))
	case !u.acked && !st.needsResend(e.id()) && (u.refs == 0 || seq >= u.first):
		s.work += int32(st.setResend(e.id(), true))
		u.copies = 0
		s.rareStats().Requeued++
	}
}

func (s *Sender) advanceAll() {
	for si := range s.streams {
		if st := s.streams[si].st; st != nil {
			s.advance(st, si)
		}
	}
}

// advance frees acknowledged units from the base of the stream upward.
func (s *Sender) advance(st *sendStream, si int) {
	for st.base < st.next {
		u := st.unit(st.base)
		if !u.acked || u.refs > 0 {
			return
		}
		if u.kind == kindWhole || u.kind == kindLast {
			s.queuedBytes -= u.size
			s.arena.putSlab(u.pay, u.size)
			st.held--
			if u.kind == kindLast && si == s.cfg.Lanes {
				st.partials--
			}
		}
		*u = unit{}
		st.base++
	}
}
