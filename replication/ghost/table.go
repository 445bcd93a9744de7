package ghost

import (
	"fmt"
	"math/bits"
	"slices"
	"sync/atomic"
	"time"
	"unsafe"
)

// ViewEntry is one entity of a connection's interest set, as the zone sees it
// this tick.
type ViewEntry struct {
	Entity uint64 // stable entity id (sent once, in the create)
	Class  *Class // registered in the Table's Registry
	// Priority is the zone's base priority for this connection (distance,
	// relevance, …); the table multiplies it by the class weight and by
	// staleness. Values ≤ 0 or NaN count as a tiny positive priority: an
	// entity in scope is never starved.
	Priority float32
	State    State
	// ChangedMask forces groups dirty on top of what the table finds by
	// diffing State against the previous view (say, a teleport the zone wants
	// resent even though the wire value is the same). Usually 0.
	ChangedMask uint64
}

// phase of a ghost slot:
//
//	free → creating → live → killing → free
//	         │  ▲               │ ▲
//	         │  └─ re-entry ────┘ │ (kill not yet sent: cancelled)
//	         └── left before the client held it ──→ free
//
// creating: in scope, the client does not hold it (create pending or in
// flight). live: a create was delivered. killing: left scope; a kill goes out
// once nothing else of this ghost is in flight, and the id is freed when the
// kill is delivered (or at once if the client never held the ghost).
type phase uint8

const (
	phaseFree phase = iota
	phaseCreating
	phaseLive
	phaseKilling
)

// slot is a ghost's record (Table.slots, by record: idm): the 32 bytes
// that taking a view, packing and a fate touch for every ghost. What only
// writing a position and its fate need is the record's posTrack
// (Table.pos), and the per-group sequences
// of groups 2 and up are lastField's (a usual update's groups, 0 and 1 for
// the shipped classes, are the slot's: lf); the entity, the quantized
// position, the yaw code and the state are the view's (the snapshot entry
// si, or the table's own copy: entityOf), not the slot's. Every byte here
// is paid per ghost per connection: what can be derived is (owtB from prioB,
// the entity from the view), and what only compares within a bounded
// window is narrow: the times are 16-bit ms from the table's epoch, moved
// on every ≈ 8 s (msTime, rebase), ackBack and inflight 8 bits, viewGen
// 8 (pinned every 64 views), the class index 8 (NewTable: at most 256
// classes), the dirty groups 32 (a registry with more groups keeps the
// rest apart: dirtyOf).
//
// 32 bytes for the cache: on a server every table is cold when its turn
// comes, and a view takes its ghosts' slots in no record order, so a ghost
// costs the slot's lines, not its instructions. The per-record arrays are
// multiples of 256 bytes in size classes of whole lines, so a slot starts
// 0 or 32 bytes into a 64-byte line and every walk of a ghost — its view,
// its record, its fate — touches one line (a 48-byte slot took 1.25 to
// 1.5), and a walk of every slot half a line a ghost. TestSlotLayout
// holds this.
type slot struct {
	// lastSeq is the newest packet that carried a record of this ghost, low
	// 32 bits, compared wrap-safe (seqAfter): the packets in flight span far
	// less than 2^31.
	lastSeq uint32
	// dirty is the groups the client may lack (RL-5): every group of a
	// registry of at most 32 groups a class; past that, groups 0–30 and in
	// bit 31 whether any group above is dirty, those in
	// tableWide.dirtyHi (dirtyOf, setDirty).
	dirty  uint32
	ackAt  msTime // SentAt of the newest delivered packet that carried this ghost (0: none)
	sentAt msTime // last time a record of this ghost was written
	since  msTime // staleness counts from here: last send, or when it became dirty
	// pendChg is when the client's copy became outdated as far as the table
	// knows for sure: the first change not yet confirmed delivered (0: the
	// client is known current). Used by ConfirmDeadline.
	pendChg msTime
	lastChg msTime // the last view that changed a group (its now)
	// inflight counts this ghost's records in packets whose fate is unknown.
	// A kill waits until it is 0, so no older record of the ghost can reach
	// the client after its kill (and none of a reused id's old incarnation).
	// At most one record a packet, and Write keeps every packet in flight
	// less than maxSeqSpan (2^7) sequences back: a byte.
	inflight uint8
	// ackBack is how far the newest packet known delivered that carried
	// this ghost lies before lastSeq (ackSeq = lastSeq − ackBack), at most
	// fieldOld: every use compares it below that (unconfirmed's window, a
	// fate's packet, in flight, is less than maxSeqSpan back), so a
	// distance further back reads the same pinned. 0: lastSeq itself was
	// delivered (nothing unconfirmed). At most 2^7: a byte.
	ackBack uint8
	// lf is the per-group sequences of groups 0 and 1 (lastField keeps
	// the rest): the groups a usual update carries (the shipped classes'
	// position and yaw) are recorded in the slot the write holds already,
	// not in a line of lastField of their own.
	lf [lfSlot]uint8
	ci uint8 // class: index in the registry's classes (NewTable: < 256)
	fl uint8 // flag bits below
	// si is where the ghost's latest state is, for views given as
	// snapshots (SetSnapshotView): its entry in the latest snapshot, or
	// siCarry|i for an AlwaysInScope ghost its latest view left out (state
	// in entryViews.carry[i]), or siGone|i for a ghost that left scope (what a
	// re-entry compares against in Table.gone[i]). Unused for SetView.
	// si, viewGen and phase are one word from byte 24 (keptAt): the usual
	// view's test of a ghost is one load and a subtraction, not three.
	si uint32
	// viewGen is the last view that included the entity (Table.viewGen),
	// 8 bits: views ask only whether it is the current view or the one
	// before, and beginView pins one older than viewGenPin views at
	// viewGenPin back, so none wraps around to look recent.
	viewGen uint8
	phase   phase
	prioB   uint8 // bucketOf(zone priority × class weight), once per view (< tierBuckets); its overdue weight is owtBTable[prioB]
	// restCopies: rest markers still to send (two per stop, in consecutive
	// views: a lost marker means a visible overshoot). While it is not 0
	// the next update sends a rest marker (a position update stamped with
	// the new view, same value) so the client's interpolation stops there
	// instead of extrapolating past it.
	restCopies uint8
}

// Flag bits of slot.fl.
const (
	flCreated        = 1 << iota // a create was delivered: the client holds this ghost
	flCreateInFlight             // a create record is in flight
	flKillInFlight               // a kill record is in flight
	flMoving                     // the position changed in the latest view
	// flPosNow: a position from the current view was written and not
	// reported lost (a ghost's position goes out at most once per view:
	// its prediction needs every value the client may hold to be older).
	flPosNow
	flPosFull // posRingLen positions in flight: the next waits
	// flNoState: the table kept no state of this leaving ghost (it left
	// under snapshot views, which keep only its position); a re-entry in
	// an entry view takes every group instead of diffing against none.
	flNoState
)

func (s *slot) has(f uint8) bool { return s.fl&f != 0 }

// classOf is ghost s's class.
func (t *Table) classOf(s *slot) *Class { return t.reg.classes[s.ci] }

// dirtyHiBit is, in a slot's dirty word of a registry with more than 32
// groups a class (Table.wideDirty), the mark that a group from 31 up is
// dirty: those are in tableWide.dirtyHi[rc], shifted down by 31.
const dirtyHiBit = 1 << 31

// dirtyOf is the dirty groups of the ghost of record rc (s is its slot).
func (t *Table) dirtyOf(rc uint32, s *slot) uint64 {
	d := uint64(s.dirty)
	if t.wideDirty {
		d = d&(dirtyHiBit-1) | t.rare.wd.dirtyHi[rc]<<31
	}
	return d
}

// setDirty sets the dirty groups of the ghost of record rc to d (s is its
// slot).
func (t *Table) setDirty(rc uint32, s *slot, d uint64) {
	if t.wideDirty {
		t.rare.wd.dirtyHi[rc] = d >> 31
		if d>>31 != 0 {
			d = d&(dirtyHiBit-1) | dirtyHiBit
		}
	}
	s.dirty = uint32(d)
}

func (s *slot) set(f uint8, on bool) {
	if on {
		s.fl |= f
	} else {
		s.fl &^= f
	}
}

// posBlocked reports whether the position cannot be written now (one from
// this view already went, or posRingLen are in flight): the hot-line
// answer of what the track holds.
func (s *slot) posBlocked() bool { return s.fl&(flPosNow|flPosFull) != 0 }

// carried is a state the table keeps itself: every ghost's latest for
// SetView, and for snapshot views an AlwaysInScope ghost's outside its view.
type carried struct {
	st     State
	entity uint64    // the ghost's entity (entityOf)
	q      [3]uint32 // st.Pos quantized (0 for a class without a position)
	yaw    uint16    // its yaw code (Table.latest)
}

