package ghost

import (
	"math/bits"
	"slices"
)

// Position coding in updates (docs/protocol.md §6 § Position).
//
// Both ends predict the new position by extrapolating linearly from the two
// newest-stamped positions the client has received before the update's
// stamp, and the update carries only the k low bits of each axis's residual:
// the client takes the value nearest its prediction with those low bits. An
// entity walking a straight line costs a few bits per axis instead of 19.
//
// The server does not know exactly which positions the client holds: packets
// in flight may or may not have arrived, in any order. It knows the ones
// delivered for sure (fates) and the ones still in flight, so it enumerates
// every pair the client could be predicting from and picks k so that the new
// value lies within the window around every one of those predictions. With
// nothing in flight there is a single pair, and the coding is exact
// dead-reckoning; under loss and reordering the window widens just enough.
//
// This relies on notify's fates being exact (a packet reported dropped was
// never processed): a false "dropped" could desynchronise the prediction.
// notify's two documented corners (WindowEvicted, ForcedDrops) need a return
// path dead for 256 packets or 1024 packets in flight; the connection is gone
// by then.

// posRingLen bounds the positions of one ghost in flight at once; a ghost
// with this many waits (Stats.PosDeferred) before its position is sent again.
// It also bounds how far back a late packet's reference can lie, which sets
// the client's history length (HistoryLen ≥ posRingLen + 2).
const posRingLen = 11

// predictMaxMS caps linear extrapolation: a pair more than this apart, or an
// update more than this after the newer value, predicts "no motion".
const predictMaxMS = 1000

// stamp is a view time in ms, kept to 32 bits: only differences matter
// (wrap-safe while they stay under 24 days).
type stamp uint32

// sub is s − o in ms.
func (s stamp) sub(o stamp) int64 { return int64(int32(s - o)) }

// pstamp is a position's stamp as its track and the pool keep it: the low
// 16 bits of the view time in ms, as the wire sends a section's stamp
// (docs/protocol.md §6.2). A difference of two is exact while they lie
// within 32,767 ms of each other: rebasePositions keeps every stamp a
// table holds within posPinAge + posRebaseSpan (28.7 s) of the view, and
// a fate's stamp matches one only if it is that recent (posKey).
type pstamp uint16

// sub is s − o in ms (|s − o| < 2^15).
func (s pstamp) sub(o pstamp) int64 { return int64(int16(s - o)) }

// at is s on t's line: the stamp within 32,767 ms of t whose low 16 bits
// are s (what the walks' posVals take).
func (s pstamp) at(t stamp) stamp { return t + stamp(int32(int16(s-pstamp(t)))) }

// posVal is a quantized position and the stamp (view time, ms) it is from.
type posVal struct {
	t stamp
	q [3]uint32
}

// posTrack is the server's knowledge of what the client may hold for one
// ghost's position: the two newest-stamped positions known delivered (the
// client certainly has them) and the positions in flight (it may have any
// subset of them). The two oldest in flight are the track's own (fq and
// posPool.fq1[rc], their stamps ft); any newer ones are a circular list of nodes in the table's posPool,
// reached through the newest (tail), whose next is the oldest of the list
// (the third oldest in flight). A server whose fates come within a view
// or two has one or two in flight when it writes the next (the previous
// packet's, and the new one until that fate comes), so writing a
// position, coding the next and their fates touch the track alone, not a
// pool node in a line of its own (written at one packet, read at the next
// and at the fate, each a cache miss on the server, where every table is
// cold when its turn comes). Oldest first, because fates come mostly in
// send order: the one a fate resolves is then fq, and the rest move up.
// A position is named by its stamp, not by the packet that carried it: a
// ghost's position goes out at most once per view, so its stamps in flight
// are distinct, and each packet keeps its view stamp.
//
// With three or more in flight, ft[1] holds the list's tail and the
// tail node the second oldest's stamp (posNode.ft1, the node's spare 16
// bits): the track's room for a tail went to the 16-bit stamps.
//
// Positions are packed as in the pool (posPool.packLo; bits 64 and up, for
// bounds that need them, in posWide.dhi by record), and the older delivered
// one's stamp is its distance below the newer's, capped at gapFar. The
// stamps are 16 bits (pstamp), and the counts and the gap share the meta
// word. The second oldest in flight is apart, in the pool's per-record fq1
// (one a fate late: the usual record and fate touch neither): 32 bytes,
// half a line, so every track lies in one line (40, with it inline, took
// 1.375 lines a walk; 48 with a 32-bit stamp each and the tail a field of
// its own, before). TestPosTrackHotBytes holds this.
// A track's methods take its ghost's record rc (its index in Table.pos),
// which keys what the pool keeps of it apart (fq1, wx.dhi).
// The zero posTrack is empty.
type posTrack struct {
	// The stamps and meta first, then the delivered pair, then the oldest
	// in flight: what the usual record and fate read and write (a
	// server's track has at most one in flight).
	t1 pstamp // dq[1]'s stamp
	// ft[0] is fq's stamp; ft[1] fq1[rc]'s (n = 2) or, with n > 2, the
	// pool node of the newest in flight (the list's tail; its next is the
	// list's oldest, the third oldest in flight), which keeps fq1[rc]'s
	// stamp (second).
	ft [2]pstamp
	// meta holds, from bit 0: the gap (10 bits: dq[1]'s stamp minus
	// dq[0]'s, in ms, at most gapFar), dn (2 bits: delivered values held)
	// and n (4 bits: positions in flight, at most posRingLen).
	meta uint16
	dq   [2]uint64 // dq[1] newest delivered, dq[0] the one before it (if dn == 2): packed
	fq   uint64    // the oldest in flight (n ≥ 1), packed; the next (n ≥ 2) is posPool.fq1[rc]
}

// ownFlight is how many of a ghost's positions in flight its track holds
// itself (the oldest); the pool holds the rest.
const ownFlight = 2

// This fails to compile unless ownFlight is 2, which unpackAll
// writes out.
const _ = uint(ownFlight-2) + uint(2-ownFlight)

// The fields of posTrack.meta.
const (
	metaGapBits = 10
	metaDnShift = metaGapBits
	metaNShift  = metaDnShift + 2
	metaGap     = 1<<metaGapBits - 1
	metaN1      = 1 << metaNShift // n's unit
)

// maxPoolNodes bounds a table's positions in flight (at most one a record
// in flight: MaxRecordsInFlight ≤ maxPoolNodes), so a node index is 16 bits.
const maxPoolNodes = 1 << 15

func (p *posTrack) n() uint8   { return uint8(p.meta >> metaNShift) }
func (p *posTrack) dn() uint8  { return uint8(p.meta>>metaDnShift) & 3 }
func (p *posTrack) gap() int64 { return int64(p.meta & metaGap) }

// setDelivered sets dn and the gap, n unchanged.
func (p *posTrack) setDelivered(dn uint8, gap int64) {
	p.meta = p.meta&^(1<<metaNShift-1) | uint16(dn)<<metaDnShift | uint16(gap)
}

// tail is the pool node of the newest in flight (n > ownFlight).
func (p *posTrack) tail() int32 { return int32(p.ft[1]) }

// head is the pool node of the list's oldest, the third oldest in flight
// (n > ownFlight).
func (p *posTrack) head(x *posPool) int32 { return x.nodes[p.tail()].next }

// second is fq1[rc]'s stamp (n ≥ 2): the track's, or the tail node's.
func (p *posTrack) second(x *posPool) pstamp {
	if p.n() > ownFlight {
		return x.nodes[p.tail()].ft1
	}
	return p.ft[1]
}

// ownStamp is the k-th oldest position's stamp (k < min(n, ownFlight)).
func (p *posTrack) ownStamp(x *posPool, k int) pstamp {
	if k == 0 {
		return p.ft[0]
	}
	return p.second(x)
}

// own is the k-th oldest position in flight (k < min(n, ownFlight)): the
// track's own, its stamp on t's line.
func (p *posTrack) own(x *posPool, rc uint32, k int, t stamp) posVal {
	v := posVal{t: p.ownStamp(x, k).at(t)}
	var hi uint32
	if x.wide {
		hi = x.wx.dhi[rc][2+k]
	}
	x.unpackQ(p.ownQ(x, rc, k), hi, &v.q)
	return v
}

// ownQ is the k-th oldest position in flight, packed (k < min(n,
// ownFlight)): the track's fq, or the second's in the pool's fq1.
func (p *posTrack) ownQ(x *posPool, rc uint32, k int) uint64 {
	if k == 0 {
		return p.fq
	}
	return x.fq1At(rc)
}

// gapFar caps posTrack.gap: the older delivered value is more than
// predictMaxMS below the newer. Its exact stamp does not matter then: the
// pair predicts no motion, and so does every pair of the newer with a value
// in flight older than predictMaxMS below it, so the window is the same
// whichever of those the client holds as its older value (its rule keeps
// the newer of two such; the track may keep the other).
const gapFar = predictMaxMS + 1

// posNode is one in-flight position in a posPool list (a ghost's third
// oldest in flight or newer): 16 bytes, four to a cache line and never
// across two. The position is packed (posPool.packLo, packHi): the three
// axes' codes take bits[0]+bits[1]+bits[2] bits, 54 for the default 4 km
// × 512 m × 4 km at 1 cm; bounds that need more than 64 keep the rest in
// posPool.hi.
type posNode struct {
	t    pstamp
	ft1  pstamp // in a list's tail: the stamp of its track's second (posPool.fq1) (posTrack.second)
	next int32  // next newer in flight of the same ghost; the newest's is the oldest
	q    uint64 // the position, packed: its low 64 bits
}

