package ghost

import (
	"math/bits"
	"time"

	"github.com/ghostwire/ghostwire/replication/notify"
)

// OnFate applies the fate of a packet Write recorded, exactly once a packet
// (fates of packets without ghost records are ignored). Fates come in any
// order: notify reports them in send order, but the session reports a
// delivery it already knows ahead of an older packet's open fate
// (session's earlyGhostFates), so a packet may be resolved before one sent
// before it; the table keeps its records until every older one is
// resolved, and a position's fate finds its own stamp in flight
// (posTrack.resolve). Delivered: creates make ghosts live, kills free their
// ids. Dropped: creates and kills are retried, and of the groups an update
// carried only those that no later packet carries are marked dirty again —
// the newer packet already brings a newer value (seed: book Listing 7.13,
// checklist RL-6). The check is O(groups): the table keeps, per ghost and
// group, the newest sequence that carried it, instead of scanning the
// in-flight packets as the listing does.
func (t *Table) OnFate(f notify.Fate) {
	i, ok := t.findPacket(f.Seq)
	if !ok {
		t.stats.UnknownFates++
		if t.stats.UnknownFates == 0 {
			t.rareOf().statsWraps.UnknownFates++
		}
		return
	}
	if f.Delivered {
		t.sampleFateDelay(max(t.lastNow-f.SentAt, 0))
	}
	p := &t.pkts[i]
	sent := t.msOf(f.SentAt)
	// The view the packet was written from, in the slots' ms (lastChg's):
	// the client holds its state once the packet is delivered.
	view := t.msOfStamp(p.t)
	n, start := int(p.n), int(p.start)
	switch {
	case !f.Delivered || t.reg.slowFates: // t.wide || t.pp.wide
		t.fateRecords(p, 0, n, start, f, sent, view)
	case f.Seq == t.lastSeq:
		// The usual fate on a server (the newest packet, before the next
		// Write): usualNewest's from here, without deliveredRecords' runs
		// and calls (≈ 100 instructions a fate), which take on at the
		// first record it does not take.
		pt := posKey(stamp(t.viewMS), p.t)
		k := t.usualNewest(t.ents[start:start+n], sent, view, pt)
		if k < n {
			t.deliveredRecords(p, k, n, start, f, sent, view)
		}
	default:
		t.deliveredRecords(p, 0, n, start, f, sent, view)
	}
	p.resolved = true
	t.releaseResolved()
}

// releaseResolved releases resolved packets from the ring's old end, with
// their entries, and trims what that frees.
func (t *Table) releaseResolved() {
	if 2*int(t.pktLen) > len(t.pkts) { // more than half full: trim keeps the ring (pktBusy)
		t.pktBusy |= 1
	}
	for t.pktLen > 0 && t.pkts[t.pktHead].resolved {
		q := &t.pkts[t.pktHead]
		t.entHead += int32(q.n)
		t.entLen -= int32(q.n)
		if t.entLen == 0 { // none in flight: the next packet's records go from index 0, no slide
			t.entHead = 0
		}
		q.n = 0
		t.pktHead = (t.pktHead + 1) & int32(len(t.pkts)-1)
		t.pktLen--
	}
	t.trim()
}

// deliveredRecords applies a delivered packet's fate to its records j0 …
// n−1 of those from ents[start] (narrow masks and positions; j0 > 0: the
// records before it were usual and are applied): runs of usual records by
// usualRun, each other record by lateRun if it is a delivered update of a
// live ghost, else by fateRecords, and after two others in a row
// (positions three or more in flight: fates late) the rest of the packet
// by lateRun's runs of delivered updates and fateRecords for each other
// record. The records of a packet are of distinct ghosts, and a
// usual record changes only its own ghost's slot and track, so this is
// the order of the records for every ghost.
func (t *Table) deliveredRecords(p *pktRec, j0, n, start int, f notify.Fate, sent, view msTime) {
	pt, seq := posKey(stamp(t.viewMS), p.t), uint32(f.Seq)
	late := false
	for j := j0; ; {
		// The records from j on: the runs walk a slice.
		es := t.ents[start+j : start+n]
		var k int
		if !late {
			k = j + t.usualRun(es, seq, sent, view, pt)
			// Two other records in a row (k, and the one before it):
			// the packet's are not the usual ones.
			late = k == j && j > j0
		}
		if late {
			k = j + t.lateRun(es, seq, sent, view, pt)
		}
		if k >= n {
			return
		}
		// Record k is not usual. A delivered update of a live ghost (its
		// position late: more in flight than the track holds itself, as
		// the first record of every packet of a late fate's) is lateRun's,
		// which does what fateRecords would at a third of the cost.
		if a := start + k; t.lateRun(t.ents[a:a+1], seq, sent, view, pt) == 0 {
			t.fateRecords(p, k, k+1, start, f, sent, view)
		}
		j = k + 1
	}
}

