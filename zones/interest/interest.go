package interest

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/ghostwire/ghostwire/zones/grid"
)

// ErrConfig reports an unusable Config.
var ErrConfig = errors.New("interest: invalid config")

// MaxKinds bounds entity kinds (the index into KindWeight).
const MaxKinds = 8

// MaxSlots bounds the slots a Tracker handles (an entry packs the slot in
// 23 bits, beside a flag and the slot's generation).
const MaxSlots = 1 << 23

// Config tunes scope and priority.
type Config struct {
	// EnterRadius: an entity this close (metres) joins the set. Default 100.
	EnterRadius float32
	// LeaveRadius: a member leaves only beyond this (metres); ≥ EnterRadius.
	// Default 110.
	LeaveRadius float32
	// FarPriority is the distance factor at LeaveRadius (1 at distance 0),
	// in (0, 1]. Default 0.1.
	FarPriority float32
	// KindWeight scales priority by entity kind (zone-side relevance: players
	// over NPCs, say). Zero entries mean 1.
	KindWeight [MaxKinds]float32
	// StaleTicks: a state this many ticks old doubles the priority. Default 20
	// (one second at 20 Hz).
	StaleTicks uint16
	// AlwaysPriority is the priority of always-relevant entities beyond the
	// leave radius. Default FarPriority.
	AlwaysPriority float32
	// MaxView caps a set's size; the highest priorities are kept. Default 1024.
	MaxView int
}

// DefaultConfig returns enter 100 m, leave 110 m, far priority 0.1, stale
// unit 20 ticks, at most 1024 entities per view.
func DefaultConfig() Config {
	return Config{EnterRadius: 100, LeaveRadius: 110, FarPriority: 0.1, StaleTicks: 20, MaxView: 1024}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.EnterRadius == 0 {
		c.EnterRadius = d.EnterRadius
	}
	if c.LeaveRadius == 0 {
		c.LeaveRadius = max(d.LeaveRadius, c.EnterRadius*1.1)
	}
	if c.FarPriority == 0 {
		c.FarPriority = d.FarPriority
	}
	for i, w := range c.KindWeight {
		if w == 0 {
			c.KindWeight[i] = 1
		}
	}
	if c.StaleTicks == 0 {
		c.StaleTicks = d.StaleTicks
	}
	if c.AlwaysPriority == 0 {
		c.AlwaysPriority = c.FarPriority
	}
	if c.MaxView == 0 {
		c.MaxView = d.MaxView
	}
	return c
}

// Validate reports the first unusable field (zero fields mean the default).
func (c Config) Validate() error {
	c = c.withDefaults()
	finitePos := func(f float32) bool { return f > 0 && !math.IsInf(float64(f), 0) }
	switch {
	case !finitePos(c.EnterRadius):
		return fmt.Errorf("%w: EnterRadius %g", ErrConfig, c.EnterRadius)
	case !finitePos(c.LeaveRadius) || c.LeaveRadius < c.EnterRadius:
		return fmt.Errorf("%w: LeaveRadius %g must be finite and ≥ EnterRadius %g", ErrConfig, c.LeaveRadius, c.EnterRadius)
	case !(c.FarPriority > 0 && c.FarPriority <= 1):
		return fmt.Errorf("%w: FarPriority %g not in (0, 1]", ErrConfig, c.FarPriority)
	case !finitePos(c.AlwaysPriority):
		return fmt.Errorf("%w: AlwaysPriority %g", ErrConfig, c.AlwaysPriority)
	case c.MaxView < 1:
		return fmt.Errorf("%w: MaxView %d", ErrConfig, c.MaxView)
	}
	for i, w := range c.KindWeight {
		if !finitePos(w) {
			return fmt.Errorf("%w: KindWeight[%d] %g", ErrConfig, i, w)
		}
	}
	return nil
}

// Aux packs what the tracker needs to know about an entity besides its
// position and id into the grid's aux word: its kind (index into
// Config.KindWeight), its slot's generation and how many ticks old its
// state is (0: fresh this tick). File every entity with
// grid.Set(slot, x, z, interest.Aux(…)).
//
// The generation tells a member from a newcomer that reuses its slot: the
// zone bumps it (mod 256) whenever a slot gets a new entity, and must not
// reuse one slot 256 times between two Updates of a set (reusing a slot at
// most once per tick and updating every set at least every 255 ticks is
// enough).
func Aux(kind, gen uint8, stale uint16) uint32 {
	return uint32(kind) | uint32(gen)<<8 | uint32(stale)<<16
}

// AuxKind, AuxGen and AuxStale unpack Aux.
func AuxKind(aux uint32) uint8   { return uint8(aux) }
func AuxGen(aux uint32) uint8    { return uint8(aux >> 8) }
func AuxStale(aux uint32) uint16 { return uint16(aux >> 16) }

// Entry is one member of a player's interest set: its slot and the slot's
// generation, 4 bytes. Its priority is not kept in it: a set lives from
// tick to tick and the priority is read only in the tick its Update made
// it (Tracker.AppendPriorities recomputes it then from the tracker's
// per-Build table, bit for bit). 8 bytes with it, the sets were a quarter
// of a zone's bytes a player (≈ 465 B at 41 in view).
type Entry struct {
	key uint32 // always<<31 | slot<<8 | the slot's generation when the entry was made
}

// Slot returns the member's slot.
func (e Entry) Slot() int32 { return int32(e.key << 1 >> 9) }

// alwaysBit flags an entry the always-relevant pass added (priority by
// Config.AlwaysPriority, kept in the set: the per-Build table cannot
// recompute it).
const alwaysBit = 1 << 31

func entryKey(slot int32, aux uint32) uint32 { return uint32(slot)<<8 | uint32(AuxGen(aux)) }

