package ghost

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Snapshot is one producer's entity states at one tick (a zone's), built
// once and shared read-only by every table whose view refers to it
// (SetSnapshotView). A view is then a list of ViewRefs — 4 bytes an entity
// instead of a 144-byte ViewEntry copy per connection — and a table keeps
// no copy of the states either: it packs from the snapshot of its latest
// view and finds changed groups by the stamps the snapshot carries, not by
// diffing against a State of its own.
//
// Build one with a SnapshotWriter: Next, Set every entry, Seal. Sealed, it
// never changes; a table holds it until its next view.
//
// # Reuse
//
// A snapshot is its writer's until the writer seals the next one. Whoever
// keeps it longer — a view on its way to a table, the owner of a table
// that took it — holds a reference: Retain (while already holding one:
// the writer's, or a view's), Release when done. Once any snapshot of a
// writer's series was retained, the writer reuses each of its snapshots
// that nobody holds any more for a later Next (spares wait in a pool), instead
// of allocating a new one every tick: from then on every holder of the
// series must hold a reference, or it reads a later tick's entries. A
// series nobody retains is never reused (the garbage collector frees its
// snapshots, as before).
type Snapshot struct {
	reg    *Registry
	source uint64 // the writer: stamps compare only within one series
	seq    uint32 // this snapshot's number in the series (from 1)
	stride int
	ents   []snapEnt
	// vw[i] is what a view reads of entry i for a ghost it took there in
	// the previous view (the usual case) — the changes and flags — and
	// the quantized position, yaw code and group codes its update
	// writes: a line apart from the entries, so such a view and its
	// packet read one line a ghost and no entry.
	vw []snapView
	// chg[i*stride+g] is the seq of the first snapshot of the series that
	// held entry i's current group-g value (for the position group: the
	// quantized position). A table that took seq p sees every change of
	// group g since as chg > p (a value changed and changed back counts
	// too), however many snapshots it skipped. Tables diff positions, not
	// stamps (a stop is a change back to no motion); the stamp spares a
	// table that took the previous snapshot reading that one's entry.
	chg []uint32
	// in is the states Set gives, by entry, in chunks allocated as
	// entries are Set: the writer's (SnapshotWriter.in), nil once sealed.
	// Seal codes them into the entries; tables read none. Set finds there
	// the state Set at the entry's index in the series' previous snapshot
	// (inFor, if it is the previous snapshot when sealed, and that entry
	// is entIn) and compares it with the new one.
	in    []*stateChunk
	inFor *Snapshot // the writer's latest snapshot when in was handed out
	inOwn bool      // in is the writer's (else a second Next's own)
	// mark[i] is what Set, SetHeld and SealCopies said of entry i before
	// Seal (markSet, markHeld, markCopy; the fields Set found changed),
	// handed out with in (the writer's, nil once sealed). Two bytes an
	// entry, a line for 32, in place of the view's flags: Next cleared
	// every view (64 B, a line an entry: 4,000 lines a crowd zone's tick,
	// more than D1 holds) and Set read it back, so Seal found no view in
	// D1 and every view line came in twice a tick.
	mark []uint16
	// xs is the States of the entries that keep theirs (entState), in
	// entry order: those of a class with a group only its Encode writes
	// (Class.stateful), with a group not coded (noCode), or refused.
	xs     []keptState
	sealed bool
	// valid: Seal found every entry set and accepted (no empty entry,
	// none refused): a view of the snapshot's own registry then needs
	// only its indices checked.
	valid bool
	// refs counts the holders: the writer (from Next until it seals the
	// next snapshot) and every Retain not yet released. The release that
	// drops it to zero hands the snapshot to free (when the series is
	// reused).
	refs atomic.Int32
	free *snapFree
}

// snapFree is a writer's spare snapshots and whether its series is reused:
// shared with the goroutines that release the writer's snapshots. A pool,
// so the spares between two ticks are not live heap for good: a collection
// frees those left over (a zone that stopped, or whose size changed).
type snapFree struct {
	spares sync.Pool   // of *Snapshot
	reuse  atomic.Bool // a snapshot of the series was retained
}

// Retain adds a holder of s; the caller must hold one already (the
// writer's until it seals the next snapshot, a view's, a table owner's),
// so the count never comes back from zero. It makes the writer reuse the
// snapshots of its series nobody holds (see Snapshot).
func (s *Snapshot) Retain() {
	if s.refs.Add(1) <= 1 {
		panic("ghost: Snapshot.Retain of a snapshot nobody holds")
	}
	if s.free != nil && !s.free.reuse.Load() {
		s.free.reuse.Store(true)
	}
}

// Release drops a holder of s (one Retain); s may not be read after. The
// last holder's release hands s back to its writer for reuse.
func (s *Snapshot) Release() {
	switch n := s.refs.Add(-1); {
	case n < 0:
		panic("ghost: Snapshot released more often than retained")
	case n == 0 && s.free != nil && s.free.reuse.Load():
		// Every holder's reads happened before its release: the writer
		// that takes s from the pool (synchronized with this Put)
		// rewrites it after them.
		s.free.spares.Put(s)
	}
}

// Held reports whether anyone holds s (tests: a snapshot a table reads is
// held).
func (s *Snapshot) Held() bool { return s.refs.Load() > 0 }

// HeldSnapshot is the snapshot whose entries the table reads (the one of
// its latest snapshot view; nil if it has none, or keeps states of its
// own). Its owner holds a reference to it (Snapshot.Retain) while the
// table does: the writer reuses it once nobody holds it.
func (t *Table) HeldSnapshot() *Snapshot { return t.snap }

// snapEnt is one entry: the entity, its class and its state as the
// tables send it — its entity, class and name; its quantized position,
// yaw code, group codes (checked and coded once at Seal for every table)
// and flags are its view's (snapView). 24 bytes; the float State (112 more) is kept apart only
// where a group needs it (entState: Snapshot.xs).
//
// The name is a pointer to a Name nobody writes once an entry holds it
// (sealedName), shared by every entry and snapshot that holds the same
// name at the same index: the zone's snapshots alive at once (its own,
// those its players' tables read and the spares: four of the largest
// zone's in a node's heap at 2,000 players) held a 32-byte copy in each
// entry, its held half's too, where a name changes about never.
//
// A table's update (writeUsual, writeRecord) reads nothing here. With
// the position and yaw code at an entry's start, each update missed a D1
// line of its own: the entries 96 bytes apart, and the zone's snapshot
// shared by every table, its lines gone from D1 between two tables' reads
// of them (25.6 k of BenchmarkTables1000Pump's 150 k D1 read misses a
// tick); with the group codes here, each update of a group besides the
// position and yaw (a player's velocity and move sequence: most of a
// node's records) missed one (the codes' load, 5.7 % of the node at
// 2,000 players).
type snapEnt struct {
	entity uint64
	class  *Class // nil: an empty entry
	// name is the state's name (NameGroup's Encode reads it alone):
	// never nil in an entry of a class, nil in an empty one.
	name *Name
}

// noName is the entries' empty name (an NPC's): shared, never written.
var noName = new(Name)

// sealedName returns a Name equal to n for an entry to hold: prev if it
// holds n already (the previous snapshot's entry at the same index, nil
// if none), else a new one. Seal calls it only where it does not know
// the name unchanged (Set's compare): a new entity, or a name that
// changed.
func sealedName(prev *Name, n *Name) *Name {
	switch {
	case prev != nil && sameName(prev, n):
		return prev
	case n.n == 0 && *n == Name{}:
		return noName
	}
	p := new(Name)
	*p = *n
	return p
}

// sameNameRef reports whether entries' names a and b are equal (nil only
// equal to nil): the same pointer, most often, else by value.
func sameNameRef(a, b *Name) bool {
	return a == b || a != nil && b != nil && sameName(a, b)
}

// Flags of snapView.ent.
const (
	// entState: the entry keeps its State (Snapshot.xs).
	entState = 1 << iota
	// entIn: the entry was Set: the writer's states (SnapshotWriter.in)
	// hold its state at its index until the next snapshot's Set.
	entIn
)

// keptState is the State of entry i (Snapshot.xs).
type keptState struct {
	i  uint32
	st State
}

// snapView is what a view reads of an entry before the entry itself
// (Snapshot.vw), and what an update writes of it: its quantized position,
// yaw code and group codes. 64 bytes, a line of its own (snapArrays'
// allocation starts on a line for 16 entries or more): a view takes its
// usual ghosts here, and the packet's updates right after it (ghostmgr
// applies a view in the pump, before the Write) find their positions and
// codes in the line the view brought — one line a ghost, where the
// 24-byte view of the position alone took 1.25 a ghost of a node's
// scattered view and the codes another in the entry (TestSnapEntLayout).
type snapView struct {
	fl uint8 // vwHeld, vwKept, vwMoved
	// age is how many of the series' snapshots before this one hold the
	// entry as vwKept does the previous one — the same entity and class,
	// accepted in each — at most ageMax (0 unless vwKept). A table whose
	// last view was k ≤ age snapshots back (a node behind skips views)
	// takes its ghost here as in the usual view (takeSince): the entry is
	// the one its ghost took, and the stamps say what changed since. In
	// the byte of padding after fl: no room of its own.
	age  uint8
	yawQ uint16 // the yaw code (Table.latest), quantized once for every table
	qpos [3]uint32
	// now is the groups stamped with this snapshot's seq (chg): what
	// changed since the series' previous snapshot (every group of a new
	// entry). A table that took the previous snapshot reads its changes
	// here, once, instead of comparing every group's stamp.
	now uint64
	// gc is the codes of the class's coded groups (Group.slot), coded
	// once at Seal for every table: each its field's bits, and its
	// length in the top byte (noCode: Encode writes it).
	gc [snapCodes]uint64
	// bad and ent are the entry's, in the view's last 8 bytes (its size is
	// a line either way: 58 rounded up to its alignment): the entry is 48
	// bytes, the two the 112 the 88-byte entry and 24-byte view were.
	bad uint8 // snapOK, or why a view naming the entry is refused
	ent uint8 // the entry's flags: entState, entIn
}