// posPool holds the in-flight positions of one table's ghosts past each
// ghost's two oldest (the track's own), reused through a bitmap of the
// free nodes: it grows to the most such positions the table ever had in
// flight at once (none while fates come within two packets).
//
// A bitmap, not a free list: taking a node from a list reads the node, a
// cache miss on the server, where every table is cold when its turn comes
// (2.7 % of its CPU was that one load); the bitmap is a word per 64 nodes,
// and the node taken is only written (a store, which does not stall).
type posPool struct {
	nodes []posNode
	// free has bit i%64 of word i/64 set while node i < len(nodes) is free;
	// its length covers cap(nodes).
	free []uint64
	wx   *posWide // wide positions' high words: nil unless wide (a pointer: the Table stays within its size class)
	// fq1 holds each ghost's second oldest position in flight, packed (its
	// track's n ≥ 2; the oldest is the track's fq): apart from the track,
	// so the track is 32 bytes, half a line, and the usual record and fate
	// (one in flight) touch one line of it, not 1.375 (a 40-byte track
	// with it inline: three of eight straddled two lines). Made at the
	// first second position in flight (setFq1) and given back by trim
	// once none was in flight for two checks: on a server whose fates
	// come before the next write a track holds one position in flight at
	// most (TestFq1OnlyWhileLate).
	//
	// Two forms (fq1At, fq1Ref, setFq1, dropFq1). Sparse first (fq1Log >
	// 0, len 0: slots and a byte a record, secs): with fates a packet late,
	// at the server's shape at 2,000 players, ≈ 14 of 88 ids hold a
	// second at once, 21 at most (TestFq1ServerShape), so 8 bytes a record
	// kept 736 bytes for what 32 slots and 88 bytes hold in 368. Dense
	// (fq1Log 0: fq1[rc], as long as the per-record arrays, Table.resizeRecords)
	// once the slots would take more room than that: where nearly every
	// ghost holds a second (the tables benchmarks' fates one or three
	// late). len 0 makes pushOwn and usualRun leave the sparse form to
	// pushLo and resolveOldest2Sparse by the test they make of the dense
	// one's length anyway.
	fq1 []uint64
	// The counts 16-bit (at most maxPoolNodes nodes, 2^15, in at most
	// 2^9 words of free): the Table keeps to its size class.
	used uint16 // nodes in lists (not free; fewer than MaxRecordsInFlight)
	hw   uint16 // most nodes used at once since the last trim
	hw1  uint16 // hw of the trim before (Table.trim)
	scan uint16 // every word of free below it is zero
	// The packing: axis a at bit sh[a], sh[3] the bits of axis 2; wide:
	// more than 64 bits (set by init).
	sh   [4]uint8
	wide bool
	// fq1Used, fq1Used1: a second position in flight was pushed since the
	// last trim, or in the one before (the bytes after wide: the Table
	// stays within its size class).
	fq1Used, fq1Used1 bool
	// fq1Log: fq1 is sparse, 1<<fq1Log slots (secs); 0: dense
	// or not made. The Table's last spare byte.
	fq1Log uint8
}

// setFq1 sets ghost rc's second position in flight to lo, making fq1 on
// its first use (sparse).
func (x *posPool) setFq1(rc uint32, lo uint64) {
	x.fq1Used = true
	x.storeFq1(rc, lo)
}

// storeFq1 is setFq1 without marking fq1 used (a promotion: the ghost
// held a second already).
func (x *posPool) storeFq1(rc uint32, lo uint64) {
	if int(rc) < len(x.fq1) {
		x.fq1[rc] = lo
		return
	}
	x.storeFq1Slow(rc, lo)
}

//go:noinline
func (x *posPool) storeFq1Slow(rc uint32, lo uint64) {
	switch {
	case x.fq1Log != 0:
		x.secPut(rc, lo)
	case x.fq1 == nil:
		x.makeSecs(secMinLog, int(rc)+1+int(rc)/8)
		x.secPut(rc, lo)
	default: // dense, rc past its end: room for rc and an eighth more
		x.makeFq1(roomFor(max(int(rc)+1+int(rc)/8, len(x.fq1)+len(x.fq1)/8, 16), 8))
		x.fq1[rc] = lo
	}
}

// fq1At is ghost rc's second position in flight (its track's n ≥ 2):
// dense inline, sparse by a call (secGet).
func (x *posPool) fq1At(rc uint32) uint64 {
	if int(rc) < len(x.fq1) {
		return x.fq1[rc]
	}
	return x.secGet(rc)
}

// fq1Ref is the place of ghost rc's second position in flight (its
// track's n ≥ 2): dense inline, sparse by a call (secRef). The general
// fate and the ring's drop read and write it through this one pointer,
// so the dense form costs them what its index did.
func (x *posPool) fq1Ref(rc uint32) *uint64 {
	if int(rc) < len(x.fq1) {
		return &x.fq1[rc]
	}
	return x.secRef(rc)
}

// dropFq1 forgets ghost rc's second position in flight (its track keeps
// none now): the sparse form's entry goes; the dense form's stays, unread.
func (x *posPool) dropFq1(rc uint32) {
	if x.fq1Log != 0 {
		x.secDel(rc)
	}
}

func (x *posPool) makeFq1(n int) {
	f := make([]uint64, n)
	copy(f, x.fq1)
	x.fq1 = f
}

// The sparse form of fq1 (posPool.fq1Log > 0): a slab of S = 1<<fq1Log
// values (S ≤ secMaxSlots) and a byte a record naming its value's slot (slot
// + 1; 0: none), in fq1's words (fq1[:cap]): the values [0, S), a free
// bitmap of S bits (one word a 64), a word of counts (secMeta), then the
// records' bytes, eight a word, for the records up to the largest held and an
// eighth more. A second a packet late is one byte and one slot set at its
// write and cleared at its fate (no hashing, no probing: ≈ 5 times fewer
// instructions than an open-addressed map by record); 1 byte a record and 8 a
// second in flight, not 8 a record.
const (
	secMinLog   = 4   // 16 slots
	secMaxSlots = 128 // a slot's byte holds slot + 1
)

// secMeta's fields: the seconds held, the most held since the last trim,
// and in the trim's check before (16 bits each).
const (
	secN   = 0
	secHW  = 16
	secHW1 = 32
)

func secField(m uint64, f uint) int { return int(m >> f & 0xffff) }

// secs is the sparse form's words and where its parts start: the free
// bitmap (at S), the counts and the records' bytes.
func (x *posPool) secs() (w []uint64, free, meta, ids int) {
	free = 1 << (x.fq1Log & 7)
	meta = free + 1 + free>>7 // a bitmap word a 64 slots (≤ secMaxSlots)
	return x.fq1[:cap(x.fq1)], free, meta, meta + 1
}

// secSlot is ghost rc's slot + 1 (0: none).
func (x *posPool) secSlot(rc uint32) int {
	w, _, _, ids := x.secs()
	if i := ids + int(rc>>3); i < len(w) {
		return int(uint8(w[i] >> (rc & 7 * 8)))
	}
	return 0
}

func secSetSlot(w []uint64, ids int, rc uint32, b int) {
	i, sh := ids+int(rc>>3), rc&7*8
	w[i] = w[i]&^(0xff<<sh) | uint64(b)<<sh
}

// makeSecs makes fq1 an empty sparse form of 1<<log slots with bytes for
// records below n.
func (x *posPool) makeSecs(log uint8, n int) {
	s := 1 << log
	x.fq1 = make([]uint64, 0, s+(s+63)/64+1+(n+7)/8)
	x.fq1Log = log
	w, free, _, _ := x.secs()
	for i := range s {
		w[free+i/64] |= 1 << (i % 64)
	}
}

// secGet is ghost rc's second (held).
func (x *posPool) secGet(rc uint32) uint64 { return *x.secRef(rc) }

// secRef is ghost rc's second's place (held).
func (x *posPool) secRef(rc uint32) *uint64 {
	w, _, _, _ := x.secs()
	return &w[x.secSlot(rc)-1]
}

// secPut sets ghost rc's second to lo, taking a slot for a new one (more
// room, or the dense form, when none is free or the record has no byte).
func (x *posPool) secPut(rc uint32, lo uint64) {
	w, free, meta, ids := x.secs()
	if j := ids + int(rc>>3); j < len(w) {
		if b := int(uint8(w[j] >> (rc & 7 * 8))); b != 0 {
			w[b-1] = lo
			return
		}
		for f := free; f < meta; f++ {
			if m := w[f]; m != 0 {
				i := uint(bits.TrailingZeros64(m))
				w[f] = m &^ (1 << i)
				slot := (f-free)<<6 + int(i)
				w[slot] = lo
				secSetSlot(w, ids, rc, slot+1)
				c := w[meta]
				n := secField(c, secN) + 1
				w[meta] = c&^(0xffff<<secN|0xffff<<secHW) | uint64(n)<<secN | uint64(max(n, secField(c, secHW)))<<secHW
				return
			}
		}
	}
	x.growSecs(rc)
	x.storeFq1(rc, lo)
}

// secDel frees ghost rc's second's slot, if it holds one.
func (x *posPool) secDel(rc uint32) {
	if b := x.secSlot(rc); b != 0 {
		x.secFree(rc, b)
	}
}

// secFree frees slot b − 1, ghost rc's.
func (x *posPool) secFree(rc uint32, b int) {
	w, free, meta, ids := x.secs()
	secSetSlot(w, ids, rc, 0)
	u := uint(b - 1)
	w[free+int(u>>6)] |= 1 << (u & 63)
	w[meta] -= 1 << secN
}

// secIDs is how many records the sparse form has bytes for.
func (x *posPool) secIDs() int {
	w, _, _, ids := x.secs()
	return 8 * (len(w) - ids)
}