// viewQ is a ghost's entity (entityOf), latest quantized position (0 for
// a class without one) and yaw code (Table.latest), for views given as
// ViewEntries: the table's own, kept apart from the States (every update
// reads them).
type viewQ struct {
	entity uint64
	q      [3]uint32
	yaw    uint16
}

// goneRec is what a ghost that left scope (phaseKilling) keeps of its last
// view while views come as snapshots: what a re-entry before its kill went
// out compares against. Only leaving ghosts have one, so a ghost in view
// pays for none of it.
type goneRec struct {
	entity uint64 // the ghost's (entityOf)
	rc     uint32 // its record
	si     uint32 // its entry in the snapshot of seq taken (staleEntry, or siCarry|i for a state in carry: none)
	taken  uint32
	q      [3]uint32
}

// entityOf is the entity of the ghost of record rc (creating, live or
// killing: in use), read where its view
// keeps it: the table's viewQ for views given as ViewEntries; for
// snapshots, the entry it refers to (snapOf), its carried state, or the
// gone record of a ghost that left. The slot does not keep it: 8 bytes a
// ghost.
func (t *Table) entityOf(rc uint32) uint64 {
	if !t.snapMode {
		return t.rare.views.qs[rc].entity
	}
	s := &t.slots[rc]
	switch {
	case s.si&siGone != 0:
		return t.gone[s.si&siIndex].entity
	case s.si&siCarry != 0:
		return t.rare.views.carry[s.si&siIndex].entity
	}
	return t.snapOf(s).ents[s.si].entity
}

// scopeEntity is entityOf for a ghost in scope (creating or live: no gone
// record) while views come as snapshots: its entry's, or its carried
// state's. Small enough to inline into the view loop.
func (t *Table) scopeEntity(s *slot) uint64 {
	if s.si&siCarry != 0 {
		return t.rare.views.carry[s.si&siIndex].entity
	}
	return t.snapOf(s).ents[s.si].entity
}

// msTime is a time the table was given, in whole milliseconds since its
// epoch plus one (0 stands for none): 2 bytes a field. The epoch moves on
// in steps of rebaseBy before the values pass 2^16 − 1 (rebase), so no
// value wraps: they compare as they are, and differences of two of them
// as int32 are exact. A time older than the epoch reads as the epoch, at
// least msWindow old: every duration a time is compared against is at
// most MaxInterval, below that, so such a time passes every test as it
// would unpinned; only overdue ghosts waiting longer than msWindow are
// ordered as if they had waited that long (by priority among themselves).
type msTime uint16

// ms is a − b in ms.
func (a msTime) ms(b msTime) int32 { return int32(a) - int32(b) }

// msCeil is d in whole ms rounded up, at most 2^31−1 (0 for d ≤ 0): for a
// whole number of ms m, m·ms < d exactly when m < msCeil(d).
func msCeil(d time.Duration) int32 {
	if d <= 0 {
		return 0
	}
	return int32(min((d+time.Millisecond-1)/time.Millisecond, 1<<31-1))
}

// msOf is d in the table's milliseconds (times before the epoch as the
// epoch).
func (t *Table) msOf(d time.Duration) msTime {
	m := (d - t.epoch) / time.Millisecond
	return msTime(min(max(m, 0), rebaseAt) + 1)
}

// msOfStamp is the table's milliseconds of the view stamped st (a
// packet's pktRec.t, at most 2^31 ms before the latest view), as beginView
// gave that view's now (msOf); 0 for a view before the epoch, which is
// then older than every time a slot keeps but one pinned at the epoch.
func (t *Table) msOfStamp(st stamp) msTime {
	m := t.viewMS - stamp(t.viewMS).sub(st) - int64(t.epoch/time.Millisecond)
	if m < 0 {
		return 0
	}
	return msTime(min(m, rebaseAt) + 1)
}

// clock takes now as the latest time the table was given (lastNow) and
// returns it in milliseconds. The first call sets the epoch.
func (t *Table) clock(now time.Duration) msTime {
	if !t.clockSet {
		t.epoch, t.clockSet = now/time.Millisecond*time.Millisecond, true
	}
	t.lastNow = max(t.lastNow, now)
	if t.lastNow-t.epoch >= rebaseAt*time.Millisecond {
		t.rebase()
	}
	return t.msOf(now)
}

// rebaseAt and rebaseBy, in ms: once rebaseAt ms from its epoch (≈ 65.5
// s, msOf's most: 2^16 − 1), a table moves the epoch on by whole steps of
// rebaseBy (≈ 8.2 s: one walk of the slots every 8 s at a steady clock),
// the fewest that bring it under rebaseAt again; times older than the new
// epoch become the epoch. A time pinned so reads at least msWindow old.
const (
	rebaseAt = 1<<16 - 2
	rebaseBy = 1 << 13
	msWindow = rebaseAt - rebaseBy
)

func (t *Table) rebase() {
	steps := ((t.lastNow-t.epoch)/time.Millisecond-rebaseAt)/rebaseBy + 1
	by := int64(steps) * rebaseBy
	t.epoch += time.Duration(by) * time.Millisecond
	back := func(x *msTime) {
		if *x != 0 {
			*x = msTime(max(int64(*x)-by, 1))
		}
	}
	for i := range t.slots[:t.live] {
		s := &t.slots[i]
		back(&s.since)
		back(&s.sentAt)
		back(&s.pendChg)
		back(&s.ackAt)
		back(&s.lastChg)
	}
	// Position stamps rebase on views (rebasePositions).
}

// Tags of slot.si.
const (
	siCarry = 1 << 31
	siGone  = 1 << 30
	siIndex = siGone - 1
)

// Stats counts what a Table did (pure packages count instead of logging).
type Stats struct {
	Packets        uint64 // Write calls that wrote at least one record
	Creates        uint64 // create records written
	Updates        uint64 // update records written
	Kills          uint64 // kill records written
	CreatesLost    uint64 // create records in dropped packets (retried)
	UpdatesLost    uint64
	KillsLost      uint64 // (retried)
	Redirtied      uint64 // groups marked dirty again after a drop
	Suppressed     uint64 // lost groups not resent because a later packet carries them (RL-6)
	AbsolutePos    uint64 // update positions sent absolute (window too wide)
	PosDeferred    uint64 // updates that left position out (11 in flight, or one already sent this view)
	Resends        uint64 // speculative resends of state not yet known delivered (spare room)
	Stalls         uint64 // Write calls that could not record a packet (in-flight limits, a packet 2^7 seqs back still in flight, or a view older than 16 s)
	RecordGrowths  uint64 // times the in-flight record store grew (it starts small)
	EncodeErrors   uint64 // records a group encoder refused (caller bug; record skipped)
	IDsExhausted   uint64 // entities that found no free ghost id
	UnknownFates   uint64 // fates for packets without ghost records
	FreedUnacked   uint64 // ghosts freed without a kill (client never held them)
	GhostsAssigned uint64 // ids handed out
}

