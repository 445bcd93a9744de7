package sim

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/ghostwire/ghostwire/zones/handoff"
)

// handoffGrace is the default of Config.HandoffGrace: how far past the
// moment a replica's owner let it go (handed it on) the heir's batches
// must reach before one that leaves it out drops it. See awaitHeir.
const handoffGrace = 3 // the default of Config.HandoffGrace

// sendReplicas builds one batch per neighbour: every entity this zone owns
// within BorderRange of the neighbour's rectangle (DESIGN §5: players at a
// border see across it). Batches are complete, not deltas: the receiver
// replaces what it had, so a lost or late batch heals with the next one.
//
// The batches leave with the Output and are read by other actors after
// Step returns, so their entities are in one array of the tick's size for
// all neighbours, which the zone reuses once every receiver released its
// batch (ReplicaBatch.Release; a batch never released leaves its array to
// the collector): the slots are listed first (in a buffer the zone keeps),
// then copied. A new array each tick was 18 MB in 40 s at 1,000 players
// (cmd/capacity), GC work for nothing. Appending
// Replica by Replica to each batch cost a doubling per batch and left up
// to half of each batch's array unused (the zone's largest allocation
// after its snapshot).
//
// An entity farther than BorderRange inside this zone's rectangle is
// farther than that from every other zone (zones do not overlap): most of
// a zone's entities. One pass lists the others, the candidates, and each
// neighbour's test runs over those only (it ran over every slot for every
// neighbour). stepSlots lists them in its walk (replicaCand).
func (z *Zone) sendReplicas(now time.Duration) {
	r2 := z.border * z.border
	cand := z.replCand // listed by stepSlots (replicaCand)
	z.pruneCommitting(now)
	slots, ends := z.replSlots[:0], z.replEnds[:0]
	for _, n := range z.nbrs {
		// world.Rect.Dist2's distance by gap, bit for bit, its rectangle
		// in locals: Dist2 no longer inlines, and its float max, inlined,
		// cost a sequence of instructions an operand (≈ 11 instructions a
		// candidate a neighbour).
		minX, minZ, maxX, maxZ := n.Min[0], n.Min[1], n.Max[0], n.Max[1]
		for _, s := range cand {
			e := &z.ents[s]
			dx, dz := gap(float64(e.state.Pos[0]), minX, maxX), gap(float64(e.state.Pos[2]), minZ, maxZ)
			if dx*dx+dz*dz > r2 {
				continue
			}
			slots = append(slots, s)
		}
		for _, c := range z.committing {
			e := &z.ents[c.slot]
			if n.ID == e.rp.owner || n.Dist2(float64(e.state.Pos[0]), float64(e.state.Pos[2])) > r2 {
				continue
			}
			slots = append(slots, c.slot)
		}
		ends = append(ends, len(slots))
	}
	z.replSlots, z.replEnds = slots, ends
	var all []Replica
	var buf *replicaBuf
	if len(slots) > 0 {
		buf = z.replBuf(len(slots))
		all = buf.ents
	}
	for i, s := range slots {
		e := &z.ents[s]
		all[i] = Replica{
			ID: e.id, Kind: e.kind, Epoch: e.epoch, State: e.state,
			Health: e.health, Flags: e.flags, Name: e.name, Extra: e.extra,
		}
	}
	if len(z.committing) > 0 {
		for i, s := range slots {
			if z.ents[s].role == roleReplica { // committing: listed at the epoch it had here
				all[i].Epoch--
			}
		}
	}
	start := 0
	for i, n := range z.nbrs {
		b := ReplicaBatch{From: z.cfg.Zone, To: n.ID, Tick: z.tick, Sent: now}
		if end := ends[i]; end > start {
			// Capped: a receiver that appends to its batch cannot write
			// into the next neighbour's.
			b.Entities = all[start:end:end]
			b.buf = buf
			buf.refs.Add(1)
			start = end
		}
		z.out.Replicas = append(z.out.Replicas, b)
	}
}

