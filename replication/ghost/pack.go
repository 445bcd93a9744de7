package ghost

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// Wire constants of the ghost section (docs/protocol.md §6).
const (
	stampBits    = 16 // low 16 bits of the view time in ms
	widthBits    = 5  // id width 0..20
	kcodeBits    = 4  // position window code: 0 absolute, 1..15 window width
	maxWindow    = 15
	sectionFixed = stampBits + widthBits

	// maxViewAgeMS bounds how old a view Write stamps a section with. A
	// client places a 16-bit stamp only within 32.7 s of its estimate of
	// the server's clock (protocol.md § 6.2): one read past that lands up
	// to 32.7 s in the future, and the client ignores every later value of
	// the groups it carried until its clock gets there, while the table
	// counts them delivered. The view's age when the packet leaves plus the
	// packet's time in the network must stay under the window: half each.
	// A zone gives a view every tick; a table whose views stopped (a stalled
	// or gone zone) keeps resending what was lost for 16 s, then waits.
	maxViewAgeMS = 16_000

	// Record kinds, a prefix code read first bit first: 0 update with the
	// class's default mask, 10 update with an explicit mask, 110 create,
	// 111 kill. Values are as written by WriteBits (LSB = first bit).
	kindDefault, kindDefaultLen = 0b0, 1
	kindMask, kindMaskLen       = 0b01, 2
	kindCreate, kindCreateLen   = 0b011, 3
	kindKill, kindKillLen       = 0b111, 3
)

// Priority buckets. Selection never sorts: every candidate goes into one of
// a fixed set of log-scale buckets (4 per octave), and the packet is filled
// from the highest non-empty bucket down; within a bucket, lower records first.
// Tiers, highest first (checklist RP-12: scope changes before updates):
//
//   - kills;
//   - creates, by priority grown with waiting;
//   - overdue updates — dirty and unsent for MaxStaleness, or pressed by
//     ConfirmDeadline — by waiting time × overdueWeight;
//   - updates, by priority × (1 + waiting/StaleUnit);
//   - speculative resends of unconfirmed state, by priority.
const (
	tierBuckets = 256
	tierResend  = 0
	tierUpdate  = 1
	tierOverdue = 2
	tierCreate  = 3
	killBucket  = 4 * tierBuckets
	numBuckets  = killBucket + 1
	bucketWords = (numBuckets + 63) / 64
	// bucketBase puts 2^-32 in bucket 0: float32 exponent field 95, times 4.
	bucketBase = 95 << 2
)

// bucketOf maps a positive key to [0, tierBuckets) on a log scale with 4
// buckets per octave, straight from the float's exponent and top 2 mantissa
// bits (no log call).
func bucketOf(key float32) int {
	b := int(math.Float32bits(key)>>21) - bucketBase
	return max(0, min(b, tierBuckets-1))
}

// pressShare: pressing copies (ConfirmDeadline) may use at most 1/pressShare
// of a packet's ghost budget. They are speculative; unbounded, they crowd out
// the updates they are meant to protect when the budget is short (measured:
// at half the CrowdScene budget, unbounded pressing halved the updates
// delivered).
const pressShare = 8

// ilog4 is 4·log2(x) to the nearest quarter octave below, from x's top three
// bits (x ≥ 1): the same scale as bucketOf, in integer operations only —
// packing takes it for every ghost in every packet.
func ilog4(x uint64) int {
	l := bits.Len64(max(x, 1))
	if l < 3 {
		return 4*(l-1) + int(x<<(3-l))&3
	}
	return 4*(l-1) + int(x>>(l-3))&3
}

// grown is the bucket of prio × (1 + age/StaleUnit) — priority grown by
// waiting (age in ms) — as log(prio) + log(StaleUnit + age) −
// log(StaleUnit), with log(prio) precomputed per view (prioB =
// bucketOf(prio)).
func (k *tableConfig) grown(prioB uint8, age int32) int {
	b := int(prioB) + grownOffset(k, age)
	return max(0, min(b, tierBuckets-1))
}

// grownOffset is what grown adds to the priority's bucket for an age in
// ms: log(StaleUnit + age) − log(StaleUnit), in quarter octaves (tabled
// in grownB for the ages below MaxStaleness).
func grownOffset(k *tableConfig, age int32) int {
	return ilog4(uint64(max(age, 0))*uint64(time.Millisecond)+k.unit) - k.logUnit
}

// maxGrownB bounds tableConfig.grownB: ages past it (a MaxStaleness of
// more than 4 s) are computed, as are creates (they wait any time).
const maxGrownB = 4096

// waited is the bucket of age/StaleUnit × overdueWeight (age in ms):
// overdue ghosts go by waiting time, weighted by owtB =
// 4·log2(overdueWeight).
func (k *tableConfig) waited(owtB int8, age int32) int {
	return weighWait(waitBase(k, age), owtB)
}

// waitBase is waited's bucket of an age before the weight.
func waitBase(k *tableConfig, age int32) int {
	return bucketOne + ilog4(max(uint64(max(age, 0))*uint64(time.Millisecond), 1)) - k.logUnit
}

// weighWait is waited's bucket of a wait's base bucket (waitBase) and a
// weight owtB.
func weighWait(base int, owtB int8) int {
	return max(0, min(base+int(owtB), tierBuckets-1))
}

// bucketOne is bucketOf(1).
const bucketOne = 127<<2 - bucketBase

// owtBTable is overdueWeight by priority bucket (collect looks it up).
var owtBTable = func() (a [tierBuckets]int8) {
	for b := range a {
		a[b] = overdueWeight(b)
	}
	return a
}()

// overdueWeight orders overdue ghosts by waiting time × a factor in [1, 4]
// that grows with priority: under overload, when every ghost is overdue,
// nearer ghosts still go more often, yet none waits more than 4× the
// longest wait of the highest-priority ones (SC-7: bounded and prioritised).
// It returns 4·log2 of that factor, in [0, 8], the bucket offset, for a
// priority in bucket prioB (tabled in owtBTable).
func overdueWeight(prioB int) int8 {
	w := 1 + 3*float64(prioB)/(tierBuckets-1)
	return int8(math.Round(4 * math.Log2(w)))
}

// packer is a table's packing state: its constants, and for the length of
// one Write a scratch borrowed from scratches (≈ 5.5 KB that every table
// would otherwise keep for the few microseconds a Write takes).
type packer struct {
	*packScratch
}

// packScratch is Write's working memory. Between Writes every bucket head is
// -1 and nonEmpty is zero (fill and clear leave it so), whichever table used
// it last.
type packScratch struct {
	head     [numBuckets]int32
	next     []int32
	nonEmpty [bucketWords]uint64
	scratch  bitstream.Writer
	sbuf     [MaxPacketBytes + 8]byte
	pressed  []uint64           // bitset by record: in the overdue tier only because ConfirmDeadline presses it
	vq       [][3]uint32        // SetView: the view's quantized positions
	carry    []carried          // SetSnapshotView: the carried states being gathered
	spill    [orderSpill]uint16 // SetSnapshotView: the previous view's hints not yet passed (spillHints)
	wire     State              // stateOf, encState: a snapshot entry's state (Snapshot.wireState), or its name
	// The packet fill writes, for writeUsual (read there after its call
	// of pair1r, not kept live across it nor passed by fill a record):
	// its seq, time, the id width and the budget in bits; and ustop,
	// budget − minRec: past that bit length the packet takes no more
	// records (writeUsual reports recFull).
	useq    uint64
	unow    msTime
	uwidth  uint
	ubudget int
	ustop   int
	// fillUsual's walk: the word of nonEmpty it pops buckets from
	// (nextChain), from the top down.
	walkW int
	// writeUsual's plans of planReg's classes (makePlans), kept from
	// Write to Write: a node's tables share one registry.
	planReg *Registry
	plans   []usualPlan
	// collect's, for collectRun's ghosts other than the usual: the
	// table's config, the time a pressing copy waits after the last, and
	// the time an unconfirmed ghost waits for a speculative resend.
	cfg       *tableConfig
	gap       int32
	resendLim int32
	// minMS is planReg's classes' MinInterval in ms by class index
	// (collect's usual ghost; past the classes, more than any age).
	minMS [256]int32
	// collectRun's last overdue wait in ms (-1: none yet in this
	// collect) and its bucket by weight: lastWaitW[owtB] is weighWait of
	// its waitBase (setWait). A ghost's times are view ticks, so a
	// table's overdue ghosts wait one of a few lengths, most the length
	// of the ghost before: a compare instead of the log (≈ 30
	// instructions an overdue ghost, ≈ 9 % of BenchmarkPack1000), and a
	// load instead of the weight's add and clamp.
	lastWait  int32
	lastWaitW [16]uint8 // by owtB (0..8: overdueWeight)
}

// setWait makes w collectRun's last overdue wait for the table of k.
// Out of line: collectRun's loop has no registers to spare.
//
//go:noinline
func (ps *packScratch) setWait(k *tableConfig, w int32) {
	base := waitBase(k, w)
	for o := range ps.lastWaitW {
		ps.lastWaitW[o] = uint8(weighWait(base, int8(o)))
	}
	ps.lastWait = w
}