// growSecs makes room in the sparse form for ghost rc's second: bytes
// for rc and an eighth more past it if it has none (a sparse form only
// ever moves to more records: their bytes are an eighth of the dense form's
// room), twice the slots if none is free, or then the dense form if that
// takes no more heap (or more slots than a byte names would be needed).
func (x *posPool) growSecs(rc uint32) {
	w, _, meta, _ := x.secs()
	log := x.fq1Log
	n := max(x.secIDs(), int(rc)+1+int(rc)/8)
	if secField(w[meta], secN) < 1<<log {
		x.rebuildSecs(log, n)
		return
	}
	log++
	s := 1 << log
	dense := roomFor(max(n, 16), 8)
	if s > secMaxSlots || heapBlock(dense*8) <= heapBlock((s+(s+63)/64+1+(n+7)/8)*8) {
		f := make([]uint64, dense)
		x.secEach(func(rc uint32, v uint64) { f[rc] = v })
		x.fq1, x.fq1Log = f, 0
		return
	}
	x.rebuildSecs(log, n)
}

// secEach calls fn for each second held.
func (x *posPool) secEach(fn func(rc uint32, v uint64)) {
	w, _, _, ids := x.secs()
	for i := ids; i < len(w); i++ {
		for k, m := 0, w[i]; m != 0; k, m = k+1, m>>8 {
			if b := uint8(m); b != 0 {
				fn(uint32((i-ids)*8+k), w[b-1])
			}
		}
	}
}

// rebuildSecs moves the sparse form into one of 1<<log slots (room for
// those held) with bytes for records below n (past every record held), its counts
// kept.
func (x *posPool) rebuildSecs(log uint8, n int) {
	w, _, meta, _ := x.secs()
	c := w[meta]
	old := posPool{fq1: x.fq1, fq1Log: x.fq1Log}
	x.makeSecs(log, n)
	old.secEach(func(rc uint32, v uint64) { x.secPut(rc, v) })
	nw, _, nmeta, _ := x.secs()
	nw[nmeta] = c
}

// trimSecs shrinks the sparse form to the fewest slots that hold its most
// use in the last two checks and a quarter more, and its bytes to the records
// up to the largest held and an eighth more, if that is a quarter fewer
// (slots grow only when all are taken, so a form at its steady use never
// moves), and starts the next check's count.
func (x *posPool) trimSecs() {
	w, _, meta, _ := x.secs()
	c := w[meta]
	hw := max(secField(c, secHW), secField(c, secHW1))
	log := uint8(secMinLog)
	for 1<<log < hw+hw/4 {
		log++
	}
	w[meta] = uint64(secField(c, secN))<<secN | uint64(secField(c, secN))<<secHW | uint64(secField(c, secHW))<<secHW1
	top := -1
	x.secEach(func(rc uint32, _ uint64) { top = max(top, int(rc)) })
	n := top + 1 + top/8
	if log < x.fq1Log || n+n/4 < x.secIDs() {
		x.rebuildSecs(min(log, x.fq1Log), max(n, 8))
	}
}

// posWide holds the bits 64 and up of packed positions, for bounds whose
// codes take more than 64 bits.
type posWide struct {
	hi []uint32 // each node's (same index as posPool.nodes)
	// dhi is each record's: its delivered positions' (posTrack.dq, [0] and
	// [1]) and its own positions in flight (posTrack.fq, [2] and [3]),
	// grown on use.
	dhi [][4]uint32
}

// init sets the packing for q's codes.
func (x *posPool) init(q *quant) {
	x.sh = [4]uint8{0, uint8(q.bits[0]), uint8(q.bits[0] + q.bits[1]), uint8(q.bits[2])}
	x.wide = q.wide()
	if x.wide && x.wx == nil {
		x.wx = new(posWide)
	}
}

// wide reports whether q's three codes take more than 64 bits packed
// (posPool.packLo, packHi).
func (q *quant) wide() bool { return q.bits[0]+q.bits[1]+q.bits[2] > 64 }

// packLo is the low 64 bits of c packed. An axis's code is at most 31
// bits, so sh[2] ≤ 62 and only z can cross bit 64 (the &63 spares Go's
// test for a shift past the width).
func (x *posPool) packLo(c *[3]uint32) uint64 {
	return uint64(c[0]) | uint64(c[1])<<(x.sh[1]&63) | uint64(c[2])<<(x.sh[2]&63)
}

// packHi is bits 64 and up of c packed: 0 unless wide.
func (x *posPool) packHi(c *[3]uint32) uint32 {
	if !x.wide {
		return 0
	}
	return uint32(uint64(c[2]) >> ((64 - x.sh[2]) & 63)) // wide: sh[2] > 33
}

// unpack sets v to node i's position and stamp (on t's line).
func (x *posPool) unpack(i int32, v *posVal, t stamp) {
	nd := &x.nodes[i]
	var hi uint32
	if x.wide {
		hi = x.wx.hi[i]
	}
	v.t = nd.t.at(t)
	x.unpackQ(nd.q, hi, &v.q)
}

// unpackQ sets c to the position packed as lo and hi (pack).
func (x *posPool) unpackQ(lo uint64, hi uint32, c *[3]uint32) {
	z := uint32(lo >> (x.sh[2] & 63))
	if x.wide { // sh[2] > 32: the shift is < 32
		z |= hi << ((64 - x.sh[2]) & 31)
	}
	m0, m1, m2 := x.masks()
	c[0] = uint32(lo) & m0
	c[1] = uint32(lo>>x.sh[1]) & m1
	c[2] = z & m2
}

// masks are the three axes' code masks (an axis has 31 bits at most: the
// &31 spares Go's test for a shift past the width).
func (x *posPool) masks() (uint32, uint32, uint32) {
	return 1<<(x.sh[1]&31) - 1, 1<<((x.sh[2]-x.sh[1])&31) - 1, 1<<(x.sh[3]&31) - 1
}

// value is node i's position and stamp (on t's line).
func (x *posPool) value(i int32, t stamp) posVal {
	var v posVal
	x.unpack(i, &v, t)
	return v
}

// get takes the lowest free node, else a new one. The lowest: the
// positions one packet writes then sit side by side, in the nodes the
// fates of an earlier packet freed, and those fates walk them in order.
// The usual node is in the word the scan starts at: pushLo takes it
// itself, and calls get for the rest.
func (x *posPool) get() int32 {
	x.used++
	x.hw = max(x.hw, x.used)
	for w := int32(x.scan); int(w) < len(x.free); w++ {
		if b := x.free[w]; b != 0 {
			i := int32(bits.TrailingZeros64(b))
			x.free[w] = b &^ (1 << i)
			x.scan = uint16(w)
			return w<<6 | i
		}
	}
	x.scan = uint16(len(x.free))
	n := len(x.nodes)
	if n == cap(x.nodes) {
		// By an eighth, not append's doubling: the room past the use is
		// heap too (trim gives back what a burst left only once it is
		// more than a quarter of the use).
		x.resize(n + max(n/8, 16))
	}
	x.nodes = x.nodes[:n+1]
	x.nodes[n] = posNode{}
	if x.wide {
		x.wx.hi = x.wx.hi[:n+1]
	}
	return int32(n)
}

// resize moves the nodes (and their high words) into room for at least n
// ≥ len(nodes), free bits too. The room is what the allocator's size class
// holds (slices.Grow): the heap spends those bytes either way.
func (x *posPool) resize(n int) {
	ns := slices.Grow([]posNode(nil), n)[:len(x.nodes)]
	copy(ns, x.nodes)
	x.nodes = ns
	if w := (cap(ns) + 63) / 64; w > len(x.free) {
		f := make([]uint64, w)
		copy(f, x.free)
		x.free = f
	}
	if x.wide {
		hi := make([]uint32, len(x.wx.hi), cap(ns))
		copy(hi, x.wx.hi)
		x.wx.hi = hi
	}
}

func (x *posPool) put(i int32) {
	x.free[i>>6] |= 1 << (i & 63)
	x.scan = min(x.scan, uint16(i>>6))
	x.used--
}

// compact moves every ghost's in-flight positions, list by list, into a
// pool of room n (≥ used), no node free: node indices change, so every
// track's list and tail are rewritten.
func (x *posPool) compact(pos []posTrack, n int) {
	ns := slices.Grow([]posNode(nil), max(n, int(x.used)))
	var hi []uint32
	if x.wide {
		hi = make([]uint32, 0, cap(ns))
	}
	for rc := range pos {
		p := &pos[rc]
		n := p.n()
		if n <= ownFlight {
			continue // the track holds them itself
		}
		first := int32(len(ns))
		for i, k := p.head(x), uint8(ownFlight); k < n; i, k = x.nodes[i].next, k+1 {
			ns = append(ns, x.nodes[i])
			if x.wide {
				hi = append(hi, x.wx.hi[i])
			}
			ns[len(ns)-1].next = int32(len(ns)) // the next copied
		}
		ns[len(ns)-1].next = first
		p.ft[1] = pstamp(len(ns) - 1) // the tail (its ft1 copied with it)
	}
	x.nodes = ns
	if x.wide {
		x.wx.hi = hi
	}
	x.free = make([]uint64, (cap(ns)+63)/64)
	x.scan = uint16(len(x.free))
}

// moveRecord moves what the pool keeps apart by record of the track p
// (moved from record from to record to: Table.moveRecord) to its new
// record: its second in flight (fq1) and, for wide bounds, the high bits
// of its own positions (wx.dhi).
func (x *posPool) moveRecord(p *posTrack, from, to uint32) {
	if p.n() >= ownFlight {
		v := x.fq1At(from)
		x.dropFq1(from)
		x.storeFq1(to, v)
	}
	if x.wide && int(from) < len(x.wx.dhi) {
		*x.deliveredHi(to) = x.wx.dhi[from]
	}
}