// Table is one connection's server-side ghost table: it diffs the zone's
// interest set into creates and kills, keeps per-ghost dirty masks, packs the
// highest-priority dirty ghosts into each packet's budget, and reacts to
// packet fates (seeds: Torque/Tribes ghost manager, 004 § Ghosts; book ch. 7
// Listings 7.10–7.13; checklist RL-5, RL-6, RP-12, SC-7..SC-9).
//
// Create with NewTable; the zero Table is not usable. Not safe for concurrent
// use; the connection that owns its ghost manager owns it.
type Table struct {
	// The fields a fate reads (OnFate: findPacket, the record walks,
	// releaseResolved, trim) come first, on the object's first three
	// cache lines: a Table is a 512-byte object, the largest size class
	// without a runtime header, so it starts on a line, and bytes 0–63,
	// 64–127 and 128–191 are three lines. On a server a
	// connection's table is cold when its fate comes; spread over six
	// lines (0, 1, 4, 6, 7, 8) a fate missed on each. TestTableFateLines
	// holds this.
	//
	// Line 0: the registry (its posBits, slowFates) and the per-record
	// arrays.
	reg   *Registry
	slots []slot     // each ghost's, by record (idm)
	pos   []posTrack // what the client may hold of each ghost's position, by record

	// Line 1: the config (MaxStaleness), the packet ring and the clock.
	cfg *tableConfig // shared by the tables of one Config (sharedConfig)
	// transmission records, FIFO in send order
	pkts    []pktRec
	pktHead int32
	pktLen  int32
	entHead int32
	entLen  int32
	lastSeq uint64
	viewMS  int64

	// Line 2: the record store, the clock, the fate delay, the trim's time
	// and the flags.
	ents    []entry
	lastNow time.Duration // latest now seen (SetView, Write): OnFate's clock
	epoch   time.Duration // msTime 1
	// Delivered fates arrive about fateDelay after the send (RFC 6298
	// style smoothing of lastNow − SentAt). ConfirmDeadline does not press a
	// ghost again before its last copy had fateDelay to be confirmed.
	fateDelay time.Duration
	trimAt    time.Duration // last trim (lastNow)
	// The bools share viewGen's word.
	viewGen uint8 // slot.viewGen's clock
	// wideDirty: a class has more than 32 groups; the slots' dirty words
	// keep groups 0–30, tableWide.dirtyHi the rest (dirtyOf).
	wideDirty bool
	haveView  bool
	clockSet  bool
	fateSeen  bool
	wrote     bool
	// recordGrowths counts the record store's growths (Stats.RecordGrowths)
	// modulo 256, in the word's spare bytes: trim shrinks the store again,
	// so it may double any number of times; each wrap adds 256 to
	// tableRare.recordGrowthsHi.
	recordGrowths uint8
	wide          bool // the registry has a class past entMaskBits groups: rare.wd.entHi is the ring's

	pkEnt0 int32 // entLen when the packet being written began
	entHW  int32 // most records in flight and candidates at once since the last trim (fill)

	// snapMode: the views come as snapshots; snap is the latest view's
	// (while one is being taken, the one it is taking: prevSnap is the one
	// before, which the ghosts not yet taken still refer to).
	snap, prevSnap *Snapshot
	// snapSrc and snapSeq name the snapshot the latest view came from:
	// its entries' stamps newer than snapSeq are changes since.
	snapSrc  uint64
	snapSeq  uint32
	snapMode bool
	// pktBusy: bit 0, the packet ring was more than half full at a fate
	// (or grew) since the last trim; bit 1, in the check before. trim
	// halves a ring that was not for two checks. In the byte after
	// snapMode (padding), off the fate's lines: releaseResolved writes it
	// only while the ring is more than half full, which a ring at its
	// steady use never is after trim.
	pktBusy uint8
	stride  uint16    // lastField's groups per record: the registry's most (≤ MaxGroups) less the slot's lfSlot
	gone    []goneRec // ghosts that left scope (snapshot views)
	pp      posPool   // in-flight positions
	// lastField[rc*stride+group−lfSlot] is the low 8 bits of the newest
	// seq that carried the group of the ghost of record rc, for groups
	// from lfSlot up (why 8 are enough: fieldOld, pack.go); slot.lf keeps
	// groups 0 and 1's.
	lastField []uint8
	idx       entityIndex // entity → record of ghosts in scope
	// order[i] is the record of the previous view's i-th entity's ghost:
	// zones list a player's interest set in much the same order tick
	// after tick, so it answers most lookups without the index
	// (SetSnapshotView walks it in lockstep with the view, so an entity
	// that entered or left shifts no hint after it). A hint only: the
	// ghost of the record it names is checked (its entity, or its entry
	// and view: keptAt), so a record whose ghost was freed or moved (a
	// freed ghost's record takes the last one's) costs a lookup, not a
	// mistake; and a record, not an id, so the usual view's ghost is
	// found without idm.
	order []uint16

	// idm is the wire ids, in one array: each record's id (idOf), then
	// the id allocation bitmap (usedIDs, 16 ids a word). A ghost is named
	// by its record everywhere but on the wire (records in flight, the entity index, the view order, the
	// gone records, the position pool), and the per-record arrays are
	// dense (a freed ghost's record takes the last one's: moveRecord), so
	// they are sized by the ghosts in use, not by the highest id, which
	// lowest-free ids leave holes below as ghosts come and go. 16 bits:
	// NewTable takes at most maxTableGhosts ids.
	idm  []uint16
	hint int32 // lowest word of the bitmap that may have a free id
	// npend counts the ghosts that want to send (slot.wants): Pending
	// without a walk of every slot. Every change of a slot's phase, dirty
	// groups or create/kill in flight keeps it (repend); checkInvariants
	// recounts it.
	npend int32
	top   int32 // highest id in use + 1 (≤ maxTableGhosts)
	live  int32 // ids in use: the records are [0, live)
	// liveHW is the most ghosts in use at once since the last trim, liveHW1
	// the one before: shrinkRecords' measure of the records a scope needs.
	liveHW, liveHW1 int32

	pk packer

	// The counters every connection moves stay here (32-bit: their wraps
	// are rare's); the rest, with the wide classes' mask bits and the
	// states a table keeps itself (SetView's, AlwaysInScope's), wait in
	// rare until one is needed. Stats folds them back: every count is
	// kept exactly, only the place differs. The Table fits the 512-byte
	// size class, the largest without a malloc header (the Config is
	// shared, the class list is the registry's): one more byte costs 64
	// a connection (the 576-byte class). TestRecordSizes holds it.
	stats hotStats
	rare  *tableRare
}

// entryViews is what a table keeps of its ghosts' states itself, not in a
// snapshot: for views given as ViewEntries (SetView) each ghost's latest
// state, and apart from the States its quantized position and yaw code
// (viewQ), diffed against the next view; for snapshot views the
// AlwaysInScope ghosts' outside the view (carry). The codes apart from
// the States: every record written reads them, and 16 bytes a ghost stay in
// the cache where 160 would not. In rare (viewsOf): a server's tables take
// snapshot views and carry nothing without an AlwaysInScope class, and
// pay no word for either.
type entryViews struct {
	states []State
	qs     []viewQ
	carry  []carried // AlwaysInScope states outside the view (snapshot views)
}

// hotStats are the Stats counters a healthy connection moves (packets,
// records, ids and the fates of packets without ghost records), 32 bits
// each: a wrap adds one to the same counter of tableRare.statsWraps (at
// most once in 2^32 counts, so its branch costs nothing), and Stats
// joins the halves. Records counts every record written, one add a
// packet (Write): Updates are Records less Creates and Kills, so the
// usual record counts nothing of its own.
type hotStats struct {
	Packets, Records, Creates, Kills, UnknownFates, GhostsAssigned uint32
}

// tableRare holds what most connections never need: the counters of
// losses, stalls, resends, deferred positions and errors, the hot
// counters' wraps, the states a table keeps itself and entHi. Made at its
// first use (rareOf); a Table without it is 512 bytes where with those
// counters inline it was 768, and with it the two objects (512 + 144)
// are no larger than that.
type tableRare struct {
	CreatesLost, UpdatesLost, KillsLost, Redirtied, Suppressed uint64
	AbsolutePos, PosDeferred, Resends, Stalls, EncodeErrors    uint64
	IDsExhausted, FreedUnacked                                 uint64
	// recordGrowthsHi is Stats.RecordGrowths less Table.recordGrowths
	// (a multiple of 256: its wraps).
	recordGrowthsHi uint64
	// statsWraps counts the wraps of each of Table.stats' counters: the
	// high 32 bits of its count.
	statsWraps hotStats
	// views holds the states the table keeps itself (viewsOf): nil
	// while it keeps none.
	views *entryViews
	// wd holds the ring's mask bits above entMaskBits and the dirty
	// groups above 30 of a registry with classes that wide: nil
	// otherwise.
	wd *tableWide
}

// rareOf returns t.rare, made on first use (a counter's increment
// inlines the test, not the allocation).
func (t *Table) rareOf() *tableRare {
	if r := t.rare; r != nil {
		return r
	}
	return t.makeRare()
}

//go:noinline
func (t *Table) makeRare() *tableRare {
	t.rare = new(tableRare)
	return t.rare
}

// tableWide is what a registry with a class of more than entMaskBits
// groups needs (tableRare.wd).
type tableWide struct {
	// entHi holds the mask bits above entMaskBits of each record in ents
	// (same index).
	entHi []uint64
	// dirtyHi[rc] holds record rc's dirty groups from 31 up, shifted down
	// by 31 (slot.dirty): nil unless a class has more than 32 groups.
	dirtyHi []uint64
}

// viewsOf returns the states the table keeps itself (tableRare.views),
// made on first use.
func (t *Table) viewsOf() *entryViews {
	r := t.rareOf()
	if r.views == nil {
		r.views = new(entryViews)
	}
	return r.views
}

// carried returns the AlwaysInScope states kept outside the latest
// snapshot view (entryViews.carry): nil while none is.
func (t *Table) carried() []carried {
	if r := t.rare; r != nil && r.views != nil {
		return r.views.carry
	}
	return nil
}

// dropCarry empties carry (a snapshot view that carries nothing), keeping
// its array, without making the views.
func (t *Table) dropCarry() {
	if r := t.rare; r != nil && r.views != nil {
		r.views.carry = r.views.carry[:0]
	}
}

// entHi is the ring of high mask bits (in rare), nil without a wide class.
func (t *Table) entHi() []uint64 {
	if !t.wide {
		return nil
	}
	return t.rare.wd.entHi
}

// pktRec lists the records one packet carried: ents[start : start+n] (the
// store never wraps: entRoom); a packet carries at most MaxPacketBytes·8 bits of records. t is the
// view stamp of every position the packet carried: it names them in their
// ghosts' in-flight lists (a ghost's position goes out at most once per
// view), so the positions need not hold the packet's sequence.
type pktRec struct {
	seq      uint32 // low 32 bits (findPacket)
	start    uint32
	t        stamp
	n        uint16
	resolved bool
}

