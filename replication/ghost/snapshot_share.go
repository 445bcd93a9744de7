package ghost

import (
	"cmp"
	"math/bits"
	"slices"
)

// EntryCopy says that a snapshot entry repeats another (SealCopies):
// entry Dst gets entry Src's entity, class and state, or with Src Carry,
// the writer's previous snapshot's entry Dst's, served again (SetHeld).
type EntryCopy struct {
	Dst, Src uint32
}

// Carry as an EntryCopy's Src: the entry is the one at its index in the
// writer's latest snapshot, served again as SetHeld would serve its state
// (CanCarry tells whether there is one to carry).
const Carry = ^uint32(0)

// CanCarry reports whether entry i of the writer's latest snapshot is
// accepted and of entity, class c and name: whether the next snapshot's
// entry i may be sealed as {Dst: i, Src: Carry}. A zone whose held entry
// of a slot was that slot's state on its last refresh carries it between
// refreshes, instead of keeping the state itself (64 bytes a slot) and
// setting and comparing it again every tick; a new entity in the slot, or
// a new name (shown at once), is refreshed instead.
func (w *SnapshotWriter) CanCarry(i int, entity uint64, c *Class, name Name) bool {
	p := w.last
	if p == nil || uint(i) >= uint(len(p.ents)) || c == nil {
		return false
	}
	e := &p.ents[i]
	return e.class == c && e.entity == entity && p.vw[i].bad == snapOK && sameName(e.name, &name)
}

// SealCopies is Seal for a snapshot some of whose entries repeat others:
// each copy's Dst entry, left empty (not Set), ends up as if it had been
// Set with its Src entry's entity, class and state before Seal, or for a
// Carry, SetHeld with those of the previous snapshot's entry Dst — the
// same entry, stamps, flags and validity, which TestSealCopiesIsSeal
// checks against Seal — but its state is checked, quantized and coded
// once, for Src (a carried one not at all). A zone whose far viewers get
// a held second entry of every slot gives it so: on the ticks it
// refreshes it, a copy of the live one (the two are equal then), and
// between refreshes, carried over.
//
// Src entries must be Set or SetHeld (or left empty: the copy is then
// empty too). A Dst given twice or already Set, a Src that is a Dst, or a
// Carry that CanCarry would refuse (for any entity), panics.
func (w *SnapshotWriter) SealCopies(s *Snapshot, copies []EntryCopy) {
	if len(copies) == 0 {
		w.Seal(s)
		return
	}
	ents := s.ents
	prev := w.last
	// An entry Set has markSet (a class only comes with Set), so its mark
	// tells a destination already set without its entry's line; a
	// carry's entry in prev is checked where carry reads it.
	for _, c := range copies {
		if int(c.Dst) >= len(ents) || s.mark[c.Dst] != 0 {
			panic("ghost: SealCopies: a copy's destination is out of range or already set")
		}
		if c.Src == Carry {
			if prev == nil || int(c.Dst) >= len(prev.ents) {
				panic("ghost: SealCopies: a carry of an entry the previous snapshot has not accepted")
			}
		} else if int(c.Src) >= len(ents) {
			panic("ghost: SealCopies: a copy's source is out of range")
		}
		s.mark[c.Dst] = markCopy // claimed: a second copy to it panics
	}
	for _, c := range copies {
		if c.Src != Carry && s.mark[c.Src]&markCopy != 0 {
			panic("ghost: SealCopies: a copy's source is another copy's destination")
		}
	}
	// Seal drops the writer's reference to the previous snapshot, whose
	// entries the copies' stamps are diffed against (and the carried
	// ones taken from): hold it until done (a count, not Retain: that
	// would turn on reuse for a series nobody else holds).
	if prev != nil {
		prev.refs.Add(1)
		defer prev.Release()
	}
	// A copy is compared with the previous snapshot's entry by their
	// codes (the entry was not Set: the writer keeps no state of it).
	in := s.in             // the sources' states as Set gave them (seal drops s.in)
	w.seal(s, len(s.ents)) // skips the destinations: their entries, stamps and views are written below
	defer w.finish(s)
	xn := len(s.xs) // the entries Seal kept States of, in order
	defer s.sortKept(xn)
	var pents []snapEnt
	var pchg []uint32
	if prev != nil && prev.source == s.source && prev.stride == s.stride {
		pents, pchg = prev.ents, prev.chg
	}
	invalid := 0 // copies empty or refused
	for _, c := range copies {
		i := int(c.Dst)
		if c.Src == Carry {
			s.carry(i, prev, pchg)
			continue
		}
		if !s.copyEntry(i, int(c.Src), in, prev, pents, pchg) {
			invalid++
		}
	}
	// Seal counted the other entries (valid: none empty or refused); a
	// carry is accepted. A pass over the entries to tell it read every
	// line again (≈ 780 D1 misses a tick in BenchmarkZoneTick).
	s.valid = s.valid && invalid == 0
}