// scratches is the free list of packScratch: there are as many as Writes
// ever ran at once (a handful: a Write never blocks), and unlike a
// sync.Pool the list is never emptied by a collection, so a steady state
// allocates nothing. last holds the scratch given back last: a Write
// that runs alone (nearly every one) takes and gives it back with one
// atomic swap and one compare-and-swap, without the lock and the list
// (≈ 80 instructions a packet before); the list takes the rest.
var scratches struct {
	last atomic.Pointer[packScratch]
	sync.Mutex
	free []*packScratch
}

// borrow takes a scratch for one Write or SetView; release gives it back.
func (p *packer) borrow() {
	if ps := scratches.last.Swap(nil); ps != nil {
		p.packScratch = ps
		return
	}
	scratches.Lock()
	if n := len(scratches.free); n > 0 {
		p.packScratch = scratches.free[n-1]
		scratches.free = scratches.free[:n-1]
		scratches.Unlock()
		return
	}
	scratches.Unlock()
	p.packScratch = new(packScratch)
	for i := range p.head {
		p.head[i] = -1
	}
}

func (p *packer) release() {
	ps := p.packScratch
	p.packScratch = nil
	if scratches.last.CompareAndSwap(nil, ps) {
		return
	}
	scratches.Lock()
	scratches.free = append(scratches.free, ps)
	scratches.Unlock()
}

// Write fills the rest of w — at most w.Remaining() bits, and never beyond
// Config.MaxPacketBytes from the start of w's buffer — with a ghost section
// for packet seq sent at now: kills, creates and the highest-priority dirty
// ghosts. It returns the number of records written. seq must increase from
// call to call (the notify sequence of the packet); every fate of a packet
// must then reach OnFate. While a packet 2^7 (128) sequences before seq
// awaits its fate, Write records nothing (seconds without a fate); nor
// while the latest view is more than maxViewAgeMS old (its ghosts wait for
// the next view).
//
// The section is always well formed: with no room for any record it is the
// single bit of an empty count. With no room for even that bit, Write returns
// ErrNoRoom and writes nothing.
func (t *Table) Write(w *bitstream.Writer, seq uint64, now time.Duration) (int, error) {
	avail := min(w.Remaining(), t.cfg.MaxPacketBytes*8-w.BitLen())
	if avail < 1 {
		return 0, ErrNoRoom
	}
	if t.wrote && seq <= t.lastSeq {
		return 0, fmt.Errorf("%w: %d after %d", ErrSeqOrder, seq, t.lastSeq)
	}
	t.lastSeq, t.wrote = seq, true
	nowMS := t.clock(now)
	if (int(t.pktLen) == len(t.pkts) && !t.growPkts()) || (int(t.entHead+t.entLen) == len(t.ents) && !t.entRoom(t.entFree())) ||
		(t.pktLen > 0 && uint32(seq)-t.pkts[t.pktHead].seq >= maxSeqSpan) || // per-group sequences are 8 bits
		(t.haveView && int64(now/time.Millisecond)-t.viewMS > maxViewAgeMS) {
		t.rareOf().Stalls++
		return 0, w.WriteGamma(1)
	}
	t.pk.borrow()
	defer t.pk.release()
	width := t.IDWidth()
	minRec := int(width) + kindDefaultLen + 1
	n := t.pk.collect(t, nowMS)
	if n == 0 || avail < 1+sectionFixed+minRec+bitstream.GammaBits(2) {
		t.pk.clear()
		return 0, w.WriteGamma(1)
	}
	maxN := min(n, avail/minRec)
	budget := avail - sectionFixed - bitstream.GammaBits(uint64(maxN)+1)
	recs := t.pk.fill(t, seq, nowMS, width, budget, n)
	if recs == 0 {
		return 0, w.WriteGamma(1)
	}
	// Counted with the records' creates and kills (writeRecord): Stats
	// takes the updates as the rest.
	t.stats.Records += uint32(recs)
	if t.stats.Records < uint32(recs) {
		t.rareOf().statsWraps.Records++
	}
	if err := w.WriteGamma(uint64(recs) + 1); err != nil {
		return 0, err // cannot happen: budget reserved it
	}
	w.WriteBits(uint64(uint16(t.viewMS))|uint64(width)<<stampBits, sectionFixed)
	p := &t.pk
	w.WriteBitsFrom(p.sbuf[:], p.scratch.BitLen())
	t.stats.Packets++
	if t.stats.Packets == 0 {
		t.rareOf().statsWraps.Packets++
	}
	return recs, w.Err()
}

// collect buckets every ghost that has something to send; it returns how
// many. The buckets name ghosts by their records (i, from the last
// down), as every step of the fill does until a record's wire id is
// written (idOf).
//
// collectRun buckets the live ghosts with groups dirty that may go now,
// the usual and the overdue, on a few of the slot's fields, in a loop
// without a call; it returns at any other ghost (a create, a kill, a
// resend, a position that cannot go now), which collectOne buckets out of
// line on all of them. The one switch for every kind of ghost kept more
// values live than there are registers, spilled and reloaded around its
// arms (≈ 60 instructions a usual ghost).
func (p *packer) collect(t *Table, now msTime) int {
	k := t.cfg
	if live := int(t.live); len(p.next) < live {
		p.next = append(p.next, make([]int32, live-len(p.next))...)
	}
	if w := (int(t.live) + 63) / 64; len(p.pressed) < w {
		p.pressed = append(p.pressed, make([]uint64, w-len(p.pressed))...)
	}
	clear(p.pressed)
	ps := p.packScratch
	if ps.planReg != t.reg {
		ps.makePlans(t.reg)
	}
	// Times in whole ms (msCeil keeps every comparison exact), so the
	// loop takes differences of the slots' 16-bit times, nothing else.
	nowMS := int32(now) // the slots' times as int32 (msTime.ms) against it
	// lateLim: a ghost whose first unconfirmed change (pendChg, not 0) is
	// at or before it is past ConfirmDeadline; 0 when none can be (no
	// deadline, or the deadline not yet past since the clock's epoch).
	lateLim := int32(0)
	if k.deadlineMS > 0 {
		lateLim = max(nowMS-k.deadlineMS, 0)
	}
	// Pressing copies go no faster than ResendInterval, and not before the
	// previous copy had the usual time to be confirmed (a fate delay past
	// msWindow as msWindow: a time pinned at the epoch reads that old).
	ps.gap, ps.cfg = max(k.resendMS, min(msCeil(t.fateDelay), msWindow)), k
	ps.resendLim = k.resendMS // a speculative resend waits as long (none: no ResendInterval)
	if ps.resendLim == 0 {
		ps.resendLim = math.MaxInt32
	}
	ps.lastWait = -1 // none yet (a wait is ≥ 0): lastWaitW is another table's
	n := 0
	for i := int(t.live) - 1; i >= 0; i-- {
		if i, n = p.collectRun(t, i, n, nowMS, lateLim); i < 0 {
			break
		}
		if b := p.collectOne(t, i, nowMS); b >= 0 {
			h := ps.head[b]
			ps.next[i], ps.head[b] = h, int32(i)
			if h < 0 {
				ps.nonEmpty[b>>6] |= 1 << uint(b&63)
			}
			n++
		}
	}
	return n
}

// collectRun is collect's walk from ghost i down, n bucketed so far: it
// buckets the live ghosts with groups dirty that may go now and skips
// those with nothing to send, and returns at the first ghost of any other
// kind (collectOne's) with the count, or -1 at the end.
//
//go:noinline
func (p *packer) collectRun(t *Table, i, n int, nowMS, lateLim int32) (int, int) {
	ps := p.packScratch
	// grownB holds the ages below MaxStaleness (fewer past maxGrownB):
	// an age it holds is neither overdue nor computed.
	grownB := t.cfg.grownB[:min(len(t.cfg.grownB), int(max(t.cfg.maxStaleMS, 0)))]
	slots := t.slots[:t.live]
	next := ps.next[:len(slots)]
	for ; uint(i) < uint(len(slots)); i-- {
		s := &slots[i]
		if s.phase != phaseLive {
			return i, n
		}
		sent := nowMS - int32(s.sentAt)
		if sent < ps.minMS[s.ci] {
			continue // sent within its class's MinInterval
		}
		if s.dirty == 0 {
			if s.ackBack == 0 || uint32(int32(s.pendChg)-1) >= uint32(lateLim) && sent < ps.resendLim {
				continue // nothing unconfirmed, or not late and no resend due
			}
			return i, n
		}
		if s.posBlocked() {
			return i, n
		}
		var b int
		age := nowMS - int32(s.since)
		if a := uint(age); uint32(int32(s.pendChg)-1) >= uint32(lateLim) && a < uint(len(grownB)) {
			// The usual: not late, grown, tabled. Linked here, not
			// where the overdue join: apart, each keeps its registers.
			b = tierUpdate*tierBuckets + int(uint8(min(int(s.prioB)+int(grownB[a]), tierBuckets-1)))
			h := ps.head[b]
			next[i], ps.head[b] = h, int32(i)
			if h < 0 { // a bucket's first ghost (a predicted branch: a table's ghosts share a few buckets)
				ps.nonEmpty[b>>6] |= 1 << uint(b&63)
			}
			n++
			continue
		} else {
			k := ps.cfg
			// late: how long the client may have lacked a change, once
			// past the confirm deadline (and the last copy has gone
			// unconfirmed for the usual fate delay): such a ghost is
			// pressed into every packet it fits until a delivery is
			// confirmed.
			late := int32(0)
			if uint32(int32(s.pendChg)-1) < uint32(lateLim) && sent >= ps.gap {
				late = nowMS - int32(s.pendChg)
			}
			if age < k.maxStaleMS {
				if late == 0 {
					return i, n // the usual past grownB (computed), or an age before now
				}
				ps.pressed[i>>6] |= 1 << uint(i&63)
			}
			if w := max(age, late); w != ps.lastWait {
				ps.setWait(k, w)
			}
			b = tierOverdue*tierBuckets + int(ps.lastWaitW[uint8(owtBTable[s.prioB])&15])
		}
		h := ps.head[b]
		next[i], ps.head[b] = h, int32(i)
		if h < 0 { // a bucket's first ghost (a predicted branch: a table's ghosts share a few buckets)
			ps.nonEmpty[b>>6] |= 1 << uint(b&63)
		}
		n++
	}
	return -1, n
}