// replicaCand lists owned or frozen slot s (entity e) in replCand, the
// candidates for sendReplicas' batches, unless it is farther than
// BorderRange inside the zone's rectangle (replInner): stepSlots calls it
// for every such slot, in slot order, after the slot's step and crossing.
func (z *Zone) replicaCand(s int, e *entity) {
	x, zz := float64(e.state.Pos[0]), float64(e.state.Pos[2])
	if in := &z.replInner; x > in.Min[0] && x < in.Max[0] && zz > in.Min[1] && zz < in.Max[1] {
		return
	}
	z.replCand = append(z.replCand, int32(s))
}

// replicaBuf is one tick's replica array, shared by its batches: refs
// counts the batches not released yet; the last Release hands it back to
// its zone (spare).
type replicaBuf struct {
	refs  atomic.Int32
	ents  []Replica
	spare *atomic.Pointer[replicaBuf]
}

// replBuf returns an array of n replicas for this tick's batches: the
// zone's spare, released by every receiver of an earlier tick's batches,
// when it has room (and not more than about twice n), else a new one.
func (z *Zone) replBuf(n int) *replicaBuf {
	b := z.replSpare.Swap(nil)
	if b == nil || cap(b.ents) < n || cap(b.ents) > 2*n+16 {
		b = &replicaBuf{ents: make([]Replica, n), spare: &z.replSpare}
	}
	all := b.ents[:cap(b.ents)]
	clear(all[n:]) // names of an earlier tick's replicas
	b.ents = all[:n]
	return b
}

// Release tells the zone that built b that its receiver is done with
// b.Entities (copied them into its own zone, or encoded them): the zone
// reuses the array once every batch of the tick is released. b is empty
// afterwards. Releasing is optional (an unreleased batch's array is
// collected) and a batch not from Step has nothing to release.
func (b *ReplicaBatch) Release() {
	buf := b.buf
	b.buf, b.Entities = nil, nil
	if buf != nil && buf.refs.Add(-1) == 0 {
		buf.spare.CompareAndSwap(nil, buf)
	}
}

// Replicas takes a neighbour's batch: its entities near this zone, all of
// them. Entities this zone owns are never overwritten (ownership wins over
// a copy), an older epoch never overwrites a newer one (a batch from a
// previous owner that arrives late), and the neighbour's replicas missing
// from the batch are dropped, unless a handoff in flight explains their
// absence (see awaitHeir).
func (z *Zone) Replicas(now time.Duration, b *ReplicaBatch) {
	if b.To != z.cfg.Zone || b.From == z.cfg.Zone {
		z.stats.ReplicasMisrouted++
		return
	}
	built := z.builtAt(now, b)
	z.batchSeq++
	seq := z.batchSeq
	for i := range b.Entities {
		r := &b.Entities[i]
		s, ok := z.byID.get(r.ID)
		if ok {
			e := &z.ents[s]
			if e.role != roleReplica || r.Epoch < e.epoch {
				z.stats.ReplicasIgnored++
				if rp := e.rp; e.role == roleReplica && rp.owner == b.From {
					rp.seenBatch = seq // still listed by its owner: not swept
				}
				continue
			}
		} else {
			s = z.slotAlloc(r.ID)
			z.ents[s].role = roleReplica
			z.replicas, z.replicasAdded = append(z.replicas, s), true
		}
		e := &z.ents[s]
		rp := z.rep(e)
		e.kind, e.epoch, rp.owner, rp.seen, rp.seenBatch, rp.wait, rp.released = r.Kind, r.Epoch, b.From, z.replClock, seq, 0, false
		e.state, e.health, e.flags, e.name, e.extra = r.State, r.Health, r.Flags, r.Name, r.Extra
	}
	if z.replicasAdded {
		slices.Sort(z.replicas)
		z.replicas, z.replicasAdded = slices.Compact(z.replicas), false
	}
	// In slot order, as a walk over every slot (slotFree's order is the
	// free list's, which later slots come from).
	for _, s := range z.replicas {
		e := &z.ents[s]
		if e.role != roleReplica {
			continue
		}
		rp := e.rp
		if rp.seenBatch == seq || (rp.owner != b.From && rp.wait == 0) {
			continue
		}
		if z.keepUnlisted(now, e, b.From, built) {
			continue
		}
		if rp.wait != 0 {
			z.stats.ReplicasHeldDropped++
		}
		z.slotFree(s)
	}
	z.stats.ReplicaBatches++
}