// copyEntry seals entry i (not Set) as a copy of entry src, sealed: the
// same entry, stamps and view as Seal gives a Set of src's entity, class
// and state (in: the states Set gave, prev the writer's previous snapshot,
// pents and pchg its entries and stamps if of s's series, mc the writer's
// wire masks). It reports whether the copy is accepted (not empty nor
// refused).
func (s *Snapshot) copyEntry(i, srcI int, in []*stateChunk, prev *Snapshot, pents []snapEnt, pchg []uint32) bool {
	ents := s.ents
	e, v, src := &ents[i], &s.vw[i], &ents[srcI]
	v.now, v.fl, v.age = 0, 0, 0 // a reused snapshot's view (Next clears none)
	// Field by field: one pointer write, not the whole entry's copy
	// under the write barrier.
	e.entity, e.class, e.name = src.entity, src.class, src.name
	sv := &s.vw[srcI]
	v.qpos, v.yawQ, v.gc, v.bad, v.ent = sv.qpos, sv.yawQ, sv.gc, sv.bad, 0
	cl := e.class
	var es *State // the source's state, as Set gave it
	if cl != nil {
		es = &in[srcI>>inShift][srcI&(inChunk-1)]
		if sv.ent&entState != 0 {
			s.keep(i, es)
		}
	}
	st := s.stride
	chg := s.chg[i*st : i*st+st]
	if cl == nil || v.bad != snapOK {
		clear(chg) // empty or refused, as Seal leaves one (a reused snapshot's)
		return false
	}
	if i >= len(pents) || pents[i].class != cl || pents[i].entity != e.entity {
		// New at this index: every group stamped.
		for g := range chg {
			chg[g] = s.seq
		}
		v.now = cl.all
		v.fl |= cl.movedFl()
		return true
	}
	p, pv := &pents[i], &prev.vw[i]
	copy(chg, pchg[i*st:i*st+st])
	if pv.bad == snapOK {
		v.fl |= vwKept
		v.age = agedFrom(pv.age)
		if pv.qpos == v.qpos && pv.yawQ == v.yawQ && pv.gc == v.gc && sameNameRef(p.name, e.name) && (pv.ent|v.ent)&entState == 0 {
			return true // still (the same wire values): nothing to stamp
		}
	}
	if cl.posIdx >= 0 && (pv.bad != snapOK || pv.qpos != v.qpos) {
		chg[cl.posIdx] = s.seq
		v.now |= cl.posBit
		v.fl |= vwMoved
	}
	if wm := &cl.wm; wm.ok && pv.bad == snapOK && (pv.ent|v.ent)&entState == 0 {
		// Every group but the position compared by its wire value in the
		// entries (changed's compare, for all at once: ≈ 500 → ≈ 40
		// instructions a refreshed held entry).
		d := wm.diff(p, e, pv, v, ^uint64(0))
		v.now |= d
		for ; d != 0; d &= d - 1 {
			chg[bits.TrailingZeros64(d)] = s.seq
		}
		return true
	}
	ps := prev.kept(uint32(i))
	for g := range cl.Groups {
		if gr := &cl.Groups[g]; !gr.pos && changed(gr, g == cl.yawIdx, p, e, pv, v, ps, es) {
			chg[g] = s.seq
			v.now |= 1 << uint(g)
		}
	}
	return true
}

// wireMasks is, for a class, which groups' wire values a snapshot entry
// holds (changed's compares): slot[k] the group coded in snapView.gc[k],
// yaw the first yaw group (its whole code in snapView.yawQ), name the
// NameGroups. ok: every group but the position is one of these, so that
// for two accepted entries that keep no State (no group uncoded, the class
// not stateful) changed is diff's bit of the group. Class.prepare sets a
// class's (Class.wm): a writer's cache of them had cost a lookup an entry,
// and missed whenever the classes alternated.
type wireMasks struct {
	slot [snapCodes]uint64
	yaw  uint64
	name uint64
	ok   bool
}