// collectOne is collect's bucket of ghost i at nowMS, for any ghost, or
// -1 when it has nothing to send; it marks the ghosts ConfirmDeadline
// presses (p.pressed).
//
//go:noinline
func (p *packer) collectOne(t *Table, i int, nowMS int32) int {
	k := t.cfg
	resend, deadline := k.resendMS, k.deadlineMS
	// Pressing copies go no faster than ResendInterval, and not before the
	// previous copy had the usual time to be confirmed (a fate delay past
	// msWindow as msWindow: a time pinned at the epoch reads that old).
	gap := max(resend, min(msCeil(t.fateDelay), msWindow))
	s := &t.slots[i]
	switch s.phase {
	case phaseKilling:
		if s.fl&(flCreated|flKillInFlight) != flCreated || s.inflight != 0 {
			return -1
		}
		return killBucket
	case phaseCreating:
		if s.has(flCreateInFlight) {
			return -1
		}
		return tierCreate*tierBuckets + k.grown(s.prioB, nowMS-int32(s.since))
	case phaseLive:
	default:
		return -1
	}
	c := t.reg.classes[s.ci]
	sent := nowMS - int32(s.sentAt)
	if sent < c.minMS {
		return -1
	}
	// late: how long the client may have lacked a change, once past
	// the confirm deadline (and the last copy has gone unconfirmed
	// for the usual fate delay): such a ghost is pressed into
	// every packet it fits until a delivery is confirmed.
	late := int32(0)
	if deadline > 0 && s.pendChg != 0 && sent >= gap {
		if l := nowMS - int32(s.pendChg); l >= deadline {
			late = l
		}
	}
	if s.dirty == 0 {
		if s.ackBack == 0 {
			return -1 // nothing unconfirmed
		}
		if late > 0 {
			p.pressed[i>>6] |= 1 << uint(i&63)
			return tierOverdue*tierBuckets + k.waited(owtBTable[s.prioB], late)
		}
		if resend == 0 || sent < resend {
			return -1
		}
		return tierResend*tierBuckets + int(s.prioB)
	}
	if s.posBlocked() && t.dirtyOf(uint32(i), s) == c.posBit {
		return -1 // only position is dirty and it cannot go now
	}
	return p.dirtyBucket(k, i, s.prioB, nowMS-int32(s.since), late)
}

// dirtyBucket is the bucket of ghost i, live with groups dirty that may
// go now, of priority bucket prioB, age ms stale, and late ms past its
// confirm deadline (0: not late); it marks the ghost pressed if only the
// deadline makes it overdue.
func (p *packer) dirtyBucket(k *tableConfig, i int, prioB uint8, age, late int32) int {
	if age >= k.maxStaleMS || late > 0 {
		if age < k.maxStaleMS {
			p.pressed[i>>6] |= 1 << uint(i&63)
		}
		return tierOverdue*tierBuckets + k.waited(owtBTable[prioB], max(age, late))
	}
	if a := int(uint32(age)); a < len(k.grownB) { // the usual: grown, tabled (≥ 0)
		return tierUpdate*tierBuckets + min(int(prioB)+int(k.grownB[a]), tierBuckets-1)
	}
	return tierUpdate*tierBuckets + k.grown(prioB, age)
}

// clear empties the buckets collect filled.
func (p *packer) clear() {
	for w := range p.nonEmpty {
		for p.nonEmpty[w] != 0 {
			b := bits.TrailingZeros64(p.nonEmpty[w])
			p.nonEmpty[w] &^= 1 << uint(b)
			p.head[w*64+b] = -1
		}
	}
}

// fill writes records into the scratch writer, highest bucket first, until
// budget bits are used or MaxMisses records in a row did not fit. It
// returns the number of records. n is the number of candidates collect
// bucketed.
func (p *packer) fill(t *Table, seq uint64, now msTime, width uint, budget, n int) int {
	sw := &p.scratch
	sw.Reset(p.sbuf[:min((budget+7)/8, len(p.sbuf))])
	minRec := int(width) + kindDefaultLen + 1
	pk := t.beginPacket(seq)
	recs, misses := 0, 0
	pressBits, pressCap := 0, budget/pressShare
	// What most packets need checked for none of their records, checked
	// once: the store has room for every candidate (each is tried at most
	// once), none is pressed. Otherwise every record takes the checks.
	// Room for every candidate after the live records: slid to index 0 if
	// the store holds them all, once for the packet, not checked a record.
	if end := int(t.entHead+t.entLen) + n; end > len(t.ents) && int(t.entLen)+n <= len(t.ents) {
		t.moveEnts(t.ents)
	}
	checks := int(t.entHead+t.entLen)+n > len(t.ents)
	// trim keeps the store this room: the records in flight and the
	// candidates' records, one each at most. Sized to the records alone
	// (endPacket's), a store of any length held no room for the candidates
	// that are not written, and most packets took the checks.
	t.entHW = max(t.entHW, t.entLen+int32(n))
	for _, w := range p.pressed {
		checks = checks || w != 0
	}
	// The usual record (writeUsual) comes only from snapshot views, and
	// keeps a ghost's dirty groups in the slot's word alone.
	stop, snap := false, t.snapMode && !t.wideDirty
	p.useq, p.unow, p.uwidth, p.ubudget, p.ustop = seq, now, width, budget, budget-minRec // writeUsual's
	if snap && !checks {
		recs = p.fillUsual(t)
		t.endPacket(pk)
		return recs
	}
	for w := bucketWords - 1; w >= 0; w-- {
		for p.nonEmpty[w] != 0 {
			b := 63 - bits.LeadingZeros64(p.nonEmpty[w])
			p.nonEmpty[w] &^= 1 << uint(b)
			i := p.head[w*64+b]
			p.head[w*64+b] = -1
			for ; i >= 0 && !stop; i = p.next[i] {
				pressed := false
				if checks {
					if int(t.entHead+t.entLen) == len(t.ents) && !t.entRoom(t.entFree()) {
						stop = true
						break
					}
					pressed = p.pressed[i>>6]&(1<<uint(i&63)) != 0
					if pressed && pressBits >= pressCap {
						continue // pressing copies are speculative: they get a bounded share
					}
				}
				mark := sw.BitLen()
				r := recOther
				if snap { // entry views have no usual record (nor wideDirty tables)
					_, r = t.writeUsual(i, nil)
				}
				if r == recOther {
					r = t.writeRecord(sw, uint32(i), seq, now, width, budget)
				}
				switch r {
				case recNothing:
					continue
				case recMiss:
					sw.Truncate(mark)
					misses++
					if misses >= t.cfg.MaxMisses || budget-sw.BitLen() < minRec {
						stop = true
					}
					continue
				}
				misses = 0
				recs++
				if checks {
					if pressed {
						pressBits += sw.BitLen() - mark
					}
				}
				if budget-sw.BitLen() < minRec {
					stop = true
				}
			}
		}
	}
	t.endPacket(pk)
	return recs
}

