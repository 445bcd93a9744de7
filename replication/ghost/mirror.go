package ghost

import (
	"fmt"
	"iter"
	"math/bits"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// Ghost is the client's replica of one server entity. Fields are read-only
// for the caller. A *Ghost stays valid (and keeps its address) until its
// ghost is killed.
type Ghost struct {
	ID     uint32 // ghost id on this connection
	Entity uint64 // the server's stable entity id
	Class  *Class
	State  State
	// Updated is the server time (Mirror clock) of the newest state applied.
	Updated time.Duration
	// Created is the local time the create arrived.
	Created time.Duration

	q       [3]uint32 // quantized position
	live    bool
	livePos int32 // index in Mirror.live
	hist    history
}

// MirrorStats counts what a Mirror decoded.
type MirrorStats struct {
	Sections uint64 // non-empty ghost sections read
	Creates  uint64
	Updates  uint64
	Kills    uint64
	Replaced uint64 // creates for an id that held another entity
	Older    uint64 // groups ignored because a newer value was already applied (reordering)
	// Unreferenced counts window-coded positions ignored because the history
	// no longer held their reference (packets delayed past HistoryLen values).
	Unreferenced uint64
}

// pageSize ghosts share one lazily allocated page, so memory follows the ids
// actually used (and a hostile packet naming a high id costs one page, not
// MaxGhosts ghosts).
const (
	pageShift = 6
	pageSize  = 1 << pageShift
)

type page struct {
	g      [pageSize]Ghost
	stamps []int64 // [slot*stride+group]: stamp of the group's applied value (ms)
}

// Mirror is the client side of the ghost protocol: it decodes ghost sections
// into replicas keyed by ghost id, and renders them through an Interpolator.
//
// Reordered packets are handled per group: each group of each ghost
// remembers the server stamp of the value it holds and ignores older ones,
// so a late packet never rolls state back (checklist RL-5: "never applies an
// x older than one it already applied").
//
// Create with NewMirror; the zero Mirror is not usable. Not safe for
// concurrent use; the client session owns it.
type Mirror struct {
	reg      *Registry
	cfg      MirrorConfig
	stride   int
	maxWidth uint

	pages    []*page
	live     []uint32
	byEntity map[uint64]uint32
	junk     State // decode target for groups that are older than what we hold

	newest   int64 // newest section stamp, ms in the mirror's server clock
	hasStamp bool
	offset   time.Duration // server clock − local clock (max over packets, decaying)
	clockAt  time.Duration
	hasClock bool

	stats MirrorStats
}

// NewMirror returns an empty mirror. It freezes reg.
func NewMirror(reg *Registry, cfg MirrorConfig) (*Mirror, error) {
	if reg == nil {
		return nil, fmt.Errorf("%w: nil registry", ErrConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	reg.frozen.Store(true)
	return &Mirror{
		reg:      reg,
		cfg:      cfg,
		stride:   max(reg.maxGroups, 1),
		maxWidth: uint(bits.Len32(uint32(cfg.MaxGhosts - 1))),
		pages:    make([]*page, (cfg.MaxGhosts+pageSize-1)/pageSize),
		byEntity: make(map[uint64]uint32),
	}, nil
}

// Stats returns the counters so far.
func (m *Mirror) Stats() MirrorStats { return m.stats }

// Len is the number of live ghosts.
func (m *Mirror) Len() int { return len(m.live) }

// At returns the i-th live ghost, 0 ≤ i < Len(), in no particular order.
// The order changes when ghosts are killed.
func (m *Mirror) At(i int) *Ghost { g, _ := m.slot(m.live[i]); return g }

// All iterates over the live ghosts. Do not call Read while iterating.
func (m *Mirror) All() iter.Seq[*Ghost] {
	return func(yield func(*Ghost) bool) {
		for _, id := range m.live {
			g, _ := m.slot(id)
			if !yield(g) {
				return
			}
		}
	}
}

// Lookup returns the live ghost with id.
func (m *Mirror) Lookup(id uint32) (*Ghost, bool) {
	if int(id) >= m.cfg.MaxGhosts {
		return nil, false
	}
	p := m.pages[id>>pageShift]
	if p == nil || !p.g[id&(pageSize-1)].live {
		return nil, false
	}
	return &p.g[id&(pageSize-1)], true
}

// ByEntity returns the live ghost of a server entity.
func (m *Mirror) ByEntity(entity uint64) (*Ghost, bool) {
	id, ok := m.byEntity[entity]
	if !ok {
		return nil, false
	}
	return m.Lookup(id)
}

// ServerTime estimates the server's clock at local time now, from the stamps
// of received sections: server − local is taken as the largest difference
// seen (the fastest packet), decaying by 1 ms per second so a route change
// or clock drift is followed. Zero before the first section.
func (m *Mirror) ServerTime(now time.Duration) time.Duration {
	return now + m.offsetAt(now)
}

// Stamp is the newest ghost section's stamp — the server's clock when it
// wrote that packet — on ServerTime's clock; false before the first section.
// Unlike ServerTime(now) it does not grow with the time a datagram waited
// to be read.
func (m *Mirror) Stamp() (time.Duration, bool) {
	return time.Duration(m.newest) * time.Millisecond, m.hasStamp
}

// RenderTime is ServerTime(now) − Interp.Delay: where Pose draws entities.
func (m *Mirror) RenderTime(now time.Duration) time.Duration {
	return m.ServerTime(now) - m.cfg.Interp.Delay
}

// Pose renders g at local time now with the mirror's Interpolator.
func (m *Mirror) Pose(g *Ghost, now time.Duration) (Pose, SampleMode) {
	return m.cfg.Interp.Sample(g, m.RenderTime(now))
}

func (m *Mirror) offsetAt(now time.Duration) time.Duration {
	if !m.hasClock {
		return 0
	}
	return m.offset - max(now-m.clockAt, 0)/1000
}

func (m *Mirror) observeClock(ts time.Duration, now time.Duration) {
	sample := ts - now
	if !m.hasClock {
		m.offset, m.clockAt, m.hasClock = sample, now, true
		return
	}
	if now > m.clockAt {
		m.offset = m.offsetAt(now)
		m.clockAt = now
	}
	m.offset = max(m.offset, sample)
}

// slot returns the ghost cell of id (allocating its page), or nil when id is
// beyond MaxGhosts.
func (m *Mirror) slot(id uint32) (*Ghost, *page) {
	if int(id) >= m.cfg.MaxGhosts {
		return nil, nil
	}
	p := m.pages[id>>pageShift]
	if p == nil {
		p = &page{stamps: make([]int64, pageSize*m.stride)}
		m.pages[id>>pageShift] = p
	}
	return &p.g[id&(pageSize-1)], p
}

func (m *Mirror) stamps(id uint32, p *page) []int64 {
	o := int(id&(pageSize-1)) * m.stride
	return p.stamps[o : o+m.stride]
}

func readErr(field string, r *bitstream.Reader, err error) error {
	return &bitstream.ReadError{Field: field, Bit: r.Pos(), Err: err}
}

// Read decodes one ghost section from r, received at local time now, and
// applies it. Malformed input returns an error (a *bitstream.ReadError naming
// the field) and never panics; records before the bad one stay applied, so
// the caller should treat the connection as suspect. Memory is bounded by
// MirrorConfig.MaxGhosts whatever the input.
func (m *Mirror) Read(r *bitstream.Reader, now time.Duration) error {
	n, width, ms, err := m.readSectionHeader(r, now)
	for ; err == nil && n > 0; n-- {
		err = m.readRecord(r, width, ms, now)
	}
	return err
}

// readSectionHeader reads a section's record count and header (the ids'
// width and the stamp, taken into the mirror's clock): n records follow
// (0: an empty section, nothing more to read).
func (m *Mirror) readSectionHeader(r *bitstream.Reader, now time.Duration) (n uint64, width uint, ms int64, err error) {
	cnt, err := r.ReadGamma("ghost.count")
	if err != nil || cnt == 1 {
		return 0, 0, 0, err
	}
	n = cnt - 1
	if n > uint64(r.Remaining()) { // every record is at least one bit
		return 0, 0, 0, readErr("ghost.count", r, bitstream.ErrOutOfRange)
	}
	hdr, err := r.ReadBits(sectionFixed, "ghost.header")
	if err != nil {
		return 0, 0, 0, err
	}
	width = uint(hdr >> stampBits)
	if width > m.maxWidth {
		return 0, 0, 0, readErr("ghost.width", r, ErrIDWidth)
	}
	ms = m.reconstructStamp(uint16(hdr), now)
	m.observeClock(time.Duration(ms)*time.Millisecond, now)
	m.stats.Sections++
	return n, width, ms, nil
}

// reconstructStamp extends a 16-bit millisecond stamp received at local
// time now to the value nearest the server's clock as the mirror estimates
// it (ServerTime: ±32.8 s), in the mirror's own epoch; never nearer the
// past than the newest stamp seen. The newest stamp alone is not enough:
// a server with nothing to send for 40 s (a static scene) sends no stamp,
// and its next section would read as 25 s older than the values the mirror
// holds, which then ignores it.
func (m *Mirror) reconstructStamp(raw uint16, now time.Duration) int64 {
	if !m.hasStamp {
		m.newest, m.hasStamp = int64(raw), true
		return m.newest
	}
	ref := m.newest
	if m.hasClock {
		ref = max(ref, int64(m.ServerTime(now)/time.Millisecond))
	}
	s := ref + int64(int16(raw-uint16(ref)))
	m.newest = max(m.newest, s)
	return s
}

func (m *Mirror) readRecord(r *bitstream.Reader, width uint, ms int64, now time.Duration) error {
	// The id and the kind's one to three bits from one peeked window (a
	// ReadBits or ReadFlag call each was ≈ 40 instructions); an id past
	// MaxGhosts and the end of the packet by readRecordFields.
	if v, w, ok := r.PeekWindow(); ok && width+3 <= uint(w) {
		if id := uint32(v & (1<<width - 1)); int(id) < m.cfg.MaxGhosts {
			switch kind := v >> width; {
			case kind&1 == 0:
				r.TryReadBits(width + 1)
				return m.readUpdate(r, id, false, ms)
			case kind&2 == 0:
				r.TryReadBits(width + 2)
				return m.readUpdate(r, id, true, ms)
			case kind&4 == 0:
				r.TryReadBits(width + 3)
				return m.readCreate(r, id, ms, now)
			}
			r.TryReadBits(width + 3)
			m.kill(id)
			return nil
		}
	}
	return m.readRecordFields(r, width, ms, now)
}

// readRecordFields is readRecord field by field.
func (m *Mirror) readRecordFields(r *bitstream.Reader, width uint, ms int64, now time.Duration) error {
	var id uint32
	if width > 0 {
		v, err := r.ReadBits(width, "ghost.id")
		if err != nil {
			return err
		}
		id = uint32(v)
	}
	if int(id) >= m.cfg.MaxGhosts {
		return readErr("ghost.id", r, ErrIDWidth)
	}
	b, err := r.ReadFlag("ghost.kind")
	if err != nil {
		return err
	}
	if !b {
		return m.readUpdate(r, id, false, ms)
	}
	if b, err = r.ReadFlag("ghost.kind"); err != nil {
		return err
	}
	if !b {
		return m.readUpdate(r, id, true, ms)
	}
	if b, err = r.ReadFlag("ghost.kind"); err != nil {
		return err
	}
	if !b {
		return m.readCreate(r, id, ms, now)
	}
	m.kill(id)
	return nil
}

func (m *Mirror) kill(id uint32) {
	m.stats.Kills++
	if g, ok := m.Lookup(id); ok {
		m.remove(g)
	}
}

func (m *Mirror) remove(g *Ghost) {
	if cur, ok := m.byEntity[g.Entity]; ok && cur == g.ID {
		delete(m.byEntity, g.Entity)
	}
	last := m.live[len(m.live)-1]
	m.live[g.livePos] = last
	if lg, ok := m.Lookup(last); ok {
		lg.livePos = g.livePos
	}
	m.live = m.live[:len(m.live)-1]
	g.live = false
}

func (m *Mirror) readCreate(r *bitstream.Reader, id uint32, ms int64, now time.Duration) error {
	cid, err := r.ReadGamma("ghost.class")
	if err != nil {
		return err
	}
	if cid > MaxClassID+1 {
		return readErr("ghost.class", r, bitstream.ErrOutOfRange)
	}
	c, ok := m.reg.Lookup(uint16(cid - 1))
	if !ok {
		return readErr("ghost.class", r, ErrUnknownClass)
	}
	entity, err := readEntity(r)
	if err != nil {
		return err
	}
	g, p := m.slot(id)
	st := m.stamps(id, p)
	fresh := !g.live || g.Entity != entity || g.Class != c
	if fresh {
		if g.live {
			m.stats.Replaced++
			m.remove(g)
		}
		*g = Ghost{ID: id, Entity: entity, Class: c, Created: now}
		for i := range st {
			st[i] = ms
		}
	}
	m.stats.Creates++
	var q [3]uint32
	posApplied := false
	for i := range c.Groups {
		grp := &c.Groups[i]
		apply := fresh || ms >= st[i]
		if grp.pos {
			if q, err = readPosAbs(r, &m.reg.q); err != nil {
				return err
			}
			if apply {
				g.q = q
				g.State.Pos = m.reg.q.value(q)
				posApplied = true
			}
		} else {
			dst := &g.State
			if !apply {
				dst = &m.junk
			}
			if err := grp.Decode(r, dst); err != nil {
				return err
			}
		}
		if apply {
			st[i] = ms
		} else {
			m.stats.Older++
		}
	}
	g.Updated = max(g.Updated, time.Duration(ms)*time.Millisecond)
	if fresh {
		g.live = true
		g.livePos = int32(len(m.live))
		m.live = append(m.live, id)
		m.byEntity[entity] = id
		g.hist.reset(&m.reg.q)
	}
	if c.posIdx >= 0 {
		// No motion is known before a create: treat it like a rest marker,
		// so an entity idle since its create does not creep towards its
		// first move (StartLead).
		m.record(g, ms, q, posApplied, fresh)
	}
	return nil
}

// readEntity reads an entity id written by writeEntity.
func readEntity(r *bitstream.Reader) (uint64, error) {
	l, err := r.ReadGamma("ghost.entity")
	if err != nil {
		return 0, err
	}
	if l > 65 {
		return 0, readErr("ghost.entity", r, bitstream.ErrOutOfRange)
	}
	l--
	if l <= 1 {
		return l, nil // 0 → entity 0, 1 → entity 1
	}
	v, err := r.ReadBits(uint(l-1), "ghost.entity")
	if err != nil {
		return 0, err
	}
	return v | 1<<(l-1), nil
}

// readPosAbs reads an absolute quantized position and checks it against
// the bounds.
func readPosAbs(r *bitstream.Reader, q *quant) ([3]uint32, error) {
	var c [3]uint32
	for a := range 3 {
		if q.bits[a] == 0 {
			continue
		}
		v, err := r.ReadBits(q.bits[a], "ghost.pos")
		if err != nil {
			return c, err
		}
		if v > uint64(q.lim[a]) {
			return c, readErr("ghost.pos", r, ErrBadPosition)
		}
		c[a] = uint32(v)
	}
	return c, nil
}

func (m *Mirror) readUpdate(r *bitstream.Reader, id uint32, explicit bool, ms int64) error {
	g, ok := m.Lookup(id)
	if !ok {
		return readErr("ghost.id", r, ErrUnknownGhost)
	}
	c := g.Class
	mask := c.DefaultMask
	if explicit {
		v, ok := r.TryReadBits(uint(len(c.Groups)))
		if !ok {
			var err error
			if v, err = r.ReadBits(uint(len(c.Groups)), "ghost.mask"); err != nil {
				return err
			}
		}
		if v == 0 || v&^c.all != 0 || v == c.DefaultMask {
			return readErr("ghost.mask", r, ErrBadMask)
		}
		mask = v
	}
	m.stats.Updates++
	st := m.stamps(id, m.pages[id>>pageShift])
	var q [3]uint32
	hasPos, posApplied, rest := false, false, false
	for mm := mask; mm != 0; mm &= mm - 1 {
		i := bits.TrailingZeros64(mm)
		grp := &c.Groups[i]
		apply := ms >= st[i]
		if grp.pos {
			var err error
			if q, hasPos, rest, err = m.readPosUpdate(r, &g.hist, ms); err != nil {
				return err
			}
			apply = apply && hasPos
			if apply {
				g.q = q
				g.State.Pos = m.reg.q.value(q)
				posApplied = true
			}
		} else {
			dst := &g.State
			if !apply {
				dst = &m.junk
			}
			if err := grp.Decode(r, dst); err != nil {
				return err
			}
			// A yaw without a position this update turns the newest
			// snapshot; with one, record below appends a snapshot that
			// takes it (the position group is decoded first, so the
			// newest here is still the update before's: turning it too
			// made the interpolated yaw run an update early).
			if apply && i == c.yawIdx && !posApplied && g.hist.n > 0 && g.hist.newest().ms <= ms {
				g.hist.newest().yaw = g.State.Yaw
			}
		}
		if apply {
			st[i] = ms
		} else {
			m.stats.Older++
		}
	}
	g.Updated = max(g.Updated, time.Duration(ms)*time.Millisecond)
	if hasPos {
		m.record(g, ms, q, posApplied, rest)
	}
	return nil
}

// record inserts a received position into g's history (which keeps even
// values older than the one shown: they are prediction references and
// interpolation points). applied says it is g's current position.
func (m *Mirror) record(g *Ghost, ms int64, q [3]uint32, applied, rest bool) {
	h := &g.hist
	s := snapshot{ms: ms, q: q, yaw: g.State.Yaw, rest: rest}
	if !applied {
		// A late value: take the yaw of its neighbour in time.
		for i := int(h.n) - 1; i >= 0; i-- {
			if h.at(i).ms <= ms {
				s.yaw = h.at(i).yaw
				break
			}
		}
	}
	if lead := m.cfg.Interp.StartLead; applied && !rest && lead > 0 && h.n > 0 {
		leadMS := int64(lead / time.Millisecond)
		if prev := h.newest(); prev.rest && ms-leadMS > prev.ms && prev.q != q {
			// It was resting at prev.q; do not creep from the rest marker.
			h.insert(snapshot{ms: ms - leadMS, q: prev.q, yaw: prev.yaw, rest: true, synth: true})
		}
	}
	h.insert(s)
}

// readPosUpdate reads the update form of a position stamped stamp: the
// low bits of each axis around the prediction from the two newest values
// in h stamped before it (the server made sure the value is within the
// window of every pair the client could hold). ok is false when h lacks a
// reference (a packet so late its reference was evicted): the bits are
// consumed and the value ignored. rest reports a value equal to the newest
// reference: the entity did not move.
func (m *Mirror) readPosUpdate(r *bitstream.Reader, h *history, ms int64) (q [3]uint32, ok, rest bool, err error) {
	// A windowed value is at most kcodeBits + 3·(1 + 15) = 52 bits: read it
	// from one peeked window (a ReadBits call a field was ≈ 40
	// instructions, four or five a ghost) when it is all there and valid;
	// anything else (the end of the packet, an absolute value, a value out
	// of bounds) by readPosFields, field by field.
	v, w, peeked := r.PeekWindow()
	k := uint(v) & (1<<kcodeBits - 1)
	if !peeked || k == 0 || w < kcodeBits+3 {
		return m.readPosFields(r, h, ms)
	}
	var low [3]uint64
	l, set := uint(kcodeBits), uint(0)
	for x := range 3 {
		if v>>(l&63)&1 == 0 {
			l++
			continue
		}
		set |= 1 << x
		low[x] = v >> ((l + 1) & 63) & (1<<k - 1)
		l += 1 + k
	}
	if l > uint(w) {
		return m.readPosFields(r, h, ms)
	}
	a, b, nref := h.ref(ms)
	var pred [3]uint32
	switch nref {
	case 1:
		pred = predict(nil, &b, stamp(ms), m.reg.q.lim)
	case 2:
		pred = predict(&a, &b, stamp(ms), m.reg.q.lim)
	}
	q = pred
	for x := range 3 {
		if set>>x&1 == 0 {
			continue
		}
		v := unwindow(pred[x], low[x], k)
		if nref > 0 && (v < 0 || v > int64(m.reg.q.lim[x])) {
			return m.readPosFields(r, h, ms) // its error, at its bit
		}
		q[x] = uint32(v)
	}
	r.TryReadBits(l) // l ≤ w: in the window PeekWindow checked
	if nref == 0 {
		m.stats.Unreferenced++
		return q, false, false, nil
	}
	return q, true, b.q == q, nil
}

// readPosFields is readPosUpdate field by field: an absolute value, one at
// the end of the packet, an invalid one (its error says where).
func (m *Mirror) readPosFields(r *bitstream.Reader, h *history, ms int64) (q [3]uint32, ok, rest bool, err error) {
	k, err := r.ReadBits(kcodeBits, "ghost.pos.k")
	if err != nil {
		return q, false, false, err
	}
	a, b, nref := h.ref(ms)
	if k == 0 {
		q, err = readPosAbs(r, &m.reg.q)
		return q, err == nil, err == nil && nref > 0 && b.q == q, err
	}
	var pred [3]uint32
	switch nref {
	case 1:
		pred = predict(nil, &b, stamp(ms), m.reg.q.lim)
	case 2:
		pred = predict(&a, &b, stamp(ms), m.reg.q.lim)
	}
	q = pred
	for x := range 3 {
		f, err := r.ReadFlag("ghost.pos.axis")
		if err != nil {
			return q, false, false, err
		}
		if !f {
			continue
		}
		low, err := r.ReadBits(uint(k), "ghost.pos.low")
		if err != nil {
			return q, false, false, err
		}
		v := unwindow(pred[x], low, uint(k))
		if nref > 0 && (v < 0 || v > int64(m.reg.q.lim[x])) {
			return q, false, false, readErr("ghost.pos", r, ErrBadPosition)
		}
		q[x] = uint32(v)
	}
	if nref == 0 {
		m.stats.Unreferenced++
		return q, false, false, nil
	}
	return q, true, b.q == q, nil
}