// setWireMasks sets c.wm from c's groups as prepare left them.
func (c *Class) setWireMasks() {
	m := wireMasks{ok: !c.stateful}
	for g := range c.Groups {
		gr := &c.Groups[g]
		switch bit := uint64(1) << uint(g); {
		case gr.pos:
		case gr.slot > 0:
			m.slot[gr.slot-1] = bit
		case g == c.yawIdx && gr.yc.bits <= 16:
			m.yaw = bit
		case gr.name:
			m.name = bit
		default:
			m.ok = false
		}
	}
	c.wm = m
}

// diff is the groups of want whose wire values entries p and e (their
// views pv and v: the codes) hold differently, and maybe others. The
// names are compared only if want has the name group: Seal knows from
// Set's compare which fields changed, and a name seldom does.
//
// Not inlined: in sealRange's loop its values took registers the loop's
// own then spilled (inlined, BenchmarkZoneTickSyncCrowd +0.12 %,
// BenchmarkSeal1000 +1.1 % instructions).
//
//go:noinline
func (m *wireMasks) diff(p, e *snapEnt, pv, v *snapView, want uint64) uint64 {
	// The codes unrolled: the loop reloaded and nil-checked its three
	// pointers every code (≈ 10 instructions a code, now ≈ 5). Four:
	// the array below fails to compile for any other snapCodes.
	_ = [1]struct{}{}[snapCodes-4]
	var d0, d1, d2, d3, dy uint64
	if pv.gc[0] != v.gc[0] {
		d0 = m.slot[0]
	}
	if pv.gc[1] != v.gc[1] {
		d1 = m.slot[1]
	}
	if pv.gc[2] != v.gc[2] {
		d2 = m.slot[2]
	}
	if pv.gc[3] != v.gc[3] {
		d3 = m.slot[3]
	}
	if pv.yawQ != v.yawQ {
		dy = m.yaw
	}
	d := d0 | d1 | d2 | d3 | dy
	if m.name&want != 0 && !sameNameRef(p.name, e.name) {
		d |= m.name
	}
	return d
}

// sameName is a == b without memequal's call (≈ 44 instructions, and its
// caller spilling around it): the length, then the 31 bytes as two
// 16-byte arrays overlapping by one, compared inline.
func sameName(a, b *Name) bool {
	return a.n == b.n && [16]byte(a.b[:16]) == [16]byte(b.b[:16]) && [16]byte(a.b[15:]) == [16]byte(b.b[15:])
}

// SealHeld is SealCopies for a zone's held half: s has 2n entries, the
// first n Set (or left empty) and the last n not, and entry n+i becomes
// entry i's held one — a copy of entry i (refreshed) where bit i of
// refresh is set or the previous snapshot's entry n+i could not be carried
// (CanCarry of entry i's entity, class and name), else that entry carried
// over. On return, bit i of refresh says whether entry n+i was refreshed
// (cleared for an empty entry i, whose held entry is empty too). The
// result is SealCopies' with those copies, which TestSealHeldIsSealCopies
// checks; but no list of copies is written and checked, Seal's pass over
// the entries stops at n (SealCopies' read the held half's views three
// times more), each run of heldBlock live entries is sealed just before
// its held ones (which read it), and the carry test reads the previous
// entry where the carry copies it.
//
// An odd length, a refresh shorter than n bits, or an entry of the held
// half already Set, panics.
func (w *SnapshotWriter) SealHeld(s *Snapshot, refresh []uint64) {
	ents := s.ents
	n := len(ents) / 2
	if len(ents) != 2*n || len(refresh) < (n+63)/64 {
		panic("ghost: SealHeld: an odd snapshot or a refresh shorter than its half")
	}
	prev := w.last
	// As SealCopies: the previous snapshot outlives Seal's release of it.
	if prev != nil {
		prev.refs.Add(1)
		defer prev.Release()
	}
	in := s.in
	r := w.sealStart(s)
	defer w.finish(s)
	var pents, pall []snapEnt
	var pchg []uint32
	if prev != nil {
		pall = prev.ents // CanCarry's: whatever the series
		if prev.source == s.source && prev.stride == s.stride {
			pents, pchg = prev.ents, prev.chg
		}
	}
	marks := s.mark[:len(ents)]
	invalid := 0
	heldKept := false // a held entry kept its State before a later live one
	for lo := 0; lo < n; lo += heldBlock {
		hi := min(lo+heldBlock, n)
		w.sealRange(s, &r, lo, hi)
		xn := len(s.xs)
		for i := lo; i < hi; i++ {
			d := n + i
			if marks[d] != 0 {
				panic("ghost: SealHeld: an entry of the held half was Set")
			}
			src := &ents[i]
			bit := uint64(1) << (uint(i) & 63)
			if src.class == nil {
				refresh[i>>6] &^= bit
			} else if refresh[i>>6]&bit == 0 && d < len(pall) {
				if p := &pall[d]; p.class == src.class && p.entity == src.entity && prev.vw[d].bad == snapOK && sameNameRef(p.name, src.name) {
					s.carry(d, prev, pchg)
					continue
				}
			}
			if src.class != nil {
				refresh[i>>6] |= bit
			}
			if !s.copyEntry(d, i, in, prev, pents, pchg) {
				invalid++
			}
		}
		heldKept = heldKept || len(s.xs) > xn && hi < n
	}
	if heldKept {
		s.sortKept(0)
	}
	s.sealed, s.valid = true, r.invalid == 0 && invalid == 0
}