// Stats counts membership changes of the sets a Tracker updates.
type Stats struct {
	Enters, Leaves uint64
	Capped         uint64 // entities dropped by MaxView, summed over ticks
}

// Set is one player's interest set. The zero Set is empty and ready; keep it
// with the player (and hand its ids over with the player on a zone handoff,
// Seed, so hysteresis survives the move).
//
// A Set is one slice (24 bytes): its counters are its Tracker's, summed
// over the sets it updates (Tracker.Stats). Nobody read them per set, and
// 24 bytes of them in every player's set put the zone's player record
// (sim.playerSlot, 232 bytes) in the 240-byte size class instead of the
// 208-byte one. For the same reason what its priorities are computed from
// is kept in the slice, not beside it:
//
//	buf = [table stamp, viewer x, viewer z, n] [n members] [tail]
//
// the stamp of the tracker table its Update read (or heldStamp: the tail
// holds every member's priority, Tracker.Hold), the viewer's position it
// was computed at, and the tail: the always-relevant members' priorities,
// in member order.
type Set struct {
	buf []Entry
}

// set header words.
const (
	hStamp = iota
	hX
	hZ
	hN
	hLen
)

// heldStamp marks a set whose tail holds every member's priority.
const heldStamp = ^uint32(0)

// Entries returns the current members. The slice is reused by the
// tracker's next Update, of this set or another (sets trade buffers:
// Tracker.refit).
func (s *Set) Entries() []Entry {
	if len(s.buf) < hLen {
		return nil
	}
	return s.buf[hLen : hLen+int(s.buf[hN].key)]
}

// Len returns the number of members.
func (s *Set) Len() int {
	if len(s.buf) < hLen {
		return 0
	}
	return int(s.buf[hN].key)
}

// Reset empties the set (counters kept).
func (s *Set) Reset() { s.buf = s.buf[:0] }

// header starts s's buffer over (members to be appended): stamp, viewer
// position, no members.
func (s *Set) header(stamp uint32, x, z float32) {
	s.buf = append(s.buf[:0], Entry{stamp}, Entry{math.Float32bits(x)}, Entry{math.Float32bits(z)}, Entry{})
}

// Seed makes the set hold the entities now in the given slots of g (as of
// the last Set), for a player arriving by handoff: the previous zone's set,
// mapped to this zone's slots, so entities between the radii stay in view
// instead of popping. Priorities are filled in by the next Update.
func (s *Set) Seed(g *grid.Grid, slots []int32) {
	s.header(0, 0, 0)
	for _, sl := range slots {
		if _, _, m, ok := g.Pos(sl); ok {
			s.buf = append(s.buf, Entry{key: entryKey(sl, m.Aux)})
		}
	}
	s.buf[hN].key = uint32(len(s.buf) - hLen)
}

// Tracker computes interest sets for the players of one zone.
type Tracker struct {
	cfg            Config
	enter2, leave2 float32
	falloff        float32 // (1 − FarPriority) / Leave²
	invStale       float32
	runs           []grid.Run
	// mark[i] = token: "the set being updated holds base[i]'s entity" (of
	// its slot and generation: a newcomer in a member's slot is not
	// marked). By base index, not by slot: the scan reads a run's marks in
	// order beside its candidates, one byte each, with no lookup by the
	// candidate's slot (a shift, a bounds check and the generation's
	// compare a candidate); the marking pass pays the slot's lookup
	// (index) instead, once per member. The 8-bit token wraps every 255
	// updates; the array is cleared then, so a mark equal to the current
	// token is always from this update.
	mark    []uint8
	token   uint8
	scratch []Entry
	// spare: buffers sets gave up (refit), for others to take;
	// spareNext: the next to go for a newer, once maxSpare are kept.
	spare     [][]Entry
	spareNext int
	// alwaysP: the always-relevant members' priorities of one Update;
	// ranked: a capped Update's candidates with their priorities.
	alwaysP []float32
	ranked  []ranked
	viewP   []float32 // AppendView's priorities
	// stamp numbers the per-Build tables (prepare): a set whose header
	// has it was computed from the tables as they are.
	stamp uint32
	// bx, bz, bkey [i]: the grid's i-th filed slot as of its last Build
	// (the scan's "base" index): its position and its entry, computed
	// once per Build for the tracker's grid, so a candidate costs no
	// position from the grid and no decode of its aux word per player
	// that sees it. Three arrays, not one of records: scan4 loads four
	// candidates' x, z and keys as three vectors (a 16-byte record of
	// them took 10 shuffles a group to transpose). Its priority factor is
	// in bySlot.
	bx, bz     []float32
	bkey       []uint32
	baseGrid   *grid.Grid
	baseBuilds uint64
	// index[slot] is the slot's index in base as of the last prepare and
	// its generation then, generation<<24 | index (indexWord), so that a
	// member's mark needs no look at base; noIndex for a slot not filed
	// then.
	index []uint32
	// bySlot[slot]: the slot's candidate's position and factor as of the
	// last prepare (stale for a slot not filed then), for the priorities
	// of a view (Viewer): one load by the member's slot, where base takes
	// index's first.
	bySlot []slotPrio
	// stats: the sets' membership changes, summed over every Update.
	stats Stats
	// sc: the scan's state, its constant part set once.
	sc scan
	// farb: FarPriority's bits as an int32 (Viewer's floor).
	farb int32
	// kf: by kind, a fresh state's factor (prepare's usual case).
	kf [MaxKinds]float32
	// vw: the view weights by kind (SetViewWeights), vwOK if every one
	// may be folded into a slot's factor exactly (a power of two, the
	// products normal floats); kwf: kf × vw. wfOK: the table's wf (as of
	// the last prepare) are of vw.
	vw         [MaxKinds]float32
	kwf        [MaxKinds]float32
	vwOK, wfOK bool
}