// release is reset for ghost rc's track in a table: its second in flight,
// if any, goes from a sparse fq1 too.
func (p *posTrack) release(x *posPool, rc uint32) {
	if p.n() >= ownFlight {
		x.dropFq1(rc)
	}
	p.reset(x)
}

// reset empties the track, its list's nodes freed; a second in flight in
// a sparse fq1 stays (release).
func (p *posTrack) reset(x *posPool) {
	if n := p.n(); n > ownFlight {
		for i, k := p.head(x), uint8(ownFlight); k < n; k++ {
			nx := x.nodes[i].next
			x.put(i)
			i = nx
		}
	}
	*p = posTrack{}
}

// delivered returns ghost rc's newest delivered value (k = 1, dn ≥ 1) or
// the one before it (k = 0, dn = 2; stamped gapFar below the newest when
// it is farther), its stamp on t's line.
func (p *posTrack) delivered(x *posPool, rc uint32, k int, t stamp) posVal {
	v := posVal{t: p.t1.at(t)}
	if k == 0 {
		v.t -= stamp(p.gap())
	}
	var hi uint32
	if x.wide {
		hi = x.wx.dhi[rc][k]
	}
	x.unpackQ(p.dq[k], hi, &v.q)
	return v
}

// unpackDelivered sets dv to ghost rc's delivered values as delivered
// does (dv[0] meaningless unless dn = 2; dn > 0), unpacking both at once.
func (p *posTrack) unpackDelivered(x *posPool, rc uint32, dv *[2]posVal, t stamp) {
	if x.wide {
		dv[1] = p.delivered(x, rc, 1, t)
		if p.dn() == 2 {
			dv[0] = p.delivered(x, rc, 0, t)
		}
		return
	}
	s1, s2 := x.sh[1]&63, x.sh[2]&63
	m0, m1, m2 := x.masks()
	lo := p.dq[1]
	v := &dv[1]
	v.t = p.t1.at(t)
	v.q[0] = uint32(lo) & m0
	v.q[1] = uint32(lo>>s1) & m1
	v.q[2] = uint32(lo>>s2) & m2
	if p.dn() < 2 {
		return
	}
	lo = p.dq[0]
	v = &dv[0]
	v.t = dv[1].t - stamp(p.gap())
	v.q[0] = uint32(lo) & m0
	v.q[1] = uint32(lo>>s1) & m1
	v.q[2] = uint32(lo>>s2) & m2
}

// The stamps' rebase (rebasePositions). A view in a new posRebaseSpan
// block of ms (every 8.2 s at a steady clock, and on any jump) looks at
// every track: the newest delivered value older than posPinAge is made
// posPinAge old (the older one moves with it: gapFar at most below), and a
// position in flight for more than posFlightAge is forgotten. Until the
// next rebase the view moves on by less than posRebaseSpan, so every
// stamp a table holds is within posPinAge + posRebaseSpan + gapFar
// (29.7 s) of the view, and their 16-bit differences are exact.
//
// Why the answers stay the same. A pinned value's pairs predict no motion
// before and after (it is more than predictMaxMS before the view and
// before every position still in flight: posPinAge − posFlightAge >
// predictMaxMS), and it keeps its place in the order of stamps. A
// forgotten position is more than posFlightAge − predictMaxMS old at any
// later update, so each pair with it predicts its newer value: those
// answers are those of the pairs the track keeps, unless the client may
// hold it as its newest (no value delivered older, or none delivered):
// then the track forgets what it knew delivered too, and the next update
// is absolute (its stamps would not tell the client's newest). Such a
// packet is more than 16 s in flight (its fate late by that much); the
// client's own stamps hold only within 32.7 s (§6.2).
const (
	posRebaseShift = 13
	posRebaseSpan  = 1 << posRebaseShift // ms
	posPinAge      = 20480               // ms
	posFlightAge   = 16384               // ms
)

// This fails to compile unless the rebase keeps every stamp
// within 2^15 ms of the view, and a pinned value more than predictMaxMS
// older than every position still in flight.
const _ = uint(1<<15-1-(posPinAge+posRebaseSpan+gapFar)) + uint(posPinAge-posFlightAge-predictMaxMS-1)

// posKey is what a fate of a packet of the view stamped st, read at the
// view stamped view, matches in flight: st's 16 bits, or, when the packet
// is 2^15 ms or more before the view, 16 bits no stamp in flight has
// (every position that old is forgotten, and those in flight are less
// than posFlightAge + posRebaseSpan before the view: rebasePositions),
// 2^15 before the view's.
func posKey(view, st stamp) pstamp {
	if uint32(view-st) >= 1<<15 {
		return pstamp(view) - 1<<15
	}
	return pstamp(st)
}

// rebasePositions rebases every track's stamps for the view of ms, the
// view before it of old (see posRebaseShift), and lets a ghost whose
// positions in flight it forgot send its position again.
func (t *Table) rebasePositions(old, ms int64) {
	// A stamp's age at the new view: at the old one (< 2^15 ms, exact in
	// 16 bits), and the jump (any length).
	r := posRebase{old: pstamp(old), jump: ms - old, v: pstamp(ms)}
	for i := range t.pos {
		if t.pos[i].rebase(&t.pp, uint32(i), &r) {
			t.slots[i].set(flPosFull, t.pos[i].full())
		}
	}
}

// posRebase is one rebase's views: the old's stamp, the new one's, and
// the ms between them.
type posRebase struct {
	old, v pstamp
	jump   int64
}

// age is how long before the new view s is (s held at the old view).
func (r *posRebase) age(s pstamp) int64 { return int64(uint16(r.old-s)) + r.jump }

// rebase pins the delivered values and forgets the positions in flight as
// rebasePositions says, for the rebase r. It reports whether it forgot
// any.
func (p *posTrack) rebase(x *posPool, rc uint32, r *posRebase) bool {
	dn := p.dn()
	forgot := false
	for p.n() > 0 && r.age(p.ft[0]) > posFlightAge { // oldest first
		if dn == 0 || p.ft[0].sub(p.t1) > 0 {
			dn = 0 // the client's newest may be this one
		}
		p.dropOldest(x, rc)
		forgot = true
	}
	if dn == 0 {
		p.meta &^= 1<<metaNShift - 1 // forgets the delivered too
	} else if r.age(p.t1) > posPinAge {
		p.t1 = r.v - posPinAge
	}
	return forgot
}

func (p *posTrack) full() bool { return p.n() == posRingLen }

// age1 is how long before the view stamped t the newest delivered value
// is (dn > 0).
func (p *posTrack) age1(t stamp) int64 { return pstamp(t).sub(p.t1) }

// push records ghost rc's position q stamped t (newer than every one in
// flight). Fields are stored one by one: building a node as a value first
// costs a store-forwarding stall on every record.
func (p *posTrack) push(x *posPool, rc uint32, t stamp, q *[3]uint32) {
	p.pushLo(x, rc, t, q, x.packLo(q))
}

// take takes a free node: get's usual case written out, a free node in
// the scan's word.
func (x *posPool) take() int32 {
	if w := int32(x.scan); uint(w) < uint(len(x.free)) && x.free[w] != 0 {
		b := x.free[w]
		i := int32(bits.TrailingZeros64(b))
		x.free[w] = b &^ (1 << i)
		x.used++
		x.hw = max(x.hw, x.used)
		return i | w<<6
	}
	return x.get()
}

// pushLo is push for a caller that has q packed already (lo: packLo).
func (p *posTrack) pushLo(x *posPool, rc uint32, t stamp, q *[3]uint32, lo uint64) {
	n := p.n()
	if n == posRingLen { // callers check full(); never lose the newest
		p.dropOldest(x, rc)
		n--
	}
	p.meta += metaN1
	if n < ownFlight { // the track's own
		if n == 0 {
			p.fq, p.ft[0] = lo, pstamp(t)
		} else {
			x.setFq1(rc, lo)
			p.ft[1] = pstamp(t)
		}
		if x.wide {
			x.deliveredHi(rc)[2+n] = x.packHi(q)
		}
		return
	}
	i := x.take()
	nd := &x.nodes[i]
	nd.t, nd.q = pstamp(t), lo
	if x.wide {
		x.wx.hi[i] = x.packHi(q)
	}
	if n == ownFlight { // the list's first: it keeps fq1[rc]'s stamp
		nd.next, nd.ft1 = i, p.ft[1]
	} else {
		tl := &x.nodes[p.tail()]
		nd.next, tl.next = tl.next, i
		nd.ft1 = tl.ft1
	}
	p.ft[1] = pstamp(i)
}

// pushOwn is pushLo's usual case, small enough to inline into the
// record's commit: the track's own room, narrow bounds. It reports false,
// having done nothing, otherwise.
func (p *posTrack) pushOwn(x *posPool, rc uint32, t stamp, lo uint64) bool {
	n := p.n()
	if n >= ownFlight || x.wide {
		return false
	}
	if n == 0 {
		p.fq, p.ft[0] = lo, pstamp(t)
	} else {
		if int(rc) >= len(x.fq1) { // fq1 not made yet, or sparse: pushLo's
			return false
		}
		x.fq1[rc], p.ft[1] = lo, pstamp(t)
		x.fq1Used = true
	}
	p.meta += metaN1
	return true
}

// dropOldest forgets the oldest position in flight (p.n > 0).
func (p *posTrack) dropOldest(x *posPool, rc uint32) {
	n := p.n()
	if n > 1 { // the newer own one moves down
		sec := x.fq1Ref(rc)
		p.fq, p.ft[0] = *sec, p.second(x)
		if x.wide {
			h := &x.wx.dhi[rc]
			h[2] = h[3]
		}
		if n > ownFlight {
			p.promote(x, rc, n, sec)
		} else {
			x.dropFq1(rc)
		}
	}
	p.meta -= metaN1
}