// fillUsual is fill's walk for the usual packet on a server: snapshot
// views of a table whose dirty groups are all in its slots (writeUsual
// asked first), and none of the per-record checks (room in the store for
// every candidate, no pressed ghost, no trace). The same records in the
// same order as fill's general walk; apart so that fewer values live
// across the calls (each one spilled and reloaded a record): the record
// that is not writeUsual's goes to otherRecord, which reads the packet's
// fields from the scratch; the records written are counted by the store
// (endPacket's count), and writeUsual and otherRecord report the record
// that leaves no room for another (recFull: past ustop), so only the
// walk's own values live here. writeUsual walks the buckets itself and
// returns here only at a record it did not write. On a stop the buckets
// not yet walked are emptied as clear does. It returns the number of
// records.
func (p *packer) fillUsual(t *Table) int {
	ps := p.packScratch
	next := ps.next
	misses := 0
	ps.walkW = bucketWords - 1
	for i := ps.nextChain(); i >= 0; {
		// writeUsual writes down the chains from i, bucket after bucket;
		// it stops at the first record it did not write (a miss wrote
		// nothing).
		ents, r := t.entLen, 0
		if i, r = t.writeUsual(i, next); r == recWritten {
			break // every bucket walked, every record written
		}
		if t.entLen != ents {
			misses = 0 // records before i were written
		}
		if r == recOther {
			r = p.otherRecord(t, uint32(i))
		}
		switch r {
		case recWritten:
			misses = 0
		case recMiss:
			misses++
			if misses >= t.cfg.MaxMisses || ps.scratch.BitLen() > ps.ustop {
				r = recFull
			}
		}
		if r == recFull {
			p.clear() // recFull, or the misses stop it
			break
		}
		if i = next[i]; i < 0 {
			i = ps.nextChain()
		}
	}
	return int(t.entLen - t.pkEnt0)
}

// nextChain pops the highest bucket not yet walked, from word walkW of
// nonEmpty down, and returns the first ghost of its chain, or -1 when
// every bucket is walked.
func (ps *packScratch) nextChain() int32 {
	for w := ps.walkW; w >= 0; w-- {
		if m := ps.nonEmpty[w]; m != 0 {
			b := 63 - bits.LeadingZeros64(m)
			ps.nonEmpty[w] = m &^ (1 << uint(b))
			i := ps.head[w*64+b]
			ps.head[w*64+b] = -1
			ps.walkW = w
			return i
		}
	}
	return -1
}

// otherRecord is fillUsual's writeRecord, for the packet fill set in the
// scratch (useq, unow, uwidth, ubudget); a miss is truncated away, and a
// record past ustop is recFull. Out of line: inlined, its mark and fields
// would live across fillUsual's call.
//
//go:noinline
func (p *packer) otherRecord(t *Table, rc uint32) int {
	ps := p.packScratch
	sw := &ps.scratch
	mark := sw.BitLen()
	r := t.writeRecord(sw, rc, ps.useq, ps.unow, ps.uwidth, ps.ubudget)
	switch {
	case r == recMiss:
		sw.Truncate(mark)
	case r == recWritten && sw.BitLen() > ps.ustop:
		r = recFull
	}
	return r
}

// Outcomes of writeRecord.
const (
	recWritten = iota
	recMiss    // did not fit (or the encoder refused): the caller truncates
	recNothing // nothing left to send after all (wrote nothing)
	recOther   // writeUsual: not the usual record (wrote and changed nothing): writeRecord's
	recFull    // writeUsual, otherRecord: written, and the packet has no room for another (past ustop)
)

// writeUsual is writeRecord for the usual record on a server, apart so
// that its few values stay in registers (writeRecord's general frame
// spilled and reloaded them, ≈ 500 instructions a record of its own): an
// update of a live snapshot entry's ghost (snapshot views of a table
// whose dirty groups are all in its slots, not wideDirty: fill asks only
// then), not a resend, with its position
// on the server's track (narrow, delivered: two and nothing in flight, the
// pair extrapolating, or positions in flight, coded by flightDeltas as
// posForm codes them) in a window, and every group in
// the mask the table's to code, in one run of at most runMax bits or two
// (a player's update with its move sequence: writeUsualRuns). It
// writes and commits it as writeRecord does (the same bits, the same
// table: TestWriteUsualIsWriteRecord), or reports recMiss when it does not
// fit the budget, or recOther, having written and changed nothing, for
// any other record. It writes into the packer's scratch, for the packet
// fill set there (useq, unow, uwidth, ubudget).
//
// It writes the record of the ghost of record i and goes on down i's bucket chain (next, as
// collect linked it) and the buckets after it (nextChain) while the
// records are written; it returns -1 and recWritten when every bucket is
// walked, or the first ghost whose record was not written with its
// outcome (every ghost before it in the walk written). With next nil it
// writes i alone (fill's general walk). The walk here, not in fillUsual:
// a call a record cost the caller's loop its reloads around the call and
// this function its entry and exit (BenchmarkTables1000PumpZones −1.5 %,
// PumpCrowd −2.0 % instructions).
func (t *Table) writeUsual(i int32, next []int32) (int32, int) {
	for {
		rc := uint32(i)
		s := &t.slots[rc]
		if s.phase != phaseLive || s.fl&(flPosNow|flPosFull) != 0 || s.si&siCarry != 0 { // t.snapMode: fill's test
			return i, recOther
		}
		tr := &t.pos[rc]
		if tr.meta&(3<<metaDnShift) == 0 || t.pp.wide {
			return i, recOther // none delivered (absolute), or wide
		}
		sn := t.snapOf(s)
		v := &sn.vw[s.si] // the entry's view: its line came with the view's walk
		q := &v.qpos
		ql := t.pp.packLo(q)
		rest := s.restCopies
		// pos: the position's window code and axes, pn bits (pair1run's, or
		// posAxis's here), as the run appends them.
		var pos uint64
		var pn uint
		flight := tr.meta>>metaDnShift != 2 // positions in flight
		if !flight {
			lo := tr.dq[1]
			dt1, span0 := tr.age1(stamp(t.viewMS)), tr.gap()
			if rest == 0 && lo == ql || uint64(dt1-1) >= predictMaxMS || uint64(span0-1) >= predictMaxMS {
				return i, recOther // posSame, or a pair that predicts no motion
			}
			if pos, pn = pair1run(&t.reg.q, tr.dq[0], lo, span0, dt1, q); pn == 0 {
				return i, recOther // absolute
			}
		} else {
			d0, d1, d2, ok := t.flightDeltas(tr, rc, q, ql, rest)
			if !ok {
				return i, recOther // posSame
			}
			k := uint(1) // posForm.window's
			if m := max(d0, d1, d2); m > 0 {
				k = windowBits(m)
			}
			if k > maxWindow {
				return i, recOther // absolute
			}
			lm := uint64(1)<<(k&15) - 1
			pos, pn = uint64(k), kcodeBits
			pos, pn = posAxis(pos, pn, d0, q[0], lm, k)
			pos, pn = posAxis(pos, pn, d1, q[1], lm, k)
			pos, pn = posAxis(pos, pn, d2, q[2], lm, k)
		}
		// The class's plan and the mask after the position's coding, not
		// before: what is loaded before its call lives across it, spilled and
		// reloaded. A record that then turns out not the usual one (no
		// position dirty) changed nothing: pair1run and flightDeltas only read.
		ps := t.pk.packScratch
		if ps.planReg != t.reg {
			ps.makePlans(t.reg)
		}
		pl := &ps.plans[s.ci]
		dirty0 := uint64(s.dirty) // not wideDirty: fill's test
		mask := dirty0 & pl.all
		if mask&pl.pos == 0 {
			return i, recOther // no position (or a resend)
		}
		// The run, as writeRecord gathers it, into the packer's scratch for
		// its packet (fillUsual's or fill's fields).
		w, width, budget := &ps.scratch, ps.uwidth, ps.ubudget
		id := t.idOf(rc)
		var rv uint64
		var rn uint
		if mask == pl.def {
			rv, rn = uint64(id)|kindDefault<<(width&63), width+kindDefaultLen
		} else {
			rv, rn = uint64(id)|kindMask<<(width&63)|mask<<((width+kindMaskLen)&63), width+kindMaskLen+uint(pl.groups)
		}
		// The shifts by rn&63: past 63 the run is past runMax, and not
		// written (Go's test for a shift past the width, spared).
		//
		// The usual masks first, without the walk of the groups: the
		// position alone, or the position and then the class's yaw (the
		// shipped classes' default masks), in group order as the walk takes
		// them.
		if mask == pl.pos || mask == pl.posYaw {
			rv |= pos << (rn & 63)
			rn += pn
			if mask != pl.pos {
				rv |= uint64(v.yawQ) << (rn & 63)
				rn += uint(pl.yawBits)
			}
		} else {
			// Any other mask (a player's update carrying its move
			// sequence: often past one run) by the walk of its groups,
			// written there.
			if r := ps.writeUsualRuns(pl.c, rn, &v.gc, v.yawQ, mask, rv, pos, pn); r != recWritten {
				return i, r
			}
			goto commit
		}
		if rn > runMax {
			return i, recOther
		}
		if w.BitLen()+int(rn) > budget {
			return i, recMiss // nothing written
		}
		if !w.TryWriteBits(rv, rn) {
			if mark := w.BitLen(); w.WriteBits(rv, rn) != nil {
				w.Truncate(mark) // nothing written (fillUsual truncates no miss)
				return i, recMiss
			}
		}
	commit:
		// Commit: writeRecord's for an update carrying its position, pushed
		// on the track's own room (n 0).
		seq, now := ps.useq, ps.unow
		t.addEntry(rc, recUpdate, mask)
		s.inflight++
		s.sentAt, s.since = now, now
		t.setFieldSeqs(rc, s, mask, uint8(seq))
		if (uint32(seq)^s.lastSeq)>>fieldBlock != 0 {
			t.ageGhost(rc, s, int(pl.groups), s.lastSeq, uint32(seq), mask)
		}
		if !flight {
			tr.fq, tr.ft[0] = ql, pstamp(t.viewMS) // pushOwn's, n 0
			tr.meta += metaN1
			s.fl |= flPosNow // flPosFull stays clear: one in flight
		} else {
			if !tr.pushOwn(&t.pp, rc, stamp(t.viewMS), ql) {
				tr.pushLo(&t.pp, rc, stamp(t.viewMS), q, ql)
			}
			s.fl |= flPosNow
			s.set(flPosFull, tr.full())
		}
		s.ackBack = uint8(min(uint64(s.ackBack)+uint64(uint32(seq)-s.lastSeq), fieldOld))
		s.lastSeq = uint32(seq)
		dirty := dirty0 &^ mask
		if rest > 0 {
			s.restCopies = rest - 1
			if rest > 1 {
				dirty |= pl.pos // the second rest marker goes with the next view
			}
		}
		s.dirty = uint32(dirty)
		t.redirty(dirty0, dirty)
		if ps.scratch.BitLen() > ps.ustop {
			return i, recFull // written: fill's walk stops, as for a full packet
		}
		if uint(i) >= uint(len(next)) { // i alone (fill's general walk)
			return -1, recWritten
		}
		if i = next[i]; i < 0 { // the chain's end: the next bucket's
			if i = ps.nextChain(); i < 0 {
				return -1, recWritten
			}
		}
	}
}