// Stats returns the membership changes of every set t updated.
func (t *Tracker) Stats() Stats { return t.stats }

// NewTracker returns a tracker for cfg (zero fields: defaults).
func NewTracker(cfg Config) (*Tracker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	t := &Tracker{
		cfg:      cfg,
		enter2:   cfg.EnterRadius * cfg.EnterRadius,
		leave2:   cfg.LeaveRadius * cfg.LeaveRadius,
		falloff:  (1 - cfg.FarPriority) / (cfg.LeaveRadius * cfg.LeaveRadius),
		invStale: 1 / float32(cfg.StaleTicks),
	}
	t.sc = scan{enter2: t.enter2, leave2: t.leave2}
	t.farb = int32(math.Float32bits(cfg.FarPriority))
	t.setKF()
	return t, nil
}

// setKF fills kf from the config's kind weights.
func (t *Tracker) setKF() {
	for k := range t.kf {
		t.kf[k] = t.factor(uint8(k), 0)
		t.kwf[k] = t.kf[k] * t.vw[k]
	}
}

// SetViewWeights sets the weights by kind (kind mod MaxKinds) that a
// view's references multiply its members' priorities by
// (Viewer.BucketRefs' w), and reports whether the tracker folds them into
// its per-Build table: from the next Update's table on, BucketRefs with
// these weights then takes a member's weighted factor from the table (one
// load beside its position) instead of its kind and the weight by it. A
// weight is folded only where that gives the same float, bit for bit:
// every nonzero weight a power of two, every priority the tracker can
// give (PriorityRange) × the weight a normal float. A zero weight is a
// kind never referenced.
func (t *Tracker) SetViewWeights(w *[MaxKinds]float32) bool {
	if *w == t.vw && t.vwOK {
		return true
	}
	t.vw, t.vwOK, t.wfOK = *w, foldable(t, w), false
	t.setKF()
	return t.vwOK
}

// Folded reports whether the tracker's table, as of its last Build, has
// the view weights of SetViewWeights folded in (exactly): then a
// Viewer's BucketRefsFolded may stand for BucketRefs with those weights,
// until the tracker's next Build or SetViewWeights.
func (t *Tracker) Folded() bool { return t.wfOK }

// foldable reports whether (p × w[k]) equals (factor × w[k]) × f for
// every priority p = factor × f the tracker can give a member of kind k
// (mod MaxKinds): w[k] a power of two (scaling by it is exact) and p ×
// w[k], p and factor × w[k] normal floats.
func foldable(t *Tracker, w *[MaxKinds]float32) bool {
	l1, h1 := t.PriorityRange(MaxKinds) // a kind beyond MaxKinds
	for k, wk := range w {
		if wk == 0 {
			continue
		}
		b := math.Float32bits(wk)
		if exp := b >> 23; b&(1<<23-1) != 0 || exp == 0 || exp >= 0xFF {
			return false // not a positive normal power of two
		}
		lo, hi := t.PriorityRange(uint8(k))
		lo, hi = min(lo, l1), max(hi, h1)
		if !(lo >= math.SmallestNonzeroFloat32*(1<<23)) || !(hi >= lo) || !(lo*wk >= math.SmallestNonzeroFloat32*(1<<23)) || !(hi*wk <= math.MaxFloat32) {
			return false
		}
	}
	return true
}

// Config returns the effective config (defaults filled in).
func (t *Tracker) Config() Config { return t.cfg }

// Resize makes slots 0..n-1 valid (as the grid's Resize); n ≤ MaxSlots.
func (t *Tracker) Resize(n int) {
	if n > MaxSlots {
		panic(fmt.Sprintf("interest: %d slots, more than MaxSlots", n))
	}
	if n <= len(t.index) {
		return
	}
	if n > cap(t.index) {
		// By an eighth, in multiples of 8, as the zone's slots and the
		// grid grow (both arrays one capacity): a zone grows one slot at a
		// time and never shrinks, and append's growth (doubling, then a
		// quarter and more, each array rounded to its own size class) left
		// up to a third of them unused for good (TestTrackerRoomByAnEighth:
		// 17,024 → 13,440 B at 600 slots).
		c := (max(n, cap(t.index)+cap(t.index)/8) + 7) &^ 7
		t.index = append(make([]uint32, 0, c), t.index...)
		t.bySlot = append(make([]slotPrio, 0, c), t.bySlot...)
	}
	old := len(t.index)
	t.index, t.bySlot = t.index[:n], t.bySlot[:n]
	clear(t.index[old:]) // a slot not filed yet: prepare rewrites every one
	clear(t.bySlot[old:])
}

// Priority is the base priority of an entity of kind at squared distance d2
// whose state is stale ticks old.
func (t *Tracker) Priority(kind uint8, d2 float32, stale uint16) float32 {
	f := 1 - d2*t.falloff
	if f < t.cfg.FarPriority {
		f = t.cfg.FarPriority
	}
	return t.factor(kind, stale) * f
}

// factor is the part of an entity's priority that does not depend on the
// viewer: kind weight × staleness.
func (t *Tracker) factor(kind uint8, stale uint16) float32 {
	w := float32(1)
	if int(kind) < MaxKinds {
		w = t.cfg.KindWeight[kind]
	}
	return w * (1 + float32(stale)*t.invStale)
}