// promote moves the list's oldest (n > ownFlight in flight) into the
// track's second own place (sec: fq1Ref), freed by the caller, and frees
// its node. The caller counts one fewer in flight.
func (p *posTrack) promote(x *posPool, rc uint32, n uint8, sec *uint64) {
	tl := &x.nodes[p.tail()]
	i := tl.next
	nd := &x.nodes[i]
	*sec = nd.q
	if x.wide {
		x.wx.dhi[rc][3] = x.wx.hi[i]
	}
	if n == ownFlight+1 { // a list of one (i is the tail): it goes
		p.ft[1] = nd.t
	} else {
		tl.next, tl.ft1 = nd.next, nd.t
	}
	x.put(i)
}

// newestStamp is the stamp of the newest position written or delivered.
func (p *posTrack) newestStamp(x *posPool) (pstamp, bool) {
	if n := p.n(); n > 0 {
		var t pstamp
		switch {
		case n > ownFlight:
			t = x.nodes[p.tail()].t
		default:
			t = p.ft[n-1]
		}
		if p.dn() == 0 || t.sub(p.t1) > 0 {
			return t, true
		}
	}
	return p.t1, p.dn() > 0
}

// resolve applies the fate of ghost rc's position in flight keyed t
// (posKey: the one the packet of that view carried; none: nothing to do).
func (p *posTrack) resolve(x *posPool, rc uint32, t pstamp, delivered bool) {
	n := p.n()
	if n == 0 {
		return
	}
	// Fates come mostly in send order: the oldest, the track's own, is
	// the usual match.
	k := 0
	if p.ft[0] != t {
		if n < 2 || p.second(x) != t {
			p.resolveListed(x, rc, t, delivered)
			return
		}
		k = 1
	}
	// The second's place (n ≥ 2), and the resolved one.
	var sec *uint64
	q := &p.fq
	if n > 1 {
		sec = x.fq1Ref(rc)
		if k == 1 {
			q = sec
		}
	}
	if delivered {
		// The usual delivery: newer than the newest delivered, which
		// becomes the older (insert's second case, written out).
		if d := t.sub(p.t1); d > 0 && p.meta&(3<<metaDnShift) != 0 && !x.wide {
			p.dq[0], p.dq[1], p.t1 = p.dq[1], *q, t
			p.meta = p.meta&^(1<<metaNShift-1) | 2<<metaDnShift | uint16(min(d, gapFar))
		} else {
			var hi uint32
			if x.wide {
				hi = x.wx.dhi[rc][2+k]
			}
			p.insert(x, rc, stamp(t), *q, hi)
		}
	}
	if n > 1 {
		if k == 0 { // the newer own one moves down
			p.fq, p.ft[0] = *sec, p.second(x)
			if x.wide {
				h := &x.wx.dhi[rc]
				h[2] = h[3]
			}
		}
		if n > ownFlight {
			p.promote(x, rc, n, sec)
		} else { // none second now
			x.dropFq1(rc)
		}
	}
	p.meta -= metaN1
}

// resolveOwn is resolve's usual case on the server, small enough to
// inline into OnFate's loop (a call there makes the loop spill and reload
// its state around it, every record): the only position in flight, the
// track's own, narrow bounds, and if delivered newer than the newest
// delivered one, which becomes the older. It reports false, having done
// nothing, otherwise (TestResolveOwnMatchesResolve). t is a posKey.
func (p *posTrack) resolveOwn(x *posPool, t pstamp, delivered bool) bool {
	if p.meta>>metaNShift != 1 || p.ft[0] != t || x.wide {
		return false
	}
	if !delivered {
		p.meta -= metaN1
		return true
	}
	d := int16(t - p.t1)
	if d <= 0 || p.meta < metaN1|1<<metaDnShift { // dn 0 (with n 1: below n 1, dn 1, gap 0)
		return false
	}
	p.dq[0], p.dq[1], p.t1 = p.dq[1], p.fq, t
	p.meta = 2<<metaDnShift | uint16(min(d, gapFar)) // n 1 → 0 (dq[0] the old dq[1], at d)
	return true
}

// resolveOldest1 is resolveOwn's delivery without its test of the
// bounds (narrow: the caller's test), for usualRun: the only position in
// flight, the track's own, delivered newer than the newest delivered one,
// which becomes the older. It reports false, having done nothing,
// otherwise (TestResolveOwnMatchesResolve). t is a posKey.
func (p *posTrack) resolveOldest1(t pstamp) bool {
	m, d := p.meta, int16(t-p.t1)
	// n 1 and dn 1 or 2: the meta from n 1, dn 1, gap 0 up to n 2's.
	if m-(metaN1|1<<metaDnShift) >= metaN1-1<<metaDnShift || p.ft[0] != t || d <= 0 {
		return false
	}
	p.dq[0], p.dq[1], p.t1 = p.dq[1], p.fq, t
	p.meta = 2<<metaDnShift | uint16(min(d, gapFar)) // n 1 → 0 (dq[0] the old dq[1], at d)
	return true
}

// resolveOldest2 is resolveOwn's case for a delivery of the older of two
// positions in flight (a fate a packet or more late), both the track's
// own: as resolveOwn, and the newer moves down; narrow bounds only (the
// caller's test). It reports false, having done nothing, otherwise
// (TestResolveOwnMatchesResolve). t is a posKey.
func (p *posTrack) resolveOldest2(t pstamp, fq1 uint64) bool {
	// n 2 and dn 1 or 2: the meta from n 2, dn 1, gap 0 up to n 3's.
	d := int16(t - p.t1)
	if p.meta-(2*metaN1|1<<metaDnShift) >= metaN1-1<<metaDnShift || p.ft[0] != t || d <= 0 {
		return false
	}
	p.dq[0], p.dq[1], p.t1 = p.dq[1], p.fq, t
	p.fq, p.ft[0] = fq1, p.ft[1]
	p.meta = metaN1 | 2<<metaDnShift | uint16(min(d, gapFar)) // n 2 → 1
	return true
}

// resolveOldest2Sparse is resolveOldest2 for a sparse fq1 (posPool.fq1Log
// > 0), the second's slot freed once it moved down: with
// fates a packet late a quarter of a packet's records (TestFq1ServerShape),
// which resolve's general walk would take (lateRun) at ≈ 5 times the
// instructions.
//
//go:noinline
func (p *posTrack) resolveOldest2Sparse(x *posPool, rc uint32, t pstamp) bool {
	b := x.secSlot(rc)
	w, _, _, _ := x.secs()
	if !p.resolveOldest2(t, w[b-1]) {
		return false
	}
	x.secFree(rc, b)
	return true
}

// resolveListed is resolve for a position in the pool's list (if any is
// keyed t: the fate of a packet ahead of the oldest in flight).
func (p *posTrack) resolveListed(x *posPool, rc uint32, t pstamp, delivered bool) {
	n := p.n()
	if n <= ownFlight {
		return // nothing of that view in flight
	}
	// The list of the newer ones is circular: its oldest's predecessor is
	// the tail.
	nodes := x.nodes
	prev := p.tail()
	i := nodes[prev].next
	nd := &nodes[i]
	for k := uint8(ownFlight + 1); nd.t != t; k++ {
		if k == n {
			return
		}
		prev, i = i, nd.next
		nd = &nodes[i]
	}
	switch {
	case n == ownFlight+1: // a list of one: it goes, fq1[rc]'s stamp back to the track
		p.ft[1] = nd.ft1
	case i == p.tail(): // its predecessor is the tail now, and keeps fq1[rc]'s stamp
		nodes[prev].next, nodes[prev].ft1 = nd.next, nd.ft1
		p.ft[1] = pstamp(prev)
	default:
		nodes[prev].next = nd.next
	}
	if delivered {
		var hi uint32
		if x.wide {
			hi = x.wx.hi[i]
		}
		p.insert(x, rc, stamp(nd.t), nd.q, hi)
	}
	x.put(i)
	p.meta -= metaN1
}

// insert adds a delivered value stamped t, packed as lo and hi, to the two
// newest of ghost rc, by stamp (the client's rule; equal stamps are one
// view, so one value; for an older value gapFar or more below the newest
// see gapFar).
func (p *posTrack) insert(x *posPool, rc uint32, st stamp, lo uint64, hi uint32) {
	var k int
	t := pstamp(st)
	switch d, dn := t.sub(p.t1), p.dn(); {
	case dn == 0:
		p.dq[1], p.t1 = lo, t
		p.setDelivered(1, 0)
		k = 1
	case d > 0:
		p.dq[0], p.dq[1], p.t1 = p.dq[1], lo, t
		p.setDelivered(2, min(d, gapFar))
		if x.wide {
			h := x.deliveredHi(rc)
			h[0] = h[1]
		}
		k = 1
	case d < 0 && (dn == 1 || -d < p.gap()):
		p.dq[0] = lo
		p.setDelivered(2, min(-d, gapFar))
		k = 0
	default:
		return
	}
	if x.wide {
		x.deliveredHi(rc)[k] = hi
	}
}

// deliveredHi is the high words of ghost rc's delivered positions and
// its own in flight (wide bounds only), the table grown by a quarter for
// a record past its end.
func (x *posPool) deliveredHi(rc uint32) *[4]uint32 {
	if d := x.wx.dhi; int(rc) >= len(d) {
		n := int(rc) + 1
		if n > cap(d) {
			d = append(make([][4]uint32, 0, n+n/4), d...)
		}
		x.wx.dhi = d[:n]
	}
	return &x.wx.dhi[rc]
}

