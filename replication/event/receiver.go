package event

import (
	"fmt"
	mbits "math/bits"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// ReceiverStats counts what a Receiver did; a plain value.
type ReceiverStats struct {
	Ordered      uint64 // ordered events delivered
	Unordered    uint64 // unordered events delivered
	Unguaranteed uint64 // unguaranteed events delivered
	Staggered    uint64 // staggered updates delivered (newer than the last one of their key)
	StaleStagger uint64 // staggered copies ignored: same or older version
	Duplicates   uint64 // guaranteed units discarded because their id was already received
	Buffered     uint64 // ordered units that arrived ahead of their lane and waited
	Sections     uint64 // sections read successfully
	Rejected     uint64 // sections rejected with an error
}

// rxSlot is an ordered unit that arrived ahead of its lane.
type rxSlot struct {
	present bool
	kind    unitKind
	total   int32  // kindFirst: the event's size
	buf     []byte // payload copy (a slab)
}

// laneRx is the receiver half of one ordered lane: units below next were
// delivered; slots buffers units in [next, next+len(slots)).
type laneRx struct {
	next       uint64
	slots      []rxSlot // ring, len a power of two, grown on demand up to MaxInFlightPerLane; nil while idle
	asm        []byte   // the fragmented event being reassembled (a slab of its size)
	pktLast    uint64   // id of the lane's latest record in the packet being read
	asmTotal   int32    // ≤ MaxEventSize
	ahead      int32    // slots present (≤ MaxInFlightPerLane)
	assembling bool
	used       bool  // a record of the lane arrived since the last trim
	idle       uint8 // trims in a row without one
}

// partial is an unordered fragmented event being reassembled.
type partial struct {
	used  bool
	first uint64 // id of its first fragment
	total int
	got   int
	buf   []byte
}

// Receiver is the receiving half of the event layer for one connection. It
// reads event sections, discards duplicate guaranteed units by id, delivers
// each ordered lane strictly in order (buffering what arrives early),
// reassembles fragments, and keeps the newest version per staggered key.
//
// Every decoder is bound-checked: a hostile section returns an error, never
// panics, and cannot make the Receiver hold more than MaxQueuedBytes of
// payload (plus slab rounding), MaxInFlightPerLane slots per lane and
// MaxPartial reassemblies.
//
// The zero Receiver is not usable; use NewReceiver. Not safe for concurrent
// use; the connection actor owns it.
type Receiver struct {
	cfg *Config // shared (interned), never written
	// sinceTrim and stats.Sections beside cfg, in the Receiver's first 16
	// bytes: a section without events (most packets') reads nothing else
	// (sectionDone), and an 80-byte object starts 16-byte aligned (on a
	// cache line, or 16, 32 or 48 bytes into one), so those are one line
	// wherever it starts (in a 96-byte object, on a line or half-way
	// into one, the first 24 bytes were; with them at bytes 72–88, two:
	// by a connection's next packet its Receiver has left the cache, and
	// each line is a miss).
	//
	// Idle release (trim), counted in sections: there is no clock here;
	// every Config.receiverTrim sections.
	sinceTrim       int32
	stats           rxStats // Sections first
	idBits, keyBits uint8
	used            bool  // a payload was read since the last trim
	quiet           uint8 // trims in a row without one
	// bytes: payload buffered (slots, reassemblies), ≤ MaxQueuedBytes ≤
	// 2^30; int32 beside the bytes above, in the word's padding (an int of
	// its own put the Receiver at 136 bytes, the 144 class; now 128).
	bytes int32
	arena arena
	lanes []laneRef // as long as the highest lane heard from
	// *receiverX: the unordered stream's and the staggered keys' state,
	// made on the first record of either (nil: none yet).
	*receiverX
	// scratch: the payload buffer of a Read without the caller's (a
	// client's); a server's Receivers read into the shard's (ReadScratch)
	// and never make one. Behind a pointer: 16 bytes fewer in every
	// Receiver (the 112 class; 128 with the slice in it).
	scratch *ownScratch
	rare    *ReceiverStats // the counters of what most connections never see: made on the first
}

// streamSet has a bit per stream: which have a record in the section being
// read (ReadScratch's, on its stack: in the Receiver it was 16 bytes of
// every connection, 96 → 80 B).
type streamSet [2]uint64

// receiverX is what a Receiver keeps for the unordered stream and the
// staggered keys, made on the first record of either: most connections
// send only ordered events (88 bytes of every Receiver otherwise). It
// holds state (the unordered window, the key versions), so it stays.
type receiverX struct {
	unBase   uint64   // all unordered ids below were received
	unSeen   []uint64 // bitmap over ids [unBase, unBase+m), position id mod m (m = MaxInFlightPerLane)
	unAhead  int32    // bits set in unSeen (ids received above unBase; < MaxInFlightPerLane)
	partials []partial
	keys     []staggerRx
	unLast   uint64 // the unordered stream's pktLast (laneRx.pktLast)
}

// ext makes the receiverX on first use.
func (r *Receiver) ext() {
	if r.receiverX == nil {
		r.receiverX = new(receiverX)
	}
}

// The receiver's buffers are made on use and sized by it: the reorder slots
// of a lane start at minSlots and double as units arrive further ahead, the
// payload scratch starts at minScratch and doubles up to MaxFragment. Once
// every trimSections sections, a lane with no record for idleTrims trims in a
// row and nothing buffered drops its slots, and a Receiver with no payload
// for as long drops its scratch, the unordered bitmap (when no id above
// unBase is marked) and idle reassembly slots. At 20
// to 30 packets a second that is 3–5 s of silence; traffic, even an event
// every second or two, keeps them, so the steady state allocates nothing.
const (
	minSlots     = 8  // 256 B
	minScratch   = 64 //
	trimSections = 32
)

type staggerRx struct {
	version uint16
	has     bool
}

// NewReceiver returns a Receiver for cfg (the sender's Config: see Config for
// the fields that are part of the wire contract).
func NewReceiver(cfg Config) (*Receiver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Receiver{
		cfg:     interned(cfg),
		idBits:  uint8(idWidth(cfg.MaxInFlightPerLane)),
		keyBits: uint8(bitstream.RangeBits(0, int64(cfg.StaggerKeys-1))),
	}
	return r, nil
}

// Stats returns the counters so far.
func (r *Receiver) Stats() ReceiverStats {
	var st ReceiverStats
	if r.rare != nil {
		st = *r.rare
	}
	st.Ordered, st.Duplicates, st.Sections = uint64(r.stats.Ordered), uint64(r.stats.Duplicates), uint64(r.stats.Sections)
	return st
}

// rxStats are the counters of ReceiverStats that a connection with ordered
// events (and their redundant copies) counts all the time.
//
// 32-bit (12 bytes of every Receiver): Sections counts one a packet, over
// two years at 60 packets a second; Ordered and Duplicates one a record,
// a few a packet on any sane link (a peer that fills every packet with
// duplicates wraps Duplicates within days: a statistic, nothing reads it).
type rxStats struct{ Sections, Ordered, Duplicates uint32 }

// rareStats returns the other counters (rejections, the other classes,
// reordering), made on first use: 48 bytes of every Receiver otherwise.
func (r *Receiver) rareStats() *ReceiverStats {
	if r.rare == nil {
		r.rare = new(ReceiverStats)
	}
	return r.rare
}

// BufferedBytes is the payload held for reordering and reassembly.
func (r *Receiver) BufferedBytes() int { return int(r.bytes) }

// record is one parsed record header.
type record struct {
	class   Class
	stream  int    // ordered: lane; unordered: Lanes
	next    bool   // id = previous id of the stream in this packet + 1
	idLow   uint64 // truncated id (when !next)
	kind    unitKind
	total   int // fragment: event size
	index   int // unordered fragment index
	offset  int // unordered fragment offset
	key     uint16
	version uint16
	n       int // payload bytes
}

// Read reads one event section from rd and calls deliver for every event it
// completes, in order. Event.Payload is valid only during the call. The
// section is parsed twice: first without side effects (a malformed or
// truncated section is rejected whole, rd untouched), then to deliver. On
// success rd is positioned after the section's end bit. A nil deliver
// discards the events (their ids still count as received).
func (r *Receiver) Read(rd *bitstream.Reader, deliver func(Event)) error {
	return r.ReadScratch(rd, nil, deliver)
}

// ReadScratch is Read with the caller's scratch for the payloads: a
// record's payload is copied out of the packet into scratch (when it
// fits) and lives there only during its deliver call, so the connections
// of one goroutine can share one buffer instead of each keeping its own
// (64 bytes and up a connection). Payloads that do not fit use the
// Receiver's own scratch. A nil scratch is Read.
func (r *Receiver) ReadScratch(rd *bitstream.Reader, scratch []byte, deliver func(Event)) error {
	if deliver == nil {
		deliver = func(Event) {} // consume the events; parse(nil) would only check them
	}
	probe := *rd
	if more, err := probe.ReadFlag("event.more"); err == nil && !more {
		// An empty section, its end bit alone — most packets' (events are
		// rare) —: nothing to check twice, nothing to deliver.
		_, _ = rd.ReadFlag("event.more") // the bit probe just read
		r.sectionDone()
		return nil
	}
	probe = *rd
	var has streamSet
	if err := r.parse(&probe, nil, nil, &has); err != nil {
		r.rareStats().Rejected++
		return err
	}
	err := r.parse(rd, deliver, scratch, &has)
	r.dropLanes(&has)
	if err != nil {
		r.rareStats().Rejected++
		return err
	}
	r.sectionDone()
	return nil
}

// SkipEmpty counts n sections without events — each its end bit alone —
// that the caller read past itself instead of calling ReadScratch, as
// ReadScratch would have: their Sections, and the idle trims due among
// them, in the same order. It returns TrimIn. A caller that reads past
// fewer than TrimIn empty sections before it calls SkipEmpty or
// ReadScratch leaves the Receiver as if ReadScratch had read each: a
// Server reads its client's empty sections so (most packets'), and its
// Receiver, by a connection's next packet out of the cache on a loaded
// server, is not read for them (a cache miss a datagram).
func (r *Receiver) SkipEmpty(n int) int {
	for n > 0 {
		k := max(1, min(n, r.TrimIn()))
		r.stats.Sections += uint32(k)
		r.sinceTrim += int32(k)
		n -= k
		if r.sinceTrim >= r.cfg.receiverTrim {
			r.sinceTrim = 0
			r.trim()
		}
	}
	return r.TrimIn()
}

// TrimIn is how many sections from now, the one that runs it included,
// the Receiver's next idle trim is (at least 1).
func (r *Receiver) TrimIn() int { return int(r.cfg.receiverTrim - r.sinceTrim) }

// sectionDone counts a section read and runs the trim when it is due.
func (r *Receiver) sectionDone() {
	r.stats.Sections++
	if r.sinceTrim++; r.sinceTrim >= r.cfg.receiverTrim {
		r.sinceTrim = 0
		r.trim()
	}
}

// trim releases what idle lanes and an idle Receiver hold (see
// trimSections). Nothing it drops holds state: the lanes' next ids, the
// unordered window's base and the stagger versions stay.
func (r *Receiver) trim() {
	for i := range r.lanes {
		ln := r.lanes[i].ln
		if ln == nil {
			continue
		}
		if ln.used || ln.ahead > 0 || ln.assembling {
			ln.used, ln.idle = false, 0
			continue
		}
		if ln.idle < idleTrims {
			ln.idle++
			continue
		}
		ln.slots = nil
		r.dropLane(i)
	}
	if r.used {
		r.used, r.quiet = false, 0
		return
	}
	if r.quiet < idleTrims {
		r.quiet++
		return
	}
	r.scratch = nil
	if r.receiverX == nil {
		return
	}
	if r.unAhead == 0 {
		r.unSeen = nil
	}
	busy := false
	for i := range r.partials {
		busy = busy || r.partials[i].used
	}
	if !busy {
		r.partials = nil
	}
}

// parse walks the section; with deliver == nil it only checks the structure
// and skips payloads.
// has collects the streams that have a record in the section.
func (r *Receiver) parse(rd *bitstream.Reader, deliver func(Event), scratch []byte, has *streamSet) error {
	*has = streamSet{}
	for {
		more, err := rd.ReadFlag("event.more")
		if err != nil {
			return err
		}
		if !more {
			return nil
		}
		var rec record
		if err := r.readHeader(rd, &rec, has); err != nil {
			return err
		}
		if deliver == nil {
			if err := skipBytes(rd, rec.n); err != nil {
				return err
			}
			continue
		}
		r.used = true
		var p []byte
		if rec.n <= len(scratch) {
			p = scratch[:rec.n]
		} else {
			if r.scratch == nil || rec.n > len(r.scratch.b) {
				r.growScratch(rec.n)
			}
			p = r.scratch.b[:rec.n]
		}
		if rec.n > 0 {
			if err := rd.ReadBytes(p, "event.payload"); err != nil {
				return err
			}
		}
		if err := r.apply(&rec, p, deliver); err != nil {
			return err
		}
	}
}

// growScratch makes the scratch hold n bytes (n ≤ MaxFragment, checked by
// the parser): a power of two from minScratch, capped at MaxFragment. Events
// are mostly a few dozen bytes; a MaxFragment buffer per connection was 1 KB
// of every player's memory.
func (r *Receiver) growScratch(n int) {
	if r.scratch == nil {
		r.scratch = new(ownScratch)
	}
	c := max(minScratch, 2*len(r.scratch.b))
	for c < n {
		c *= 2
	}
	r.scratch.b = make([]byte, min(c, r.cfg.MaxFragment))
}

// ownScratch is a Receiver's own payload buffer (Receiver.scratch).
type ownScratch struct{ b []byte }

// ownLen is the size of the Receiver's own payload buffer (0: none).
func (r *Receiver) ownLen() int {
	if r.scratch == nil {
		return 0
	}
	return len(r.scratch.b)
}

// lane returns lane i's receiver state, made on its first record (i <
// Lanes: the parser checked it). The slice reaches only as far as the
// highest lane heard from.
func (r *Receiver) lane(i int) *laneRx {
	if i >= len(r.lanes) {
		nl := make([]laneRef, i+1)
		copy(nl, r.lanes)
		r.lanes = nl
	}
	ln := r.lanes[i].ln
	if ln == nil {
		// Lane state only while the lane has a record in the packet at
		// hand or holds something (dropLanes): the id goes on from the
		// reference.
		ln = laneStructs.Get()
		ln.next = r.lanes[i].next
		r.lanes[i].ln = ln
	}
	return ln
}

// laneRef is a Receiver's handle on one ordered lane: its state while it
// holds something, or only its next id while it is idle — 16 bytes instead
// of the 80 of a laneRx for every lane a connection ever used.
type laneRef struct {
	ln   *laneRx // nil: idle or never heard from
	next uint64  // the lane's next id while ln is nil
}

// dropLane gives lane i's state back to its pool if it holds nothing:
// no unit waiting ahead, no reassembly, no slots.
func (r *Receiver) dropLane(i int) {
	ln := r.lanes[i].ln
	if ln == nil || ln.ahead != 0 || ln.assembling || ln.slots != nil || ln.asm != nil {
		return
	}
	r.lanes[i] = laneRef{next: ln.next}
	*ln = laneRx{}
	laneStructs.Put(ln)
}

// dropLanes drops, after a section, the lanes it had records of that hold
// nothing now (has): a lane that receives an event a second keeps no
// state between them.
func (r *Receiver) dropLanes(has *streamSet) {
	for w, bits := range has {
		for bits != 0 {
			i := w*64 + mbits.TrailingZeros64(bits)
			bits &= bits - 1
			if i < len(r.lanes) {
				r.dropLane(i)
			}
		}
	}
}

// readHeader reads and checks a record's fields up to its payload.
func (r *Receiver) readHeader(rd *bitstream.Reader, rec *record, has *streamSet) error {
	c, err := rd.ReadBits(classBits, "event.class")
	if err != nil {
		return err
	}
	rec.class = Class(c)
	switch rec.class {
	case Unguaranteed:
	case Staggered:
		if r.keyBits > 0 {
			k, err := rd.ReadRangedInt(0, int64(r.cfg.StaggerKeys-1), "event.key")
			if err != nil {
				return err
			}
			rec.key = uint16(k)
		}
		v, err := rd.ReadBits(versionBits, "event.version")
		if err != nil {
			return err
		}
		rec.version = uint16(v)
	case Ordered, Unordered:
		if err := r.readUnitHeader(rd, rec, has); err != nil {
			return err
		}
	}
	n, err := rd.ReadGamma("event.len")
	if err != nil {
		return err
	}
	if n-1 > uint64(r.cfg.MaxFragment) {
		return fmt.Errorf("%w: record of %d bytes (MaxFragment %d)", ErrMalformed, n-1, r.cfg.MaxFragment)
	}
	rec.n = int(n - 1)
	if rec.kind != kindWhole {
		if rec.n == 0 || rec.n >= rec.total {
			return fmt.Errorf("%w: fragment of %d bytes in an event of %d", ErrMalformed, rec.n, rec.total)
		}
		if rec.class == Unordered && rec.offset+rec.n > rec.total {
			return fmt.Errorf("%w: fragment [%d, %d) beyond event size %d", ErrMalformed, rec.offset, rec.offset+rec.n, rec.total)
		}
	}
	return nil
}

func (r *Receiver) readUnitHeader(rd *bitstream.Reader, rec *record, has *streamSet) error {
	rec.stream = r.cfg.Lanes
	if rec.class == Ordered {
		l, err := rd.ReadRangedInt(0, int64(r.cfg.Lanes-1), "event.lane")
		if err != nil {
			return err
		}
		rec.stream = int(l)
	}
	if bit := uint64(1) << (rec.stream & 63); has[rec.stream>>6]&bit != 0 {
		next, err := rd.ReadFlag("event.next")
		if err != nil {
			return err
		}
		rec.next = next
	} else {
		has[rec.stream>>6] |= bit
	}
	if !rec.next {
		id, err := rd.ReadBits(uint(r.idBits), "event.id")
		if err != nil {
			return err
		}
		rec.idLow = id
	}
	frag, err := rd.ReadFlag("event.frag")
	if err != nil || !frag {
		return err
	}
	if rec.class == Ordered {
		k, err := rd.ReadBits(fkindBits, "event.fkind")
		if err != nil {
			return err
		}
		if k > 2 {
			return fmt.Errorf("%w: fragment kind 3", ErrMalformed)
		}
		rec.kind = kindFirst + unitKind(k)
		rec.total = r.cfg.MaxEventSize // middle and last: bounded by the reassembly
		if rec.kind == kindFirst {
			t, err := rd.ReadBits(totalBits, "event.total")
			if err != nil {
				return err
			}
			rec.total = int(t) + 1
		}
	} else {
		ix, err := rd.ReadGamma("event.index")
		if err != nil {
			return err
		}
		t, err := rd.ReadBits(totalBits, "event.total")
		if err != nil {
			return err
		}
		off, err := rd.ReadBits(offsetBits, "event.offset")
		if err != nil {
			return err
		}
		rec.kind = kindMiddle // unordered fragments complete by byte count
		rec.index, rec.total, rec.offset = int(ix-1), int(t)+1, int(off)
		if (rec.index == 0) != (rec.offset == 0) {
			return fmt.Errorf("%w: fragment index %d at offset %d", ErrMalformed, rec.index, rec.offset)
		}
	}
	if rec.total > r.cfg.MaxEventSize {
		return fmt.Errorf("%w: event of %d bytes (MaxEventSize %d)", ErrMalformed, rec.total, r.cfg.MaxEventSize)
	}
	return nil
}

// skipBytes advances rd past n payload bytes.
func skipBytes(rd *bitstream.Reader, n int) error {
	if 8*n > rd.Remaining() {
		_, err := rd.ReadBits(64, "event.payload") // fails with the field named
		if err == nil {
			err = fmt.Errorf("%w: payload beyond the packet", ErrMalformed)
		}
		return err
	}
	for b := 8 * n; b > 0; b -= 64 {
		if _, err := rd.ReadBits(uint(min(b, 64)), "event.payload"); err != nil {
			return err
		}
	}
	return nil
}

// growKeys makes r.keys cover key (< StaggerKeys, checked by the parser):
// a prefix grown by doubling, so idle connections keep no per-key state.
func (r *Receiver) growKeys(key int) {
	r.ext()
	n := max(minGrow, 2*len(r.keys))
	for n <= key {
		n *= 2
	}
	keys := make([]staggerRx, min(n, r.cfg.StaggerKeys))
	copy(keys, r.keys)
	r.keys = keys
}

// apply delivers or buffers one record whose structure was checked.
func (r *Receiver) apply(rec *record, p []byte, deliver func(Event)) error {
	switch rec.class {
	case Unguaranteed:
		r.rareStats().Unguaranteed++
		deliver(Event{Class: Unguaranteed, Payload: p})
		return nil
	case Staggered:
		r.ext()
		if int(rec.key) >= len(r.keys) {
			r.growKeys(int(rec.key))
		}
		k := &r.keys[rec.key]
		if k.has {
			if d := rec.version - k.version; d == 0 || d > 1<<versionBits-1-staggerStale {
				r.rareStats().StaleStagger++
				return nil
			}
		}
		k.has, k.version = true, rec.version
		r.rareStats().Staggered++
		deliver(Event{Class: Staggered, Key: rec.key, Payload: p})
		return nil
	}
	var ref uint64
	var last *uint64
	if rec.class == Ordered {
		ln := r.lane(rec.stream)
		ln.used = true
		ref, last = ln.next, &ln.pktLast
	} else {
		r.ext()
		ref, last = r.unBase, &r.unLast
	}
	id := rec.idLow
	if rec.next {
		// A record of the stream came before it in this packet: apply set
		// *last (the lane exists since).
		id = *last + 1
	} else {
		id = reconstruct(ref, id, uint(r.idBits))
	}
	*last = id
	if id < ref {
		r.stats.Duplicates++
		return nil
	}
	if id-ref >= uint64(r.cfg.MaxInFlightPerLane) {
		return fmt.Errorf("%w: id %d beyond the window at %d", ErrMalformed, id, ref)
	}
	if rec.class == Ordered {
		return r.applyOrdered(rec, id, p, deliver)
	}
	return r.applyUnordered(rec, id, p, deliver)
}

func (r *Receiver) applyOrdered(rec *record, id uint64, p []byte, deliver func(Event)) error {
	ln := r.lanes[rec.stream].ln
	if id > ln.next {
		if err := r.ensureSlots(ln, id-ln.next); err != nil {
			return err
		}
		s := &ln.slots[id&uint64(len(ln.slots)-1)]
		if s.present {
			r.stats.Duplicates++
			return nil
		}
		if int(r.bytes)+len(p) > r.cfg.MaxQueuedBytes {
			return fmt.Errorf("%w: %d bytes buffered", ErrReceiverFull, r.bytes)
		}
		s.present, s.kind, s.total = true, rec.kind, int32(rec.total)
		s.buf = r.arena.get(len(p))
		copy(s.buf, p)
		ln.ahead++
		r.bytes += int32(len(p))
		r.rareStats().Buffered++
		return nil
	}
	if err := r.deliverOrdered(ln, rec.stream, rec.kind, rec.total, p, deliver); err != nil {
		return err
	}
	ln.next++
	for len(ln.slots) > 0 {
		s := &ln.slots[ln.next&uint64(len(ln.slots)-1)]
		if !s.present {
			break
		}
		buf, kind, total := s.buf, s.kind, int(s.total)
		*s = rxSlot{}
		ln.ahead--
		r.bytes -= int32(len(buf))
		err := r.deliverOrdered(ln, rec.stream, kind, total, buf, deliver)
		r.arena.put(buf)
		if err != nil {
			return err
		}
		ln.next++
	}
	return nil
}

// ensureSlots grows the lane's ring so that it covers ids up to next+ahead.
func (r *Receiver) ensureSlots(ln *laneRx, ahead uint64) error {
	if ahead < uint64(len(ln.slots)) {
		return nil
	}
	n := max(minSlots, len(ln.slots))
	for uint64(n) <= ahead {
		n *= 2
	}
	s := make([]rxSlot, n)
	if len(ln.slots) > 0 {
		for id := ln.next; id < ln.next+uint64(len(ln.slots)); id++ {
			s[id&uint64(n-1)] = ln.slots[id&uint64(len(ln.slots)-1)]
		}
	}
	ln.slots = s
	return nil
}

// deliverOrdered hands the lane's next unit to the application or to the
// reassembly of a fragmented event.
func (r *Receiver) deliverOrdered(ln *laneRx, lane int, kind unitKind, total int, p []byte, deliver func(Event)) error {
	switch kind {
	case kindWhole:
		if ln.assembling {
			return fmt.Errorf("%w: lane %d: whole event inside a fragmented one", ErrMalformed, lane)
		}
		r.stats.Ordered++
		deliver(Event{Class: Ordered, Lane: lane, Payload: p})
		return nil
	case kindFirst:
		if ln.assembling {
			return fmt.Errorf("%w: lane %d: first fragment inside a fragmented event", ErrMalformed, lane)
		}
		if int(r.bytes)+len(p) > r.cfg.MaxQueuedBytes {
			return fmt.Errorf("%w: %d bytes buffered", ErrReceiverFull, r.bytes)
		}
		ln.asm = append(r.arena.get(total)[:0], p...)
		ln.asmTotal, ln.assembling = int32(total), true
		r.bytes += int32(len(p))
		return nil
	}
	if !ln.assembling {
		return fmt.Errorf("%w: lane %d: fragment without a first one", ErrMalformed, lane)
	}
	got := len(ln.asm) + len(p)
	if got > int(ln.asmTotal) || (kind == kindMiddle) == (got == int(ln.asmTotal)) {
		return fmt.Errorf("%w: lane %d: fragments make %d of %d bytes", ErrMalformed, lane, got, ln.asmTotal)
	}
	if int(r.bytes)+len(p) > r.cfg.MaxQueuedBytes {
		return fmt.Errorf("%w: %d bytes buffered", ErrReceiverFull, r.bytes)
	}
	ln.asm = append(ln.asm, p...)
	r.bytes += int32(len(p))
	if kind == kindLast {
		r.stats.Ordered++
		deliver(Event{Class: Ordered, Lane: lane, Payload: ln.asm})
		r.bytes -= int32(len(ln.asm))
		r.arena.put(ln.asm)
		ln.asm, ln.asmTotal, ln.assembling = nil, 0, false
	}
	return nil
}

func (r *Receiver) seen(id uint64) bool {
	if r.unSeen == nil {
		return false
	}
	p := id & (uint64(r.cfg.MaxInFlightPerLane) - 1)
	return r.unSeen[p>>6]&(1<<(p&63)) != 0
}

func (r *Receiver) applyUnordered(rec *record, id uint64, p []byte, deliver func(Event)) error {
	if r.seen(id) {
		r.stats.Duplicates++
		return nil
	}
	if rec.kind != kindWhole {
		if err := r.reassemble(rec, id, p, deliver); err != nil {
			return err
		}
	} else {
		r.rareStats().Unordered++
		deliver(Event{Class: Unordered, Payload: p})
	}
	if r.unSeen == nil { // most connections never see an unordered event: 2 KB saved
		r.unSeen = make([]uint64, r.cfg.MaxInFlightPerLane/64)
	}
	pos := id & (uint64(r.cfg.MaxInFlightPerLane) - 1)
	r.unSeen[pos>>6] |= 1 << (pos & 63)
	r.unAhead++
	for r.seen(r.unBase) {
		pos := r.unBase & (uint64(r.cfg.MaxInFlightPerLane) - 1)
		r.unSeen[pos>>6] &^= 1 << (pos & 63)
		r.unAhead--
		r.unBase++
	}
	return nil
}

// reassemble adds an unordered fragment to its event (identified by the id of
// its first fragment) and delivers the event once every byte arrived.
func (r *Receiver) reassemble(rec *record, id uint64, p []byte, deliver func(Event)) error {
	if uint64(rec.index) > id {
		return fmt.Errorf("%w: fragment index %d of id %d", ErrMalformed, rec.index, id)
	}
	first := id - uint64(rec.index)
	var pt, free *partial
	for i := range r.partials {
		q := &r.partials[i]
		switch {
		case q.used && q.first == first:
			pt = q
		case !q.used && free == nil:
			free = q
		}
	}
	if pt == nil {
		if free == nil && len(r.partials) < r.cfg.MaxPartial {
			// Made on use, up to MaxPartial: most connections never
			// fragment an unordered event (≈ 1 KB per connection otherwise).
			r.partials = append(r.partials, partial{})
			free = &r.partials[len(r.partials)-1]
		}
		if free == nil {
			return fmt.Errorf("%w: %d fragmented events in reassembly", ErrReceiverFull, len(r.partials))
		}
		pt = free
		*pt = partial{used: true, first: first, total: rec.total}
	}
	if pt.total != rec.total {
		return fmt.Errorf("%w: fragment says %d bytes, event %d", ErrMalformed, rec.total, pt.total)
	}
	if int(r.bytes)+len(p) > r.cfg.MaxQueuedBytes {
		if pt.got == 0 {
			pt.used = false
		}
		return fmt.Errorf("%w: %d bytes buffered", ErrReceiverFull, r.bytes)
	}
	if pt.buf == nil {
		pt.buf = r.arena.get(pt.total)
	}
	copy(pt.buf[rec.offset:], p)
	pt.got += len(p)
	r.bytes += int32(len(p))
	if pt.got >= pt.total {
		r.rareStats().Unordered++
		deliver(Event{Class: Unordered, Payload: pt.buf})
		r.bytes -= int32(pt.got)
		r.arena.put(pt.buf)
		*pt = partial{}
	}
	return nil
}