// usualPlan is what writeUsual reads of a class, worked out once for its
// registry (makePlans) instead of a record at a time: its masks as words
// to compare with, not the group indexes its tests were made of.
type usualPlan struct {
	all     uint64 // Class.all
	pos     uint64 // Class.posBit: the usual mask of the position alone (0: none is usual)
	posYaw  uint64 // the position and then the class's first yaw group, if after it; else pos
	def     uint64 // Class.DefaultMask
	c       *Class // the class, for writeUsualRuns' walk (in the plan's line, not the registry's slice)
	groups  uint8  // len(Class.Groups)
	yawBits uint8  // Class.yawBits
}

// makePlans works out reg's classes' plans, by class index (slot.ci). A
// registry's classes are fixed once a table has it (Registry.frozen), so
// the plans hold for every Write of a table of reg, whichever table
// used the scratch before.
//
//go:noinline
func (ps *packScratch) makePlans(reg *Registry) {
	ps.plans = ps.plans[:0]
	for _, c := range reg.classes {
		pl := usualPlan{c: c, all: c.all, pos: c.posBit, posYaw: c.posBit, def: c.DefaultMask, groups: uint8(len(c.Groups)), yawBits: c.yawBits}
		if c.posBit != 0 && c.yawIdx > c.posIdx {
			pl.posYaw |= 1 << uint(c.yawIdx)
		}
		ps.plans = append(ps.plans, pl)
	}
	for i := range ps.minMS {
		ps.minMS[i] = math.MaxInt32
		if i < len(reg.classes) {
			ps.minMS[i] = reg.classes[i].minMS
		}
	}
	ps.planReg = reg
}

// writeUsualRuns is writeUsual's walk of the groups in mask, in group
// order, for a mask other than the usual ones it writes itself, and its
// write into the scratch within its budget: the header hv of hn bits,
// then each group's bits, gathered as one record of at most 2·runMax
// bits in two words (lo, then hi from bit 64), written as one run of at
// most runMax bits or as two, the first of runMax bits and the second of
// the rest (a player's update with its move sequence, yaw and velocity).
// It returns recWritten, recMiss (nothing written) when the record does
// not fit, or recOther (nothing written) for a group not the table's to
// code (writeRecord's record), a record past two runs, a field past one
// (noCode's 255 bits) or a header past one run. The bits are
// writeRecord's, split where writeUpdate does not split them: the stream
// is the same. gc is the entry's group codes (in its view), yaw its yaw
// code. Out of line: writeUsual's usual record keeps its values in
// registers.
//
//go:noinline
func (ps *packScratch) writeUsualRuns(c *Class, hn uint, gc *[snapCodes]uint64, yaw uint16, mask, hv uint64, pos uint64, pn uint) int {
	if hn > runMax {
		return recOther
	}
	// The record in two words, not a run closed where a field crosses
	// runMax: a field is one test and a shift or two, and the split is
	// made once, at the end.
	lo, hi, rn := hv, uint64(0), hn
	m := mask
	// A position that is group 0 (the shipped classes'), and the yaw
	// after it, without the walk: two groups of a player's four.
	if m&1 != 0 && c.wk[0] == wkPos && rn+pn <= 64 {
		lo |= pos << (rn & 63)
		rn += pn
		m &^= 1
		if m&2 != 0 && c.wk[1] == wkYaw && rn+uint(c.yawBits) <= 64 {
			lo |= uint64(yaw) << (rn & 63)
			rn += uint(c.yawBits)
			m &^= 2
		}
	}
	for ; m != 0; m &= m - 1 {
		var f uint64 // the field, l bits
		var l uint
		switch g := c.wk[bits.TrailingZeros64(m)]; {
		case g >= wkCoded:
			code := gc[(g-wkCoded)&(snapCodes-1)]
			f, l = code&(1<<codeShift-1), uint(code>>codeShift)
		case g == wkPos:
			f, l = pos, pn
		case g == wkYaw:
			f, l = uint64(yaw), uint(c.yawBits)
		default:
			return recOther // a group Encode writes (a second yaw): writeRecord's
		}
		if l > runMax {
			return recOther // past one run (noCode)
		}
		// Past 128 bits the shifts wrap: that record is past two runs,
		// refused below.
		switch {
		case rn+l <= 64:
			lo |= f << (rn & 63)
		case rn >= 64:
			hi |= f << ((rn - 64) & 63)
		default: // the field crosses into hi
			lo |= f << (rn & 63)
			hi |= f >> ((64 - rn) & 63)
		}
		rn += l
	}
	if rn > 2*runMax {
		return recOther // past two runs
	}
	w := &ps.scratch
	mark := w.BitLen()
	if rn <= runMax {
		if mark+int(rn) > ps.ubudget {
			return recMiss
		}
		if !w.TryWriteBits(lo, rn) && w.WriteBits(lo, rn) != nil {
			w.Truncate(mark) // nothing written (fillUsual truncates no miss)
			return recMiss
		}
		return recWritten
	}
	if mark+int(rn) > ps.ubudget {
		return recMiss
	}
	first, rv := lo&(1<<runMax-1), lo>>runMax|hi<<(64-runMax)
	rn -= runMax
	if !w.TryWriteBits(first, runMax) && w.WriteBits(first, runMax) != nil {
		w.Truncate(mark)
		return recMiss
	}
	if !w.TryWriteBits(rv, rn) && w.WriteBits(rv, rn) != nil {
		w.Truncate(mark) // the first run too
		return recMiss
	}
	return recWritten
}

// flightDeltas is writeUsual's position for a track with positions in
// flight (a server whose fates come after its next Write), coded as
// posForm codes it (form1, or the general walk); ok false for posSame.
func (t *Table) flightDeltas(tr *posTrack, rc uint32, q *[3]uint32, ql uint64, rest uint8) (d0, d1, d2 uint64, ok bool) {
	var d [3]uint64
	if tr.fast1(&t.pp) {
		if tr.form1(&t.pp, q, ql, stamp(t.viewMS), &t.reg.q.lim, rest == 0, &d) {
			return 0, 0, 0, false
		}
	} else if tr.formN(&t.pp, rc, q, ql, stamp(t.viewMS), &t.reg.q.lim, rest == 0, &d) {
		return 0, 0, 0, false
	}
	return d[0], d[1], d[2], true
}