// clientHasIn reports whether every position the client may currently show
// of ghost rc (its newest received, or one in flight, fl) equals q, so
// there is nothing to send.
func (p *posTrack) clientHasIn(x *posPool, rc uint32, fl []posVal, q *[3]uint32) bool {
	if p.dn() == 0 {
		return false
	}
	if p.dq[1] != x.packLo(q) || x.wide && x.wx.dhi[rc][1] != x.packHi(q) {
		return false
	}
	for k := range fl {
		if v := &fl[k]; pstamp(v.t).sub(p.t1) > 0 && v.q != *q {
			return false
		}
	}
	return true
}

// predSpread widens d, per axis, to the largest |q − prediction| over every
// pair the client may predict from for a value stamped t. It returns false
// if the client holds no position for sure (then only an absolute value is
// safe). Every in-flight and delivered value is older than t (the table
// writes a ghost's position at most once per view).
func (p *posTrack) predSpread(x *posPool, rc uint32, q *[3]uint32, t stamp, lim *[3]uint32, d *[3]uint64) bool {
	if p.dn() == 0 {
		return false
	}
	var buf [posRingLen]posVal
	var dv [2]posVal
	p.spreadDV(&dv, p.unpackAll(x, rc, &dv, &buf, t), q, t, lim, d)
	return true
}

// fast1 reports whether posForm codes ghost rc's position by form1: a
// narrow track (packed in one word) with at most one position in flight,
// the usual one. Others take the general walk (inflight, clientHasIn,
// spread).
func (p *posTrack) fast1(x *posPool) bool { return p.n() <= 1 && !x.wide }

// form1 is the position coding of posForm for a track with fast1 (p.dn >
// 0) and ghost rc's value q stamped t (ql: q packed, packLo): it reports whether every value the
// client may show equals q (clientHasIn; asked only if checkSame), else
// widens d as spread does. clientHasIn and spread are written out for a
// list of at most one: the same pairs in the same order, so the same d bit
// for bit (TestFormMatchesGeneral). It saves the 176-byte list copy, its
// walk, and the older delivered value's unpacking when no pair needs it.
func (p *posTrack) form1(x *posPool, q *[3]uint32, ql uint64, t stamp, lim *[3]uint32, checkSame bool, d *[3]uint64) bool {
	lo := p.dq[1]
	var d1, f posVal
	// fd: f's stamp relative to d1's (fl[:j0] older, fl[j1:] newer in
	// spread). A packed value equals q exactly when its codes do (an
	// axis's code is within its mask): the test needs no unpacking.
	var fd int64
	var fq uint64
	hasF := p.n() == 1
	if hasF {
		fq = p.fq // the one in flight: the track's own
		fd = p.ft[0].sub(p.t1)
	}
	if checkSame && lo == ql && (fd <= 0 || fq == lo) {
		return true
	}
	dn := p.dn()
	if dn == 2 && fd > 0 {
		// The steady track: d0, d1 delivered, f newer in flight. When
		// both its pairs, (d0, d1) and (d1, f), extrapolate (stamps in
		// order, at most predictMaxMS apart and before t), those two
		// are all spread visits: pair2 takes them axis by axis.
		dtF, span0 := pstamp(t).sub(p.ft[0]), p.gap()
		if uint64(dtF-1) < predictMaxMS && uint64(dtF+fd-1) < predictMaxMS &&
			span0 <= predictMaxMS && fd <= predictMaxMS {
			pair2(x, p.dq[0], lo, fq, span0, fd, dtF, q, lim, d)
			return false
		}
	} else if dn == 2 && !hasF {
		// The server's track: d0, d1 delivered and nothing in flight (a
		// connection applies the fates it has before it writes, and its
		// client acks within a view). When the pair (d0, d1)
		// extrapolates, it is all spread visits: pair1r takes it axis by
		// axis.
		dt1, span0 := p.age1(t), p.gap()
		if uint64(dt1-1) < predictMaxMS && uint64(span0-1) < predictMaxMS {
			r0, r1, r2 := pair1r(x, p.dq[0], lo, span0, dt1, q, lim)
			d[0], d[1], d[2] = max(d[0], r0), max(d[1], r1), max(d[2], r2)
			return false
		}
	}
	// The other tracks unpack: the shifts and masks only here (pair2
	// takes its own), not on the steady track's way.
	s1, s2 := x.sh[1]&63, x.sh[2]&63
	m0, m1, m2 := x.masks()
	d1.t = p.t1.at(t)
	d1.q[0], d1.q[1], d1.q[2] = uint32(lo)&m0, uint32(lo>>s1)&m1, uint32(lo>>s2)&m2
	if hasF {
		f.t = p.ft[0].at(t)
		f.q[0], f.q[1], f.q[2] = uint32(fq)&m0, uint32(fq>>s1)&m1, uint32(fq>>s2)&m2
	}
	w := spreader{q: q, lim: lim, w: *d}
	if !w.from(&d1, t) {
		w.rest(&d1)
	} else if dn == 2 {
		var d0 posVal
		lo0 := p.dq[0]
		d0.t = d1.t - stamp(p.gap())
		d0.q[0], d0.q[1], d0.q[2] = uint32(lo0)&m0, uint32(lo0>>s1)&m1, uint32(lo0>>s2)&m2
		w.pair(&d0, &d1)
		if fd < 0 && f.t.sub(d0.t) > 0 {
			w.pair(&f, &d1)
		}
	} else {
		w.rest(&d1)
		if fd < 0 {
			w.pair(&f, &d1)
		}
	}
	if fd > 0 {
		if !w.from(&f, t) {
			w.rest(&f)
		} else {
			w.pair(&d1, &f)
		}
	}
	*d = w.w
	return false
}

// pair2 widens d, per axis, by the pairs (d0, d1) and (d1, f) for q, the
// three packed as in the pool (narrow): d1 is span0 after d0, f is spanF
// after d1 and dtF before q, each of the three spans in (0,
// predictMaxMS], and so is q's distance from d1 (dtF + spanF). The
// factors are whole (predWhole) when the views came evenly spaced, as in
// the benchmarks, else the float work (predictAxis), skipped on an axis a
// pair did not move on (it predicts its newer value exactly). Axis by
// axis, each unpacked just before its two pairs: with
// all nine codes unpacked first, most of them lived on the stack. The
// same d as spread's (TestFormMatchesGeneral): max is order-free.
func pair2(x *posPool, d0, d1, f uint64, span0, spanF, dtF int64, q, lim *[3]uint32, d *[3]uint64) {
	dt1 := dtF + spanF // q's distance from d1
	var m0, mF int64   // whole factors, 0: none
	switch dt1 {
	case span0:
		m0 = 1
	case 2 * span0:
		m0 = 2
	}
	switch dtF {
	case spanF:
		mF = 1
	case 2 * spanF:
		mF = 2
	}
	s1, s2 := x.sh[1]&63, x.sh[2]&63
	if m0 != 0 && mF != 0 { // predWhole, written out
		k := uint32(1)<<(s1&31) - 1
		a, b, c := int64(uint32(d0)&k), int64(uint32(d1)&k), int64(uint32(f)&k)
		d[0] = max(d[0], resid(q[0], b+(b-a)*m0, lim[0]), resid(q[0], c+(c-b)*mF, lim[0]))
		k = uint32(1)<<((s2-s1)&31) - 1
		a, b, c = int64(uint32(d0>>s1)&k), int64(uint32(d1>>s1)&k), int64(uint32(f>>s1)&k)
		d[1] = max(d[1], resid(q[1], b+(b-a)*m0, lim[1]), resid(q[1], c+(c-b)*mF, lim[1]))
		k = uint32(1)<<(x.sh[3]&31) - 1
		a, b, c = int64(uint32(d0>>s2)&k), int64(uint32(d1>>s2)&k), int64(uint32(f>>s2)&k)
		d[2] = max(d[2], resid(q[2], b+(b-a)*m0, lim[2]), resid(q[2], c+(c-b)*mF, lim[2]))
		return
	}
	// predictAxis written out, pair by pair and axis by axis (a call an
	// axis cost more than the work).
	f0, fF := float64(dt1)/float64(span0), float64(dtF)/float64(spanF)
	k := uint32(1)<<(s1&31) - 1
	a, b, c := int64(uint32(d0)&k), int64(uint32(d1)&k), int64(uint32(f)&k)
	r0, rF := b, c
	if a != b {
		r0 += roundHalfAway(float64(float64(b-a) * f0))
	}
	if b != c {
		rF += roundHalfAway(float64(float64(c-b) * fF))
	}
	d[0] = max(d[0], resid(q[0], r0, lim[0]), resid(q[0], rF, lim[0]))
	k = uint32(1)<<((s2-s1)&31) - 1
	a, b, c = int64(uint32(d0>>s1)&k), int64(uint32(d1>>s1)&k), int64(uint32(f>>s1)&k)
	r0, rF = b, c
	if a != b {
		r0 += roundHalfAway(float64(float64(b-a) * f0))
	}
	if b != c {
		rF += roundHalfAway(float64(float64(c-b) * fF))
	}
	d[1] = max(d[1], resid(q[1], r0, lim[1]), resid(q[1], rF, lim[1]))
	k = uint32(1)<<(x.sh[3]&31) - 1
	a, b, c = int64(uint32(d0>>s2)&k), int64(uint32(d1>>s2)&k), int64(uint32(f>>s2)&k)
	r0, rF = b, c
	if a != b {
		r0 += roundHalfAway(float64(float64(b-a) * f0))
	}
	if b != c {
		rF += roundHalfAway(float64(float64(c-b) * fF))
	}
	d[2] = max(d[2], resid(q[2], r0, lim[2]), resid(q[2], rF, lim[2]))
}