// PriorityRange is the least and the greatest priority an Update can give
// a member of kind (every staleness, every distance, always-relevant or
// not): a consumer that maps priorities onward (a zone, to ghost buckets)
// can check its mapping over the whole range once instead of guarding
// every member. Update's priority is kind weight × staleness × distance
// factor in float32, each product rounded, and rounding is monotonic: its
// least is the least factors' product (fresh, at the leave radius), its
// greatest the greatest factors' (MaxUint16 ticks stale, at distance 0).
func (t *Tracker) PriorityRange(kind uint8) (lo, hi float32) {
	lo = t.factor(kind, 0) * t.cfg.FarPriority
	hi = t.factor(kind, math.MaxUint16)
	// Always-relevant members beyond the scan: AlwaysPriority × staleness,
	// or the greater of it and the member's Priority.
	st := 1 + float32(math.MaxUint16)*t.invStale
	return min(lo, t.cfg.AlwaysPriority), max(hi, t.cfg.AlwaysPriority*st)
}

// prepare fills the base arrays (bx, bz, bkey) for g's last Build.
func (t *Tracker) prepare(g *grid.Grid) {
	sa, xz := g.SlotAuxes(), g.Positions()
	n := len(sa)
	if cap(t.bkey) < n {
		// At least 16 past the last: scan4 reads up to 3 past a run's
		// end, so mark (as long as the arrays' room) has them too.
		c := n + n/4 + 16
		t.bx, t.bz, t.bkey = make([]float32, n, c), make([]float32, n, c), make([]uint32, n, c)
	}
	t.bx, t.bz, t.bkey = t.bx[:n], t.bz[:n], t.bkey[:n]
	bx, bz, bkey := t.bx[:n], t.bz[:n], t.bkey[:n]
	if len(t.mark) < n {
		t.mark = make([]uint8, cap(t.bkey)) // zero: no token
	}
	xz = xz[:n]
	index, bySlot := t.index, t.bySlot[:len(t.index)]
	for i := range index {
		index[i] = noIndex
	}
	for i, m := range sa {
		x, z := xz[i][0], xz[i][1]
		bx[i], bz[i], bkey[i] = x, z, entryKey(m.Slot, m.Aux)
		if uint(m.Slot) < uint(len(index)) {
			index[m.Slot] = indexWord(int32(i), m.Aux)
			// A fresh state of a kind below MaxKinds (nearly every slot: a
			// stale one is a lagging replica) takes its factor from kf:
			// KindWeight × (1 + 0), computed once.
			if aux := m.Aux &^ 0xFF00; aux < MaxKinds {
				bySlot[m.Slot] = slotPrio{x, z, t.kf[aux], t.kwf[aux]}
			} else {
				f := t.factor(AuxKind(m.Aux), AuxStale(m.Aux))
				bySlot[m.Slot] = slotPrio{x, z, f, f * t.vw[AuxKind(m.Aux)%MaxKinds]}
			}
		}
	}
	t.baseGrid, t.baseBuilds = g, g.Builds()
	t.wfOK = t.vwOK
	t.stamp++
	if t.stamp == heldStamp || t.stamp == 0 {
		t.stamp = 1
	}
}

// indexWord is index's word for a slot filed at base index i with aux:
// generation<<24 | i. An entry's key shifted left by 24 is its
// generation<<24, so word ^ key<<24 is the base index (below MaxSlots<<1)
// for a member of this generation and at least 1<<24 for any other or
// for noIndex: one compare tells a member's mark index from none.
func indexWord(i int32, aux uint32) uint32 { return uint32(AuxGen(aux))<<24 | uint32(i) }

// noIndex is index's word for a slot not filed: an index no base has (base
// holds at most MaxSlots entries, and only with every slot filed).
const noIndex = ^uint32(0)

func (t *Tracker) nextToken() uint8 {
	t.token++
	if t.token == 0 { // wrapped: old marks could alias; start over
		clear(t.mark)
		t.token = 1
	}
	return t.token
}