// lateRun is usualRun for a packet whose fate comes late (more positions
// in flight than the tracks hold themselves): it applies the fate to its
// records es while each is a delivered update of a live ghost, its
// position, if it carried one, by posTrack.resolve (fateRecords' way for
// such a record, without its tests of the other kinds and of a drop). It
// returns how many it applied.
func (t *Table) lateRun(es []entry, seq uint32, sent, view msTime, pt pstamp) int {
	// usualRun's locals: the slots and tracks by one bounds check, the
	// position bit by the registry's array, not the class behind it.
	slots := t.slots
	pos, posBits, pp := t.pos[:len(slots)], &t.reg.posBits, &t.pp
	for k, e := range es {
		rc := e.rec()
		s := &slots[rc]
		if e.kind() != recUpdate || s.phase != phaseLive {
			return k
		}
		s.inflight--
		s.delivered(seq, sent, view)
		if uint64(e>>maskShift)&posBits[s.ci] != 0 {
			tr := &pos[rc]
			tr.resolve(pp, rc, pt, true)
			s.set(flPosFull, tr.full())
		}
	}
	return len(es)
}

// usualRun applies a delivered packet's fate (of packet seq, sent at
// sent, written from view, its position key pt) to its records es while
// each is usual: an update of a live ghost whose position, if it carried
// one, was the oldest of at most two in flight and newer than the newest
// delivered (posTrack.resolveOldest1, resolveOldest2; narrow bounds:
// the caller's test). It returns how many it applied (len(es): all). A
// loopback server's fates, each of the newest packet written (before the
// next Write), go by usualNewest; usualAny takes on at the first record
// it does not take, and takes every record of an older packet.
func (t *Table) usualRun(es []entry, seq uint32, sent, view msTime, pt pstamp) int {
	k := 0
	if seq == uint32(t.lastSeq) {
		k = t.usualNewest(es, sent, view, pt)
	}
	if k < len(es) {
		k += t.usualAny(es[k:], seq, sent, view, pt)
	}
	return k
}

// usualNewest is usualRun for the newest packet written (t.lastSeq) and
// the records whose position, if they carried one, is the only one of
// its ghost in flight (fates that come before the next Write, as a
// loopback server's do). The packet is each of its ghosts' lastSeq (a
// Write sets it for every record), so the delivery is at distance 0
// (deliveredNewest) and the loop keeps no sequence live; without
// usualAny's tests for a second in flight and its call for a sparse one,
// fewer values are live across the loop the compiler must spill and
// reload every record.
func (t *Table) usualNewest(es []entry, sent, view msTime, pt pstamp) int {
	slots := t.slots
	pos, posBits := t.pos[:len(slots)], &t.reg.posBits
	for k, e := range es {
		rc := e.rec()
		s := &slots[rc]
		if e.kind() != recUpdate || s.phase != phaseLive {
			return k
		}
		// Not one condition with the position bit's test: the compiler
		// would make the resolve's result a value and test it again.
		if uint64(e>>maskShift)&posBits[s.ci] != 0 {
			if !pos[rc].resolveOldest1(pt) {
				return k // two in flight, or it changed nothing
			}
		}
		s.inflight--
		s.deliveredNewest(sent, view)
	}
	return len(es)
}