// writeRecord writes the record of the ghost of record rc into w within budget and, if it fit,
// commits it to the table and the packet's transmission record.
func (t *Table) writeRecord(w *bitstream.Writer, rc uint32, seq uint64, now msTime, width uint, budget int) int {
	id := t.idOf(rc)
	s := &t.slots[rc]
	// What the ghost wants (npend) changes with the commit of a create or
	// kill (now in flight), and with an update's dirty groups (its phase is
	// live throughout): dirty0 is where they started, dirty where they
	// are (setDirty keeps the slot's).
	dirty0 := t.dirtyOf(rc, s)
	dirty := dirty0
	c := t.classOf(s)
	var kind uint8
	var mask uint64
	var err error
	pushPos := false
	var q *[3]uint32 // the latest quantized position, if the record carries it
	var ql uint64    // q packed (posPool.packLo), if it does
	switch s.phase {
	case phaseKilling:
		kind = recKill
		err = w.WriteBits(uint64(id)|kindKill<<width, width+kindKillLen)
	case phaseCreating:
		kind, mask = recCreate, c.all
		err = t.writeCreate(w, id, rc, s, c, width)
		if pushPos = c.posIdx >= 0; pushPos {
			q = t.qposOf(rc, s)
			ql = t.pp.packLo(q)
		}
	default:
		kind = recUpdate
		mask = dirty & c.all
		resend := mask == 0
		if resend {
			mask = t.unconfirmed(rc, s, c)
		}
		// Where the view left the position, yaw code and group codes:
		// looked up once for the posForm, the update and the position's
		// track. The usual ghost's are its snapshot entry's (latest and
		// codesOf written out: one lookup of the entry, not two).
		var yaw uint16
		var gc *[snapCodes]uint64
		if t.snapMode && s.si&siCarry == 0 {
			sn := t.snapOf(s)
			v := &sn.vw[s.si]
			q, yaw, gc = &v.qpos, v.yawQ, &v.gc
		} else if !t.snapMode { // an entry view's (latest's, without its call)
			v := &t.rare.views.qs[rc]
			q, yaw = &v.q, v.yaw
		} else {
			q, yaw = t.latest(rc, s)
		}
		var pf posForm
		if mask&c.posBit != 0 {
			if tr := &t.pos[rc]; tr.meta>>metaDnShift == 2 && !t.pp.wide && !s.posBlocked() {
				// posForm's way for the server's track (n 0, dn 2) written
				// out: no posForm frame a record. The other tracks, and a
				// blocked position, go by posForm (the same answers: the
				// convergence, fuzz and conformance tests fail with either
				// way's posSame or window broken).
				pf.ql = t.pp.packLo(q)
				lo := tr.dq[1]
				dt1, span0 := tr.age1(stamp(t.viewMS)), tr.gap()
				switch {
				case s.restCopies == 0 && lo == pf.ql:
					pf.kind = posSame
				case uint64(dt1-1) < predictMaxMS && uint64(span0-1) < predictMaxMS:
					pf.d[0], pf.d[1], pf.d[2] = pair1r(&t.pp, tr.dq[0], lo, span0, dt1, q, &t.reg.q.lim) // pf is new: d is 0
					pf.window()
				default:
					if tr.form1(&t.pp, q, pf.ql, stamp(t.viewMS), &t.reg.q.lim, s.restCopies == 0, &pf.d) {
						pf.kind = posSame
					} else {
						pf.window()
					}
				}
			} else if tr.n() <= 1 && tr.dn() != 0 && !t.pp.wide && !s.posBlocked() {
				// posForm's form1 way (fast1, some delivered) written out
				// too: no posForm frame a record for an entry view's usual
				// track either.
				pf.ql = t.pp.packLo(q)
				if tr.form1(&t.pp, q, pf.ql, stamp(t.viewMS), &t.reg.q.lim, s.restCopies == 0, &pf.d) {
					pf.kind = posSame
				} else {
					pf.window()
				}
			} else {
				t.posForm(rc, s, q, &pf)
			}
			switch pf.kind {
			case posSame: // every value the client may show equals it
				dirty &^= c.posBit
				t.setDirty(rc, s, dirty)
				mask &^= c.posBit
			case posLater:
				mask &^= c.posBit
			}
		}
		if mask == 0 {
			t.redirty(dirty0, dirty) // the position may have been found the client's
			return recNothing
		}
		// The usual update: a ghost whose groups in mask are all the
		// table's to code (the position in a window, the yaw code, a
		// snapshot entry's codes) and whose record is one run of at most
		// runMax bits. Gathered here as writeUpdate gathers it (the same
		// bits, one write) without writeUpdate's call: writeRecord keeps
		// its values in registers, not saved and reloaded around it
		// (TestSnapshotViewsPackLikeEntryViews, Fuzz*ViewsWriteWhatEntryViewsWrite:
		// entry views' other groups go by writeUpdate;
		// TestEntryUpdateIsWriteUpdate: entry views' position and yaw
		// runs). An entry view's update of the position and yaw alone
		// takes the run too (BenchmarkPack1000 −4 %). Anything else,
		// nothing written yet, goes to writeUpdate.
		run := false
		var rv uint64
		var rn uint
		// The shifts by width&63 and rn&63, as writeUsual's: width is at
		// most 20, and past 63 the run is past runMax and not written
		// (Go's test for a shift past the width, spared).
		if mask == c.DefaultMask {
			rv, rn = uint64(id)|kindDefault<<(width&63), width+kindDefaultLen
		} else {
			rv, rn = uint64(id)|kindMask<<(width&63)|mask<<((width+kindMaskLen)&63), width+kindMaskLen+uint(len(c.Groups))
		}
		if (mask == c.posBit || mask == c.posYaw) && pf.k > 0 {
			// The position in a window, and then the yaw (an NPC's usual
			// update), without the walk of the groups: the loop's cases,
			// written out again (a helper for the position's is over the
			// inliner's budget, 172 against 80: a call a record).
			k, lo := pf.k, uint64(1)<<(pf.k&15)-1 // k ≤ maxWindow
			rv |= uint64(k) << (rn & 63)
			rn += kcodeBits
			rv, rn = posAxis(rv, rn, pf.d[0], q[0], lo, k)
			rv, rn = posAxis(rv, rn, pf.d[1], q[1], lo, k)
			rv, rn = posAxis(rv, rn, pf.d[2], q[2], lo, k)
			if mask != c.posBit {
				rv |= uint64(yaw) << (rn & 63)
				rn += uint(c.yawBits)
			}
			run = rn <= runMax
			goto write
		}
	groups:
		for m := mask; ; m &= m - 1 {
			if m == 0 {
				run = rn <= runMax // rn only grows: no field went past runMax
				break
			}
			switch k := c.wk[bits.TrailingZeros64(m)]; {
			case k >= wkCoded && gc != nil: // an entry view (gc nil): by its Encode, writeUpdate's
				code := gc[(k-wkCoded)&(snapCodes-1)] // noCode: 255 bits, past runMax
				rv |= (code & (1<<codeShift - 1)) << (rn & 63)
				rn += uint(code >> codeShift)
			case k == wkPos && pf.k > 0:
				// posWindow written out: no call in the loop.
				k, lo := pf.k, uint64(1)<<(pf.k&15)-1 // k ≤ maxWindow
				rv |= uint64(k) << (rn & 63)
				rn += kcodeBits
				rv, rn = posAxis(rv, rn, pf.d[0], q[0], lo, k)
				rv, rn = posAxis(rv, rn, pf.d[1], q[1], lo, k)
				rv, rn = posAxis(rv, rn, pf.d[2], q[2], lo, k)
			case k == wkYaw:
				rv |= uint64(yaw) << (rn & 63)
				rn += uint(c.yawBits)
			default:
				break groups
			}
		}
	write:
		if run {
			if !w.TryWriteBits(rv, rn) { // the writer's fast path in line (1 ≤ rn ≤ runMax)
				err = w.WriteBits(rv, rn)
			}
		} else {
			err = t.writeUpdate(w, id, rc, c, mask, width, &pf, q, yaw, gc)
		}
		pushPos = mask&c.posBit != 0
		ql = pf.ql // posForm's: it sends the position (posSend)
		if err == nil && pushPos && pf.k == 0 {
			t.rareOf().AbsolutePos++
		}
		if err == nil && resend {
			t.rareOf().Resends++
		}
	}
	if err == nil && w.BitLen() > budget {
		err = bitstream.ErrOverflow
	}
	if err != nil {
		if !errors.Is(err, bitstream.ErrOverflow) {
			t.rareOf().EncodeErrors++
		}
		if kind == recUpdate {
			t.redirty(dirty0, dirty) // a position found the client's stays so
		}
		return recMiss
	}
	// Commit.
	t.addEntry(rc, kind, mask)
	s.inflight++
	s.sentAt, s.since = now, now
	t.setFieldSeqs(rc, s, mask, uint8(seq))
	if (uint32(seq)^s.lastSeq)>>fieldBlock != 0 {
		t.ageGhost(rc, s, len(c.Groups), s.lastSeq, uint32(seq), mask)
	}
	if pushPos {
		tr := &t.pos[rc]
		if !tr.pushOwn(&t.pp, rc, stamp(t.viewMS), ql) {
			tr.pushLo(&t.pp, rc, stamp(t.viewMS), q, ql)
		}
		s.fl |= flPosNow
		s.set(flPosFull, tr.full())
		if s.restCopies > 0 {
			s.restCopies--
		}
	}
	// The delivered carrier stays where it was: further back from the new
	// lastSeq (pinned at fieldOld).
	s.ackBack = uint8(min(uint64(s.ackBack)+uint64(uint32(seq)-s.lastSeq), fieldOld))
	s.lastSeq = uint32(seq)
	switch kind {
	case recKill:
		if s.fl&flKillInFlight == 0 {
			t.npend-- // a killing ghost wants to send its kill until it is in flight
		}
		s.fl |= flKillInFlight
		t.idxDel(t.entityOf(rc), rc) // a re-entry from now on gets a new ghost
		t.stats.Kills++
		if t.stats.Kills == 0 {
			t.rareOf().statsWraps.Kills++
		}
	case recCreate:
		if s.fl&flCreateInFlight == 0 {
			t.npend-- // a creating ghost wants to send its create until it is in flight
		}
		s.fl |= flCreateInFlight
		s.ackBack = 1 // nothing of this incarnation is confirmed yet (seq − 1)
		t.setDirty(rc, s, 0)
		t.stats.Creates++
		if t.stats.Creates == 0 {
			t.rareOf().statsWraps.Creates++
		}
	default:
		if mask&c.posBit == 0 && dirty&c.posBit != 0 {
			t.rareOf().PosDeferred++
		}
		dirty &^= mask
		if s.restCopies > 0 {
			dirty |= c.posBit // the second rest marker goes with the next view
		}
		t.setDirty(rc, s, dirty)
		t.redirty(dirty0, dirty)
	}
	return recWritten
}