// Update recomputes s for a player at [x, z] whose own slot is self (-1 if
// the player has none here) against g as of its last Build; always lists
// always-relevant slots. It returns how many entities entered and left.
//
// Cost: one lookup and write per old member (its mark), one scan of the
// grid cells the leave radius touches, one mark read per candidate (in
// order); once per grid
// Build, one pass over the filed slots (the per-Build entry table).
func (t *Tracker) Update(s *Set, self int32, x, z float32, g *grid.Grid, always []int32) (entered, left int) {
	if g != t.baseGrid || g.Builds() != t.baseBuilds || len(t.bkey) != g.Built() {
		t.prepare(g)
	}
	tok := t.nextToken()
	marks := t.mark
	old := s.Entries()
	mark(marks[:len(t.bkey)], t.index, old, tok)
	// The new set is built in the tracker's scratch buffer, which stays in
	// L1 from player to player, and then copied over the old one, whose
	// lines the marking loop has just pulled into cache: no second buffer
	// per player to miss on.
	bx, bz, bkey := t.bx, t.bz, t.bkey
	t.runs = g.Runs(t.runs[:0], x, z, t.cfg.LeaveRadius)
	// Room for every candidate at once, so the scan writes by index with
	// no capacity check and a run costs one call: the runs hold at most
	// every filed slot, once (the room of the whole base, grown once, not
	// the runs' lengths summed for every player: ≈ 46 instructions).
	next := slices.Grow(t.scratch[:0], len(bkey)+3) // scan4 writes 4 at a time
	// The player's own entry is moved out of reach for the scan (+Inf:
	// beyond every radius, never kept) rather than tested for in it (one
	// compare fewer a candidate) or split out of its run (a call more a
	// player), and put back after.
	selfAt := -1
	if uint(self) < uint(len(t.index)) {
		if i := int(t.index[self] & (MaxSlots<<1 - 1)); uint(i) < uint(len(bkey)) && int32(bkey[i]>>8) == self {
			selfAt = i
		}
	}
	var selfX float32
	if selfAt >= 0 {
		selfX = bx[selfAt]
		bx[selfAt] = float32(math.Inf(1))
	}
	n, kept := 0, 0
	if nb := len(bkey) + 3; haveScan4 && len(t.runs) > 0 && len(marks) >= nb && cap(bx) >= nb && cap(bz) >= nb && cap(bkey) >= nb {
		// Every run four candidates at a time (scan_amd64.s): the same
		// entries and counts as scan.run's loop. It reads up to 3
		// candidates and marks past a run's end (prepare leaves room past
		// the last) and writes up to 3 entries past what it keeps.
		n, kept = scan4(&next[:cap(next)][0], &bx[:cap(bx)][0], &bz[:cap(bz)][0], &bkey[:cap(bkey)][0], &marks[0], &t.runs[0], len(t.runs), x, z, t.sc.enter2, t.sc.leave2, uint32(tok))
	} else {
		// The scan's radii are the tracker's (NewTracker); the rest is
		// this call's, set here only: scan4 takes it as arguments, and
		// storing it for every player, then clearing it, cost ≈ 50
		// instructions a player (BenchmarkZoneTickSync).
		sc := &t.sc
		sc.out, sc.bx, sc.bz, sc.bkey, sc.marks, sc.tok, sc.x, sc.z = next[:cap(next)], bx, bz, bkey, marks[:len(bkey)], tok, x, z
		for _, run := range t.runs {
			o, k := sc.run(n, run.A, run.B)
			n, kept = n+o, kept+k
		}
		sc.out, sc.bx, sc.bz, sc.bkey, sc.marks = nil, nil, nil, nil, nil // held by the tracker anyway; not kept twice
	}
	if selfAt >= 0 {
		bx[selfAt] = selfX
	}
	next = next[:n]
	// Always-relevant slots the scan did not add: beyond the leave radius,
	// or in the band without having been members.
	var alwaysP []float32 // their priorities (none: no buffer touched)
	if len(always) > 0 {
		alwaysP = t.alwaysP[:0]
	}
	for _, sl := range always {
		px, pz, m, ok := g.Pos(sl)
		if !ok || sl == self {
			continue
		}
		dx, dz := px-x, pz-z
		d2 := dx*dx + dz*dz
		was := t.marked(sl, AuxGen(m.Aux), tok)
		if d2 <= t.enter2 || was && d2 <= t.leave2 {
			continue // added by the scan
		}
		if was {
			kept++
		}
		p := t.cfg.AlwaysPriority * (1 + float32(AuxStale(m.Aux))*t.invStale)
		if d2 <= t.leave2 {
			p = max(p, t.Priority(AuxKind(m.Aux), d2, AuxStale(m.Aux)))
		}
		next = append(next, Entry{key: alwaysBit | entryKey(sl, m.Aux)})
		alwaysP = append(alwaysP, p)
	}
	if len(next) > t.cfg.MaxView {
		t.stats.Capped += uint64(len(next) - t.cfg.MaxView)
		next, alwaysP = t.capView(next, alwaysP, x, z)
		kept = 0
		for _, e := range next {
			if t.marked(e.Slot(), uint8(e.key), tok) {
				kept++
			}
		}
	}
	if alwaysP != nil {
		t.alwaysP = alwaysP
	}
	entered, left = len(next)-kept, len(old)-kept
	t.stats.Enters += uint64(entered)
	t.stats.Leaves += uint64(left)
	size := hLen + len(next) + len(alwaysP)
	// Too small or too roomy, in one compare (a room below size wraps).
	if uint(cap(s.buf)-size) > uint(shrinkSlack(size)) {
		t.refit(s, size)
	}
	buf := s.buf[:size]
	h := (*[hLen]Entry)(buf)
	h[hStamp], h[hX], h[hZ], h[hN] = Entry{t.stamp}, Entry{math.Float32bits(x)}, Entry{math.Float32bits(z)}, Entry{uint32(len(next))}
	copy(buf[hLen:], next)
	for i, p := range alwaysP {
		buf[hLen+len(next)+i] = Entry{math.Float32bits(p)}
	}
	s.buf = buf
	t.scratch = next
	return entered, left
}

// setRoom is the room a set's new buffer is made with for size entries
// (the allocator rounds it up to its size class, which the buffer then
// uses: slices.Grow): an eighth more, where it was a quarter and 4. The
// headroom spares reallocating a set that drifts past its room, but a set
// kept the room of its largest size for good, and a crowd's sets drift:
// 548 B a set (header and size class included) for 357 B used after a
// minute at 85 in view, 452 B since sets trade buffers (refit) so that a
// set's room follows its size both ways (TestSetRoomFollowsUse). A
// thirty-second more made it 444 B, but sets still growing into a crowd
// then allocated ≈ 1.9 times a tick in BenchmarkInterest's first 200
// ticks (≈ 0.35 with an eighth).
func setRoom(size int) int { return size + size>>3 }

// shrinkSlack is the room beyond size (entries) at which a set trades its
// buffer for a smaller spare one: three sixteenths and 4, above setRoom's
// eighth, so a buffer just made is never too roomy (refit hides the size
// class's rounding beyond it: TestSetRoomNoThrash). It was half: a set
// that drifted down kept up to half its size unused, 458 B a set after a
// minute at 85 in view (357 B used) where it is 431 now, for ≈ 14 refits
// and 0.37 allocations a tick of 1,000 sets where there were ≈ 5 and 0.18
// (TestSetRoomFollowsUse; a refit is ≈ 100 instructions, a tick of them ≈
// 10 M). An eighth and 4 made it 425 B for 0.56 allocations a tick, but
// 1.13 under -race, whose allocator rounds less. A shift, not a division:
// Update tests it for every set.
func shrinkSlack(size int) int { return size>>3 + size>>4 + 4 }