// usualAny is usualRun for records of one or two positions in flight.
// It walks a slice (no ring index to wrap and check), and the tracks by
// the slots' bounds check (the per-record arrays are of one length).
func (t *Table) usualAny(es []entry, seq uint32, sent, view msTime, pt pstamp) int {
	slots := t.slots
	pos, posBits := t.pos[:len(slots)], &t.reg.posBits
	for k, e := range es {
		rc := e.rec()
		s := &slots[rc]
		if e.kind() != recUpdate || s.phase != phaseLive {
			return k
		}
		if uint64(e>>maskShift)&posBits[s.ci] != 0 {
			// The oldest of one or two in flight, the track's own.
			if tr := &pos[rc]; tr.meta < 2*metaN1 {
				if !tr.resolveOldest1(pt) {
					return k // it changed nothing
				}
			} else if f := t.pp.fq1; int(rc) < len(f) {
				if !tr.resolveOldest2(pt, f[rc]) {
					return k
				}
			} else if !tr.resolveOldest2Sparse(&t.pp, rc, pt) {
				return k
			}
		}
		// flPosFull stays clear: one or two positions in flight, one fewer now.
		s.inflight--
		s.delivered(seq, sent, view)
	}
	return len(es)
}

// fateRecords applies a packet's fate to its records j0 … j1−1 (of those
// from ents[start]): every kind, delivered or dropped.
func (t *Table) fateRecords(p *pktRec, j0, j1, start int, f notify.Fate, sent, view msTime) {
	posBits, pk := &t.reg.posBits, posKey(stamp(t.viewMS), p.t)
	// A lost packet of this view: its positions may go again (flPosNow).
	lostNow := !f.Delivered && p.t == stamp(t.viewMS)
	var from msTime // restale's bound, for a lost packet's records
	if !f.Delivered {
		from = t.msOf(f.SentAt - t.cfg.MaxStaleness)
	}
	for j := j0; j < j1; j++ {
		k := start + j
		e := t.ents[k]
		rc := e.rec() // ghosts are freed with nothing in flight
		s := &t.slots[rc]
		mask := t.entMask(k, e)
		s.inflight--
		if f.Delivered {
			s.delivered(uint32(f.Seq), sent, view)
		}
		posBit := posBits[s.ci] // classes[s.ci].posBit, without the class's line
		if mask&posBit != 0 {
			tr := &t.pos[rc]
			if tr.resolveOwn(&t.pp, pk, f.Delivered) {
				s.fl &^= flPosFull // none in flight now
			} else {
				tr.resolve(&t.pp, rc, pk, f.Delivered)
				s.set(flPosFull, tr.full())
			}
			if lostNow {
				s.fl &^= flPosNow // this view's position was lost: it may go again
			}
		}
		switch e.kind() {
		case recCreate:
			was := s.wants()
			s.fl &^= flCreateInFlight
			if f.Delivered {
				s.fl |= flCreated
				if s.phase == phaseCreating {
					s.phase = phaseLive
				}
			} else {
				t.rareOf().CreatesLost++
				t.restale(s, f, from)
			}
			t.repend(s, was)
		case recUpdate:
			if f.Delivered {
				break
			}
			r := t.rareOf()
			r.UpdatesLost++
			// The groups no later packet carries. None does when this
			// packet is the ghost's newest record (a write sets lastSeq
			// and the groups' lastField together): every group it
			// carried (a fate before the next write, as on loopback).
			lost := mask
			if s.lastSeq != uint32(f.Seq) {
				lost = 0
				for m := mask; m != 0; m &= m - 1 {
					g := bits.TrailingZeros64(m)
					if t.fieldSeq(rc, s, g) == uint8(f.Seq) {
						lost |= 1 << uint(g)
					}
				}
				r.Suppressed += uint64(bits.OnesCount64(mask &^ lost)) // none when every group is lost
			}
			r.Redirtied += uint64(bits.OnesCount64(lost))
			// Killing too: the entity may re-enter before the kill goes out
			// (the kill is then cancelled and the ghost must be complete).
			if lost != 0 {
				if s.phase == phaseLive && !t.wideDirty {
					// wants and setDirty, for the usual ghost: a live
					// one wants to send while it has dirty groups.
					if s.dirty == 0 {
						t.npend++
					}
					s.dirty |= uint32(lost)
				} else {
					was := s.wants()
					t.setDirty(rc, s, t.dirtyOf(rc, s)|lost)
					t.repend(s, was)
				}
				if lost&posBit != 0 {
					// Resend the position even if the client has it: the
					// stamp matters (a rest marker).
					s.restCopies = max(s.restCopies, 1)
				}
				t.restale(s, f, from)
			}
		case recKill:
			was := s.wants()
			s.fl &^= flKillInFlight
			t.repend(s, was)
			if f.Delivered {
				t.free(rc) // the last record, if it moves here, has its entries renamed
				continue
			}
			t.rareOf().KillsLost++
		}
		if s.phase == phaseKilling { // settle's own test, without the call for every record
			t.settle(rc)
		}
	}
}