// ageMax is the most snapView.age counts: a table further behind takes
// its view by the general path.
const ageMax = 1<<8 - 1

// agedFrom is the age of an entry vwKept from one of age a.
func agedFrom(a uint8) uint8 { return min(a, ageMax-1) + 1 }

// Flags of snapView.fl.
const (
	// vwHeld: the entry is a held state served again (SetHeld), not a
	// new sample: a position equal to the one the table had says nothing
	// of a stop.
	vwHeld = 1 << iota
	// vwKept: the entry is accepted and of the entity and class of the
	// series' previous snapshot's entry at its index (also accepted): a
	// ghost a table took there from that snapshot is this entry's.
	vwKept
	// vwMoved: now holds the class's position bit (the quantized position
	// is this snapshot's): a view's usual ghost (takeKept) tells a move
	// without looking its class up.
	vwMoved
)

// The fields of a State a Set compares (fieldDiff) and a group reads
// (Group.fields).
const (
	fPos = 1 << iota
	fYaw
	fVel
	fHealth
	fFlags
	fName
	fExtra
	numFields = iota
	fAll      = 1<<numFields - 1
)

// Snapshot.mark's flags, above an entry's fields (fAll).
const (
	// markSet: the entry was Set, and its mark's low bits are the fields
	// in which its state differs from the one Set at its index in the
	// previous snapshot (Snapshot.in; a second Set of it: all).
	markSet = 1 << numFields
	// markHeld is vwHeld in the mark's high byte: SetHeld.
	markHeld = vwHeld << 8
	// markCopy: the entry is a copy's destination (SealCopies), which
	// Seal skips.
	markCopy = markHeld << 1
)

// fieldDiff is the fields in which a and b differ, bit for bit (−0 is not
// +0, a NaN is itself).
func fieldDiff(a, b *State) uint64 {
	var d uint64
	f := math.Float64bits
	// (^ and | bind alike: each xor in parentheses.)
	if (f(a.Pos[0])^f(b.Pos[0]))|(f(a.Pos[1])^f(b.Pos[1]))|(f(a.Pos[2])^f(b.Pos[2])) != 0 {
		d = fPos
	}
	if f(a.Yaw) != f(b.Yaw) {
		d |= fYaw
	}
	if (f(a.Vel[0])^f(b.Vel[0]))|(f(a.Vel[1])^f(b.Vel[1]))|(f(a.Vel[2])^f(b.Vel[2])) != 0 {
		d |= fVel
	}
	if a.Health != b.Health {
		d |= fHealth
	}
	if a.Flags != b.Flags {
		d |= fFlags
	}
	na, nb := (*[4]uint64)(unsafe.Pointer(&a.Name)), (*[4]uint64)(unsafe.Pointer(&b.Name))
	if (na[0]^nb[0])|(na[1]^nb[1])|(na[2]^nb[2])|(na[3]^nb[3]) != 0 {
		d |= fName
	}
	if a.Extra != b.Extra {
		d |= fExtra
	}
	return d
}

// stateChunk is a chunk of Snapshot.in: the zone's held entries (copies,
// SealCopies) are never Set, and their chunks never allocated.
type stateChunk [inChunk]State

const (
	inShift = 6 // 64 states, 7 KB (a size class of its own)
	inChunk = 1 << inShift
)

// snapCodes is how many groups of a class a snapshot entry holds codes
// of: the shipped player class's velocity, health, flags and extra (its
// yaw has yawQ; its name and position are coded per table).
const snapCodes = 4

// noCode marks a snapView.gc slot whose group's field is not coded (too
// wide, or a value Encode refuses): writeUpdate calls Encode.
const noCode = ^uint64(0)

// codeShift is where a snapView.gc code keeps its field's length.
const codeShift = 56

// codeGroups sets v.gc's codes of c's coded groups in m, of st.
func (v *snapView) codeGroups(c *Class, m uint64, st *State) {
	for ; m != 0; m &= m - 1 {
		g := &c.Groups[bits.TrailingZeros64(m)]
		code := noCode
		if v, n, ok := g.code(st); ok {
			code = v | uint64(n)<<codeShift
		}
		v.gc[g.slot-1] = code
	}
}

// uncoded reports whether a coded group of v's entry's class c has no
// code (noCode: its Encode writes it, from the State).
func (v *snapView) uncoded(c *Class) bool {
	for _, code := range v.gc[:bits.OnesCount64(c.coded)] {
		if code == noCode {
			return true
		}
	}
	return false
}

// keep makes entry i keep st (entState); Seal keeps them in entry order,
// SealCopies sorts what it adds.
func (s *Snapshot) keep(i int, st *State) {
	s.vw[i].ent |= entState
	s.xs = append(s.xs, keptState{i: uint32(i), st: *st})
}