// maxSpare bounds the buffers a tracker keeps for its sets to trade: a
// few of 1,000 sets at 85 in view a tick outgrow theirs or outsize their
// use, and with 16 spare all but ≈ 0.4 a tick find one that fits
// (TestSetRoomFollowsUse).
const maxSpare = 16

// refit gives s a buffer with room for size entries and at most
// shrinkSlack(size) more: a spare one that fits (the smallest), s's own then
// spare in its place; else, if s's is too small, a new one, s's spare.
// A set too roomy with no smaller buffer spare keeps its own (a shrink
// never allocates). The spare buffers are the sets' room drifting from
// one set to another: one that grew leaves its buffer to one that
// shrank.
//
//go:noinline
func (t *Tracker) refit(s *Set, size int) {
	hi := size + shrinkSlack(size)
	best := -1
	for i, b := range t.spare {
		if c := cap(b); c >= size && c <= hi && (best < 0 || c < cap(t.spare[best])) {
			best = i
		}
	}
	old := s.buf[:0]
	switch {
	case best >= 0:
		s.buf = t.spare[best]
		if cap(old) > 0 {
			t.spare[best] = old
		} else {
			t.spare[best] = t.spare[len(t.spare)-1]
			t.spare[len(t.spare)-1] = nil
			t.spare = t.spare[:len(t.spare)-1]
		}
		return
	case cap(old) >= size:
		return
	}
	// The size class's rounding past shrinkSlack is left out of the
	// room (a gap between classes reaches a sixth of the size, 3,456 →
	// 4,096 B): counted, it would make the buffer too roomy at once.
	b := slices.Grow([]Entry(nil), setRoom(size))
	s.buf = b[:0:min(cap(b), hi)]
	switch {
	case cap(old) == 0:
	case len(t.spare) < maxSpare:
		t.spare = append(t.spare, old)
	default: // one spare goes, in turn
		t.spare[t.spareNext] = old
		t.spareNext = (t.spareNext + 1) % maxSpare
	}
}

// ranked is a member with its priority, for capView.
type ranked struct {
	e Entry
	p float32
}

// capView keeps the MaxView members of next with the highest priorities
// (at the viewer [x, z]; the always-relevant ones, flagged, with theirs
// in alwaysP in order) and returns them, in next's room, with the kept
// always-relevant members' priorities in alwaysP's.
func (t *Tracker) capView(next []Entry, alwaysP []float32, x, z float32) ([]Entry, []float32) {
	r := t.ranked[:0]
	ai := 0
	for _, e := range next {
		p := float32(0)
		if e.key&alwaysBit != 0 {
			p = alwaysP[ai]
			ai++
		} else {
			p = t.basePriority(e, x, z)
		}
		r = append(r, ranked{e, p})
	}
	keepTop(r, t.cfg.MaxView)
	r = r[:t.cfg.MaxView]
	next, alwaysP = next[:0], alwaysP[:0]
	for _, m := range r {
		next = append(next, m.e)
		if m.e.key&alwaysBit != 0 {
			alwaysP = append(alwaysP, m.p)
		}
	}
	t.ranked = r
	return next, alwaysP
}

// basePriority is e's priority at the viewer [x, z] from the per-Build
// table, as the scan computed it: the candidate's factor × the distance
// falloff floored at FarPriority (the far-priority floor as the scan's,
// by the float's bits). An entry the table does not hold (its slot no
// longer filed, or refilled) gets FarPriority.
func (t *Tracker) basePriority(e Entry, x, z float32) float32 {
	sl := e.key << 1 >> 9
	if sl >= uint32(len(t.index)) {
		return t.cfg.FarPriority
	}
	if uint(t.index[sl]^e.key<<24) >= uint(len(t.bkey)) {
		return t.cfg.FarPriority
	}
	p, _ := t.bySlot[sl].prio(x, z, t.falloff, int32(math.Float32bits(t.cfg.FarPriority)))
	return p
}

// AppendPriorities appends the priorities of s's members (in Entries'
// order) to dst and returns it: the priorities s's last Update gave them.
// Call it after the Update, before the tracker's next Build's Update
// (Update recomputes its table then), or Hold s before that; a set neither
// updated nor held since gets its members' priorities at its last Update's
// viewer position by the newer table (FarPriority for a member no longer
// filed), not the old ones. It allocates only when dst must grow.
//
// The zone reads a set's priorities once or twice a tick (its views), and
// keeping them in the set between ticks was half the set's bytes.
func (t *Tracker) AppendPriorities(dst []float32, s *Set) []float32 {
	es := s.Entries()
	if len(es) == 0 {
		return dst
	}
	tail := s.buf[hLen+len(es):]
	if s.buf[hStamp].key == heldStamp {
		for _, p := range tail[:len(es)] {
			dst = append(dst, math.Float32frombits(p.key))
		}
		return dst
	}
	n := len(dst)
	dst = slices.Grow(dst, len(es))[:n+len(es)]
	x, z := math.Float32frombits(s.buf[hX].key), math.Float32frombits(s.buf[hZ].key)
	if v, ok := t.Viewer(s); ok {
		out := dst[n:]
		out = out[:len(es)]
		for i, e := range es {
			out[i] = v.Priority(e)
		}
	} else {
		t.priorities(dst[n:], es, tail, x, z)
	}
	return dst
}

// slotPrio is a filed slot's position and priority factor, by slot, and
// the factor × its kind's view weight (Tracker.SetViewWeights; 16 bytes
// a slot, an index scaled by one shift, where 12 took two instructions).
type slotPrio struct{ x, z, factor, wf float32 }