// keepUnlisted decides on replica e that a batch from zone from, built at
// built (this zone's clock: builtAt), does not list: its owner's batch, or
// any batch while e waits for its heir. It reports whether e stays.
func (z *Zone) keepUnlisted(now time.Duration, e *entity, from string, built time.Duration) bool {
	rp := e.rp
	if rp.wait != 0 {
		// Waiting for its heir: only the heir's batches decide, and only
		// one built after the wait began.
		return z.heir(e) != from || built < rp.wait
	}
	if rp.owner != from {
		return true
	}
	if _, reserved := z.hand.Reserved(e.id); reserved {
		// Its owner is handing it to this zone (the offer is accepted, the
		// Commit on its way): keep it in its slot for the acquisition.
		// Across processes the owner's next batch, without it, can come
		// before the Commit.
		return true
	}
	if z.handingTo(e, from) {
		// This zone handed it to from and the Commit is not acknowledged:
		// from cannot list it before it has it, however long the Commit
		// takes (across processes it waits for the player record's write).
		return true
	}
	if z.heir(e) == "" {
		return false // out of range inside its owner's zone: gone
	}
	z.awaitHeir(now, e)
	return true
}

// awaitHeir holds replica e, which its owner no longer lists because the
// entity is being handed on, until a batch its heir (heir: the zone taking
// it) built after now + HandoffGrace periods either lists it (it moves on
// in the same slot and generation: no viewer's interest set changes) or
// leaves it out (it is really gone). The wait begins only once the heir
// has it: a zone that hands an entity away lists it to its other
// neighbours until the Commit is acknowledged (sendReplicas), and does
// not await its heir before that itself (handingTo). So a batch the heir
// built after the wait began lists it, if it is still there.
//
// "Built after" is measured on the heir's clock (builtAt), not by when
// its batch arrives: across processes a batch came 1–2 s late on a loaded
// host while both zones ticked on time, and a hold of HandoffGrace ticks
// of this zone's time (1 s in zoned) ran out before the heir's first
// batch with the entity arrived; every viewer's ghost of it was killed
// and re-created under a new ghost id a moment later
// (actors/node TestClusterThreeNodesAcrossBorders with a CPU hog beside
// it, 2–3 runs in 17). HandoffGrace is the margin for the clocks' mapping.
//
// Bound: the wait restarts the replica's silence (rp.seen), and
// expireReplica drops it ReplicaTTL of live time later whatever its heir
// sent: a heir that died, or whose batches lag more than that, does not
// keep it longer.
func (z *Zone) awaitHeir(now time.Duration, e *entity) {
	rp := e.rp
	rp.wait = now + time.Duration(z.cfg.HandoffGrace)*z.period
	rp.seen = z.replClock
	z.stats.ReplicasHeld++
}

// heir names the zone that takes replica e on from its owner, or "" if
// none does: the zone this one handed it to (its replica since, not yet
// listed by it), else
// the neighbour its last known position lies in. An owner lists every
// entity it owns near this zone, frozen ones too (at the position it was
// offered from), so an entity it stops listing while it stood in another
// neighbour has usually been committed there. One that walked out of range
// inside its owner's zone has no heir (it goes at once); one that walked
// out of range while still owned from across a border (MinDwell) is held
// until the zone it stood in says it has no such entity.
func (z *Zone) heir(e *entity) string {
	rp := e.rp
	if rp.released {
		return rp.owner
	}
	to, ok := z.w.ZoneAt(float64(e.state.Pos[0]), float64(e.state.Pos[2]))
	if !ok || to.ID == rp.owner || to.ID == z.cfg.Zone {
		return ""
	}
	for _, n := range z.nbrs {
		if n.ID == to.ID {
			return to.ID
		}
	}
	return "" // no batches from there: nobody will list it here
}