// lowBits[b] is uint32(1)<<(b&31) − 1, pair1r's axis masks looked up (a
// shift a mask cost more instructions a record).
var lowBits = func() (m [64]uint32) {
	for b := range m {
		m[b] = uint32(1)<<(b&31) - 1
	}
	return m
}()

// pair1r returns, per axis, how far the prediction of the pair (d0, d1)
// lies from q, the two packed as in the pool (narrow): d1 is span0 after
// d0 and dt1 before q, both in (0, predictMaxMS]. The factor is whole
// (predWhole) when the views came evenly spaced, else the float work
// (predictAxis), skipped on an axis the pair did not move on (it predicts
// d1 exactly): spreader.pair's answer (TestFormDeliveredMatchesGeneral)
// without unpacking the two into posVals or a spreader. The three come
// back in registers: writeUsual keeps them there, the posForm ways widen
// their d by them.
func pair1r(x *posPool, d0, d1 uint64, span0, dt1 int64, q, lim *[3]uint32) (r0, r1, r2 uint64) {
	var m int64 // whole factor, 0: none
	switch dt1 {
	case span0:
		m = 1
	case 2 * span0:
		m = 2
	}
	s1, s2 := x.sh[1]&63, x.sh[2]&63
	k0, k1 := lowBits[s1], lowBits[(s2-s1)&63]
	// Axis 2 is the packing's top: nothing above it (narrow), no mask.
	if m != 0 { // predWhole, written out
		a, b := int64(uint32(d0)&k0), int64(uint32(d1)&k0)
		r0 = resid(q[0], b+(b-a)*m, lim[0])
		a, b = int64(uint32(d0>>s1)&k1), int64(uint32(d1>>s1)&k1)
		r1 = resid(q[1], b+(b-a)*m, lim[1])
		a, b = int64(d0>>s2), int64(d1>>s2)
		r2 = resid(q[2], b+(b-a)*m, lim[2])
		return
	}
	f := float64(dt1) / float64(span0)
	a, b := int64(uint32(d0)&k0), int64(uint32(d1)&k0)
	if a != b {
		b += roundHalfAway(float64(float64(b-a) * f))
	}
	r0 = resid(q[0], b, lim[0])
	a, b = int64(uint32(d0>>s1)&k1), int64(uint32(d1>>s1)&k1)
	if a != b {
		b += roundHalfAway(float64(float64(b-a) * f))
	}
	r1 = resid(q[1], b, lim[1])
	a, b = int64(d0>>s2), int64(d1>>s2)
	if a != b {
		b += roundHalfAway(float64(float64(b-a) * f))
	}
	r2 = resid(q[2], b, lim[2])
	return
}

// pair1run is writeUsual's pair1r: the position's window code and its
// three axes (posAxis) as writeUsual appends them, n bits of run, for the
// pair's residuals; n 0 when they need a window past maxWindow (the
// record goes absolute). The same residuals as pair1r's, written out
// again: the window is coded where they are still in registers, and
// writeUsual keeps only the run across the call, not the three and q.
// pair1run calling pair1r for them instead cost 446 k instructions an op
// more of BenchmarkTables1000Server's ≈ 29.1 M (+1.5 %; cachegrind, 40x −
// 20x): the nested call's spills, on every usual record. The axes' shifts,
// masks and bounds come from the registry's quant z, worked out once
// (newQuant), not from the pool's shifts and a table lookup a record.
func pair1run(z *quant, d0, d1 uint64, span0, dt1 int64, q *[3]uint32) (run uint64, n uint) {
	var m int64 // whole factor, 0: none
	switch dt1 {
	case span0:
		m = 1
	case 2 * span0:
		m = 2
	}
	s1, s2 := z.sh[1]&63, z.sh[2]&63
	k0, k1 := z.mask[0], z.mask[1]
	lim := &z.lim
	var r0, r1, r2 uint64
	if m != 0 { // predWhole, written out
		a, b := int64(uint32(d0)&k0), int64(uint32(d1)&k0)
		r0 = resid(q[0], b+(b-a)*m, lim[0])
		a, b = int64(uint32(d0>>s1)&k1), int64(uint32(d1>>s1)&k1)
		r1 = resid(q[1], b+(b-a)*m, lim[1])
		a, b = int64(d0>>s2), int64(d1>>s2)
		r2 = resid(q[2], b+(b-a)*m, lim[2])
	} else {
		// An axis the pair did not move on predicts d1's code, a delivered
		// position's, in [0, lim] already: no clamp (resid's) to take.
		f := float64(dt1) / float64(span0)
		a, b := int64(uint32(d0)&k0), int64(uint32(d1)&k0)
		if a != b {
			r0 = resid(q[0], b+roundHalfAway(float64(float64(b-a)*f)), lim[0])
		} else {
			r0 = absDiff64(q[0], uint32(b))
		}
		a, b = int64(uint32(d0>>s1)&k1), int64(uint32(d1>>s1)&k1)
		if a != b {
			r1 = resid(q[1], b+roundHalfAway(float64(float64(b-a)*f)), lim[1])
		} else {
			r1 = absDiff64(q[1], uint32(b))
		}
		a, b = int64(d0>>s2), int64(d1>>s2)
		if a != b {
			r2 = resid(q[2], b+roundHalfAway(float64(float64(b-a)*f)), lim[2])
		} else {
			r2 = absDiff64(q[2], uint32(b))
		}
	}
	k := windowBits(max(r0, r1, r2)) // posForm.window's: 1 for 0
	if k > maxWindow {
		return 0, 0 // absolute
	}
	lm := uint64(1)<<(k&15) - 1
	run, n = uint64(k), kcodeBits
	run, n = posAxis(run, n, r0, q[0], lm, k)
	run, n = posAxis(run, n, r1, q[1], lm, k)
	run, n = posAxis(run, n, r2, q[2], lm, k)
	return run, n
}

// resid is |q − v| for v clamped to [0, lim].
func resid(q uint32, v int64, lim uint32) uint64 {
	return absDiff64(q, uint32(max(0, min(v, int64(lim)))))
}

// inflight copies ghost rc's positions in flight, oldest first, into
// buf, their stamps on t's line: the pairs below visit each several
// times, and a copy on the stack is one walk of the pool's links instead
// of one per newer value.
func (p *posTrack) inflight(x *posPool, rc uint32, buf *[posRingLen]posVal, t stamp) []posVal {
	n := min(int(p.n()), posRingLen)
	if x.wide {
		own := min(n, ownFlight)
		for k := range own { // the track's own
			buf[k] = p.own(x, rc, k, t)
		}
		if n > own {
			for i, k := p.head(x), own; k < n; i, k = x.nodes[i].next, k+1 {
				x.unpack(i, &buf[k], t)
			}
		}
		return buf[:n]
	}
	// unpack written out for one word: the shifts and masks loaded once.
	s1, s2 := x.sh[1]&63, x.sh[2]&63
	m0, m1, m2 := x.masks()
	own := min(n, ownFlight)
	for k := range own { // the track's own
		v := &buf[k]
		q := p.ownQ(x, rc, k)
		v.t = p.ownStamp(x, k).at(t)
		v.q[0] = uint32(q) & m0
		v.q[1] = uint32(q>>s1) & m1
		v.q[2] = uint32(q>>s2) & m2
	}
	if n <= own {
		return buf[:n]
	}
	for i, k := p.head(x), own; k < n; k++ {
		nd := &x.nodes[i]
		v := &buf[k]
		q := nd.q
		v.t = nd.t.at(t)
		v.q[0] = uint32(q) & m0
		v.q[1] = uint32(q>>s1) & m1
		v.q[2] = uint32(q>>s2) & m2
		i = nd.next
	}
	return buf[:n]
}

// formN is the position coding of posForm for any track (p.dn > 0; ql: q
// packed, packLo): the general walk of the positions in flight, apart so
// that posForm's own frame holds no copy of them. It reports whether every
// value the client may show equals q (clientHasIn; asked only if
// checkSame), else widens d by spread. clientHasIn's first test is made
// here, without the call: a moving ghost's newest delivered value is not
// its current one (TestFormMatchesGeneral).
func (p *posTrack) formN(x *posPool, rc uint32, q *[3]uint32, ql uint64, t stamp, lim *[3]uint32, checkSame bool, d *[3]uint64) bool {
	var buf [posRingLen]posVal
	var dv [2]posVal
	fl := p.unpackAll(x, rc, &dv, &buf, t)
	if checkSame && p.dq[1] == ql && p.clientHasIn(x, rc, fl, q) {
		return true
	}
	p.spreadDV(&dv, fl, q, t, lim, d)
	return false
}