// prio is the priority the slot's entity has for a viewer at (x, z), with
// its squared distance: factor × (1 − d²·falloff), floored at FarPriority
// (farb, its bits: a float's order is its bits' while both are positive,
// so the floor is an integer compare). It inlines where it is called;
// Viewer.BucketRefs writes the same formula out itself: called there it
// cost the crowd tick +0.9 to +1.4 % instructions (register allocation in
// that loop).
func (c *slotPrio) prio(x, z, falloff float32, farb int32) (p, d2 float32) {
	dx, dz := c.x-x, c.z-z
	d2 = dx*dx + dz*dz
	fb := int32(math.Float32bits(1 - d2*falloff))
	if fb < farb {
		fb = farb
	}
	return c.factor * math.Float32frombits(uint32(fb)), d2
}

// Viewer computes the priorities of one set's members (AppendPriorities)
// one by one, for a view's loop that reads each member anyway: inlined
// there, a member's priority costs its arithmetic and one load, no pass
// and no buffer of its own.
type Viewer struct {
	bySlot  []slotPrio
	x, z    float32
	falloff float32
	farb    int32
}

// Viewer returns the Viewer of s, ok if its priorities can be computed so:
// s was updated from the tracker's table as it is and has no
// always-relevant member beyond the scan (AppendPriorities otherwise).
// Use it before the tracker's next Update.
func (t *Tracker) Viewer(s *Set) (v Viewer, ok bool) {
	b := s.buf
	if len(b) < hLen {
		return Viewer{}, false
	}
	h := (*[hLen]Entry)(b)
	if h[hStamp].key != t.stamp || len(b) != hLen+int(h[hN].key) {
		return Viewer{}, false
	}
	return Viewer{bySlot: t.bySlot, x: math.Float32frombits(h[hX].key), z: math.Float32frombits(h[hZ].key),
		falloff: t.falloff, farb: t.farb}, true
}

// Priority is the priority of e, a member of the Viewer's set: its factor
// × the distance falloff floored at FarPriority, as Update's scan would
// have computed it (the floor by the float's bits).
func (v *Viewer) Priority(e Entry) float32 {
	c := &v.bySlot[e.key<<1>>9]
	dx, dz := c.x-v.x, c.z-v.z
	fb := int32(math.Float32bits(1 - (dx*dx+dz*dz)*v.falloff))
	if fb < v.farb {
		fb = v.farb
	}
	return c.factor * math.Float32frombits(uint32(fb))
}

// PriorityDist2 is Priority and the squared distance it computed it at:
// (member − viewer)² by the positions of the tracker's table, in float32,
// the same operations in the same order as the scan's. A caller that
// tests the same distance (a zone's far members) takes it from here
// instead of computing it again, where Tracker.Current says the table's
// positions are its grid's.
func (v *Viewer) PriorityDist2(e Entry) (p, d2 float32) {
	c := &v.bySlot[e.key<<1>>9]
	dx, dz := c.x-v.x, c.z-v.z
	d2 = dx*dx + dz*dz
	fb := int32(math.Float32bits(1 - d2*v.falloff))
	if fb < v.farb {
		fb = v.farb
	}
	return c.factor * math.Float32frombits(uint32(fb)), d2
}

// At is the viewer's position the Viewer computes distances from: its
// set's last Update's.
func (v *Viewer) At() (x, z float32) { return v.x, v.z }

// Current reports whether t's table is of g's last Build: then a Viewer's
// member positions (PriorityDist2) are g's as of that Build, bit for bit.
func (t *Tracker) Current(g *grid.Grid) bool {
	return g == t.baseGrid && g.Builds() == t.baseBuilds && len(t.bkey) == g.Built()
}

// priorities writes es's priorities at the viewer [x, z] into out (as
// long): the flagged always-relevant ones from tail, in order, the others
// from the per-Build table.
func (t *Tracker) priorities(out []float32, es, tail []Entry, x, z float32) {
	out = out[:len(es)]
	index, nb, bySlot := t.index, uint(len(t.bkey)), t.bySlot[:len(t.index)]
	far := t.cfg.FarPriority
	farb, falloff := int32(math.Float32bits(far)), t.falloff
	ai := 0
	for i, e := range es {
		sl := e.key << 1 >> 9
		if e.key&alwaysBit != 0 {
			if ai < len(tail) {
				out[i] = math.Float32frombits(tail[ai].key)
				ai++
			} else {
				out[i] = t.cfg.AlwaysPriority
			}
			continue
		}
		if sl >= uint32(len(index)) {
			out[i] = far
			continue
		}
		if uint(index[sl]^e.key<<24) >= nb {
			out[i] = far
			continue
		}
		out[i], _ = bySlot[sl].prio(x, z, falloff, farb)
	}
}

// Hold keeps s's priorities in s, for a set the zone does not update this
// tick (a player skipped under overload, or frozen in a handoff): call it
// before the tick's first Update, which recomputes the table they are
// computed from. Its views then keep the priorities of its last Update, as
// its members. A held set stays so until its next Update; holding a set
// that its last Update's table no longer describes does nothing.
func (t *Tracker) Hold(s *Set) {
	es := s.Entries()
	if len(s.buf) < hLen || s.buf[hStamp].key != t.stamp || len(es) == 0 {
		return
	}
	n := len(es)
	p := t.alwaysP[:0]
	p = slices.Grow(p, n)[:n]
	t.priorities(p, es, s.buf[hLen+n:], math.Float32frombits(s.buf[hX].key), math.Float32frombits(s.buf[hZ].key))
	t.alwaysP = p
	s.buf = s.buf[:hLen+n]
	for _, v := range p {
		s.buf = append(s.buf, Entry{math.Float32bits(v)})
	}
	s.buf[hStamp].key = heldStamp
}