// heldBlock is how many live entries SealHeld seals before their held
// ones: the live entries a held one copies or is carried by are still in
// D1 (a pass over all the live entries first had evicted them: ≈ 350 D1
// misses a tick in BenchmarkZoneTickCrowd).
const heldBlock = 32

// carry makes entry i prev's entry i (accepted) served again, as Seal
// seals a SetHeld of its entity, class and state (the state Set gave
// stays in s.in[i] from prev): still
// since prev (its stamps, nothing new), or new if prev is not of s's
// series (pchg nil: the writer started a new one).
func (s *Snapshot) carry(i int, prev *Snapshot, pchg []uint32) {
	e, p, v := &s.ents[i], &prev.ents[i], &s.vw[i]
	pv := &prev.vw[i]
	if p.class == nil || pv.bad != snapOK {
		panic("ghost: SealCopies: a carry of an entry the previous snapshot has not accepted")
	}
	*e = *p
	v.qpos, v.yawQ, v.gc, v.bad, v.ent = pv.qpos, pv.yawQ, pv.gc, pv.bad, pv.ent
	if v.ent&entState != 0 {
		s.keep(i, prev.kept(uint32(i)))
	}
	st := s.stride
	chg := s.chg[i*st : i*st+st]
	if pchg == nil {
		for g := range chg {
			chg[g] = s.seq
		}
		v.now, v.fl, v.age = e.class.all, vwHeld|e.class.movedFl(), 0
		return
	}
	copy(chg, pchg[i*st:i*st+st])
	v.now, v.fl, v.age = 0, vwHeld|vwKept, agedFrom(pv.age)
}

// changed is gr.Changed(ps, es) for entries p and e of gr's class (their
// views pv and v: the yaw and group codes), e accepted, of states ps and
// es: where both entries hold gr's wire value coded (snapView.gc, or the yaw code for the
// class's yaw group, or the name for a NameGroup), a compare of the codes — Changed compares wire values —
// instead of the call (≈ 80 instructions for velocity and yaw). ps and es
// may be nil where the entries hold every group's value (no entState): a
// table's diff of two entries (Table.diffPrev).
func changed(gr *Group, yaw bool, p, e *snapEnt, pv, v *snapView, ps, es *State) bool {
	if pv.bad == snapOK {
		if k := int(gr.slot) - 1; k >= 0 {
			if pc, ec := pv.gc[k], v.gc[k]; pc != noCode && ec != noCode {
				return pc != ec
			} else if pc != ec {
				// One coded, one not: values that differ (whether a
				// value has a code is the value's).
				return true
			}
		}
		if yaw && gr.yc.bits <= 16 {
			return pv.yawQ != v.yawQ
		}
		if gr.name {
			return !sameNameRef(p.name, e.name)
		}
	}
	if ps == nil || es == nil {
		return true // not expected: such entries keep their States
	}
	return gr.Changed(ps, es)
}

// sortKept puts the States kept for entries after the first n (SealCopies'
// copies) in entry order with the rest (Snapshot.kept searches them).
func (s *Snapshot) sortKept(n int) {
	if len(s.xs) == n {
		return
	}
	slices.SortFunc(s.xs, func(a, b keptState) int { return cmp.Compare(a.i, b.i) })
}