// sampleFateDelay folds one delivered packet's fate delay into the estimate.
func (t *Table) sampleFateDelay(d time.Duration) {
	if !t.fateSeen {
		t.fateDelay, t.fateSeen = d, true
		return
	}
	t.fateDelay += (d - t.fateDelay) / 8
}

// restale makes a ghost whose newest record was lost as stale as the client's
// copy really is: from the newest delivered send, but no more than
// MaxStaleness before the lost one (so one lost packet of a ghost idle for an
// hour does not jump it ahead of everything).
func (t *Table) restale(s *slot, f notify.Fate, since msTime) {
	if s.lastSeq != uint32(f.Seq) {
		return // a later packet carries this ghost; its staleness is current
	}
	if s.ackAt > since { // 0, none, is not
		since = s.ackAt
	}
	if since < s.since {
		s.since = since
	}
}

// findPacket returns the index of seq's transmission record. Records keep
// 32 bits of their seq: every one lies less than 2^32 before the newest
// Write's (t.lastSeq), so its distance back from that names it.
func (t *Table) findPacket(seq uint64) (int, bool) {
	if !t.wrote || seq > t.lastSeq || t.lastSeq-seq >= 1<<32 {
		return 0, false
	}
	// Fates come mostly in send order (notify's), so the oldest record,
	// the one the release in OnFate reads next, is the usual match: no
	// search, no line of the ring but the head's. Records in the window
	// differ in their low 32 bits, so equal ones name the same packet.
	if h := int(t.pktHead); t.pktLen > 0 && t.pkts[h].seq == uint32(seq) {
		return h, !t.pkts[h].resolved // the head is never resolved (OnFate's release)
	}
	last := uint32(t.lastSeq)
	back := last - uint32(seq)
	head, n := int(t.pktHead), int(t.pktLen)
	lo, hi := 0, n
	mask := len(t.pkts) - 1
	for lo < hi { // records are in increasing seq order: decreasing distance back
		mid := int(uint(lo+hi) >> 1)
		if last-t.pkts[(head+mid)&mask].seq > back {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == n {
		return 0, false
	}
	i := (head + lo) & mask
	if t.pkts[i].seq != uint32(seq) || t.pkts[i].resolved {
		return 0, false
	}
	return i, true
}

// delivered records the delivery of packet seq, sent at sent and written
// from view, which carried s (the three fate walks' shared bookkeeping).
// The msTimes compare as they are (none wraps; 0, none, is below every
// time).
func (s *slot) delivered(seq uint32, sent, view msTime) {
	if sent < s.ackAt {
		return
	}
	s.ackAt = sent
	// The packet carried the ghost, so it is at most lastSeq, and in
	// flight: less than maxSeqSpan back.
	if back := uint8(s.lastSeq - seq); back < s.ackBack {
		s.ackBack = back
	}
	s.confirmView(sent, view)
}

// deliveredNewest is delivered of the ghost's newest packet (seq ==
// s.lastSeq: usualNewest's): its distance back is 0, below or at any.
func (s *slot) deliveredNewest(sent, view msTime) {
	if sent < s.ackAt {
		return
	}
	s.ackAt, s.ackBack = sent, 0
	s.confirmView(sent, view)
}

// confirmView records that the client holds the state of the view a
// packet sent at sent was written from (view): anything changed in a
// later view is still unconfirmed (counted from SentAt: pessimistic by
// less than one view).
func (s *slot) confirmView(sent, view msTime) {
	if view >= s.lastChg {
		s.pendChg = 0
	} else if s.pendChg != 0 && sent > s.pendChg {
		s.pendChg = sent
	}
}