// kept is the State entry i keeps (entState), else nil.
func (s *Snapshot) kept(i uint32) *State {
	if s.vw[i].ent&entState == 0 {
		return nil
	}
	lo, hi := 0, len(s.xs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.xs[m].i < i {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return &s.xs[lo].st
}

// wireState is entry i's state (accepted, or refused): the State it keeps,
// else its state as a client decodes it from the tables' records — the
// position quantized, the coded groups as decoded, the name — in dst;
// fields no group of the class replicates are zero.
func (s *Snapshot) wireState(i uint32, dst *State) *State {
	if st := s.kept(i); st != nil {
		return st
	}
	s.ents[i].decode(&s.vw[i], &s.reg.q, dst)
	return dst
}

// decode sets dst to e's state as a client decodes it (e keeps no State),
// v the entry's view (its position, yaw code and group codes).
func (e *snapEnt) decode(v *snapView, q *quant, dst *State) {
	c := e.class
	*dst = State{Name: *e.name}
	if c.posIdx >= 0 {
		dst.Pos = q.value(v.qpos)
	}
	for g := range c.Groups {
		gr := &c.Groups[g]
		switch k := c.wk[g]; {
		case k == wkYaw:
			dst.Yaw = gr.yc.value(uint64(v.yawQ))
		case k >= wkCoded:
			gr.decode(v.gc[k-wkCoded]&(1<<codeShift-1), dst)
		}
	}
}

// WireState returns st, a state of class c (registered in r), as a client
// decodes it from the ghost records: what Snapshot.Entry gives for an
// entry Set with st. It returns st itself for a state r refuses and for a
// class with a group only its Encode writes (such entries keep theirs).
func (r *Registry) WireState(c *Class, st *State) State {
	var e snapEnt
	var v snapView
	if c.stateful || r.check(c, st, &v.qpos) != nil {
		return *st
	}
	e.class, e.name, v.yawQ = c, &st.Name, yawCode(c, st)
	v.codeGroups(c, c.coded, st)
	if v.uncoded(c) {
		return *st
	}
	var w State
	e.decode(&v, &r.q, &w)
	return w
}

// Why a snapshot entry is refused.
const (
	snapOK uint8 = iota
	snapBadState
	snapBadClass
)

// Len is the number of entries.
func (s *Snapshot) Len() int { return len(s.ents) }

// Seq is the snapshot's number in its writer's series.
func (s *Snapshot) Seq() uint32 { return s.seq }

// Set fills entry i (before Seal). c nil leaves it empty.
func (s *Snapshot) Set(i int, entity uint64, c *Class, st *State) {
	if s.sealed {
		panic("ghost: Snapshot.Set after Seal")
	}
	e := &s.ents[i]
	e.entity, e.class = entity, c
	// Compared with the state given at i in the previous snapshot, which
	// the entry's room for it still holds (Seal's still-check), and taken.
	ch, mk := s.in[i>>inShift], &s.mark[i]
	if ch == nil {
		ch = s.newChunk(i)
	}
	in := &ch[i&(inChunk-1)]
	d := uint16(fAll)
	if *mk&markSet == 0 {
		d = uint16(fieldDiff(in, st))
	}
	*in = *st
	*mk = markSet | d
}

// newChunk allocates the chunk of s.in that holds entry i's state: no
// entry of it was Set in the previous snapshot (none is entIn there).
func (s *Snapshot) newChunk(i int) *stateChunk {
	ch := new(stateChunk)
	s.in[i>>inShift] = ch
	return ch
}

// inState is entry i's state as Set gave it (before Seal; the entry Set).
func (s *Snapshot) inState(i int) *State { return &s.in[i>>inShift][i&(inChunk-1)] }

// SetHeld is Set for a held state served again: the entry's state is the
// one an earlier snapshot already gave as a sample of the entity (a zone
// that serves a far view member a state it refreshes only every few
// ticks), not a new sample. A table takes it as Set's, except that a
// position equal to the one it had is not taken as the entity stopping:
// no rest markers go out for it, and a ghost the zone holds costs no
// record on its held ticks. On the tick the held state is refreshed, the
// zone gives it with Set: an unchanged position then is a stop.
func (s *Snapshot) SetHeld(i int, entity uint64, c *Class, st *State) {
	s.Set(i, entity, c, st)
	s.mark[i] |= markHeld
}

// Entry returns entry i's entity, class and state (nil class: empty;
// a class the registry lacks: no state). The state is what the tables
// send: the position quantized, each group as a client decodes it (the
// entry keeps codes, not floats), except for a class with a group only
// its Encode writes, whose entries keep the State Set gave. It must not
// be modified.
func (s *Snapshot) Entry(i int) (entity uint64, c *Class, st *State) {
	e := &s.ents[i]
	if e.class == nil || s.vw[i].bad == snapBadClass {
		return e.entity, e.class, new(State)
	}
	return e.entity, e.class, s.wireState(uint32(i), new(State))
}

// AppendEntries appends view as ViewEntries (states as Entry gives them):
// for consumers that need a view of their own, such as a view bound for
// another process.
func (s *Snapshot) AppendEntries(dst []ViewEntry, view []ViewRef) []ViewEntry {
	for _, r := range view {
		if int(r.Index()) >= len(s.ents) {
			continue
		}
		e := &s.ents[r.Index()]
		if e.class == nil {
			continue
		}
		var st State
		if s.vw[r.Index()].bad != snapBadClass {
			st = *s.wireState(r.Index(), &st)
		}
		dst = append(dst, ViewEntry{Entity: e.entity, Class: e.class, Priority: r.Priority(e.class), State: st})
	}
	return dst
}

// ViewRef is one entity of a connection's interest set as an index into the
// view's Snapshot and the priority bucket the table packs it by: 4 bytes
// (the index in the low 24 bits, the bucket in the top 8). Make one with
// NewViewRef. A view of 80 members was 640 bytes as an index and a float
// priority; a table reads the priority only as its bucket (bucketOf of the
// priority × the class weight), which the maker of the ref computes once
// exactly as the table did, so the packing order is the same.
type ViewRef uint32

// refIndexBits is how many low bits of a ViewRef are the entry's index:
// a snapshot has fewer than 1<<refIndexBits entries (SetSnapshotView).
const refIndexBits = 24

// refIndexMax is the largest index a ViewRef can name, and an entry no
// snapshot a table takes has: NewViewRef clamps larger indices to it,
// which SetSnapshotView refuses as out of range.
const refIndexMax = 1<<refIndexBits - 1

// NewViewRef returns the reference to snapshot entry index, of class c
// (the entry's), at priority (as ViewEntry.Priority: greater sends
// sooner; c's Weight multiplies it). An index of 1<<24 or more names an
// entry no snapshot has (SetSnapshotView refuses it).
func NewViewRef(index uint32, c *Class, priority float32) ViewRef {
	return WeightedViewRef(index, c.PriorityWeight(), priority)
}

// WeightedViewRef is NewViewRef for a class of PriorityWeight w, for a
// maker of many references that keeps its classes' weights at hand (a
// zone, per kind).
func WeightedViewRef(index uint32, w, priority float32) ViewRef {
	return ViewRef(min(index, refIndexMax) | refBucket(w, priority))
}

// refBucket is bucketOf(basePriority(p) × w) in a ViewRef's top byte.
func refBucket(w, p float32) uint32 {
	return uint32(bucketOf(basePriority(p)*w)) << refIndexBits
}

// PriorityWeight is what a table multiplies c's priorities by: Weight, or
// 1 if Weight is 0.
func (c *Class) PriorityWeight() float32 {
	if c.weight != 0 { // registered
		return c.weight
	}
	if c.Weight != 0 {
		return c.Weight
	}
	return 1
}

// Index is the snapshot entry r names.
func (r ViewRef) Index() uint32 { return uint32(r) & refIndexMax }

// Priority is a priority in r's bucket: one that NewViewRef of r's class
// maps to the same bucket (its middle, divided by the class weight).
func (r ViewRef) Priority(c *Class) float32 {
	w := c.PriorityWeight()
	mid := math.Float32frombits(uint32(int(r.bucket())+bucketBase)<<21 | 1<<20)
	return mid / w
}

// bucket is r's priority bucket (slot.prioB).
func (r ViewRef) bucket() uint8 { return uint8(r >> refIndexBits) }

// sources numbers snapshot writers process-wide, from 1: a table that
// switches to a snapshot of another writer (a handoff to another zone)
// cannot compare stamps and takes every group as changed.
var sources atomic.Uint64

// SnapshotWriter makes one producer's series of snapshots and their change
// stamps. Not safe for concurrent use; the snapshots it seals are.
type SnapshotWriter struct {
	reg    *Registry
	source uint64
	seq    uint32
	last   *Snapshot // the writer holds a reference to it
	free   snapFree
	// in is the states Set gave, by entry (Snapshot.in): last's once
	// sealed (Set compares the next snapshot's with them), handed to the
	// snapshot being filled from Next to Seal. The writer's, one zone's
	// worth of the entries Set: the snapshots the tables pin keep none.
	in     []*stateChunk
	inBusy bool     // a snapshot not yet sealed has in
	mark   []uint16 // handed out with in (Snapshot.mark)
}

// NewSnapshotWriter returns a writer of snapshots of reg's classes. It
// freezes reg.
func NewSnapshotWriter(reg *Registry) (*SnapshotWriter, error) {
	if reg == nil {
		return nil, fmt.Errorf("%w: nil registry", ErrConfig)
	}
	reg.frozen.Store(true)
	return &SnapshotWriter{reg: reg, source: sources.Add(1)}, nil
}

// Next returns an empty snapshot of n entries to fill with Set and Seal:
// a spare one nobody holds any more if the series is reused (Snapshot)
// and it has the room, else a new one.
func (w *SnapshotWriter) Next(n int) *Snapshot {
	stride := max(w.reg.maxGroups, 1)
	if s, _ := w.free.spares.Get().(*Snapshot); s != nil {
		if c := cap(s.ents); c >= n && c <= 2*n+64 && s.stride == stride {
			// Its entries and views are emptied or written whole as
			// Seal finds them (Snapshot.mark), not cleared here.
			s.ents, s.chg, s.vw = s.ents[:n], s.chg[:n*stride], s.vw[:n]
			s.xs = s.xs[:0]
			s.in, s.inFor, s.inOwn = w.takeIn(n)
			s.mark = w.takeMarks(n, s.inOwn)
			s.source, s.seq, s.sealed = w.source, 0, false
			s.refs.Store(1)
			return s
		}
		// The zone grew past it or shrank far below: a new one.
	}
	s := &Snapshot{
		reg:    w.reg,
		source: w.source,
		stride: stride,
		ents:   make([]snapEnt, n),
		free:   &w.free,
	}
	s.vw, s.chg = snapArrays(n, stride)
	s.in, s.inFor, s.inOwn = w.takeIn(n)
	s.mark = w.takeMarks(n, s.inOwn)
	s.refs.Store(1)
	return s
}

// takeIn returns the chunks for n states to Set, the snapshot whose
// states (of its entIn entries) they hold, and whether they are the
// writer's: the writer's, unless a snapshot not yet sealed has them (then
// new ones, holding none).
func (w *SnapshotWriter) takeIn(n int) ([]*stateChunk, *Snapshot, bool) {
	k := (n + inChunk - 1) >> inShift
	if w.inBusy {
		return make([]*stateChunk, k), nil, false
	}
	if len(w.in) < k {
		w.in = append(w.in, make([]*stateChunk, k-len(w.in))...)
	}
	w.inBusy = true
	return w.in[:k:k], w.last, true // Set adds chunks to w.in's array in place
}

// takeMarks returns n cleared marks (Snapshot.mark): the writer's if own
// (the snapshot has the writer's in), else new ones.
func (w *SnapshotWriter) takeMarks(n int, own bool) []uint16 {
	if !own {
		return make([]uint16, n)
	}
	if cap(w.mark) < n {
		w.mark = make([]uint16, n)
	}
	m := w.mark[:n]
	clear(m)
	return m
}

// snapArrays returns a snapshot's vw and chg for n entries of stride
// groups, in one allocation (neither holds a pointer): a snapshot costs
// the allocations it did before vw (a zone's tick allocates nothing once
// its snapshots are reused, and a pool that drops one costs no more).
func snapArrays(n, stride int) ([]snapView, []uint32) {
	if n == 0 {
		return nil, nil
	}
	buf := make([]uint64, snapWords(n, stride))
	vw := unsafe.Slice((*snapView)(unsafe.Pointer(&buf[0])), n)
	chg := unsafe.Slice((*uint32)(unsafe.Pointer(&buf[n*snapViewWords])), n*stride)
	return vw, chg
}

// snapViewWords is a snapView's size in uint64s.
const snapViewWords = int(unsafe.Sizeof(snapView{}) / 8)

// snapWords is the uint64s of snapArrays' allocation: past the last
// entry's stamps, room for stampWindow more (takeSince reads that many
// from an entry's first, whatever the stride: 32 bytes a snapshot).
func snapWords(n, stride int) int { return n*snapViewWords + (n*stride+1)/2 + stampWindow/2 }

// stampWindow is how many stamps from an entry's first takeSince reads
// at once (the snapshot's stride at most this: else one by one).
const stampWindow = 8

// release drops the writer's reference to its latest snapshot.
func (w *SnapshotWriter) release() {
	if w.last != nil {
		w.last.Release()
		w.last = nil
	}
}

// Seal checks and quantizes every entry once, stamps the groups that
// changed since the writer's previous snapshot (an entry whose entity or
// class differs from the previous one at its index is new: every group
// stamped), and makes s immutable. s must come from w.Next.
func (w *SnapshotWriter) Seal(s *Snapshot) {
	w.seal(s, len(s.ents))
	w.finish(s)
}

// seal is Seal of s's first end entries but for its end (finish): w.last
// is still the previous snapshot. The entries from end on are the
// caller's to write (SealHeld's held half), all of them.
func (w *SnapshotWriter) seal(s *Snapshot, end int) {
	r := w.sealStart(s)
	w.sealRange(s, &r, 0, end)
	s.sealed, s.valid = true, r.invalid == 0
}

// sealRun is what seal's passes over a snapshot's entries share
// (sealStart, sealRange).
type sealRun struct {
	prev     []snapEnt
	prevVw   []snapView
	prevChg  []uint32
	prevSnap *Snapshot
	inPrev   bool
	invalid  int // entries empty or refused
}

// sealStart numbers s in the series and returns what sealRange needs.
func (w *SnapshotWriter) sealStart(s *Snapshot) sealRun {
	if s.sealed || s.source != w.source {
		panic("ghost: SnapshotWriter.Seal of a snapshot not its own or sealed twice")
	}
	w.seq++
	if w.seq == 0 { // after 2^32 snapshots; 0 would look older than every stamp
		w.source = sources.Add(1)
		s.source = w.source
		w.seq = 1
		w.release()
	}
	s.seq = w.seq
	var r sealRun
	if w.last != nil && w.last.stride == s.stride {
		r.prevSnap = w.last
		r.prev, r.prevVw, r.prevChg = r.prevSnap.ents, r.prevSnap.vw, r.prevSnap.chg
	}
	// Set's compares with the previous snapshot's states hold if s.in
	// had them: of its entries that were Set (entIn).
	r.inPrev = s.inFor != nil && s.inFor == w.last
	s.valid = false
	return r
}

// sealRange seals entries lo to hi of s (Seal's work on each).
func (w *SnapshotWriter) sealRange(s *Snapshot, r *sealRun, lo, hi int) {
	prev, prevVw, prevChg, prevSnap, inPrev := r.prev, r.prevVw, r.prevChg, r.prevSnap, r.inPrev
	st := s.stride
	invalid := 0 // entries empty or refused
	ents := s.ents[:hi]
	vw := s.vw[:len(ents)] // one bounds check, not one an entry
	marks := s.mark[:len(ents)]
	for i := lo; i < len(ents); i++ {
		mk := marks[i]
		if mk&markCopy != 0 {
			// SealCopies writes the whole entry, its stamps and its view
			// (and counts it): read here, its line came in twice more
			// (≈ 400 D1 misses a tick in BenchmarkZoneTick, 300 copies).
			continue
		}
		v, e := &vw[i], &ents[i]
		// The fields that changed since the state Set at i in the
		// previous snapshot (all: not known).
		diff := uint64(fAll)
		var ent uint8
		if mk&markSet != 0 {
			if inPrev && i < len(prev) && prevVw[i].ent&entIn != 0 {
				diff = uint64(mk & fAll)
			}
			ent = entIn
		} else {
			// Not Set: empty (a reused snapshot's entry is emptied here,
			// not in Next, which wrote every entry's line for the Sets
			// and copies to write again).
			e.entity, e.class = 0, nil
		}
		c := e.class
		// The view is a reused snapshot's (Next clears none): every
		// field is written below, on each path.
		fl := uint8(mk>>8) & vwHeld
		if c == nil {
			// No name either (a reused snapshot's): the next Seal, finding
			// the state Set here unchanged, would take it as this one's.
			e.name = nil
			*v = snapView{fl: fl, ent: ent}
			clear(s.chg[i*st : i*st+st]) // a reused snapshot's
			invalid++
			continue
		}
		if !w.reg.has(c) {
			e.name = nil // as an empty entry's
			*v = snapView{fl: fl, bad: snapBadClass, ent: ent}
			clear(s.chg[i*st : i*st+st])
			invalid++
			continue
		}
		v.now, v.fl, v.age, v.bad, v.ent = 0, fl, 0, snapOK, ent
		cur := s.inState(i)
		if diff == 0 && prev[i].class == c && prev[i].entity == e.entity && prevVw[i].bad == snapOK {
			// Still since the previous snapshot, byte for byte (Set
			// compared): its check passed, and its quantized position,
			// yaw code, group codes and name are these (functions of the
			// state alone); nothing to stamp.
			p := &prev[i]
			v.qpos, v.yawQ, v.gc, e.name = prevVw[i].qpos, prevVw[i].yawQ, prevVw[i].gc, p.name
			if prevVw[i].ent&entState != 0 {
				s.keep(i, cur)
			}
			copy(s.chg[i*st:i*st+st], prevChg[i*st:i*st+st])
			v.fl |= vwKept
			v.age = agedFrom(prevVw[i].age)
			continue
		}
		// The previous entry's name where Set found the name unchanged
		// (diff known), else one equal to the state's.
		var pname *Name
		if i < len(prev) {
			pname = prev[i].name
		}
		if diff&fName != 0 || pname == nil {
			pname = sealedName(pname, &cur.Name)
		}
		e.name = pname
		groups := c.groupsOf(diff) // once, for the check and the codes
		var bad error
		if diff != fAll && prevVw[i].bad == snapOK && prev[i].class == c {
			// diff is known: Set compared the state with the previous
			// entry's, which Seal accepted for the same class (of
			// whatever entity: the verdict is the state's): check what
			// changed.
			bad = w.reg.checkChanged(c, cur, &v.qpos, &prevVw[i].qpos, diff, groups)
		} else {
			bad = w.reg.check(c, cur, &v.qpos)
		}
		if bad != nil {
			*v = snapView{fl: fl, bad: snapBadState, ent: ent}
			s.keep(i, cur) // for the view's error (checkRefs)
			clear(s.chg[i*st : i*st+st])
			invalid++
			continue
		}
		v.yawQ = yawCode(c, cur)
		chg := s.chg[i*st : i*st+st]
		if i < len(prev) && prev[i].class == c && prev[i].entity == e.entity {
			p, pv := &prev[i], &prevVw[i]
			copy(chg, prevChg[i*st:i*st+st])
			if c.posIdx >= 0 && (pv.bad != snapOK || pv.qpos != v.qpos) {
				chg[c.posIdx] = s.seq
				v.now |= c.posBit
				v.fl |= vwMoved
			}
			if pv.bad == snapOK {
				v.fl |= vwKept
				v.age = agedFrom(pv.age)
				// The groups that read a changed field: their wire value
				// changed if their code did (Changed compares wire
				// values; the previous entry's State where a group has
				// none). The others keep the previous entry's codes.
				v.gc = pv.gc
				if m := groups &^ c.posBit; m != 0 {
					v.codeGroups(c, m&c.coded, cur)
					if m&(m-1) != 0 && c.wm.ok && pv.ent&entState == 0 {
						// changed for every group of m at once (the
						// entry keeps a State only where wm.diff
						// could not tell, which p does not); for one
						// group, the call is as cheap (BenchmarkSeal1000
						// +6 % instructions with the masks for it).
						wm := &c.wm
						d := wm.diff(p, e, pv, v, m) & m
						v.now |= d
						for ; d != 0; d &= d - 1 {
							chg[bits.TrailingZeros64(d)] = s.seq
						}
					} else {
						var ps *State
						if pv.ent&entState != 0 {
							ps = prevSnap.kept(uint32(i))
						}
						for ; m != 0; m &= m - 1 {
							g := bits.TrailingZeros64(m)
							if changed(&c.Groups[g], g == c.yawIdx, p, e, pv, v, ps, cur) {
								chg[g] = s.seq
								v.now |= 1 << uint(g)
							}
						}
					}
				}
			} else {
				// Refused before: its State is kept.
				ps := prevSnap.kept(uint32(i))
				for g := range c.Groups {
					if gr := &c.Groups[g]; !gr.pos && (ps == nil || gr.Changed(ps, cur)) {
						chg[g] = s.seq
						v.now |= 1 << uint(g)
					}
				}
				v.gc = [snapCodes]uint64{} // the slots c has none in, too
				v.codeGroups(c, c.coded, cur)
			}
		} else {
			for g := range chg {
				chg[g] = s.seq
			}
			v.now = c.all
			v.fl |= c.movedFl()
			v.gc = [snapCodes]uint64{} // the slots c has none in, too
			v.codeGroups(c, c.coded, cur)
		}
		if c.stateful || v.uncoded(c) {
			s.keep(i, cur)
		}
	}
	r.invalid += invalid
}

// movedFl is vwMoved if c has a position group, else 0: the flag of an
// entry whose now holds every group of c.
func (c *Class) movedFl() uint8 {
	if c.posBit != 0 {
		return vwMoved
	}
	return 0
}

// groupsOf is the groups of c that read a field in diff (fPos, …).
func (c *Class) groupsOf(diff uint64) uint64 {
	m := c.anyField
	for ; diff != 0; diff &= diff - 1 {
		m |= c.byField[bits.TrailingZeros64(diff)]
	}
	return m
}

// finish ends Seal: s becomes the writer's latest snapshot, its states
// (s.in) the ones the next snapshot's Set compares with.
func (w *SnapshotWriter) finish(s *Snapshot) {
	w.release() // the previous one: its stamps are read (prev above)
	w.last = s
	switch {
	case s.inOwn: // the writer's chunks, s's states in them
		w.inBusy = false
	case !w.inBusy: // s's own chunks: the writer's from now
		w.in, w.mark = s.in, s.mark
	}
	// Else another snapshot not yet sealed has the writer's chunks: its
	// Seal finds they hold no states of the writer's latest (inFor).
	s.in, s.inFor, s.mark = nil, nil, nil
}

// SetSnapshotView is SetView for a view given as references into snap: the
// same merge (creates, kills, dirty groups, the same errors), but the table
// keeps snap, not a copy of each state, until the next view, and finds a
// ghost's changed groups by snap's stamps: those newer than the snapshot
// the ghost last took (one from another writer, or another entry of it,
// takes every group as changed). Views it skipped lose nothing. snap must be
// sealed and of the table's registry; it and view are only read.
func (t *Table) SetSnapshotView(now time.Duration, snap *Snapshot, view []ViewRef) error {
	ms := int64(now / time.Millisecond)
	if t.haveView && ms <= t.viewMS {
		return fmt.Errorf("%w: %v after %dms", ErrViewTime, now, t.viewMS)
	}
	// Another registry of the same bounds quantizes alike (a class object
	// may be registered in several): its classes are checked against ours.
	if snap == nil || !snap.sealed || snap.reg != t.reg && snap.reg.bounds != t.reg.bounds {
		return fmt.Errorf("%w: snapshot not sealed or of a registry with other bounds", ErrConfig)
	}
	if len(snap.ents) >= refIndexMax { // refIndexMax: no entry (NewViewRef's clamp)
		return fmt.Errorf("%w: a snapshot of %d entries (at most %d)", ErrConfig, len(snap.ents), refIndexMax-1)
	}
	// Seal refused the entries of classes its registry lacks (snapBadClass):
	// a snapshot of the table's registry names only classes it knows.
	if ours := snap.reg == t.reg; ours && snap.valid {
		// Every entry is set and accepted: only the indices can be wrong.
		n := uint32(len(snap.ents))
		if !refsBelow(view, n) {
			for _, r := range view {
				if r.Index() >= n {
					return fmt.Errorf("%w: view entry %d of a %d-entry snapshot", ErrBadState, r.Index(), n)
				}
			}
		}
	} else if err := t.checkRefs(snap, view, ours); err != nil {
		return err
	}
	if !t.snapMode {
		t.enterSnapshots()
	}
	same := t.snap != nil && t.snapSrc == snap.source
	oldSnap, oldCarry := t.snap, t.carried()
	// The previous view's order, the hints of where each ghost is: the
	// view is walked in lockstep with it (j), so an entity that entered,
	// left or moved shifts the hints of none after it. The new order is
	// written over it (beginView keeps the array when it has the room):
	// before a write could reach a hint not yet passed, what is left of
	// them moves to the borrowed scratch's spill (rare: a view that gained
	// an entity; an array here would be zeroed every view).
	old := t.order
	alias := cap(t.order) >= len(view)
	_, nowMS := t.beginView(ms, now, len(view), false)
	// From here the ghosts already taken refer to snap, the others still
	// to oldSnap (snapOf).
	t.snap, t.prevSnap = snap, oldSnap
	// next: the table took the series' previous snapshot (the usual view).
	next := same && t.snapSeq == snap.seq-1
	// usual: its usual ghosts go by takeKept and takeKeptOne (markSlot
	// alone: not with dirty groups kept apart, wideDirty).
	usual := next && !t.wideDirty
	// behind: a later snapshot of the series (views skipped); its ghosts
	// at the entries they took in old go by takeSince.
	behind := same && !next && !t.wideDirty && snap.seq-t.snapSeq <= ageMax
	exhausted := false
	// kept counts the ghosts taken as in the previous view at the same
	// entry (the fast path below, each once): when that is every entry
	// of the view and every ghost in scope, no ghost leaves or is
	// carried, and the walk of every slot after the loop has nothing to
	// do.
	kept := 0
	// taken counts the other ghosts taken (each once: not those named
	// again, nor an entity no id was left for).
	taken := 0
	j := 0 // old[j] is the first hint not yet passed
	for i := 0; i < len(view); i++ {
		if usual || behind {
			// The usual ghosts, in a loop of their own (the general one
			// keeps too much in registers), as far as the hints go.
			var n int
			if usual {
				n = t.takeKept(snap, view[i:], old[j:], nowMS)
			} else {
				n = t.takeSince(snap, oldSnap, view[i:], old[j:], nowMS)
			}
			// The hints it passed are the new order's: in the usual
			// view they are there already (old is t.order, j = i); else
			// moved, a memmove (j ≥ i while the two share an array).
			if order := t.order[i : i+n]; n > 0 && &order[0] != &old[j] {
				copy(order, old[j:j+n])
			}
			kept, i, j = kept+n, i+n, j+n
			if i == len(view) {
				break
			}
		}
		r := view[i]
		ri := r.Index()
		v := &snap.vw[ri]
		// A usual ghost one hint further: the ghost at old[j] left the
		// view or moved down it.
		if usual && v.fl&vwKept != 0 && j+1 < len(old) {
			if h := old[j+1]; t.keptSlot(h, ri) != nil {
				t.takeKeptOne(&t.slots[h], r, v, nowMS)
				kept, j = kept+1, j+2
				if alias && i >= j && i < len(old) {
					old, j, alias = t.spillHints(old, j), 0, false
				}
				t.order[i] = h
				continue
			}
		}
		e := &snap.ents[ri]
		c := e.class
		// viewGhost inline, with the lockstep's hints: after another
		// writer's snapshot or a skipped one, the ghost at old[j] or
		// old[j+1] if it holds the entity (in the usual view, the fast
		// path above found it there if it could be), else the index's.
		var rc uint32
		ok := false
		if !next {
			for k := j; k < min(j+2, len(old)); k++ {
				if h := old[k]; int32(h) < t.live {
					if s := &t.slots[h]; s.phase-phaseCreating <= phaseLive-phaseCreating && t.classOf(s) == c && t.scopeEntity(s) == e.entity {
						rc, ok, j = uint32(h), true, k+1
						break
					}
				}
			}
		}
		if !ok {
			if rc, ok = t.idxGet(e.entity); ok {
				// Back in step if it was near: past the ghosts before it
				// in the previous order (gone, or further down this view)
				// — unless the next entry's is the hint's: then this one
				// moved up the view, and the hints stay.
				for k := j; k < min(j+orderResync, len(old)); k++ {
					if uint32(old[k]) == rc {
						if k == j || !next || i+1 == len(view) || t.keptSlot(old[j], view[i+1].Index()) == nil {
							j = k + 1
						}
						break
					}
				}
				rc, ok = t.sameClass(rc, &t.slots[rc], c)
			}
		}
		if alias && i >= j && i < len(old) {
			// Writing t.order[i] would overwrite old[i], not yet passed.
			old, j, alias = t.spillHints(old, j), 0, false
		}
		if !ok {
			var err bool
			if rc, err = t.alloc(e.entity, c, nowMS); err {
				exhausted = true
				continue
			}
		} else if t.slots[rc].viewGen == t.viewGen {
			// Named again (a view that names an entity twice): taken
			// already, its changes merged. (Diffing it again would read
			// the previous snapshot, which a first view has not.)
			t.order[i] = uint16(rc)
			continue
		} else {
			// What the ghost's previous view left: its entry (or a state
			// of the table's own), that snapshot's seq and the position.
			s := &t.slots[rc]
			psi, ptaken := s.si, t.snapSeq
			var moved bool
			switch {
			case psi&siGone != 0:
				g := &t.gone[psi&siIndex]
				psi, ptaken, moved = g.si, g.taken, g.q != v.qpos // unkill drops the record
			case psi&siCarry != 0:
				moved = oldCarry[psi&siIndex].q != v.qpos
			case same && psi == ri && ptaken == snap.seq-1:
				// The entry of the snapshot just before this one: its
				// stamp says whether the position differs from that one's.
				moved = v.now&c.posBit != 0
			default:
				moved = oldSnap.vw[psi].qpos != v.qpos
			}
			if s.phase == phaseKilling {
				t.unkill(s) // drops the gone record
			}
			var changed uint64
			if moved || v.fl&vwHeld == 0 { // a held state the table had: no news, not a stop
				changed = s.moveBit(c, moved)
			}
			switch prevView := s.viewGen == t.viewGen-1; {
			case same && psi == ri && ptaken == snap.seq-1:
				changed |= v.now &^ c.posBit // the stamps that are snap.seq
			// The groups stamped since the ghost's last view: a superset
			// of those whose value differs from it. A ghost back before
			// its kill went out whose entity stayed in the snapshot, with
			// a group changed and changed back meanwhile, sends that group
			// again where entry views, which compare values, send nothing
			// (FuzzMixedViewsWriteWhatEntryViewsWrite, input
			// "0100021100900000000000020010X10001000": flags 48 → 88 →
			// 48); the client decodes the same state. Exact would need the
			// gone record to keep the entry's codes, name and yaw code
			// (and a State for a class with groups not coded): 32 → 104
			// bytes a record, +88 to +296 B a table in the churning cases
			// of TestTableFootprintServerShape, +257 in
			// TestTableChurnFootprint.
			case same && psi == ri:
				chg := snap.chg[int(ri)*snap.stride:]
				for g := range c.Groups {
					if int32(chg[g]-ptaken) > 0 && g != c.posIdx {
						changed |= 1 << uint(g)
					}
				}
			// Another writer (a handoff to another zone), another entry
			// (a held state under overload), or the table's own state (the
			// views came as entries before): diff against the state of the
			// previous view, which the table still has.
			case prevView && psi != staleEntry:
				changed |= t.diffPrev(c, oldSnap, oldCarry, psi, snap, ri)
			// Nothing to diff against: every group. Among these, a ghost
			// back before its kill went out whose entity left the
			// snapshot itself meanwhile (the writer stamps an entry that
			// was not at its index in its previous snapshot new in every
			// group, and a gone record keeps the entry's place and
			// position, not its groups). Entry views diff such a ghost
			// against the table's copy of its state and send only what
			// changed; this sends a superset, which the client applies
			// by stamp to the same state (TestReentryOutsideTheSnapshot).
			// An entity that stays in the snapshot while out of a view
			// takes the stamps' case above (TestWriteUsualIsWriteRecord),
			// a superset too where a group changed and back.
			default:
				changed |= c.all &^ c.posBit
			}
			t.markChanged(rc, changed, nowMS)
		}
		t.order[i] = uint16(rc)
		s := &t.slots[rc]
		s.si, s.viewGen = ri, t.viewGen
		s.fl &^= flPosNow // a new view: its position may go again
		s.prioB = r.bucket()
		taken++
	}
	if t.pk.packScratch != nil { // the hints spilled: not read past here
		t.pk.release()
	}
	if same && !exhausted && kept+taken == int(t.live)-len(t.gone) {
		// Every ghost in scope (creating or live: those without a gone
		// record) is in this view: none leaves, none is carried (a
		// carried one is in scope and in no view entry; one carried
		// before is in this view, at its entry now), and every gone
		// record is of this series (same) — or stale since a view of
		// another series walked them. Only the leaving ghosts still need
		// flPosNow cleared.
		for i := range t.gone {
			t.slots[t.gone[i].rc].fl &^= flPosNow
		}
		t.dropCarry()
		t.prevSnap, t.snapSrc, t.snapSeq = nil, snap.source, snap.seq
		return nil
	}
	// The ghosts this view left out: first those that leave, then the
	// AlwaysInScope ones, whose states are kept (carried). In two walks: a
	// ghost that leaves may be freed (settle), which asks the index, and
	// the index reads every ghost's entity where its si names it — a
	// carried one's in carry, which the second walk rebuilds. The first
	// from the last record down: a freed ghost's record takes the last
	// one's, walked already.
	carries := 0
	for rc := t.live - 1; rc >= 0; rc-- {
		s := &t.slots[rc]
		if s.viewGen == t.viewGen {
			continue
		}
		s.fl &^= flPosNow // a new view (the ghosts taken: as they were)
		switch s.phase {
		case phaseCreating, phaseLive:
			if t.classOf(s).AlwaysInScope {
				carries++
				continue // carried, below
			}
			live := t.live
			if t.leave(uint32(rc)); t.live != live {
				continue // freed
			}
		}
		if s.si&siGone != 0 && !same {
			// Of another writer's series: must not match an entry of
			// this one by chance on a re-entry.
			t.gone[s.si&siIndex].si = staleEntry
		}
	}
	if carries == 0 {
		// The walk above left no ghost in scope outside this view (one
		// that leaves is killing or free now): none to carry.
		t.dropCarry()
		t.prevSnap, t.snapSrc, t.snapSeq = nil, snap.source, snap.seq
		if exhausted {
			return ErrTooManyGhosts
		}
		return nil
	}
	// The states kept for AlwaysInScope ghosts outside this view gather in
	// a borrowed scratch (rare: most views keep none), then replace carry.
	// No ghost's entity is asked for until they do.
	var nc []carried
	borrowed := false
	for i := range int(t.live) {
		s := &t.slots[i]
		if s.viewGen == t.viewGen || s.phase != phaseCreating && s.phase != phaseLive {
			continue
		}
		// Kept on the client without a view entry (AlwaysInScope: the
		// walk above left every other one): keep its state.
		if !borrowed {
			t.pk.borrow()
			borrowed, nc = true, t.pk.carry[:0]
		}
		if s.si&siCarry != 0 {
			nc = append(nc, oldCarry[s.si&siIndex])
		} else {
			oe := &oldSnap.ents[s.si]
			var st State
			st = *oldSnap.wireState(s.si, &st)
			ov := &oldSnap.vw[s.si]
			nc = append(nc, carried{st: st, entity: oe.entity, q: ov.qpos, yaw: ov.yawQ})
		}
		s.si = siCarry | uint32(len(nc)-1)
	}
	v := t.viewsOf()
	v.carry = append(v.carry[:0], nc...) // oldCarry is not read past here
	if borrowed {
		t.pk.carry = nc[:0]
		t.pk.release()
	}
	t.prevSnap, t.snapSrc, t.snapSeq = nil, snap.source, snap.seq
	if exhausted {
		return ErrTooManyGhosts
	}
	return nil
}

// refsBelow reports whether every reference of view names an entry below
// n (at most refIndexMax: SetSnapshotView refuses larger snapshots)
// without a branch a reference, two references a 64-bit word: in each
// 32-bit lane, index + 2^31 − n sets bit 31 exactly when index ≥ n (both
// below 2^24: no carry into the lane above), and the sums' or keeps a
// lane's bit 31 set once any index is not below n. Sixteen references a
// step, the last step the last sixteen (some checked again, which answers
// the same), so no tail goes one by one: four instructions a word, where a
// borrow test (k − index, and'ed) took seven, and 43 references cost 194
// instructions (BenchmarkManagers1000's apply).
func refsBelow(view []ViewRef, n uint32) bool {
	c := uint64(1<<31-n) * (1 | 1<<32)
	var acc uint64
	if len(view) < 16 || !unalignedWordsOK {
		return refsBelowEach(view, c)
	}
	// The words, read in place: a ViewRef array is 4-aligned, which an
	// array of pointer-free words may be (checkptr allows it; the
	// architecture must too: unalignedWordsOK).
	p := unsafe.Pointer(unsafe.SliceData(view))
	// From the last sixteen down, the first sixteen last: no step past
	// the end, none before the start.
	for off := (len(view) - 16) * int(unsafe.Sizeof(ViewRef(0))); off > 0; off -= 64 {
		acc |= refsOver((*[8]uint64)(unsafe.Add(p, off)), c)
	}
	acc |= refsOver((*[8]uint64)(p), c)
	return acc&(1<<31|1<<63) == 0
}

// refsBelowEach is refsBelow a reference at a time (c: 2^31 − n).
func refsBelowEach(view []ViewRef, c uint64) bool {
	var acc uint64
	for _, r := range view {
		acc |= uint64(r.Index()) + c // the low lane's
	}
	return acc&(1<<31) == 0
}

// refsOver is refsBelow's or of sixteen references' lane sums, two
// references a word w (c: 2^31 − n in each lane).
func refsOver(w *[8]uint64, c uint64) uint64 {
	const idx = refIndexMax | refIndexMax<<32
	return (w[0]&idx + c) | (w[1]&idx + c) | (w[2]&idx + c) | (w[3]&idx + c) |
		(w[4]&idx + c) | (w[5]&idx + c) | (w[6]&idx + c) | (w[7]&idx + c)
}

// checkRefs checks every entry view names in snap: SetSnapshotView's
// check of a snapshot with entries empty or refused, or of another
// registry (ours: snap's registry is the table's).
func (t *Table) checkRefs(snap *Snapshot, view []ViewRef, ours bool) error {
	var known *Class
	for _, r := range view {
		if int(r.Index()) >= len(snap.ents) {
			return fmt.Errorf("%w: view entry %d of a %d-entry snapshot", ErrBadState, r.Index(), len(snap.ents))
		}
		e, bad := &snap.ents[r.Index()], snap.vw[r.Index()].bad
		if ours && e.class != nil && bad == snapOK {
			continue
		}
		switch {
		case e.class == nil:
			return fmt.Errorf("%w: view entry %d is empty", ErrUnknownClass, r.Index())
		case bad == snapBadClass:
			return fmt.Errorf("%w: entity %d", ErrUnknownClass, e.entity)
		case bad == snapBadState:
			return fmt.Errorf("entity %d: %w", e.entity, t.reg.check(e.class, snap.kept(r.Index()), new([3]uint32)))
		case e.class != known:
			if !t.knows(e.class) {
				return fmt.Errorf("%w: entity %d", ErrUnknownClass, e.entity)
			}
			known = e.class
		}
	}
	return nil
}

// wordsLE: the slot's si, viewGen and phase read as one little-endian
// word (keptAt); the other architectures compare the three fields.
const wordsLE = unalignedWordsOK && runtime.GOARCH != "s390x"

// keptMask is the bits of keptAt's difference that must be 0: si's,
// viewGen's, and phase's but its lowest (phaseLive − phaseCreating = 1).
const keptMask = (1<<48 - 1) &^ (1 << 40)

// keptGen is keptAt's gw for a table at view gen.
func keptGen(gen uint8) uint64 { return uint64(gen-1)<<32 | uint64(phaseCreating)<<40 }

// keptAt reports whether the ghost of s was taken at entry ri in the
// previous view and is in scope (creating or live): s.si == ri, s.viewGen
// == gen − 1 and phaseCreating ≤ s.phase ≤ phaseLive, gw being
// keptGen(gen). One load and a subtraction, for the three fields are a
// word (slot): the difference's si and viewGen lanes are 0 exactly when
// they are equal (a lane unequal leaves a bit of its own set whatever it
// borrows), and then the phase lane, not borrowed from, is phase −
// phaseCreating: 0 or 1 in scope. Past it, prioB and restCopies are
// masked off (TestKeptAt).
func (s *slot) keptAt(ri uint32, gw uint64) bool {
	if wordsLE {
		w := *(*uint64)(unsafe.Pointer(&s.si))
		return (w-uint64(ri)-gw)&keptMask == 0
	}
	return s.si == ri && s.viewGen == uint8(gw>>32) && s.phase-phaseCreating <= phaseLive-phaseCreating
}

// takeKept takes the usual ghosts of view from its first entry on — each
// the ghost the previous view took at the same entry of the series'
// previous snapshot (vwKept), named by its hint old[k] for view[k] — and
// returns how many it took: it stops at the first entry that is not such
// a ghost. The slot, the view's ref and the entry's changes say all: the
// entry itself is not read. The caller moves the hints it passed to the
// new order (in the usual view they are there already: old is t.order
// at the same place, so no ghost writes its record back). That move is the
// caller's, not done here after the loop, so that nothing but the walk
// is live across it: the start and the order the move needs took two
// registers the walk wants, two reloads on every ghost's back edge
// (with the entry's flags read once: 3.6 instructions a ghost less in
// BenchmarkTables1000Pump).
func (t *Table) takeKept(snap *Snapshot, view []ViewRef, old []uint16, nowMS msTime) int {
	n := min(len(view), len(old))
	view, old = view[:n], old[:n]
	// Every reference is below len(snap.vw): SetSnapshotView checked them
	// all (refsBelow, checkRefs) before it took any ghost, so the walk
	// indexes the views unchecked (a check, and a register, a ghost).
	vw := unsafe.Pointer(unsafe.SliceData(snap.vw))
	slots, gen := t.slots[:t.live], t.viewGen
	gw := keptGen(gen)
	k := 0
	for ; k < len(view); k++ {
		r, h := view[k], old[k]
		if int(h) >= len(slots) {
			break
		}
		// The slot's tests before the entry's, and the ref's last use as
		// soon as they pass: the index read from the ref once, and the ref
		// no longer kept to the end (a spill and two reloads a ghost).
		s := &slots[h]
		ri := r.Index()
		if !s.keptAt(ri, gw) {
			break
		}
		v := (*snapView)(unsafe.Add(vw, uintptr(ri)*unsafe.Sizeof(snapView{})))
		vfl := v.fl // once: the compiler reads it again after the slot's stores
		if vfl&vwKept == 0 {
			break
		}
		// takeKeptOne, inline.
		s.viewGen, s.prioB = gen, r.bucket()
		changed := v.now
		fl := s.fl &^ flPosNow
		if vfl&vwMoved != 0 {
			fl |= flMoving
		} else if fl&flMoving != 0 && vfl&vwHeld == 0 {
			changed |= t.stop(s)
			fl &^= flMoving
		}
		s.fl = fl
		if changed != 0 {
			t.markSlot(s, changed, nowMS)
		}
	}
	return k
}

// takeSince is takeKept for a view of a snapshot k ≥ 2 after the table's
// last, old (a node behind skips views; p its seq), or of old again: it
// takes the ghosts
// of view from its first entry on that the previous view took at the
// same entry of old, as the general path takes them — the entry (its
// age says) holds the entity and class of the ghost since old, so no
// entry is read to tell: its stamps newer than p are what changed, and
// the position moved if it differs from old's, which is compared only
// where a stamp says it may. It returns how many it took.
func (t *Table) takeSince(snap, old *Snapshot, view []ViewRef, hints []uint16, nowMS msTime) int {
	n := min(len(view), len(hints))
	view, hints = view[:n], hints[:n]
	p := t.snapSeq
	back := snap.seq - p // not 1: the usual view is takeKept's (0: old again)
	if back > ageMax {
		return 0
	}
	// Every reference is below len(snap.vw) (checked before any ghost was
	// taken), and the index of an entry aged back was old's too.
	vw, ovw := unsafe.Pointer(unsafe.SliceData(snap.vw)), unsafe.Pointer(unsafe.SliceData(old.vw))
	chg, st := unsafe.Pointer(unsafe.SliceData(snap.chg)), uint32(snap.stride)
	slots, gen, classes := t.slots[:t.live], t.viewGen, t.reg.classes
	// words: the stamps compare two to a word (stampsOver, lanes in
	// little-endian order), which holds while every seq of the series is
	// below 2^31: then int32(stamp − p) > 0, the general path's test, is
	// stamp > p.
	words := unalignedWordsOK && runtime.GOARCH != "s390x" && st <= stampWindow && snap.seq < 1<<31
	pw := uint64(p|1<<31) * (1 | 1<<32)
	k := 0
	for ; k < len(view); k++ {
		r, h := view[k], hints[k]
		if int(h) >= len(slots) {
			break
		}
		s := &slots[h]
		ri := r.Index()
		// Not keptAt: its word costs this loop's registers more than it
		// saves (BenchmarkTables1000PumpSkip, takeSince +0.8 %).
		if s.si != ri || s.viewGen != gen-1 || s.phase-phaseCreating > phaseLive-phaseCreating {
			break
		}
		v := (*snapView)(unsafe.Add(vw, uintptr(ri)*unsafe.Sizeof(snapView{})))
		if uint32(v.age) < back {
			break
		}
		s.viewGen, s.prioB = gen, r.bucket()
		c := classes[s.ci]
		// The groups stamped since p: those changed since the ghost's last
		// view (or changed and back: the general path's superset).
		var changed uint64
		row := unsafe.Add(chg, uintptr(ri*st)*4)
		if words {
			// The window may run past the entry's stamps (into the next
			// entry's, or the allocation's room after the last): only
			// the class's groups are kept.
			changed = stampsOver(row, pw) & c.all
		} else {
			changed = stampsAfter(unsafe.Slice((*uint32)(row), len(c.Groups)), p)
		}
		fl := s.fl &^ flPosNow
		if changed&c.posBit != 0 {
			changed &^= c.posBit
			if (*snapView)(unsafe.Add(ovw, uintptr(ri)*unsafe.Sizeof(snapView{}))).qpos != v.qpos {
				// Moved (moveBit).
				fl |= flMoving
				changed |= c.posBit
				s.fl = fl
				t.markSlot(s, changed, nowMS)
				continue
			}
		}
		if fl&flMoving != 0 && v.fl&vwHeld == 0 {
			changed |= t.stop(s)
			fl &^= flMoving
		}
		s.fl = fl
		if changed != 0 {
			t.markSlot(s, changed, nowMS)
		}
	}
	return k
}

// stampsAfter is the groups whose stamp in chg is newer than p (int32(stamp
// − p) > 0, as the general path compares them), without a branch a group.
func stampsAfter(chg []uint32, p uint32) uint64 {
	var m uint64
	for g, stamp := range chg[:min(len(chg), MaxGroups)] {
		var b uint64
		if stamp-p-1 < 1<<31-1 {
			b = 1
		}
		m |= b << uint(g)
	}
	return m
}

// stampsOver is stampsAfter of the eight stamps at row, each below 2^31
// as p is (pw: p + 2^31 in both lanes of a word), two to a word: in a
// lane, p + 2^31 − stamp never borrows from the lane above, and its bit
// 31 is clear exactly when stamp > p. A stamp past the entry's (the
// caller keeps only its class's groups) may be any value, and its lane
// borrow from the one above: that changes only lanes past the entry's.
// Four subtractions where a compare a stamp took eight, and inlined.
func stampsOver(row unsafe.Pointer, pw uint64) uint64 {
	const top = 1<<31 | 1<<63
	w := (*[stampWindow / 2]uint64)(row)
	z := (^(pw-w[0])&top)>>31 | (^(pw-w[1])&top)>>29 | (^(pw-w[2])&top)>>27 | (^(pw-w[3])&top)>>25
	// Lane 2i's bit is at 2i, lane 2i+1's at 2i+32.
	return z&0x55 | z>>31&0xAA
}

// takeKeptOne takes ghost s, a usual ghost (takeKept), at ref r of
// entry v. v's flags say whether the position moved (vwMoved: the entry
// is of s's class, vwKept), so the class is looked up only for a stop.
func (t *Table) takeKeptOne(s *slot, r ViewRef, v *snapView, nowMS msTime) {
	// now holds the position bit iff the position moved: moveBit's bit
	// then; else only a stop adds it (a held state the table had: no
	// news, neither a move nor a stop).
	changed := v.now
	fl := s.fl &^ flPosNow // a new view: its position may go again
	if v.fl&vwMoved != 0 {
		fl |= flMoving
	} else if fl&flMoving != 0 && v.fl&vwHeld == 0 {
		changed |= t.stop(s)
		fl &^= flMoving
	}
	s.fl = fl
	if changed != 0 {
		t.markSlot(s, changed, nowMS)
	}
	s.viewGen = t.viewGen
	s.prioB = r.bucket()
}

// stop is moveBit's stop of ghost s (flMoving, not moved; the caller
// clears flMoving): two rest markers, and the position group's bit.
func (t *Table) stop(s *slot) uint64 {
	s.restCopies = restMarkerCopies
	return t.reg.classes[s.ci].posBit
}

// keptSlot returns the slot of record h if its ghost was taken in the
// previous view at entry ri (of the series' previous snapshot) and is in
// scope, else nil: the ghost of entry ri when ri holds the same entity and
// class (vwKept), whatever hint named h.
func (t *Table) keptSlot(h uint16, ri uint32) *slot {
	if int32(h) < t.live {
		if s := &t.slots[h]; s.si == ri && s.viewGen == t.viewGen-1 && s.phase-phaseCreating <= phaseLive-phaseCreating {
			return s
		}
	}
	return nil
}

// orderSpill is how many of the previous view's hints SetSnapshotView
// keeps aside once the new order would overwrite them (a view that gained
// an entity): past them, its ghosts are found by the index.
const orderSpill = 128

// orderResync is how far down the previous order a ghost the index found
// moves the lockstep walk's hint: past the ghosts before it (gone, or
// further down the view), so a few leaving together cost one lookup.
const orderResync = 8

// spillHints moves the hints old[j:] (at most orderSpill) to the spill of
// a borrowed scratch, which SetSnapshotView gives back after its walk of
// the view. Called at most once a view (the hints are apart from then on).
func (t *Table) spillHints(old []uint16, j int) []uint16 {
	t.pk.borrow()
	return t.pk.spill[:copy(t.pk.spill[:], old[j:])]
}

// staleEntry is a slot.si or goneRec.si that names no snapshot entry
// (SetSnapshotView refuses snapshots that large).
const staleEntry = siIndex

// diffGroups is the groups other than the position whose wire value
// differs between old and cur.
func diffGroups(c *Class, old, cur *State) uint64 {
	var m uint64
	if !sameBeyondPos(old, cur) {
		for i := range c.Groups {
			if g := &c.Groups[i]; !g.pos && g.Changed(old, cur) {
				m |= 1 << uint(i)
			}
		}
	}
	return m
}

// stateOf is the latest state of the ghost of record rc: what its records encode (a ghost in
// scope: creating or live). A snapshot entry's is the State it keeps, else
// its state as the client decodes it (Snapshot.wireState), the same wire
// value of every group: in the borrowed packer's scratch during a Write
// (valid until the next call), else a new one.
func (t *Table) stateOf(rc uint32) *State {
	if !t.snapMode {
		return &t.rare.views.states[rc]
	}
	s := &t.slots[rc]
	if s.si&siCarry != 0 {
		return &t.rare.views.carry[s.si&siIndex].st
	}
	var dst *State
	if t.pk.packScratch != nil {
		dst = &t.pk.wire
	} else {
		dst = new(State)
	}
	return t.snapOf(s).wireState(s.si, dst)
}

// encState is what a group's Encode reads of the latest state of the
// ghost of record rc (in scope), for the groups an update or create does not write from codes
// (writeUpdate, writeCreate): stateOf's, except for a snapshot entry that
// keeps no State, whose class's only such groups are NameGroups (every
// other group coded: Class.stateful, noCode), for which it is a State of
// the entry's name alone, in the borrowed packer's scratch (its other
// fields stale), not a decode of every group.
func (t *Table) encState(rc uint32) *State {
	if !t.snapMode {
		return &t.rare.views.states[rc]
	}
	return t.encEntry(rc)
}

// encEntry is encState under snapshot views.
func (t *Table) encEntry(rc uint32) *State {
	if t.pk.packScratch == nil {
		return t.stateOf(rc)
	}
	s := &t.slots[rc]
	if s.si&siCarry != 0 {
		return &t.rare.views.carry[s.si&siIndex].st
	}
	snap := t.snapOf(s)
	if st := snap.kept(s.si); st != nil {
		return st
	}
	t.pk.wire.Name = *snap.ents[s.si].name
	return &t.pk.wire
}

// qposOf is ghost s's (of record rc) latest quantized position (in scope).
func (t *Table) qposOf(rc uint32, s *slot) *[3]uint32 {
	if !t.snapMode {
		return &t.rare.views.qs[rc].q
	}
	if s.si&siCarry != 0 {
		return &t.rare.views.carry[s.si&siIndex].q
	}
	return &t.snapOf(s).vw[s.si].qpos
}

// latest is ghost s's (of record rc, in scope) latest quantized position and yaw
// code of its class's first yaw group: what an update writes of the two,
// quantized once per view (a snapshot's once at Seal, for every table) and
// kept where the view's state is — the slot keeps neither.
func (t *Table) latest(rc uint32, s *slot) (*[3]uint32, uint16) {
	if !t.snapMode {
		v := &t.rare.views.qs[rc]
		return &v.q, v.yaw
	}
	if s.si&siCarry != 0 {
		v := &t.rare.views.carry[s.si&siIndex]
		return &v.q, v.yaw
	}
	v := &t.snapOf(s).vw[s.si]
	return &v.qpos, v.yawQ
}

// codesOf is the codes of ghost s's (in scope) coded groups if its latest
// state is a snapshot's, else nil (their Encode writes them).
func (t *Table) codesOf(s *slot) *[snapCodes]uint64 {
	if !t.snapMode || s.si&siCarry != 0 {
		return nil
	}
	return &t.snapOf(s).vw[s.si].gc
}

// diffPrev is the groups of class c other than the position whose wire
// value differs between a ghost's previous view — entry psi of old, or
// carried (psi siCarry|i) — and entry ri of snap: diffGroups of their
// states, by their codes where the entries hold them.
func (t *Table) diffPrev(c *Class, old *Snapshot, carry []carried, psi uint32, snap *Snapshot, ri uint32) uint64 {
	e := &snap.ents[ri]
	var m uint64
	if psi&siCarry != 0 {
		// Rare (an AlwaysInScope ghost back in view): a State to decode to.
		cur := snap.wireState(ri, new(State))
		return diffGroups(c, &carry[psi&siIndex].st, cur)
	}
	p := &old.ents[psi]
	ps, es := old.kept(psi), snap.kept(ri)
	for g := range c.Groups {
		if gr := &c.Groups[g]; !gr.pos && changed(gr, g == c.yawIdx, p, e, &old.vw[psi], &snap.vw[ri], ps, es) {
			m |= 1 << uint(g)
		}
	}
	return m
}

// enterSnapshots turns a table whose views came as entries (or none yet)
// to snapshot views: a ghost in scope keeps its state as carried (siCarry),
// one that left keeps a goneRec — and its state too if it left after the
// latest view (Remove), which the next view diffs against.
func (t *Table) enterSnapshots() {
	t.gone = t.gone[:0]
	t.dropCarry()
	// ev: the views' states, made with the first record (resizeRecords),
	// so there whenever a ghost is.
	var ev *entryViews
	if t.live > 0 {
		ev = t.rare.views
	}
	for i := range int(t.live) {
		s := &t.slots[i]
		s.fl &^= flNoState // a re-entry under snapshot views takes every group of such a ghost anyway (staleEntry)
		switch s.phase {
		case phaseCreating, phaseLive:
			ev.carry = append(ev.carry, carried{st: ev.states[i], entity: ev.qs[i].entity, q: ev.qs[i].q, yaw: ev.qs[i].yaw})
			s.si = siCarry | uint32(len(ev.carry)-1)
		case phaseKilling:
			g := goneRec{entity: ev.qs[i].entity, rc: uint32(i), si: staleEntry, q: ev.qs[i].q}
			if s.viewGen == t.viewGen {
				ev.carry = append(ev.carry, carried{st: ev.states[i], entity: ev.qs[i].entity, q: ev.qs[i].q, yaw: ev.qs[i].yaw})
				g.si = siCarry | uint32(len(ev.carry)-1)
			}
			s.si = siGone | uint32(len(t.gone))
			t.gone = append(t.gone, g)
		}
	}
	if ev != nil {
		ev.states, ev.qs = nil, nil // the snapshots hold the states from now on
	}
	t.snapMode = true
}

// leaveSnapshots turns a table whose views came as snapshots back to
// keeping states of its own (SetView after SetSnapshotView): every ghost's
// latest state is copied out, so the diff of the next view stays exact.
func (t *Table) leaveSnapshots() {
	states, qs := make([]State, len(t.slots)), make([]viewQ, len(t.slots))
	for i := range int(t.live) {
		// A leaving ghost's state was not kept (it is never written
		// again); its position was. Its re-entry takes every group
		// (flNoState), not a diff against a zero State, which would miss
		// a change to a zero value.
		s := &t.slots[i]
		switch s.phase {
		case phaseCreating, phaseLive:
			q, yaw := t.latest(uint32(i), s)
			states[i], qs[i] = *t.stateOf(uint32(i)), viewQ{entity: t.entityOf(uint32(i)), q: *q, yaw: yaw}
		case phaseKilling:
			g := &t.gone[s.si&siIndex]
			qs[i].entity, qs[i].q = g.entity, g.q
			s.fl |= flNoState
		}
		s.si = 0
	}
	ev := t.viewsOf()
	ev.states, ev.qs, ev.carry = states, qs, nil
	t.snap, t.snapSrc, t.snapSeq, t.snapMode = nil, 0, 0, false
	t.gone = nil
}