// unpackAll is inflight and unpackDelivered at once (p.dn > 0), the
// stamps on t's line: the general walk's unpacking, the shifts and masks
// loaded once for both.
func (p *posTrack) unpackAll(x *posPool, rc uint32, dv *[2]posVal, buf *[posRingLen]posVal, t stamp) []posVal {
	if x.wide {
		p.unpackDelivered(x, rc, dv, t)
		return p.inflight(x, rc, buf, t)
	}
	s1, s2 := x.sh[1]&63, x.sh[2]&63
	m0, m1, m2 := x.masks()
	lo := p.dq[1]
	v := &dv[1]
	v.t = p.t1.at(t)
	v.q[0], v.q[1], v.q[2] = uint32(lo)&m0, uint32(lo>>s1)&m1, uint32(lo>>s2)&m2
	if p.dn() == 2 {
		lo = p.dq[0]
		v = &dv[0]
		v.t = dv[1].t - stamp(p.gap())
		v.q[0], v.q[1], v.q[2] = uint32(lo)&m0, uint32(lo>>s1)&m1, uint32(lo>>s2)&m2
	}
	n := min(int(p.n()), posRingLen)
	// The track's own, written out (ownFlight is 2: ownFlightIs2).
	if n == 0 {
		return buf[:0]
	}
	q := p.fq
	v = &buf[0]
	v.t = p.ft[0].at(t)
	v.q[0], v.q[1], v.q[2] = uint32(q)&m0, uint32(q>>s1)&m1, uint32(q>>s2)&m2
	if n == 1 {
		return buf[:1]
	}
	q = x.fq1At(rc)
	v = &buf[1]
	v.t = p.second(x).at(t)
	v.q[0], v.q[1], v.q[2] = uint32(q)&m0, uint32(q>>s1)&m1, uint32(q>>s2)&m2
	if n == ownFlight {
		return buf[:ownFlight]
	}
	for i, k := p.head(x), ownFlight; k < n; k++ {
		nd := &x.nodes[i]
		v := &buf[k]
		q := nd.q
		v.t = nd.t.at(t)
		v.q[0], v.q[1], v.q[2] = uint32(q)&m0, uint32(q>>s1)&m1, uint32(q>>s2)&m2
		i = nd.next
	}
	return buf[:n]
}

// spread is predSpread over fl, ghost rc's positions in flight oldest first
// (p.dn > 0). Newest of a pair (n1): the newest delivered value d1, or a value in
// flight newer than it. Older of the pair: the newest certain value below
// n1 (d0 for d1, d1 for the others; d0 may be missing), or any value in
// flight between that one and n1. The stamps in flight strictly increase
// (a ghost's position goes out at most once per view, each newer than the
// ones before it: checkInvariants), so each set is a run of fl.
func (p *posTrack) spread(x *posPool, rc uint32, fl []posVal, q *[3]uint32, t stamp, lim *[3]uint32, d *[3]uint64) {
	var dv [2]posVal
	p.unpackDelivered(x, rc, &dv, t)
	p.spreadDV(&dv, fl, q, t, lim, d)
}

// spreadDV is spread with the delivered values unpacked (unpackDelivered,
// unpackAll).
func (p *posTrack) spreadDV(dv *[2]posVal, fl []posVal, q *[3]uint32, t stamp, lim *[3]uint32, d *[3]uint64) {
	d1 := &dv[1]
	var d0 *posVal
	if p.dn() == 2 {
		d0 = &dv[0]
	}
	w := spreader{q: q, lim: lim, w: *d}
	// fl[:j0] are older than d1, fl[j1:] newer (between: d1's own stamp,
	// which is never in flight too; skipped all the same).
	j0 := 0
	for j0 < len(fl) && fl[j0].t.sub(d1.t) < 0 {
		j0++
	}
	if !w.from(d1, t) {
		w.rest(d1)
	} else {
		if d0 == nil {
			w.rest(d1)
		} else {
			w.pair(d0, d1)
		}
		for k := range j0 { // delivered out of order: between d0 and d1
			if d0 == nil || fl[k].t.sub(d0.t) > 0 {
				w.pair(&fl[k], d1)
			}
		}
	}
	j1 := j0
	for j1 < len(fl) && fl[j1].t.sub(d1.t) <= 0 {
		j1++
	}
	for j := j1; j < len(fl); j++ {
		n1 := &fl[j]
		if !w.from(n1, t) {
			w.rest(n1)
			continue
		}
		w.pair(d1, n1)
		for k := j1; k < j; k++ {
			w.pair(&fl[k], n1)
		}
	}
	*d = w.w
}

// spreader accumulates, per axis, the largest |q − prediction| of the
// pairs one spread visits (w), for a value q; dt is the time from the
// newest value of the pairs at hand to q's (from). q and lim are the
// caller's: a spreader is three stores to set up, not a 48-byte copy.
type spreader struct {
	q, lim *[3]uint32
	dt     int64
	w      [3]uint64
}

// from starts the pairs whose newest value is b, for a value stamped t. It
// returns false if each of them predicts b (b more than predictMaxMS
// before t, or not before it: predFactor): then rest(b) is their widening.
func (s *spreader) from(b *posVal, t stamp) bool {
	dt := t.sub(b.t)
	s.dt = dt
	return dt > 0 && dt <= predictMaxMS
}

// rest widens w by |q − b|: the pair of b with no older value.
func (s *spreader) rest(b *posVal) {
	s.w[0] = max(s.w[0], absDiff64(s.q[0], b.q[0]))
	s.w[1] = max(s.w[1], absDiff64(s.q[1], b.q[1]))
	s.w[2] = max(s.w[2], absDiff64(s.q[2], b.q[2]))
}

// pair widens w by |q − predict(a, b, t)| per axis, for b started by
// from. A pair more than predictMaxMS apart (or out of order) predicts b
// (predFactor). The usual pair is a whole number of its spans before q —
// updates every view, fates a view or two later: (t − b.t)/(b.t − a.t) is
// 1 or 2 — and predicts in integers, every axis without a branch
// (predWhole); any other factor takes the float work, only on an axis the
// pair moved on: one with the same value predicts b on it exactly (b +
// round(0·f), b ≤ lim) — the height of a walker on flat ground, every axis
// of a ghost at rest.
func (s *spreader) pair(a, b *posVal) {
	span := b.t.sub(a.t)
	if uint64(span-1) >= predictMaxMS { // not 0 < span ≤ predictMaxMS: b
		s.rest(b)
		return
	}
	var m int64
	switch s.dt {
	case span:
		m = 1
	case 2 * span:
		m = 2
	default:
		s.pairFloat(a, b, span)
		return
	}
	q, lim := s.q, s.lim
	s.w[0] = max(s.w[0], absDiff64(q[0], predWhole(a.q[0], b.q[0], m, lim[0])))
	s.w[1] = max(s.w[1], absDiff64(q[1], predWhole(a.q[1], b.q[1], m, lim[1])))
	s.w[2] = max(s.w[2], absDiff64(q[2], predWhole(a.q[2], b.q[2], m, lim[2])))
}

// pairFloat is pair for a factor dt/span that may not be whole.
func (s *spreader) pairFloat(a, b *posVal, span int64) {
	r0, r1, r2 := b.q[0], b.q[1], b.q[2]
	f := float64(s.dt) / float64(span)
	if a.q[0] != r0 {
		r0 = predictAxis(a.q[0], r0, f, s.lim[0])
	}
	if a.q[1] != r1 {
		r1 = predictAxis(a.q[1], r1, f, s.lim[1])
	}
	if a.q[2] != r2 {
		r2 = predictAxis(a.q[2], r2, f, s.lim[2])
	}
	s.w[0] = max(s.w[0], absDiff64(s.q[0], r0))
	s.w[1] = max(s.w[1], absDiff64(s.q[1], r1))
	s.w[2] = max(s.w[2], absDiff64(s.q[2], r2))
}

// predWhole is predictAxis(a, b, float64(m), lim) for a whole factor m
// (1 ≤ m ≤ predictMaxMS), in integers: (b − a)·m is exact in binary64
// (|b − a| < 2^31, so below 2^41) and a whole number rounds to itself,
// so both give b + (b − a)·m, clamped to [0, lim] (TestPredWholeIsFloat).
func predWhole(a, b uint32, m int64, lim uint32) uint32 {
	v := int64(b) + (int64(b)-int64(a))*m
	return uint32(max(0, min(v, int64(lim))))
}

// absDiff64 is |a − b|, without a branch.
func absDiff64(a, b uint32) uint64 {
	d := int64(a) - int64(b)
	m := d >> 63
	return uint64((d ^ m) - m)
}

// predFactor returns (t − b.t)/(b.t − a.t), or false when the pair predicts
// no motion: no older value, stamps out of order, or more than predictMaxMS
// apart or ahead.
func predFactor(a, b *posVal, t stamp) (float64, bool) {
	if a == nil {
		return 0, false
	}
	dt, span := t.sub(b.t), b.t.sub(a.t)
	if span <= 0 || span > predictMaxMS || dt <= 0 || dt > predictMaxMS {
		return 0, false
	}
	return float64(dt) / float64(span), true
}

// predictAxis is b + round((b − a)·f), clamped to [0, lim]. Integer inputs
// and IEEE-754 binary64 operations in this order make it bit-identical on
// every platform (the explicit float64 conversion forbids fusing the
// multiply into anything); round is half away from zero (roundHalfAway is
// math.Round exactly: |x| < 2^42 here).
func predictAxis(a, b uint32, f float64, lim uint32) uint32 {
	v := int64(b) + roundHalfAway(float64(float64(int64(b)-int64(a))*f))
	return uint32(max(0, min(v, int64(lim))))
}

// predict extrapolates the pair (a, b) (a may be nil: no motion known) to
// stamp t (the client's side of spreader.pair).
func predict(a, b *posVal, t stamp, lim [3]uint32) [3]uint32 {
	f, ok := predFactor(a, b, t)
	if !ok {
		return b.q
	}
	var r [3]uint32
	for x := range 3 {
		r[x] = predictAxis(a.q[x], b.q[x], f, lim[x])
	}
	return r
}

// windowBits is the smallest k with |residual| < 2^(k−1) for a largest
// residual m > 0.
func windowBits(m uint64) uint { return uint(bits.Len64(m)) + 1 }

// unwindow recovers the value nearest ref whose low k bits are low.
func unwindow(ref uint32, low uint64, k uint) int64 {
	lo := int64(1)<<k - 1
	d := (int64(low) - int64(ref)) & lo
	if d >= int64(1)<<(k-1) {
		d -= lo + 1
	}
	return int64(ref) + d
}

func absDiff(a, b uint32) uint32 {
	if a > b {
		return a - b
	}
	return b - a
}