// mark marks every member of cur in marks (by its index in base, marks as
// long as base) with tok: a member whose slot is not filed in base, or
// holds another entity now (another generation), is not a candidate and
// gets no mark.
//
// Apart from Update, like scan.run: inlined there, the loop reloaded the
// token and each key from the stack.
//
//go:noinline
func mark(marks []uint8, index []uint32, cur []Entry, tok uint8) {
	// The entry's generation in the word's top byte: 0 there and the
	// base index below len(marks) iff the slot is filed with this
	// generation (one compare, not the generation's and the index's).
	// Four members an iteration: the loop's count, compare and branch once
	// for all four (two an iteration: ≈ 13.5 instructions a member, four:
	// ≈ 12; BenchmarkZoneTickSyncCrowd −0.47 %).
	i := 0
	for ; i < len(cur)-3; i += 4 {
		p := cur[i : i+4 : i+4]
		k0, k1, k2, k3 := p[0].key, p[1].key, p[2].key, p[3].key
		if j := uint(index[k0<<1>>9] ^ k0<<24); j < uint(len(marks)) {
			marks[j] = tok
		}
		if j := uint(index[k1<<1>>9] ^ k1<<24); j < uint(len(marks)) {
			marks[j] = tok
		}
		if j := uint(index[k2<<1>>9] ^ k2<<24); j < uint(len(marks)) {
			marks[j] = tok
		}
		if j := uint(index[k3<<1>>9] ^ k3<<24); j < uint(len(marks)) {
			marks[j] = tok
		}
	}
	for _, e := range cur[i:] {
		k := e.key
		if j := uint(index[k<<1>>9] ^ k<<24); j < uint(len(marks)) {
			marks[j] = tok
		}
	}
}

// marked reports whether the set being updated held slot's entity of
// generation gen before this Update (tok).
func (t *Tracker) marked(slot int32, gen uint8, tok uint8) bool {
	if uint(slot) >= uint(len(t.index)) {
		return false
	}
	i := t.index[slot] ^ uint32(gen)<<24
	return uint(i) < uint(len(t.bkey)) && t.mark[i] == tok
}

// scan is what one Update's candidate scan needs, apart from Update so the
// run loop keeps it in registers (inlined into Update, the loop spilled
// its counters to the stack on every candidate).
type scan struct {
	out            []Entry // room for every candidate of the Update's runs
	bx, bz         []float32
	bkey           []uint32
	marks          []uint8 // by base index
	tok            uint8   // the update's token: a member's mark
	x, z           float32
	enter2, leave2 float32
}

// run filters the candidates a to b (base indices, in grid order) into out[n:]:
// those within the enter radius, and the members still within the leave
// radius. It returns how many it wrote and how many of them were members.
// Their priorities are not computed here: most sets' are read once, in
// the tick's views (AppendPriorities).
//
// The loop has no data-dependent branch: every candidate is written and
// the output index advances by the keep bit. A quarter of a run's
// candidates lie beyond the leave radius, in no order a predictor can
// learn, and a mispredicted branch per such candidate cost more than the
// whole test (2.2 → 1.6 ms per BenchmarkInterest tick).
//
// On amd64 Update runs scan4 instead (scan_amd64.s: the same loop four
// candidates at a time, one call for every run: ≈ 36 → ≈ 12 instructions
// a candidate, calls included); this loop is its reference
// (TestScan4MatchesRun) and every other platform's scan.
//
//go:noinline
func (sc *scan) run(n int, a, b int32) (o, kept int) {
	keys := sc.bkey[a:b]
	xs, zs := sc.bx[a:b], sc.bz[a:b]
	xs, zs = xs[:len(keys)], zs[:len(keys)]
	marks := sc.marks[a:b]
	marks = marks[:len(keys)]
	out := sc.out[n:]
	out = out[:len(keys)] // room for every candidate
	tok := sc.tok
	x, z, enter2, leave2 := sc.x, sc.z, sc.enter2, sc.leave2
	for i, key := range keys {
		dx, dz := xs[i]-x, zs[i]-z
		d2 := dx*dx + dz*dz
		was := b2i(marks[i] == tok)
		keep := b2i(d2 <= enter2) | was&b2i(d2 <= leave2)
		out[o] = Entry{key: key}
		o += keep
		kept += keep & was
	}
	return o, kept
}

// keepTop partially orders e so its first k entries have the highest
// priorities (quickselect; no allocation). Ties break by slot, so the
// outcome does not depend on the query order.
func keepTop(e []ranked, k int) {
	less := func(a, b *ranked) bool { // a ranks before b
		return a.p > b.p || a.p == b.p && a.e.Slot() < b.e.Slot()
	}
	lo, hi := 0, len(e)-1
	for lo < hi {
		// Median of three as pivot.
		mid := lo + (hi-lo)/2
		if less(&e[mid], &e[lo]) {
			e[mid], e[lo] = e[lo], e[mid]
		}
		if less(&e[hi], &e[lo]) {
			e[hi], e[lo] = e[lo], e[hi]
		}
		if less(&e[hi], &e[mid]) {
			e[hi], e[mid] = e[mid], e[hi]
		}
		p := e[mid]
		i, j := lo, hi
		for i <= j {
			for less(&e[i], &p) {
				i++
			}
			for less(&p, &e[j]) {
				j--
			}
			if i <= j {
				e[i], e[j] = e[j], e[i]
				i++
				j--
			}
		}
		switch {
		case k-1 <= j:
			hi = j
		case k-1 >= i:
			lo = i
		default:
			return
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