// Record kinds in a transmission entry.
const (
	recUpdate uint8 = iota
	recCreate
	recKill
)

// entry is one record of an in-flight packet, 4 bytes: the ghost's
// record (< maxTableGhosts; its id on the wire is idOf's, and a free that
// moves the record renames its entries: renameInFlight), the record kind and the groups written (all
// groups for a create) up to entMaskBits; the mask bits above those, of
// classes with more groups, are in Table.entHi. Ten bits hold every mask
// of the shipped classes (7 groups at most): a connection keeps one entry
// per ghost per packet in flight, ≈ 4 packets of 44 ghosts at 1,000
// players (the store: entRoom).
type entry uint32

const (
	kindShift   = 20 // records < maxTableGhosts ≤ 1<<20
	maskShift   = kindShift + 2
	entMaskBits = 32 - maskShift
)

func mkEntry(rc uint32, kind uint8, mask uint64) entry {
	return entry(rc | uint32(kind)<<kindShift | uint32(mask)<<maskShift)
}

func (e entry) rec() uint32 { return uint32(e) & (1<<kindShift - 1) }
func (e entry) kind() uint8 { return uint8(e>>kindShift) & 3 }

// entMask is the mask of record i of the ring, e = ents[i].
func (t *Table) entMask(i int, e entry) uint64 {
	m := uint64(e >> maskShift)
	if t.wide {
		m |= t.rare.wd.entHi[i] << entMaskBits
	}
	return m
}

// maxTableClasses bounds the classes of a Table's registry: a slot keeps
// its ghost's class index in a byte.
const maxTableClasses = 1 << 8