// batchClock maps one neighbour's batch times (ReplicaBatch.Sent, on the
// sender's clock: another process's monotonic clock, across processes) to
// this zone's: the least delay (receipt − Sent) its batches showed within
// the last one or two windows is the clocks' offset plus the link's least
// latency, so Sent plus it is when the batch was built, by this zone's
// clock, give or take how much that least latency differs between links
// (awaitHeir's margin, HandoffGrace, covers it). Windows let it follow the
// clocks' drift and a neighbour's restart.
type batchClock struct {
	least, prev time.Duration // least delay in this window, in the last
	turn        time.Duration // this window's end (receipt time); 0: no batch yet
}

// batchClockWindow is how long one batchClock window lasts.
const batchClockWindow = 30 * time.Second

// builtAt returns when b was built, by this zone's clock, as its sender's
// batchClock maps it; now for a batch from a zone that is no neighbour
// (never an heir). A batch that arrives late maps to before its receipt.
func (z *Zone) builtAt(now time.Duration, b *ReplicaBatch) time.Duration {
	i := 0
	for i < len(z.nbrs) && z.nbrs[i].ID != b.From {
		i++
	}
	if i == len(z.nbrs) {
		return now
	}
	if z.batchClocks == nil {
		z.batchClocks = make([]batchClock, len(z.nbrs))
	}
	c := &z.batchClocks[i]
	d := now - b.Sent
	switch {
	case c.turn == 0:
		c.least, c.prev, c.turn = d, d, now+batchClockWindow
	case now >= c.turn:
		c.prev, c.least, c.turn = c.least, d, now+batchClockWindow
	default:
		c.least = min(c.least, d)
	}
	return b.Sent + min(c.least, c.prev)
}

// handingTo reports whether this zone handed e's entity to zone to and
// has not had the Commit acknowledged yet (the handoff machine resends it
// for at most its CommitGiveUp).
func (z *Zone) handingTo(e *entity, to string) bool {
	ph, _, peer := z.hand.Status(e.id)
	return ph == handoff.PhaseCommitting && peer == to
}

// replicaStallTicks bounds what one tick gap adds to the replicas' clock
// (replicaClock): a gap up to this many periods counts in full (a zone
// that falls behind and skips ticks still ages its replicas at the wall
// clock's pace), a longer one counts as this many periods.
const replicaStallTicks = 4

// replicaClock advances the replicas' clock by the time since the last
// Step, at most replicaStallTicks periods: the zone's live time, on which
// a replica's silence is measured (rp.seen, expireReplica, staleness).
//
// A gap longer than that is this zone's own stall (a starved goroutine or
// host), not its neighbours': they kept sending, and their batches of the
// stall wait in this zone's mailbox behind the tick the zone resumes with
// (the timer posts it first). On the wall clock that tick expired every
// replica of every neighbour at once, and each viewer's ghost of them was
// killed and re-created under a new ghost id when the batches were read a
// moment later (actors/node TestClusterThreeNodesAcrossBorders on a loaded
// host: 223 replicas of three neighbours expired together).
//
// Bound: a replica whose owner really went quiet (its node died) is
// dropped once ReplicaTTL of live time has passed since its last batch —
// with ticks on time, on the first tick more than ReplicaTTL after the
// tick before its last batch (a batch taken between two ticks counts from
// the tick before: up to one period sooner than on the wall clock), and in
// wall time after at most ReplicaTTL plus whatever the zone's own stalls
// took beyond replicaStallTicks periods each.
func (z *Zone) replicaClock(now time.Duration) {
	elapsed := z.period
	if z.replAt != 0 && now > z.replAt {
		elapsed = now - z.replAt
	}
	z.replAt = now
	z.replClock += min(elapsed, replicaStallTicks*z.period)
}