// unconfirmed returns the groups whose newest sent value is in a packet not
// known delivered (newer than the newest delivered packet of the ghost).
func (t *Table) unconfirmed(rc uint32, s *slot, c *Class) uint64 {
	// Distances back from the ghost's newest record: a group is
	// unconfirmed if its newest carrier is nearer than the newest delivered
	// one. Groups fieldOld or more back count as confirmed (fieldSeqs).
	ack, last := uint32(s.ackBack), uint8(s.lastSeq) // ack at most fieldOld
	var m uint64
	for i := range c.Groups {
		if uint32(last-t.fieldSeq(rc, s, i)) < ack {
			m |= 1 << uint(i)
		}
	}
	return m
}

// Per-group sequences: 8 bits of each, groups 0 and 1's in the slot
// (slot.lf), the rest in lastField (5 bytes a record for the shipped
// classes' 7 groups; 14 with 16 bits, all in lastField). The
// full number is the ghost's newest record's (slot.lastSeq, 32 bits) minus
// a distance below 2^8, which holds as follows.
//
//   - Write records nothing while its oldest packet in flight is
//     fieldOld (128) or more sequences back (maxSeqSpan), so a packet's
//     records are never older than that, and a drop's equality test (lf ==
//     the packet's low 8 bits) cannot match a later carrier 2^8 on. A
//     connection has a packet 128 sequences unresolved only after seconds
//     without a fate (the client's keepalive acks every second; a session
//     times out in a few): its ghost records wait for the fates meanwhile.
//   - A group fieldOld or more back is in no packet in flight, and was
//     delivered, or dropped and dirty again (unconfirmed is asked only of a
//     ghost with nothing dirty): it counts as confirmed.
//   - When a record's seq moves lastSeq into another block of
//     2^fieldBlock, ageFields pins every group fieldOld or more back at
//     exactly fieldOld back. Until the next block, lastSeq moves less than
//     2^fieldBlock, so every distance stays below fieldOld + 2^fieldBlock
//     = 2^8 and no group a long time unsent reads as recent. (A block of
//     2^7, not less: ageFields runs when a ghost's record enters a new
//     block, every 128 packets for a ghost in each.)
const (
	fieldOld   = 1 << 7
	fieldBlock = 7
	maxSeqSpan = fieldOld
)

// lfSlot is how many groups' per-group sequences a slot keeps (slot.lf):
// groups 0 and 1; lastField keeps the rest.
const lfSlot = 2

// fieldSeq is the ghost of record rc's per-group sequence of group g (s is its slot).
func (t *Table) fieldSeq(rc uint32, s *slot, g int) uint8 {
	if g < lfSlot {
		return s.lf[g]
	}
	return t.lastField[int(rc)*int(t.stride)+g-lfSlot]
}

// setFieldSeqs sets the per-group sequence of each group in mask (of the
// ghost of record rc, s its slot) to seq, where fieldSeq reads it: groups 0
// and 1 (lfSlot) in the slot, the rest in lastField. Indexed from the
// ghost's base, not through a slice from it (its bounds and capacity
// arithmetic, ≈ 8 instructions a record), without a test of the group a
// group; the usual masks touch no line of lastField.
func (t *Table) setFieldSeqs(rc uint32, s *slot, mask uint64, seq uint8) {
	if mask&1 != 0 {
		s.lf[0] = seq
	}
	if mask&2 != 0 {
		s.lf[1] = seq
	}
	if m := mask &^ (1<<lfSlot - 1); m != 0 {
		lfs, lb := t.lastField, int(rc)*int(t.stride)-lfSlot
		for ; m != 0; m &= m - 1 {
			lfs[lb+bits.TrailingZeros64(m)] = seq
		}
	}
}

// ageGhost is ageFields over the n groups of the ghost of record rc: the slot's and
// lastField's (s is its slot).
func (t *Table) ageGhost(rc uint32, s *slot, n int, last, seq uint32, mask uint64) {
	ageFields(s.lf[:min(n, lfSlot)], last, seq, mask)
	if n > lfSlot {
		lb := int(rc) * int(t.stride)
		ageFields(t.lastField[lb:lb+n-lfSlot], last, seq, mask>>lfSlot)
	}
}

// ageFields pins the groups of a ghost fieldOld or more back at fieldOld
// back, as its newest record moves from last to seq (the groups in mask
// were just set to seq).
func ageFields(lf []uint8, last, seq uint32, mask uint64) {
	gap := seq - last
	for g := range lf {
		if mask&(1<<uint(g)) != 0 {
			continue
		}
		if d := uint32(uint8(last)-lf[g]) + gap; d >= fieldOld || d < gap { // d < gap: gap ≥ 2^32 − 2^8
			lf[g] = uint8(seq - fieldOld)
		}
	}
}

// posForm is how an update sends the position.
type posForm struct {
	kind int
	k    uint      // window width 1..15; 0 means absolute
	d    [3]uint64 // per axis, the largest residual over the client's possible predictions
	ql   uint64    // the position packed (posPool.packLo), when kind is posSend or posSame
}

// Kinds of posForm.
const (
	posSend  = iota
	posSame  // every value the client may show equals the current one: nothing to send
	posLater // cannot go now: too many positions in flight, or one already went in this view
)

// posWritable reports whether the position of the ghost of record rc may be written now: fewer
// than posRingLen positions in flight and none yet from the current view
// (the prediction needs every value the client may hold to be older than
// the one it codes). The slot's flags say so (posBlocked); this is the
// track's own answer, which they must agree with (tests).
func (t *Table) posWritable(rc uint32) bool {
	tr := &t.pos[rc]
	if tr.full() {
		return false
	}
	ts, ok := tr.newestStamp(&t.pp)
	return !ok || ts.sub(pstamp(t.viewMS)) < 0
}

// posForm fills pf with how an update sends the position q (the latest
// of the ghost of record rc): the low k bits of each changed axis (k from the spread of the
// client's possible predictions), absolute, or not at all.
func (t *Table) posForm(rc uint32, s *slot, q *[3]uint32, pf *posForm) {
	if s.posBlocked() {
		pf.kind = posLater
		return
	}
	tr := &t.pos[rc]
	pf.ql = t.pp.packLo(q) // for form1 and the position's push
	if tr.dn() == 0 {
		return // absolute (kind posSend, k 0)
	}
	var same bool
	if tr.meta>>metaDnShift == 2 && !t.pp.wide {
		// The server's track, two delivered and nothing in flight (n 0,
		// dn 2): form1's way for it written out here, a call less a
		// record (TestPosFormServerTrack). Tested before fast1: the
		// server's way pays one test, the others two either way.
		lo := tr.dq[1]
		dt1, span0 := tr.age1(stamp(t.viewMS)), tr.gap()
		switch {
		case s.restCopies == 0 && lo == pf.ql:
			same = true
		case uint64(dt1-1) < predictMaxMS && uint64(span0-1) < predictMaxMS:
			r0, r1, r2 := pair1r(&t.pp, tr.dq[0], lo, span0, dt1, q, &t.reg.q.lim)
			pf.d = [3]uint64{max(pf.d[0], r0), max(pf.d[1], r1), max(pf.d[2], r2)}
		default:
			same = tr.form1(&t.pp, q, pf.ql, stamp(t.viewMS), &t.reg.q.lim, s.restCopies == 0, &pf.d)
		}
	} else if tr.fast1(&t.pp) { // the usual track: one pass
		same = tr.form1(&t.pp, q, pf.ql, stamp(t.viewMS), &t.reg.q.lim, s.restCopies == 0, &pf.d)
	} else {
		same = t.formWalk(rc, tr, q, s.restCopies == 0, pf)
	}
	if same {
		pf.kind = posSame
		return
	}
	pf.window()
}

// window sets pf.k from the residuals pf.d: the window that holds the
// largest, or 0 (absolute) if none does.
func (pf *posForm) window() {
	m := max(pf.d[0], pf.d[1], pf.d[2])
	k := uint(1) // m == 0: a rest marker or an exact prediction; every axis flag is 0
	if m > 0 {
		k = windowBits(m)
	}
	if k <= maxWindow {
		pf.k = k
	}
}

// formWalk is posForm's coding of a track form1 does not take: the
// general walk of the positions in flight (posTrack.formN), widening
// pf.d. It takes pf whole (ql, d) so that posForm's usual way, form1,
// passes no more than before; not inlined, so that posForm's frame holds
// none of formN's (a larger frame costs the usual way instructions).
//
//go:noinline
func (t *Table) formWalk(rc uint32, tr *posTrack, q *[3]uint32, checkSame bool, pf *posForm) bool {
	return tr.formN(&t.pp, rc, q, pf.ql, stamp(t.viewMS), &t.reg.q.lim, checkSame, &pf.d)
}