// NewTable returns an empty table for one connection. It freezes reg. It
// refuses a registry of more than 256 classes or with a class whose
// MinInterval is past MaxInterval, and a Config of more than 2^16
// MaxGhosts (DefaultMaxGhosts: a Table maps ids and records in 16 bits).
func NewTable(reg *Registry, cfg Config) (*Table, error) {
	if reg == nil {
		return nil, fmt.Errorf("%w: nil registry", ErrConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxGhosts > maxTableGhosts {
		return nil, fmt.Errorf("%w: MaxGhosts %d, a Table takes at most %d", ErrConfig, cfg.MaxGhosts, maxTableGhosts)
	}
	if len(reg.classes) > maxTableClasses {
		return nil, fmt.Errorf("%w: registry of %d classes, a Table takes at most %d", ErrConfig, len(reg.classes), maxTableClasses)
	}
	for _, c := range reg.classes {
		if c.MinInterval > MaxInterval {
			return nil, fmt.Errorf("%w: class %q MinInterval %v past MaxInterval %v", ErrConfig, c.Name, c.MinInterval, MaxInterval)
		}
	}
	reg.frozen.Store(true)
	t := &Table{
		reg:    reg,
		cfg:    sharedConfig(cfg),
		stride: uint16(max(reg.maxGroups-lfSlot, 0)),
		// Both rings start small and double on demand up to
		// MaxPacketsInFlight and MaxRecordsInFlight (rounded up to a power of
		// two): a connection that sees a few ghosts must not pay for the
		// worst case (256 packets × 16 B, 8192 records × 4 B) up front.
		pkts: make([]pktRec, min(initialPackets, cfg.MaxPacketsInFlight)),
		ents: make([]entry, min(initialRecords, entCap(cfg))),
	}
	if reg.maxGroups > entMaskBits {
		t.rareOf().wd = &tableWide{entHi: make([]uint64, len(t.ents))}
		t.wide = true
	}
	t.wideDirty = reg.maxGroups > 32 // entMaskBits < 32: rare is made
	t.pp.init(&reg.q)
	return t, nil
}

// tableConfig is a table's Config and what packing derives from it, read
// only: the tables of a server share one (72 + 16 bytes a connection, and
// the Table stays in the 512-byte size class).
type tableConfig struct {
	Config
	unit    uint64 // StaleUnit in ns
	logUnit int    // ilog4(unit)
	// grownB[age] is grownOffset(age) for the ages in ms below
	// MaxStaleness (at most maxGrownB): collect buckets every dirty ghost
	// by it, a load instead of a log each packet. Never negative (the
	// offset of an age ≥ 0), so collect clamps only from above.
	grownB []uint16
	// MaxStaleness, ResendInterval and ConfirmDeadline in whole ms
	// (msCeil), for collect: taken once here, not three divisions a packet.
	maxStaleMS, resendMS, deadlineMS int32
}

// lastConfig is the tableConfig NewTable made last: the next table of an
// equal Config shares it. One, not a map: a program that makes tables of
// many Configs keeps one each, as before, and nothing more.
var lastConfig atomic.Pointer[tableConfig]

// sharedConfig returns a tableConfig of cfg (validated).
func sharedConfig(cfg Config) *tableConfig {
	if k := lastConfig.Load(); k != nil && k.Config == cfg {
		return k
	}
	k := &tableConfig{Config: cfg, unit: uint64(cfg.StaleUnit)}
	k.logUnit = ilog4(k.unit)
	k.maxStaleMS, k.resendMS, k.deadlineMS = msCeil(cfg.MaxStaleness), msCeil(cfg.ResendInterval), msCeil(cfg.ConfirmDeadline)
	k.grownB = make([]uint16, min(msCeil(cfg.MaxStaleness), maxGrownB))
	for age := range k.grownB {
		k.grownB[age] = uint16(grownOffset(k, int32(age)))
	}
	lastConfig.Store(k)
	return k
}

// Stats returns the counters so far.
func (t *Table) Stats() Stats {
	var hi hotStats
	if r := t.rare; r != nil {
		hi = r.statsWraps
	}
	lo := &t.stats
	count := func(lo, wraps uint32) uint64 { return uint64(wraps)<<32 | uint64(lo) }
	s := Stats{
		Packets: count(lo.Packets, hi.Packets), Creates: count(lo.Creates, hi.Creates), Kills: count(lo.Kills, hi.Kills),
		UnknownFates: count(lo.UnknownFates, hi.UnknownFates), GhostsAssigned: count(lo.GhostsAssigned, hi.GhostsAssigned),
		RecordGrowths: uint64(t.recordGrowths),
	}
	s.Updates = count(lo.Records, hi.Records) - s.Creates - s.Kills
	if r := t.rare; r != nil {
		s.RecordGrowths += r.recordGrowthsHi
		s.CreatesLost, s.UpdatesLost, s.KillsLost = r.CreatesLost, r.UpdatesLost, r.KillsLost
		s.Redirtied, s.Suppressed = r.Redirtied, r.Suppressed
		s.AbsolutePos, s.PosDeferred, s.Resends = r.AbsolutePos, r.PosDeferred, r.Resends
		s.Stalls, s.EncodeErrors = r.Stalls, r.EncodeErrors
		s.IDsExhausted, s.FreedUnacked = r.IDsExhausted, r.FreedUnacked
	}
	return s
}

// Len is the number of ghost ids in use (creating, live or killing).
func (t *Table) Len() int { return int(t.live) }

// IDWidth is the width of ghost ids on the wire right now:
// ⌈log2(highest id in use + 1)⌉.
func (t *Table) IDWidth() uint {
	if t.top == 0 {
		return 0
	}
	return uint(bits.Len32(uint32(t.top - 1)))
}

// GhostID returns the ghost id the entity has on this connection, if it is
// in scope (creating or live; false once its kill is on its way).
func (t *Table) GhostID(entity uint64) (uint32, bool) {
	rc, ok := t.idxGet(entity)
	if !ok {
		return 0, false
	}
	return t.idOf(rc), true
}

// InFlight is the number of packets with ghost records whose fate is unknown.
func (t *Table) InFlight() int { return int(t.pktLen) }

// Pending reports whether the table has anything to send: a create, kill or
// dirty group (ignoring rate limits and in-flight waits). A count the table
// keeps (npend), not a walk of the slots.
func (t *Table) Pending() bool { return t.npend != 0 }

// wants reports whether ghost s has something to send (what Pending
// counts): a create or kill not in flight, or dirty groups of a live ghost.
func (s *slot) wants() bool {
	switch s.phase {
	case phaseCreating:
		return s.fl&flCreateInFlight == 0
	case phaseLive:
		return s.dirty != 0
	case phaseKilling:
		return s.fl&flKillInFlight == 0
	}
	return false
}

// redirty keeps npend after a live ghost's dirty groups went from d0 to d1
// (a live ghost wants to send while it has dirty groups).
func (t *Table) redirty(d0, d1 uint64) {
	if (d0 == 0) != (d1 == 0) {
		if d1 != 0 {
			t.npend++
		} else {
			t.npend--
		}
	}
}

// repend keeps npend after a change to ghost s, which wanted to send
// (wants) before it when was.
func (t *Table) repend(s *slot, was bool) {
	if now := s.wants(); now != was {
		if now {
			t.npend++
		} else {
			t.npend--
		}
	}
}

// beginView starts taking a view of n entries at virtual time now: it
// returns the previous view's order (the position hints for viewGhost)
// and now in the table's milliseconds, and makes room for the new view in
// t.order. clearPos: clear every ghost's flPosNow here (SetView);
// SetSnapshotView clears it as it takes each ghost, and on the ghosts it
// does not take after.
func (t *Table) beginView(ms int64, now time.Duration, n int, clearPos bool) (prev []uint16, nowMS msTime) {
	if t.haveView && ms>>posRebaseShift != t.viewMS>>posRebaseShift {
		t.rebasePositions(t.viewMS, ms) // the view moves to another block: see posRebaseShift
	}
	t.viewMS, t.haveView = ms, true
	nowMS = t.clock(now)
	t.viewGen++
	if t.viewGen%viewGenPin == 0 {
		t.pinViewGens()
	}
	// A new view: every ghost's position may go again. First, and in id
	// order: on a cold table these are the slots' cache misses, each line
	// independent of the others and in sequence, so they overlap; the
	// view then takes its ghosts in view order, which would wait for
	// each line in turn.
	if clearPos {
		for i := range t.slots[:t.live] {
			t.slots[i].fl &^= flPosNow
		}
	}
	if cap(t.order) < n {
		// An eighth of room, and the rest of the size class: the heap
		// spends those bytes either way.
		t.order = make([]uint16, n, roomFor(n+n/8, 2))
	}
	prev = t.order[:min(len(t.order), n)]
	t.order = t.order[:n]
	return prev, nowMS
}

// viewGenPin: every viewGenPin views, a slot's viewGen older than that is
// pinned at exactly viewGenPin back (pinViewGens), so none drifts 2^8
// back and wraps to the current view or the one before (at most
// 2·viewGenPin back between two pins). A walk of the slots every 64 views
// (3.2 s at 20 Hz).
const viewGenPin = 1 << 6

// pinViewGens pins every ghost's viewGen more than viewGenPin views old
// at viewGenPin back: still neither this view nor the one before, which
// is all a view asks of it (a free record's is alloc's to set).
func (t *Table) pinViewGens() {
	for i := range t.slots[:t.live] {
		if s := &t.slots[i]; t.viewGen-s.viewGen > viewGenPin {
			s.viewGen = t.viewGen - viewGenPin
		}
	}
}

// viewGhost finds the record of the ghost of entity, at position i of a
// view: the one at the same position of the previous view when it still
// holds entity (views keep their order from tick to tick), else the
// index's. An entity whose class changed is a new ghost: its old one
// leaves, and ok is false.
func (t *Table) viewGhost(prev []uint16, i int, entity uint64, class *Class) (uint32, bool) {
	// A creating or live slot holding the entity is the one the index
	// names: there is never a second one for the same entity.
	if i < len(prev) {
		if h := uint32(prev[i]); int32(h) < t.live {
			if s := &t.slots[h]; s.phase-phaseCreating <= phaseLive-phaseCreating && t.entityOf(h) == entity {
				return t.sameClass(h, s, class)
			}
		}
	}
	rc, ok := t.idxGet(entity)
	if !ok {
		return 0, false
	}
	return t.sameClass(rc, &t.slots[rc], class)
}

// sameClass returns rc if its ghost s is of class; else the ghost leaves
// (an entity that changes class is a new ghost) and ok is false.
func (t *Table) sameClass(rc uint32, s *slot, class *Class) (uint32, bool) {
	if t.classOf(s) != class {
		t.leave(rc)
		return 0, false
	}
	return rc, true
}

// SetView merges the zone's interest set for this connection at virtual time
// now (DESIGN §4 step 5). Entities new to the set are created, entities
// missing from it are killed (unless their class is AlwaysInScope), and the
// rest are diffed group by group into their dirty masks. now must advance by
// at least a millisecond per call (ErrViewTime): states are stamped in
// milliseconds on the wire. The view is validated first; an invalid entry
// fails the whole call (ErrBadState, ErrUnknownClass) with nothing changed.
// If ids run out (ErrTooManyGhosts), the entities without one are retried on
// the next view; everything else was applied.
func (t *Table) SetView(now time.Duration, view []ViewEntry) error {
	ms := int64(now / time.Millisecond)
	if t.haveView && ms <= t.viewMS {
		return fmt.Errorf("%w: %v after %dms", ErrViewTime, now, t.viewMS)
	}
	// The quantized positions live in a borrowed scratch (12 B per entry
	// that every table would otherwise keep between views).
	t.pk.borrow()
	defer t.pk.release()
	if cap(t.pk.vq) < len(view) {
		t.pk.vq = make([][3]uint32, len(view))
	}
	vq := t.pk.vq[:len(view)]
	var known *Class // views hold few classes: check each once per run of equal ones
	for i := range view {
		e := &view[i]
		if e.Class != known {
			if e.Class == nil || !t.knows(e.Class) {
				return fmt.Errorf("%w: entity %d", ErrUnknownClass, e.Entity)
			}
			known = e.Class
		}
		if err := t.reg.check(e.Class, &e.State, &vq[i]); err != nil {
			return fmt.Errorf("entity %d: %w", e.Entity, err)
		}
	}
	if t.snapMode {
		t.leaveSnapshots()
	}
	prev, nowMS := t.beginView(ms, now, len(view), true)
	exhausted := false
	for i := range view {
		e := &view[i]
		rc, ok := t.viewGhost(prev, i, e.Entity, e.Class)
		if !ok {
			var err bool
			if rc, err = t.alloc(e.Entity, e.Class, nowMS); err {
				exhausted = true
				continue
			}
			t.rare.views.states[rc] = e.State
			t.rare.views.qs[rc] = viewQ{entity: e.Entity, yaw: yawCode(e.Class, &e.State)}
			if e.Class.posIdx >= 0 {
				t.rare.views.qs[rc].q = vq[i]
			}
		} else {
			t.refresh(rc, e, &vq[i], nowMS)
		}
		t.order[i] = uint16(rc)
		s := &t.slots[rc]
		s.viewGen = t.viewGen
		b := bucketOf(basePriority(e.Priority) * e.Class.weight)
		s.prioB = uint8(b)
	}
	// From the last record down: a ghost that leaves may be freed, and
	// the last record, walked already, moves into its place.
	for rc := t.live - 1; rc >= 0; rc-- {
		s := &t.slots[rc]
		if (s.phase == phaseCreating || s.phase == phaseLive) && s.viewGen != t.viewGen && !t.classOf(s).AlwaysInScope {
			t.leave(uint32(rc))
		}
	}
	if exhausted {
		return ErrTooManyGhosts
	}
	return nil
}

// knows reports whether c is registered in the table's registry: a class
// first registered there says so itself (no map lookup; views alternate
// classes, so the check runs about every other entry).
func (t *Table) knows(c *Class) bool {
	return c.reg == t.reg || t.reg.byID[c.ID] == c
}

// seqAfter reports whether truncated sequence a is after b.
func seqAfter(a, b uint32) bool { return int32(a-b) > 0 }

// restMarkerCopies is how many rest markers mark one stop.
const restMarkerCopies = 2

// minPriority stands in for a zero, negative or NaN priority.
const minPriority = 1e-6

func basePriority(p float32) float32 {
	if !(p > minPriority) {
		return minPriority
	}
	if p > 1e12 {
		return 1e12
	}
	return p
}

// Remove takes entity out of scope now, whatever its class (the way an
// AlwaysInScope ghost leaves, or an entity destroyed between views).
func (t *Table) Remove(entity uint64) {
	if rc, ok := t.idxGet(entity); ok {
		t.leave(rc)
	}
}

// refresh applies a view entry to the existing ghost of record rc: diff
// and store.
func (t *Table) refresh(rc uint32, e *ViewEntry, q *[3]uint32, now msTime) {
	c := e.Class
	old := &t.rare.views.states[rc]
	v := &t.rare.views.qs[rc]
	changed := t.reenter(rc, c, v.q != *q)
	if c.posIdx >= 0 {
		v.q = *q
	}
	if s := &t.slots[rc]; s.has(flNoState) {
		s.fl &^= flNoState
		changed |= c.all &^ c.posBit
	}
	if !sameBeyondPos(old, &e.State) { // most views change a ghost's position at most
		for i := range c.Groups {
			g := &c.Groups[i]
			if !g.pos && g.Changed(old, &e.State) {
				changed |= 1 << uint(i)
			}
		}
	}
	changed |= e.ChangedMask & c.all
	t.markChanged(rc, changed, now)
	if old.Yaw != e.State.Yaw {
		v.yaw = yawCode(c, &e.State)
	}
	*old = e.State
}

// yawCode is st's code of c's first yaw group (0 if c has none).
func yawCode(c *Class, st *State) uint16 {
	if c.yawIdx < 0 {
		return 0
	}
	return uint16(c.Groups[c.yawIdx].yc.code(st.Yaw))
}

// reenter cancels a pending kill of the ghost of record rc (in view again
// before the kill went out) and returns the position group's bit if its
// position moved since the previous view or just stopped moving.
func (t *Table) reenter(rc uint32, c *Class, moved bool) uint64 {
	s := &t.slots[rc]
	if s.phase == phaseKilling {
		t.unkill(s)
	}
	return s.moveBit(c, moved)
}

// moveBit returns c's position bit if the ghost's position moved since the
// previous view (moved), or just stopped moving: then two rest markers go
// out (restCopies). Small enough to inline into the view loops.
func (s *slot) moveBit(c *Class, moved bool) uint64 {
	switch {
	case c.posBit == 0:
		return 0
	case moved:
		s.fl |= flMoving
		return c.posBit
	case s.fl&flMoving != 0:
		s.fl &^= flMoving
		s.restCopies = restMarkerCopies
		return c.posBit
	}
	return 0
}

// unkill cancels ghost s's pending kill: back to live, or to creating if
// the client never held it.
func (t *Table) unkill(s *slot) {
	defer t.repend(s, s.wants())
	if s.si&siGone != 0 {
		t.dropGone(s.si &^ siGone)
	}
	if s.has(flCreated) {
		s.phase = phaseLive
	} else {
		s.phase = phaseCreating
	}
}

// markChanged marks groups of the ghost of record rc dirty as of now (the
// view's time).
func (t *Table) markChanged(rc uint32, changed uint64, now msTime) {
	if changed != 0 {
		s := &t.slots[rc]
		t.markSlot(s, changed, now)
		if changed>>31 != 0 {
			t.orDirtyHi(rc, s, changed)
		}
	}
}

// markSlot is markChanged of ghost s, for changed groups (not 0), in the
// slot's dirty word: groups from 31 up of a registry with wider classes
// (wideDirty) are the caller's to add (orDirtyHi; SetSnapshotView's
// usual-ghost walks, which call this alone, are not taken then).
func (t *Table) markSlot(s *slot, changed uint64, now msTime) {
	if s.dirty == 0 {
		s.since = now // staleness counts from the first change not yet sent
		if s.phase == phaseLive {
			t.npend++ // wants: a live ghost's dirty groups are all it sends
		}
	}
	if s.pendChg == 0 {
		s.pendChg = now
	}
	s.lastChg = now
	s.dirty |= uint32(changed)
}

// orDirtyHi adds changed's groups from 31 up to the dirty groups of the
// ghost of record rc when its registry keeps them apart (wideDirty;
// markSlot's word has the rest, and as it takes group 31's bit as the
// mark of any above, that is the mark it sets).
//
//go:noinline
func (t *Table) orDirtyHi(rc uint32, s *slot, changed uint64) {
	if t.wideDirty {
		t.rare.wd.dirtyHi[rc] |= changed >> 31
		s.dirty |= dirtyHiBit
	}
}

// sameBeyondPos reports whether a and b are byte for byte equal past Pos (a
// position group is the table's, never a group's Changed): then no group
// can have changed.
func sameBeyondPos(a, b *State) bool {
	const off, n = unsafe.Offsetof(State{}.Vel), unsafe.Sizeof(State{}) - unsafe.Offsetof(State{}.Vel)
	return *(*[n]byte)(unsafe.Add(unsafe.Pointer(a), off)) == *(*[n]byte)(unsafe.Add(unsafe.Pointer(b), off))
}

// samePos reports whether a's and b's positions are bit for bit equal:
// stricter than ==, so −0 and +0 (which may quantize alike, or not) never
// pass for the same. With sameBeyondPos, the whole State byte for byte.
func samePos(a, b *State) bool {
	pa, pb := (*[3]uint64)(unsafe.Pointer(&a.Pos)), (*[3]uint64)(unsafe.Pointer(&b.Pos))
	return pa[0] == pb[0] && pa[1] == pb[1] && pa[2] == pb[2]
}

// alloc gives entity the lowest free ghost id and the record after the
// others, which it returns; true means none is left. The caller stores
// its state and entity (for a snapshot view, si and viewGen: entityOf)
// before the index is asked of the record again.
func (t *Table) alloc(entity uint64, c *Class, now msTime) (uint32, bool) {
	if int(t.live) >= t.cfg.MaxGhosts {
		t.rareOf().IDsExhausted++
		return 0, true
	}
	rc := uint32(t.live)
	if int(rc) >= len(t.slots) {
		t.grow(int(rc) + 1)
	}
	id := t.allocID()
	t.live++
	t.liveHW = max(t.liveHW, t.live)
	t.idm[rc] = uint16(id)
	s := &t.slots[rc]
	// The record held another ghost, or none: nothing of it is kept. Its
	// per-group sequences (lf, lastField) are not reset: the create's
	// write sets every group's before any is read
	// (TestRecordReuseWritesAsFresh). viewGen: neither this view nor the
	// one before until the caller takes the ghost into the view.
	*s = slot{
		viewGen: t.viewGen - viewGenPin,
		lf:      s.lf,
		ci:      uint8(t.reg.index(c)), // < maxTableClasses
		since:   now,
		pendChg: now,
		lastChg: now,
		phase:   phaseCreating,
	}
	t.setDirty(rc, s, c.all)
	t.npend++ // a free record wanted nothing; a create does
	t.pos[rc].release(&t.pp, rc)
	t.idxSet(entity, rc) // reads the entities of the other records only
	t.stats.GhostsAssigned++
	if t.stats.GhostsAssigned == 0 {
		t.rareOf().statsWraps.GhostsAssigned++
	}
	return rc, false
}

// maxTableGhosts bounds Config.MaxGhosts for a Table: idm holds the ids
// in 16 bits (2 bytes a record).
const maxTableGhosts = 1 << 16

// idOf is the wire id of the ghost of record rc (< live).
func (t *Table) idOf(rc uint32) uint32 { return uint32(t.idm[rc]) }

// usedIDs is the id allocation bitmap (idm's words after the records').
func (t *Table) usedIDs() []uint16 { return t.idm[len(t.slots):] }

// grow extends the per-record arrays to at least n records, by an eighth
// at a time and to the room of their size classes (recordsFit; records
// are dense, so the arrays stay near the largest scope; a scope that
// settles stops allocating). An eighth, not more: the room is kept until
// trim finds two seconds of ghosts that fit in smaller size classes,
// ≈ 100 B a record (snapshot views).
func (t *Table) grow(n int) {
	c := max(n, len(t.slots)+len(t.slots)/8, 8)
	t.resizeRecords(max(min(t.recordsFit(c), t.cfg.MaxGhosts), n))
}

// recordsFit is the most records, at least n, whose per-record arrays
// take the heap's size classes that n records' do: the room those
// classes hold past n is heap the table pays for either way. grow and
// trim size the arrays by it, not in whole 8s: at the server's scopes at
// 2,000 players (76–104 ghosts, 32-byte slots and tracks) whole 8s took
// up to 800 bytes a table more (≈ 195 on average), in the classes of the
// 8s' room. The arrays of 32-byte records stay in one line each: every
// size class from 256 bytes up is a multiple of 32 (TestRecordsFit;
// TestSlotLayout: from 512 bytes, 16 records, a multiple of 64).
func (t *Table) recordsFit(n int) int {
	// The slots' and tracks' classes only: the smaller arrays' (fq1,
	// lastField, idm) are finer, and following them moved the arrays back
	// and forth across them for a few bytes (TestTableChurnFootprint's
	// moves).
	m := min(roomFor(n, int(unsafe.Sizeof(slot{}))), roomFor(n, int(unsafe.Sizeof(posTrack{}))))
	if !t.snapMode {
		m = min(m, roomFor(n, int(unsafe.Sizeof(State{}))), roomFor(n, int(unsafe.Sizeof(viewQ{}))))
	}
	if t.wideDirty {
		m = min(m, roomFor(n, 8))
	}
	return m
}

// roomFor is how many elements of size bytes (> 0) the heap's block for n
// of them holds (n ≥ 1; elements without pointers).
func roomFor(n, size int) int { return heapBlock(n*size) / size }

// heapBlock is the bytes the runtime allocates for an object of n bytes
// without pointers (runtime.roundupsize): its size class up to 32 KB, whole
// 8 KB pages above. TestHeapBlock checks the table against the runtime's
// own rounding (append's): if a Go release changed its classes, the arrays
// would only hold less room than they could, never fewer ids than asked.
func heapBlock(n int) int {
	if n > maxSmallBlock {
		return (n + 8191) &^ 8191
	}
	i, _ := slices.BinarySearch(sizeClasses[:], uint16(n))
	return int(sizeClasses[i])
}

const maxSmallBlock = 32768

// sizeClasses are the runtime's small-object size classes (Go 1.26,
// internal/runtime/gc.SizeClassToSize without its 0).
var sizeClasses = [...]uint16{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256, 288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408, 1536, 1792, 2048, 2304, 2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912, 8192, 9472, 9728, 10240, 10880, 12288, 13568, 14336, 16384, 18432, 19072, 20480, 21760, 24576, 27264, 28672, maxSmallBlock}

// resizeRecords gives every per-record array length and capacity n
// (≥ live), and idm room for n records' ids and a bitmap of the ids up to
// top and an eighth more.
func (t *Table) resizeRecords(n int) {
	top := int(t.top)
	t.remap((top+top/8+15)/16, n)
	t.slots = resize(t.slots, n)
	t.pos = resize(t.pos, n)
	if t.pp.fq1 != nil && t.pp.fq1Log == 0 { // made dense (posPool.fq1)
		t.pp.fq1 = resize(t.pp.fq1, n)
	}
	if !t.snapMode {
		ev := t.viewsOf()
		ev.states = resize(ev.states, n)
		ev.qs = resize(ev.qs, n)
	}
	t.lastField = resize(t.lastField, n*int(t.stride))
	if t.wideDirty {
		t.rare.wd.dirtyHi = resize(t.rare.wd.dirtyHi, n)
	}
}

// remap makes idm anew with at least words words of the id bitmap
// (covering top) and recs records' ids (≥ live; the per-record arrays'
// length once the caller has resized them), the rest of its size class's
// room going to the bitmap.
func (t *Table) remap(words, recs int) {
	words = heapBlock(2*(words+recs))/2 - recs
	m := make([]uint16, words+recs)
	copy(m, t.idm[:t.live])
	copy(m[recs:], t.usedIDs())
	t.idm = m
}

// resize returns s with length and capacity n, its first min(len(s), n)
// elements kept. Not append: append rounds a small slice's capacity up to
// double, so a table's per-record arrays would hold up to twice the
// records they ever use (measured at 1,000 players: ≈ 70 of room for 44
// ghosts).
func resize[T any](s []T, n int) []T {
	ns := make([]T, n)
	copy(ns, s)
	return ns
}

// allocID returns the lowest free id (ids stay compact, so the id width
// stays small) and marks it used, the bitmap grown if every id it covers
// is.
func (t *Table) allocID() uint32 {
	used := t.usedIDs()
	w := int(t.hint)
	for w < len(used) && used[w] == 1<<16-1 {
		w++
	}
	if w == len(used) {
		t.remap(w+w/8+1, len(t.slots))
		used = t.usedIDs()
	}
	b := bits.TrailingZeros16(^used[w])
	used[w] |= 1 << b
	t.hint = int32(w)
	id := uint32(w*16 + b)
	t.top = max(t.top, int32(id+1))
	return id
}

// free releases the ghost of record rc and its id. The last record moves
// into rc, so the records stay dense.
func (t *Table) free(rc uint32) {
	s := &t.slots[rc]
	t.idxDel(t.entityOf(rc), rc)
	if s.si&siGone != 0 {
		t.dropGone(s.si &^ siGone)
	}
	if s.wants() {
		t.npend--
	}
	id := t.idOf(rc)
	w := int(id / 16)
	used := t.usedIDs()
	used[w] &^= 1 << (id % 16)
	t.hint = min(t.hint, int32(w))
	if int32(id) == t.top-1 {
		for t.top > 0 && used[(t.top-1)/16]&(1<<((t.top-1)%16)) == 0 {
			t.top--
		}
	}
	t.live--
	if last := uint32(t.live); rc != last {
		t.moveRecord(last, rc)
	}
}

// moveRecord moves the ghost of record from (the last) into record to
// (free: its ghost had nothing in flight, so its track holds no position
// in flight), and renames it wherever it is named: its records in flight,
// the entity index, its gone record. The view order's hints are left: a
// hint is checked, and one naming a moved ghost costs its next view a
// lookup. The track's pool list moves with the track; what the pool keeps
// apart by record (posPool.fq1, posWide.dhi) is moved too, and the track
// left behind is emptied without freeing the list it shared.
func (t *Table) moveRecord(from, to uint32) {
	t.idm[to] = t.idm[from]
	s := &t.slots[to]
	*s = t.slots[from]
	if s.si&siGone != 0 {
		t.gone[s.si&siIndex].rc = to
	}
	if s.inflight != 0 {
		t.renameInFlight(from, to)
	}
	t.pos[to] = t.pos[from]
	t.pp.moveRecord(&t.pos[to], from, to)
	t.pos[from] = posTrack{}
	if st := int(t.stride); st > 0 {
		copy(t.lastField[int(to)*st:int(to+1)*st], t.lastField[int(from)*st:])
	}
	if !t.snapMode {
		ev := t.rare.views
		ev.states[to], ev.qs[to] = ev.states[from], ev.qs[from]
	}
	if t.wideDirty {
		t.rare.wd.dirtyHi[to] = t.rare.wd.dirtyHi[from]
	}
	// The index reads the entity through the record: moved first.
	if s.phase != phaseKilling || s.fl&flKillInFlight == 0 {
		t.idxMove(t.entityOf(to), from, to)
	}
}

// renameInFlight makes the records in flight of the ghost of record from
// name record to: a walk of the records in flight (a few packets' of a
// scope, once a freed ghost's record is taken by one with records in
// flight). Frees come from views and fates, never while a packet is
// being written.
func (t *Table) renameInFlight(from, to uint32) {
	ents := t.ents[t.entHead : t.entHead+t.entLen]
	for i, e := range ents {
		if e.rec() == from {
			ents[i] = e&^(1<<kindShift-1) | entry(to)
		}
	}
}

// leave starts killing the ghost of record rc (it left scope or was
// removed).
func (t *Table) leave(rc uint32) {
	s := &t.slots[rc]
	switch s.phase {
	case phaseFree, phaseKilling:
		return
	}
	if t.snapMode {
		// What a re-entry before the kill goes out compares against: the
		// view's entry is not kept past the view.
		g := goneRec{entity: t.entityOf(rc), rc: rc, si: staleEntry}
		switch {
		case s.si&siCarry != 0:
			g.q = t.rare.views.carry[s.si&siIndex].q
		default:
			sn := t.snapOf(s)
			g.si, g.taken, g.q = s.si, sn.seq, sn.vw[s.si].qpos
		}
		s.si = siGone | uint32(len(t.gone))
		t.gone = append(t.gone, g)
	}
	was := s.wants()
	s.phase = phaseKilling
	t.repend(s, was)
	t.settle(rc)
}

// snapOf is the snapshot s.si (an entry, in view) refers to: the latest,
// or while a view is being taken, the one before for a ghost not yet in it.
func (t *Table) snapOf(s *slot) *Snapshot {
	if s.viewGen != t.viewGen && t.prevSnap != nil {
		return t.prevSnap
	}
	return t.snap
}

// dropGone removes gone[i] (its ghost re-entered or was freed), moving the
// last record into its place.
func (t *Table) dropGone(i uint32) {
	last := len(t.gone) - 1
	if int(i) != last {
		t.gone[i] = t.gone[last]
		t.slots[t.gone[i].rc].si = siGone | i
	}
	t.gone = t.gone[:last]
}

// settle frees a killing ghost the client never held once nothing of it is
// in flight: there is nothing to kill.
func (t *Table) settle(rc uint32) {
	s := &t.slots[rc]
	if s.phase == phaseKilling && !s.has(flCreated) && s.inflight == 0 {
		t.rareOf().FreedUnacked++
		t.free(rc)
	}
}

// initialRecords and initialPackets are the rings' first sizes: a few
// packets of a small scope, so a quiet connection never grows them. Four
// packets: a server's fates come a round trip late (20–60 ms at 21
// packets a second: one or two in flight, and the one being written
// takes a record too). A client acknowledging at 10 Hz keeps 3-6 in
// flight: its ring doubles to 8 on demand (16 B a packet), and trim
// halves it again only after two checks at most half full (a ring whose
// use sits at exactly half moves once every few seconds).
const (
	initialRecords = 64
	initialPackets = 4
)

// entCap is the record store's largest size.
func entCap(cfg Config) int { return 1 << bits.Len(uint(cfg.MaxRecordsInFlight-1)) }

// The records of the packets in flight are ents[entHead : entHead+entLen],
// in send order, each packet's from its start on: a store of any length
// (trim sizes it to its size class's room) that never wraps. A packet's
// records go at the end of the live ones, and when they may not fit there
// the live records slide to index 0 (a copy of the few in flight, about
// one packet's) or the store grows. A ring of a power of two held 1.3–2
// times the records in flight (300 B a connection at 80 ghosts, 256
// records for 110–200), and one of any length wrapped each record by a
// compare (+0.3 % of Tables1000PumpZones' instructions).

// entRoom makes room for k records after the live ones (ents[entHead+entLen
// : entHead+entLen+k]): it slides them to index 0 if that gives the room,
// else grows the store (up to its configured maximum) and slides. It
// reports false if the store cannot hold entLen+k records. The packet
// being written, if any, moves with its records.
func (t *Table) entRoom(k int) bool {
	need := int(t.entLen) + k
	if need <= len(t.ents) {
		t.moveEnts(t.ents)
		return true
	}
	if c := entCap(t.cfg.Config); need <= c {
		t.moveEnts(newRecordStore(min(max(2*len(t.ents), need), c)))
		t.recordGrowths++
		if t.recordGrowths == 0 {
			t.rareOf().recordGrowthsHi += 256
		}
		return true
	}
	return false
}

// growPkts doubles the packet ring up to MaxPacketsInFlight, unwrapping the
// FIFO to index 0. It reports false when the ring is at its maximum.
func (t *Table) growPkts() bool {
	old := t.pkts
	if len(old) >= t.cfg.MaxPacketsInFlight {
		return false
	}
	t.movePkts(2 * len(old))
	t.pktBusy |= 1
	return true
}

// movePkts moves the packet records, in FIFO order from index 0, into a
// ring of n (a power of two ≥ pktLen).
func (t *Table) movePkts(n int) {
	old := t.pkts
	pkts := make([]pktRec, n)
	for i := range int(t.pktLen) {
		pkts[i] = old[(int(t.pktHead)+i)&(len(old)-1)]
	}
	t.pkts, t.pktHead = pkts, 0
}

// trimEvery is how often OnFate checks the in-flight stores against their
// use since the previous check.
const trimEvery = time.Second

// trim gives back in-flight room a burst left behind: the record store and
// the position pool keep their high-water mark (a fate delay of a few
// hundred milliseconds once, on a loaded host, held 2-4 times the room of
// the usual one for the connection's life). Once every trimEvery, the
// record store (doubled on demand) shrinks to its size class's room a
// quarter above its most use since the last check (the records in flight
// and a packet's candidates: fill), and the pool
// (grown by an eighth) shrinks to a sixteenth above its most use in the
// last two checks once its room is more than a quarter above that. A store
// at its steady use never moves and allocates nothing; a burst costs at
// most one shrink a second. The per-record arrays likewise: grown to the
// most ghosts a scope held, they come down to the most in use in the last
// two checks, to their size classes' room (recordsFit, shrinkRecords).
func (t *Table) trim() {
	if t.lastNow-t.trimAt < trimEvery {
		return
	}
	t.trimAt = t.lastNow
	// The record store: a quarter of room above the use, to its size
	// class's room, if that is smaller.
	if n, want := len(t.ents), max(roomFor(int(t.entHW+t.entHW/4), 4), initialRecords); want < n {
		t.moveEnts(newRecordStore(want))
	}
	// The pool grows by an eighth (posPool.get): it comes down to a
	// sixteenth above its most use once its room is more than a quarter
	// above that. The room after a compaction (that, rounded up to its
	// size class: at most 19 % more) is below the bound, so a pool at its
	// steady use is never moved twice; a pool grown by one step past its
	// peak is brought back. A pool unused for two checks goes entirely:
	// on a server each fate comes before the next write, so the pool is
	// the room of a burst of late fates, and its floor (32 to 64 nodes,
	// 0.5–1 KB) would otherwise stay for the connection's life.
	if x := &t.pp; cap(x.nodes) > 0 && max(x.hw, x.hw1) == 0 {
		t.compactPositions(0)
	} else if cap(x.nodes) > 64 {
		hw := int(max(x.hw, x.hw1))
		if want := max(hw+hw/16, 32); cap(x.nodes) > want+want/4 {
			t.compactPositions(want)
		}
	}
	t.entHW, t.pp.hw1, t.pp.hw = t.entLen, t.pp.hw, t.pp.used
	// The packet ring doubles when full (growPkts) and, grown by a burst
	// of late fates (a stall of a second: 21 packets in flight, a ring of
	// 32), kept that room for the connection's life. It halves, once a
	// check, after two checks at most half full: the use since fits the
	// half, and a ring at its steady use, more than half full at times,
	// stays.
	if t.pktBusy == 0 && len(t.pkts) > initialPackets {
		t.movePkts(len(t.pkts) / 2)
	}
	t.pktBusy = t.pktBusy << 1 & 2
	// The second positions in flight go once none was pushed for two
	// checks and no track holds one (a walk of the tracks once a second,
	// only while fq1 is kept unused).
	// A sparse fq1 comes down to its use of the last two checks
	// (posPool.trimSecs).
	if x := &t.pp; x.fq1 != nil && !x.fq1Used && !x.fq1Used1 && !t.anySecond() {
		x.fq1, x.fq1Log = nil, 0
	} else if x.fq1Log != 0 {
		x.trimSecs()
	}
	t.pp.fq1Used1, t.pp.fq1Used = t.pp.fq1Used, false
	// The per-record arrays come down to the ghosts of the last two
	// seconds, with the room of their size classes (recordsFit), once
	// that is smaller: a scope that shrank, or the room of a peak or of a
	// growth, is given back (a crowd the player walked through would
	// otherwise cost its ≈ 100 bytes a ghost, 260 with SetView's states,
	// for the connection's life), and a scope walking within its classes'
	// room never moves. No eighth of room as grow gives: at the server's scope
	// (43 ghosts, ids up to ≈ 48) it took 56 ids where 48 do, ≈ 880 bytes
	// a connection, for a move every 14 s or so instead of 21
	// (TestTableChurnFootprint).
	if n := len(t.slots); n > minShrinkRecords {
		// By an eighth at least, as grow grows: a scope walking across
		// one of the finer classes (1,408 bytes: 44 slots) would
		// otherwise move the arrays back and forth.
		if want := t.recordsFit(max(int(max(t.liveHW, t.liveHW1)), minShrinkRecords)); want <= n-n/8 {
			t.resizeRecords(want) // the records above are free, their tracks empty
		}
	}
	t.liveHW1, t.liveHW = t.liveHW, t.live
	t.idxTrim()
	// The view order's hints: grown to a peak view with an eighth of room
	// and its size class's rest (beginView) and kept for the connection's
	// life. Given back once the view is at most half the room, so a scope
	// walking within a factor of two never moves them.
	if c := cap(t.order); c > 16 && len(t.order) <= c/2 {
		t.order = append(make([]uint16, 0, roomFor(len(t.order)+len(t.order)/8, 2)), t.order...)
	}
	// The gone records of a burst of leaves (a teleport, a crowd left
	// behind) are kept until their kills are delivered; their room, grown
	// by append's doubling, is given back once at most a quarter is used
	// (all of it when none is): a connection that once saw 40 ghosts
	// leave at once kept 2 KB for its life.
	if c := cap(t.gone); c > 0 && len(t.gone) <= c/4 {
		if len(t.gone) == 0 {
			t.gone = nil
		} else {
			t.gone = append([]goneRec(nil), t.gone...)
		}
	}
}

// anySecond reports whether a track holds a second position in flight
// (posPool.fq1).
func (t *Table) anySecond() bool {
	for i := range t.pos {
		if t.pos[i].n() >= 2 {
			return true
		}
	}
	return false
}

// minShrinkRecords: per-record arrays of this many records or fewer are
// never shrunk (a few hundred bytes).
const minShrinkRecords = 16

// entFree is the room entRoom makes when the end of the store is reached:
// all the store's free room, so that a nearly full store slides once for
// its free records, not once a record; at least one record (a full store
// grows).
func (t *Table) entFree() int { return max(len(t.ents)-int(t.entLen), 1) }

// moveEnts moves the live records to index 0 of ents (the store itself,
// to slide them, or a new one of room for them), their entHi too, and
// every in-flight packet's start with them, the one being written too.
// newRecordStore makes a record store of n entries: one allocation site
// for the store's growth and trim, so a heap profile (cmd/capacity's
// breakdown) counts the store as in flight, not as the table's rest.
func newRecordStore(n int) []entry { return make([]entry, n) }

func (t *Table) moveEnts(ents []entry) {
	head, n := int(t.entHead), int(t.entLen)
	copy(ents, t.ents[head:head+n])
	if old := t.entHi(); old != nil {
		hi := old
		if len(ents) != len(t.ents) {
			hi = make([]uint64, len(ents))
		}
		copy(hi, old[head:head+n])
		t.rare.wd.entHi = hi
	}
	for i := range int(t.pktLen) { // recorded packets: each holds ≥ 1 live record
		p := &t.pkts[(int(t.pktHead)+i)&(len(t.pkts)-1)]
		p.start -= uint32(head)
	}
	if int(t.pktLen) < len(t.pkts) {
		// The packet being written (beginPacket … endPacket) owns the
		// records from pkEnt0 on (none yet, or the store is between
		// packets and beginPacket sets it).
		p := &t.pkts[int(t.pktHead+t.pktLen)&(len(t.pkts)-1)]
		p.start = uint32(t.pkEnt0)
	}
	t.ents, t.entHead = ents, 0
}

// compactPositions moves every ghost's in-flight positions into a pool of
// room n (≥ used): posPool.compact.
func (t *Table) compactPositions(n int) { t.pp.compact(t.pos, n) }