// expireReplica drops replica e (slot s) if its owner has sent nothing
// for ReplicaTTL of the zone's live time (replicaClock), unless a handoff
// in flight brings or takes it (no owner lists it meanwhile, and it never
// left its viewers' range):
//
//   - handed away by this zone, the Commit unacknowledged: held while it
//     is (the new owner cannot list it yet), then awaiting the new owner's
//     batches (awaitHeir), ReplicaTTL at most;
//   - handed to this zone (its offer accepted, the Commit on its way): held
//     for as long as a Commit may still come, CommitGiveUp + MaxAge past
//     ReplicaTTL.
//
// Across processes the Commit waits for the player record's write, which
// on a starved host took over 2 s (the node's ReplicaTTL): both zones
// dropped the entity, and every viewer's ghost of it was killed and
// re-created under a new ghost id once the Commit came.
// It reports whether it did.
func (z *Zone) expireReplica(now time.Duration, s int, e *entity) bool {
	if z.replClock-e.rp.seen > z.cfg.ReplicaTTL && !z.handoffHolds(e, now) {
		z.slotFree(int32(s))
		z.stats.ReplicasExpired++
		return true
	}
	return false
}

// handoffHolds reports whether a handoff in flight keeps replica e past
// ReplicaTTL (see expireReplica). Asked only of replicas past it.
func (z *Zone) handoffHolds(e *entity, now time.Duration) bool {
	rp := e.rp
	if rp.released && rp.wait == 0 {
		if !z.handingTo(e, rp.owner) {
			// Acknowledged (or given up) since the last tick, and not
			// listed by the new owner yet: its silence counts from now.
			z.awaitHeir(now, e)
		}
		return true
	}
	if _, ok := z.hand.Reserved(e.id); ok {
		hc := z.hand.Config()
		return z.replClock-rp.seen <= z.cfg.ReplicaTTL+hc.CommitGiveUp+hc.MaxAge
	}
	return false
}

// committingSlot is a slot this zone handed away whose Commit is not
// acknowledged yet (Zone.committing): sendReplicas lists it.
type committingSlot struct {
	slot int32
	id   uint64
}

// handedAway turns slot s, whose entity this zone has just committed to
// zone to, into to's replica, unchanged: players here keep seeing it (same
// slot, same generation: no leave and re-enter) until to's batches take
// over (awaitHeir). Its other neighbours see it listed by this zone until
// the Commit is acknowledged (sendReplicas).
func (z *Zone) handedAway(s int32, to string) {
	e := &z.ents[s]
	rp := z.rep(e)
	e.role, e.epoch = roleReplica, e.epoch+1
	z.owned[s] = nil
	z.replicas, z.replicasAdded = append(z.replicas, s), true
	rp.owner, rp.seen, rp.released = to, z.replClock, true
	z.committing = append(z.committing, committingSlot{s, e.id})
}

// pruneCommitting forgets the slots of z.committing that are no longer
// that replica, and those whose Commit was acknowledged (or given up),
// which from now on await their new owner's batches (awaitHeir).
func (z *Zone) pruneCommitting(now time.Duration) {
	keep := z.committing[:0]
	for _, c := range z.committing {
		e := &z.ents[c.slot]
		if e.id != c.id || e.role != roleReplica || !e.rp.released {
			continue
		}
		if z.handingTo(e, e.rp.owner) {
			keep = append(keep, c)
		} else if e.rp.wait == 0 {
			z.awaitHeir(now, e)
		}
	}
	z.committing = keep
}

// gap is max(lo−v, 0, v−hi) (world.Rect.Dist2's per axis) for lo ≤ hi (a
// zone's rectangle), bit for bit, by compares: lo−v NaN or above 0 (v
// below lo, or NaN), it is the max (v−hi is then below 0); else v−hi if
// above 0, else 0 (+0, as max gives: every operand is then 0 or below).
func gap(v, lo, hi float64) float64 {
	if d := lo - v; !(d <= 0) {
		return d
	}
	if d := v - hi; d > 0 {
		return d
	}
	return 0
}