// writePosAbs writes a quantized position absolute, axis by axis.
func writePosAbs(w *bitstream.Writer, q *quant, c *[3]uint32) error {
	if n := q.bits[0] + q.bits[1] + q.bits[2]; n <= 64 {
		v := uint64(c[0]) | uint64(c[1])<<q.bits[0] | uint64(c[2])<<(q.bits[0]+q.bits[1])
		if n == 0 {
			return nil
		}
		return w.WriteBits(v, n)
	}
	at := w.BitLen()
	for a := range 3 {
		if err := w.WriteBits(uint64(c[a]), q.bits[a]); err != nil {
			w.Truncate(at)
			return err
		}
	}
	return nil
}

// writeCreate writes a create record: id, kind, class, entity, every group
// — as writeUpdate writes a group: the position, the yaw code and a
// snapshot entry's codes from what the view quantized and coded (the same
// bits as the groups' Encode), the others by their Encode.
func (t *Table) writeCreate(w *bitstream.Writer, id, rc uint32, s *slot, c *Class, width uint) error {
	if err := w.WriteBits(uint64(id)|kindCreate<<width, width+kindCreateLen); err != nil {
		return err
	}
	if err := w.WriteGamma(uint64(c.ID) + 1); err != nil {
		return err
	}
	if err := writeEntity(w, t.entityOf(rc)); err != nil {
		return err
	}
	var q *[3]uint32
	var yaw uint16
	var gc *[snapCodes]uint64
	if t.snapMode && s.si&siCarry == 0 { // latest and codesOf: one lookup of the snapshot
		sn := t.snapOf(s)
		v := &sn.vw[s.si]
		q, yaw, gc = &v.qpos, v.yawQ, &v.gc
	} else {
		q, yaw = t.latest(rc, s)
	}
	var st *State
	for i := range c.Groups {
		g := &c.Groups[i]
		var err error
		switch k := c.wk[i]; {
		case k == wkPos:
			err = writePosAbs(w, &t.reg.q, q)
		case k == wkYaw:
			err = w.WriteBits(uint64(yaw), uint(c.yawBits))
		case k >= wkCoded && gc != nil && gc[(k-wkCoded)&(snapCodes-1)] != noCode:
			if code := gc[(k-wkCoded)&(snapCodes-1)]; code>>codeShift != 0 {
				err = w.WriteBits(code&(1<<codeShift-1), uint(code>>codeShift))
			}
		default:
			if st == nil {
				st = t.encState(rc)
			}
			err = g.Encode(w, st)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// writeEntity writes an entity id as gamma(L+1) with L = bit length, then
// the L−1 bits below its leading one.
func writeEntity(w *bitstream.Writer, e uint64) error {
	l := uint(bits.Len64(e))
	if err := w.WriteGamma(uint64(l) + 1); err != nil {
		return err
	}
	if l > 1 {
		return w.WriteBits(e&^(1<<(l-1)), l-1)
	}
	return nil
}

// writeUpdate writes an update record with the given mask, of the ghost's
// latest quantized position q and yaw code yaw (Table.latest) and, if its
// state is a snapshot's, the codes gc of its coded groups (codesOf; nil:
// Encode writes them). The header and
// the fields the table codes itself or finds coded (a position window,
// yaw, a snapshot's codes) are gathered, first bit first, into runs of at
// most runMax bits, each one write (the writer's fast path): the same
// bits, one call instead of three for a usual update, and no Encode call
// nor read of the state for a coded group.
func (t *Table) writeUpdate(w *bitstream.Writer, id, rc uint32, c *Class, mask uint64, width uint, pf *posForm, q *[3]uint32, yaw uint16, gc *[snapCodes]uint64) error {
	var rv uint64 // the run: rn bits gathered, not yet written
	var rn uint
	if mask == c.DefaultMask {
		rv, rn = uint64(id)|kindDefault<<width, width+kindDefaultLen
	} else if n := width + kindMaskLen + uint(len(c.Groups)); n <= runMax {
		rv, rn = uint64(id)|kindMask<<width|mask<<(width+kindMaskLen), n
	} else {
		if err := w.WriteBits(uint64(id)|kindMask<<width, width+kindMaskLen); err != nil {
			return err
		}
		if err := w.WriteBits(mask, uint(len(c.Groups))); err != nil {
			return err
		}
	}
	var st *State
	for m := mask; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		var v uint64
		var n uint
		switch k := c.wk[i]; {
		case k >= wkCoded && gc != nil && gc[(k-wkCoded)&(snapCodes-1)] != noCode:
			code := gc[(k-wkCoded)&(snapCodes-1)]
			v, n = code&(1<<codeShift-1), uint(code>>codeShift) // Encode's field, coded at Seal
		case k == wkPos && pf.k > 0:
			v, n = posWindow(q, pf)
		case k == wkYaw:
			v, n = uint64(yaw), uint(c.yawBits) // YawGroup's Encode, quantized at the view (a snapshot's: at Seal)
		default:
			g := &c.Groups[i]
			if g.yaw { // a second yaw group
				if st == nil {
					st = t.encState(rc)
				}
				v, n = g.yc.code(st.Yaw), g.yc.bits
				break
			}
			// Written by the group's Encode, or absolute: the run goes first.
			if rn > 0 {
				if err := w.WriteBits(rv, rn); err != nil {
					return err
				}
				rv, rn = 0, 0
			}
			var err error
			if g.pos {
				err = t.writePosAbsUpdate(w, q)
			} else {
				if st == nil {
					st = t.encState(rc)
				}
				err = g.Encode(w, st)
			}
			if err != nil {
				return err
			}
			continue
		}
		if rn+n > runMax {
			if err := w.WriteBits(rv, rn); err != nil {
				return err
			}
			rv, rn = v, n
		} else {
			rv |= v << rn
			rn += n
		}
	}
	if rn > 0 {
		return w.WriteBits(rv, rn)
	}
	return nil
}

// runMax is the most bits writeUpdate gathers into one write: the
// writer's fast path takes up to 56.
const runMax = 56

// noCode's length is past runMax: writeRecord's run of the usual update
// leaves an entry's group without a code to writeUpdate by its length
// alone (a compile error otherwise).
const _ = uint(noCode>>codeShift) - runMax - 1

// writePosAbsUpdate writes the update form of a position sent absolute:
// window code 0, then the position as a create has it.
func (t *Table) writePosAbsUpdate(w *bitstream.Writer, q *[3]uint32) error {
	if err := w.WriteBits(0, kcodeBits); err != nil {
		return err
	}
	return writePosAbs(w, &t.reg.q, q)
}

// posWindow is the update form of a position sent in a window (pf.k > 0),
// as n ≤ 4 + 3·16 = 52 bits: the 4-bit window code k, then per axis a flag
// (the value differs from every possible prediction) and, if set, the k
// low bits of the value.
func posWindow(q *[3]uint32, pf *posForm) (v uint64, n uint) {
	k := pf.k
	lo := uint64(1)<<k - 1
	// The three axes written out: every update with a position runs this.
	v, n = posAxis(uint64(k), kcodeBits, pf.d[0], q[0], lo, k)
	v, n = posAxis(v, n, pf.d[1], q[1], lo, k)
	return posAxis(v, n, pf.d[2], q[2], lo, k)
}

// posAxis appends one axis of posWindow to the n bits of v: flag 0 (the
// prediction is exact, d == 0), or flag 1 and the k low bits of q.
func posAxis(v uint64, n uint, d uint64, q uint32, lo uint64, k uint) (uint64, uint) {
	if d == 0 {
		return v, n + 1
	}
	return v | (1|(uint64(q)&lo)<<1)<<(n&63), n + 1 + k // n&63: see writeUsual
}

// beginPacket reserves the transmission record of packet seq.
func (t *Table) beginPacket(seq uint64) int {
	i := int(t.pktHead+t.pktLen) & (len(t.pkts) - 1)
	t.pkts[i] = pktRec{seq: uint32(seq), start: uint32(t.entHead + t.entLen), t: stamp(t.viewMS)}
	t.pkEnt0 = t.entLen
	return i
}

// addEntry appends a record of the ghost of record rc to the packet being
// written.
func (t *Table) addEntry(rc uint32, kind uint8, mask uint64) {
	// uint32: the 32-bit sum needs no sign extension to index. The store
	// has room (fill made it: entRoom).
	i := uint32(t.entHead + t.entLen)
	t.ents[i] = mkEntry(rc, kind, mask)
	if t.wide {
		t.rare.wd.entHi[i] = mask >> entMaskBits
	}
	t.entLen++ // the packet's count is taken at endPacket: entLen − pkEnt0
}

// endPacket keeps the record if the packet carried anything.
func (t *Table) endPacket(i int) {
	t.pkts[i].n = uint16(t.entLen - t.pkEnt0)
	if t.pkts[i].n > 0 {
		t.pktLen++
	}
}
