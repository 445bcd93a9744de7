package sim

import (
	"math"
	"math/bits"
	"slices"
	"time"

	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/interest"
	"github.com/ghostwire/ghostwire/zones/world"
)

// ViewRef names a player whose view is due this tick: exactly one per
// player with a connection per tick. AppendView materializes it (into the
// caller's pooled buffer, so the tick allocates nothing for views).
//
// 24 bytes (a zone keeps a tick's worth, one a player): the player's
// connection address is its Control's (Zone.Control).
type ViewRef struct {
	Entity uint64
	// Epoch is the player's handoff epoch here: it grows with every
	// handoff, so a connection can tell a late view from the previous
	// owner (another process, say) from the new owner's.
	Epoch handoff.Epoch
	slot  int32
	// control: the player has a Control this tick (Zone.Control), with
	// correct its Correct.
	control, correct bool
}

// Slot is the zone slot of ref's player this tick: a key a caller may
// cache per-player things under for the tick's views (checking the
// player's id on use: a slot is reused after its player leaves).
func (ref ViewRef) Slot() int32 { return ref.slot }

// Control is a player's control-object result for one tick, for its
// connection: the newest move applied and the state after it.
type Control struct {
	Entity      uint64
	Epoch       handoff.Epoch // as ViewRef.Epoch
	Conn        string
	LastApplied uint64
	State       move.ControlState
	// Correct asks for a full-state correction now (ControlWriter.Force):
	// spawn, teleport, world edge, moves held back by the speed limit.
	Correct bool
	slot    int32 // the player's (ControlEvents)
}

// Replica is one entity's state as a neighbour sees it.
type Replica struct {
	ID     uint64
	Kind   uint8
	Epoch  handoff.Epoch // the owner's; a replica never goes back to an older epoch
	State  move.ControlState
	Health int32
	Flags  uint32
	Name   ghost.Name
	Extra  [4]uint32
}

// ReplicaBatch is the complete set of one zone's entities within
// BorderRange of a neighbour, for one tick: the neighbour replaces what it
// had from this zone with it.
type ReplicaBatch struct {
	From, To string
	Tick     uint64
	Sent     time.Duration
	// Entities is the tick's: the zone that built the batch reuses it
	// after Release. Hand the batch off; its receiver copies what it
	// needs and releases it.
	Entities []Replica

	buf *replicaBuf // Step's batches: the array Release gives back
}

// Output is what one Step produced. Its slices are reused by the next Step;
// ReplicaBatch.Entities are not (until every batch of the tick is
// released: ReplicaBatch.Release).
//
// The tick's Controls are not listed: each is the state of a player that
// has a view (Zone.Control of its ViewRef), and a list of them cost a
// zone 96 bytes a player for good (Controls makes one on demand).
type Output struct {
	Send     []handoff.Msg // to zones (handoff) and to connections (Route)
	Views    []ViewRef
	Replicas []ReplicaBatch

	z        *Zone
	controls []Control // Controls' buffer
}

// Controls lists the tick's Controls (Zone.Control of every view that has
// one, in the views' order), in a buffer reused by the next call. Call it
// before the zone changes (the next Step, Teleport, a handoff).
func (o *Output) Controls() []Control {
	o.controls = o.controls[:0]
	for _, ref := range o.Views {
		if c, ok := o.z.Control(ref); ok {
			o.controls = append(o.controls, c)
		}
	}
	return o.controls
}

// Step advances the zone by one tick at time now (the tick's scheduled
// time; the zone does not read a clock). A zone whose ticks are paused
// runs its handoff timers alone with HandoffTimers.
func (z *Zone) Step(now time.Duration) *Output {
	z.now = now
	z.tick++
	z.snap = nil
	z.ov.account(z)
	out := &z.out
	out.Send, out.Views, out.Replicas, out.z = out.Send[:0], out.Views[:0], out.Replicas[:0], z

	z.replicaClock(now)
	z.hand.Tick(now, &z.hout)
	z.applyHandoff(now)

	z.stepSlots(now) // expiry, moves, NPCs, crossings, views, the grid's records
	z.buildGrid()
	z.updateInterest()
	z.sendReplicas(now)
	out.Send = append(out.Send, z.pend...)
	z.pend = nil
	return out
}

// maxOwed bounds the input time a player may be owed (stepPlayer): more
// than the client's move window (64 moves, 2.1 s at 30 Hz) plus a round
// trip. A client that sends slower than real time to bank it gains at
// most this much at double speed, never more ground than real time allows.
const maxOwed = 3 * time.Second

// stepSlots is the tick's walk over the slots before the grid's Build:
// each replica's expiry (expireReplica), each owned player's queued moves
// (stepPlayer), each owned wanderer's step (stepNPC), each owned entity's
// crossing (crossing), each owned or frozen slot's view (emitView) and
// replica candidacy (replicaCand), then every live slot's grid record
// (file). Each slot's work reads and writes only that slot (and the
// zone's counters and the tick's lists; the handoffs begun, the views and
// the candidates go out in slot order, as before; nothing reads the
// grid's records before its Build, and nothing later in the tick changes
// a view, a role or a position), so one walk does what seven did in turn:
// each read every slot's first line again, and the views' read every
// player's record again where stepPlayer had just read it.
func (z *Zone) stepSlots(now time.Duration) {
	pt := z.playerTick(now)
	nt := z.npcTick()
	m2 := z.cfg.HandoffMargin * z.cfg.HandoffMargin
	held := z.holdFar()
	own := &z.self.Rect
	z.replCand = z.replCand[:0]
	z.replicas, z.replicasAdded = z.replicas[:0], false
	for s := range z.ents {
		z.prefetchStep(s)
		e := &z.ents[s]
		switch e.role {
		case roleFree:
			continue
		case roleReplica:
			if z.expireReplica(now, s, e) {
				continue
			}
			z.replicas = append(z.replicas, int32(s))
		case roleOwned:
			switch e.kind {
			case KindPlayer:
				z.stepPlayer(&pt, e)
			case KindNPC:
				z.stepNPC(&nt, s, e)
			}
			if !inside(own, e.state.Pos[0], e.state.Pos[2]) {
				z.crossing(now, s, e, m2)
			}
			z.emitView(s, e)
			z.replicaCand(s, e)
		case roleFrozen:
			z.emitView(s, e)
			z.replicaCand(s, e)
		}
		z.file(s, e, held)
	}
}

// playerTick is what stepPlayer reads of the zone for every player, taken
// once a tick: the loop's stores (the player's queue, credit, state) may
// write memory, so every field of z read in it was loaded again for every
// player and every move.
type playerTick struct {
	now, elapsed, gapClock, period, maxCredit time.Duration
	maxSpeed                                  float64
	step                                      move.StepFunc
}

// playerTick advances the players' clocks for a tick at now and returns
// what stepPlayer needs.
func (z *Zone) playerTick(now time.Duration) playerTick {
	elapsed := z.period
	if z.prevStep != 0 && now > z.prevStep {
		elapsed = now - z.prevStep
	}
	z.prevStep = now
	// The move queues' gap timeout runs on the ticks the zone ran, at most
	// a period each, not on the scheduled clock: a missing move may be
	// queued in this zone's mailbox behind the tick (ticks overtake
	// inputs), and a tick that came late on a starved host gave it no
	// chance to be taken. On the wall clock one tick 1.5 s late skipped
	// the gap as lost at once; a zone that keeps up sees no difference.
	z.gapClock += min(elapsed, z.period)
	return playerTick{now: now, elapsed: elapsed, gapClock: z.gapClock, period: z.period,
		maxCredit: z.cfg.MaxCredit, maxSpeed: float64(z.cfg.MaxSpeed), step: z.cfg.Step}
}

// stepPlayer applies an owned player's queued moves within its time
// credit.
func (z *Zone) stepPlayer(t *playerTick, ent *entity) {
	now, elapsed, gapClock, period := t.now, t.elapsed, t.gapClock, t.period
	maxCredit, maxSpeed, step := t.maxCredit, t.maxSpeed, t.step
	e := z.pl(ent)
	if e.renumber && now-e.renumberAt >= renumberWait {
		e.renumber = false
		e.queue.Reset(0)
	}
	// Credit follows the scheduled clock, not the number of ticks: a
	// zone that skipped ticks owes its players that time too.
	// A restored player's replay burst (InputBatch) is spent, not capped.
	// Time beyond the credit's cap while no move was ready is owed, not
	// forfeited: the player's input was late (an outage, a NATS
	// reconnect, a stalled link), and the backlog that follows is
	// repaid at up to one extra tick period per tick. Without it a late
	// player stays behind its input for good, and a second stall pushes
	// it past the client's window. A client that runs fast has moves
	// ready, so it forfeits what exceeds the cap; either way the input
	// time applied never exceeds real time plus MaxCredit. Time this
	// zone's own tick came late (a stalled host: the moves waited
	// here) is owed whether moves were ready or not.
	var over time.Duration
	switch room := maxCredit - e.credit; {
	case room < 0: // a restored player's replay burst: above the cap, owed nothing
	case elapsed > room:
		e.credit += room
		over = elapsed - room
	default:
		e.credit += elapsed
	}
	if late := min(over, elapsed-period); late > 0 {
		e.owed = min(e.owed+late, maxOwed)
		over -= late
	}
	start := ent.state.Pos
	var spent, repaid time.Duration
	for {
		// The move after the last applied, at the queue's head (Head,
		// inlined), else whatever Next says is ready (a gap).
		m := e.queue.Head()
		if m == nil {
			if m = e.queue.Next(gapClock); m == nil {
				e.owed = min(e.owed+over, maxOwed) // starved: nothing ready
				break
			}
		}
		dt := time.Duration(m.Dt) * time.Second / move.DtHz
		if need := dt - e.credit; need > 0 && need <= e.owed && repaid+need <= period {
			e.owed -= need
			e.credit += need
			repaid += need
			z.stats.MovesCaughtUp++
		}
		if dt > e.credit {
			// Faster than real time: the rest waits for later ticks
			// (the client will mispredict and get a correction).
			z.stats.MovesThrottled++
			ent.correct = true
			break
		}
		mv := *m // Pop may move the queue's moves
		e.queue.Pop()
		if err := mv.Validate(); err != nil {
			z.stats.MovesInvalid++
			continue
		}
		e.credit -= dt
		spent += dt
		ent.state = step(ent.state, mv, mv.Seconds())
		z.stats.MovesApplied++
	}
	z.seqExtra(ent)
	// The world's edge is a wall.
	x, zz := z.w.Clamp(float64(ent.state.Pos[0]), float64(ent.state.Pos[2]))
	if float32(x) != ent.state.Pos[0] || float32(zz) != ent.state.Pos[2] {
		ent.state.Pos[0], ent.state.Pos[2] = float32(x), float32(zz)
		ent.state.Vel[0], ent.state.Vel[2] = 0, 0
		ent.correct = true
		z.stats.EdgeClamps++
	}
	// Teleport detection: no legal sequence of moves covers more ground
	// than MaxSpeed × the input time it spent.
	dx, dz := float64(ent.state.Pos[0]-start[0]), float64(ent.state.Pos[2]-start[2])
	allowed := maxSpeed*spent.Seconds()*1.001 + 1e-3
	if dx*dx+dz*dz > allowed*allowed {
		z.stats.TeleportsDetected++
		ent.correct = true
	}
}

// crossing offers owned entity e (slot s) to the zone it is in if it is
// past the margin beyond this zone's border (m2: the margin squared) and
// has dwelt here long enough.
// inside reports whether [x, z] lies in r's half-open interior
// [Min, Max): a point the zone owns there (world.Owns), so an owned
// entity there crosses nowhere. stepSlots tests it inline before calling
// crossing, which nearly every entity left at once (≈ 60 instructions an
// owned entity a tick, the call and Dist2's).
func inside(r *world.Rect, x, z float32) bool {
	fx, fz := float64(x), float64(z)
	return fx >= r.Min[0] && fx < r.Max[0] && fz >= r.Min[1] && fz < r.Max[1]
}

func (z *Zone) crossing(now time.Duration, s int, e *entity, m2 float64) {
	x, zz := float64(e.state.Pos[0]), float64(e.state.Pos[2])
	if z.self.Dist2(x, zz) < m2 || z.w.Owns(z.self, x, zz) {
		return
	}
	if now-e.since < z.cfg.MinDwell {
		z.stats.DwellHeld++
		return
	}
	to, ok := z.w.ZoneAt(x, zz)
	if !ok || to.ID == z.cfg.Zone {
		return
	}
	z.beginHandoff(now, int32(s), to.ID)
}

// ghostState converts an entity to its replicated form.
func ghostState(e *entity) ghost.State {
	return ghost.State{
		Pos:    [3]float64{float64(e.state.Pos[0]), float64(e.state.Pos[1]), float64(e.state.Pos[2])},
		Vel:    [3]float64{float64(e.state.Vel[0]), float64(e.state.Vel[1]), float64(e.state.Vel[2])},
		Yaw:    float64(e.state.Yaw),
		Health: e.health,
		Flags:  e.flags,
		Name:   e.name,
		Extra:  e.extra,
	}
}

// heldState is what a slot's far viewers need besides its held snapshot
// entry (Config.FarEvery): xz, the entity's position on the ground as of
// the last Step, which tells its viewers whether it is far; and t, the tick
// (its low 32 bits) of the snapshot that last refreshed the held entry (0:
// refresh it in the next). The held state itself is the snapshots': a
// copy of the live entry on a refresh, carried over from the previous
// snapshot between refreshes (ghost.SealHeld). 12 bytes a slot; the zone
// kept the state too (its replicated fields, 64 bytes a slot), converted
// it, set it and had it compared every tick.
type heldState struct {
	xz [2]float32
	t  uint32
}

// holdFar makes or drops the held records (Config.FarEvery) for this
// tick's overload level and reports whether far members are held.
func (z *Zone) holdFar() bool {
	held := z.ov.heldEvery > 1
	switch {
	case held && z.held == nil:
		// Taken afresh, each on its first tick held (t 0).
		z.held = make([]heldState, len(z.ents), cap(z.ents))
	case !held && z.held != nil:
		z.held = nil
	}
	return held
}

// file files live slot s's entity, owned or replica, in the grid (as of
// the next Build) and refreshes its kind and, if held, its held record's
// position (Config.FarEvery). (The tick's replicated states are not
// copied here: Snapshot and AppendView convert each entity's own state,
// which nothing changes between Step and the views.)
func (z *Zone) file(s int, e *entity, held bool) {
	var stale uint16
	if e.role == roleReplica {
		stale = uint16(min(uint64((z.replClock-e.rp.seen)/z.period), math.MaxUint16))
	}
	z.grid.Set(int32(s), e.state.Pos[0], e.state.Pos[2], interest.Aux(e.kind, e.gen, stale))
	z.kinds[s] = e.kind
	if held {
		z.held[s].xz = [2]float32{e.state.Pos[0], e.state.Pos[2]}
	}
}

// buildGrid builds the grid from the records stepSlots filed.
func (z *Zone) buildGrid() {
	if z.autoCell && z.tick%adaptEvery == 0 {
		z.adaptCell()
	}
	z.grid.Build()
}

// adaptEvery is how often (ticks) adaptCell looks at the zone's crowding.
const adaptEvery = 20

// adaptCell picks the grid's cell size for the zone's crowding (as of the
// last Build): a quarter of the leave radius in a crowd, half of it when
// sparse. A view query pays per cell row it crosses (≈ 9 rows at a
// quarter, 5 at a half) and per candidate it reads (more with larger
// cells); BenchmarkZoneTick-like zones of 1 km² measured (instructions a
// tick): 300 entities −5.5 % at a half, 1,200 +0.5 %, 2,400 +6 %. The
// switch is at 12/LeaveRadius² entities per m² (1,000 per km² at 110 m),
// with ±30 % hysteresis so a zone near it does not flip.
func (z *Zone) adaptCell() {
	r := float64(z.cfg.Interest.LeaveRadius)
	sx, sz := z.self.Rect.Size()
	rho := float64(z.grid.Built()) / (sx * sz)
	cross := 12 / (r * r)
	small, large := r/4, r/2
	cur := z.grid.CellSize()
	want := cur
	switch {
	case cur != large && rho < cross/1.3:
		want = large
	case cur != small && rho > cross*1.3:
		want = small
	}
	if want != cur && z.grid.SetCellSize(want) == nil {
		z.stats.CellChanges++
	}
}

// updateInterest recomputes every owned player's interest set, players in
// grid order so the cells one scans are still in cache for the next.
func (z *Zone) updateInterest() {
	every := z.ov.interestEvery
	seeding := len(z.seeds) > 0 // usually not: no lookup per player then
	if every > 1 {
		// Sets skipped this tick keep their last Update's priorities
		// (interest.Tracker.Hold), held before the first Update recomputes
		// the table they are computed from. (A frozen player's set is held
		// when it freezes, beginHandoff.)
		for _, sa := range z.grid.SlotAuxes() {
			s := sa.Slot
			if interest.AuxKind(sa.Aux) != KindPlayer || (z.tick+uint64(s))%every == 0 || seeding && z.seeds[s] != nil {
				continue
			}
			if p := z.ownedAt(s); p != nil {
				z.track.Hold(&p.set)
			}
		}
	}
	// Each owned player by Zone.owned and at its filed position (the
	// slot's, bit for bit: file), so that the pass reads none of the
	// slots' lines.
	xz := z.grid.Positions()
	sas := z.grid.SlotAuxes()
	for i, sa := range sas {
		z.prefetchInterest(sas, i)
		if interest.AuxKind(sa.Aux) != KindPlayer {
			continue
		}
		s := sa.Slot
		p := z.ownedAt(s)
		if p == nil {
			// A frozen player's set is what its handoff snapshot took to the
			// new owner, which seeds the player's set there from it. Changed
			// here meanwhile, this zone's views would show the player
			// entities the new owner's set lacks: killed by its first view,
			// re-created later under a new ghost id. In one process a
			// handoff settles within the tick; across processes it spans
			// ticks, and this was the pop at process borders.
			continue
		}
		var ids []uint64
		if seeding {
			ids = z.seeds[s]
		}
		if ids != nil {
			slots := make([]int32, 0, len(ids))
			for _, id := range ids {
				if sl, ok := z.byID.get(id); ok {
					slots = append(slots, sl)
				}
			}
			p.set.Seed(z.grid, slots)
			delete(z.seeds, s)
		} else if every > 1 && (z.tick+uint64(s))%every != 0 {
			z.stats.InterestSkipped++
			continue
		}
		z.track.Update(&p.set, s, xz[i][0], xz[i][1], z.grid, nil)
	}
}

// ownedAt is slot s's player state if the slot is an owned player's
// (Zone.owned, filled here on a miss), else nil.
func (z *Zone) ownedAt(s int32) *playerSlot {
	if p := z.owned[s]; p != nil {
		return p
	}
	if e := &z.ents[s]; e.role == roleOwned && e.kind == KindPlayer {
		z.owned[s] = z.pl(e)
		return z.owned[s]
	}
	return nil
}

// emitView lists slot s's view if it is a player's with a connection,
// with its Control (Zone.Control) unless the player's new connection has
// not told yet how it numbers its moves (renumber). Frozen players get
// theirs too: a player frozen by its crossing this tick had its moves
// applied before it froze, and its connection must hear of them now, not
// a tick later from the new owner (that skipped update was the handoff
// hitch). stepSlots calls it for every owned or frozen slot in slot
// order, after the slot's crossing.
func (z *Zone) emitView(s int, e *entity) {
	if e.kind != KindPlayer || e.pl == nil || !e.pl.hasConn {
		return
	}
	ctl := !e.pl.renumber
	z.out.Views = append(z.out.Views, ViewRef{Entity: e.id, Epoch: e.epoch, slot: int32(s), control: ctl, correct: ctl && e.correct})
	if ctl {
		e.correct = false
	}
}

// Control is the Control of ref (from this tick's Output) if it has one:
// the player's newest applied move and its state now. Call it before the
// zone changes (the next Step, Teleport, a handoff).
func (z *Zone) Control(ref ViewRef) (Control, bool) {
	if !ref.control || int(ref.slot) >= len(z.ents) || z.ents[ref.slot].id != ref.Entity {
		return Control{}, false
	}
	e := &z.ents[ref.slot]
	return Control{
		Entity: ref.Entity, Conn: z.conn(e), Epoch: ref.Epoch, LastApplied: e.p().queue.LastApplied(), State: e.state, Correct: ref.correct,
		slot: ref.slot,
	}, true
}

// HasControl reports whether ref (from this tick's Output) has a Control
// (Control's ok), without making one.
func (z *Zone) HasControl(ref ViewRef) bool {
	return ref.control && int(ref.slot) < len(z.ents) && z.ents[ref.slot].id == ref.Entity
}

// ControlInto is Control and ControlEvents of ref in one look at the
// player's slot, for a zone actor's per-view loop: it writes the player's
// state to st and returns its newest applied move and whether a
// correction is due (Control's State, LastApplied and Correct). ok is
// false, and nothing written, where Control has none. Control made a
// 120-byte value (its connection's address among it) that the actor
// copied into its message field by field, and ControlEvents looked the
// slot up again: ≈ 220 instructions a player a tick, now ≈ 50. Call it
// before the zone changes, as Control.
//
// The events' fence (ControlEvents') is written to ev only when it is
// news: changed since ControlInto last wrote it for the player (an event
// taken, a restore, a handoff in) or the player's connection changed
// (TakeOver, Reclaim), and on one tick in fenceEvery (a Control lost on
// a link that may lose one, or dropped, is made good). Otherwise ev is
// left as it is: a zeroed fence (Gen 0) says nothing, and a connection
// keeps the last it took. The copy of each player's 72-byte fence every
// tick read two lines of its record and wrote two of the Control's
// (≈ 1.1 D1 misses a player a tick in BenchmarkZoneTickSync).
func (z *Zone) ControlInto(ref ViewRef, st *move.ControlState, ev *handoff.EventFence) (lastApplied uint64, correct, ok bool) {
	if !z.HasControl(ref) {
		return 0, false, false
	}
	e := &z.ents[ref.slot]
	p := e.p()
	*st = e.state
	if p.evNew || (z.tick+uint64(ref.slot))%fenceEvery == 0 {
		if (e.role == roleOwned || e.role == roleFrozen) && e.kind == KindPlayer {
			*ev = p.events
		} else {
			*ev = handoff.EventFence{}
		}
		if p.evNew { // never set in noPlayer (read-only)
			p.evNew = false
		}
	}
	return p.queue.LastApplied(), ref.correct, true
}

// fenceEvery: ControlInto writes a player's unchanged event fence into
// its Control on one tick in fenceEvery (each player on its own, by
// slot), 1.6 s at 20 Hz: the fence a lost Control carried comes again.
const fenceEvery = 32

// AppendView appends the view of ref (from this tick's Output) to dst and
// returns it: every member of the player's interest set with its class,
// priority and its state of the tick, the player itself excluded. Call it
// before the next Step.
//
// Far members are never held here, whatever Config.FarEvery or the
// overload level: a ViewEntry cannot say that its state is held, and a
// ghost table fed these views (SetView; a connection in another process
// gets its views so) takes a held moving member as stopped, sends a rest
// marker and then the restart — a record every tick as without holding,
// and a ghost that stutters. Only views by reference (AppendViewRefs)
// hold far members.
func (z *Zone) AppendView(dst []ghost.ViewEntry, ref ViewRef) []ghost.ViewEntry {
	if int(ref.slot) >= len(z.ents) || z.ents[ref.slot].id != ref.Entity {
		return dst
	}
	e := &z.ents[ref.slot]
	z.prio = z.track.AppendPriorities(z.prio[:0], &e.p().set)
	for i, en := range e.p().set.Entries() {
		sl := en.Slot()
		cls := z.cfg.Classes[z.kinds[sl]]
		if cls == nil {
			continue
		}
		o := &z.ents[sl]
		dst = append(dst, ghost.ViewEntry{Entity: o.id, Class: cls, Priority: z.prio[i], State: ghostState(o)})
	}
	return dst
}

// Snapshot returns this tick's snapshot for views as references
// (AppendViewRefs): entry s is slot s's replicated state and, while far
// members are held (Config.FarEvery, overload), entry len(slots)+s is slot
// s's held one: a copy of entry s on the ticks it is refreshed
// (ghost.SealHeld: the state is checked and coded once for both), the
// previous snapshot's held entry carried over on the others, served held
// (so the ghost tables take its unchanged position as nothing to send, not
// as a stop). Built once per tick, on first use after Step, and shared by
// every view of the tick; nil if the zone's classes were never registered
// in a ghost.Registry (then only AppendView works).
func (z *Zone) Snapshot() *ghost.Snapshot {
	if z.snap != nil {
		return z.snap
	}
	if z.snapW == nil {
		var reg *ghost.Registry
		for _, c := range z.cfg.Classes {
			if c != nil && c.Registry() != nil {
				reg = c.Registry()
				break
			}
		}
		if reg == nil {
			return nil
		}
		w, err := ghost.NewSnapshotWriter(reg)
		if err != nil {
			return nil
		}
		z.snapW = w
	}
	n := len(z.ents)
	size := n
	if z.held != nil && z.ov.heldEvery > 1 {
		size = 2 * n
	}
	s := z.snapW.Next(size)
	var refresh []uint64
	if size != n {
		k := (n + 63) / 64
		if cap(z.refresh) < k {
			z.refresh = make([]uint64, k)
		}
		refresh = z.refresh[:k]
		clear(refresh)
	}
	var w [interest.MaxKinds]float32
	for k, c := range &z.cfg.Classes {
		if c != nil {
			w[k] = c.PriorityWeight()
		}
	}
	if w != z.refW || !z.refChecked {
		// The weights are the classes' (a class's changes when it is
		// registered): checked once, not each tick.
		z.refW, z.refChecked = w, true
		z.refFast = z.checkRefBuckets(&w)
		// Folded into the tracker's table from its next Build on, where
		// exact (interest.Viewer.BucketRefs).
		z.track.SetViewWeights(&w)
	}
	// The same entries AppendView would copy: every slot with a class.
	z.snapAll = true
	for sl := range z.ents {
		cls := z.cfg.Classes[z.kinds[sl]]
		if cls == nil {
			z.snapAll = false
			continue
		}
		e := &z.ents[sl]
		st := ghostState(e)
		s.Set(sl, e.id, cls, &st)
		if size == n {
			continue
		}
		// Each slot's held entry is refreshed every heldEvery ticks,
		// staggered by slot (and at once if a refresh was missed: a tick
		// without views builds no snapshot). The others are held: the
		// previous snapshot's entry, served again (as SetHeld: the ghost
		// tables take its unchanged position as nothing to send, not as a
		// stop), unless SealHeld cannot carry it (a new entity in the
		// slot, or a new name, shown at once): refreshed then too.
		h, every := &z.held[sl], z.ov.heldEvery
		if (z.tick+uint64(sl))%every == 0 || h.t == 0 || uint32(z.tick)-h.t >= uint32(every) {
			refresh[sl>>6] |= 1 << (uint(sl) & 63)
		}
	}
	if size == n {
		z.snapW.Seal(s)
	} else {
		// Refreshed: the state of the tick, entry sl again, which
		// SealHeld checks and codes once for both.
		z.snapW.SealHeld(s, refresh)
		t := uint32(z.tick)
		for k, m := range refresh {
			for ; m != 0; m &= m - 1 {
				z.held[k<<6+bits.TrailingZeros64(m)].t = t
			}
		}
	}
	z.snap, z.snapN = s, n
	return s
}

// ViewLen is the most entries the view of ref (from this tick's Output)
// can have: the player's interest set's size.
func (z *Zone) ViewLen(ref ViewRef) int {
	if int(ref.slot) >= len(z.ents) || z.ents[ref.slot].id != ref.Entity {
		return 0
	}
	return z.ents[ref.slot].p().set.Len()
}

// AppendViewRefs is AppendView as references into Snapshot (which it
// builds if this tick has none yet): 4 bytes an entity instead of a copy
// of its state (ghost.NewViewRef: the entry's index and the bucket of the
// member's priority by its class, which is all a ghost table reads of
// it). It returns dst unchanged if the zone has no snapshots.
func (z *Zone) AppendViewRefs(dst []ghost.ViewRef, ref ViewRef) []ghost.ViewRef {
	// z.snap tested here first: every view after a tick's first finds the
	// snapshot built, and Snapshot is no call it inlines (≈ 18
	// instructions a view).
	if int(ref.slot) >= len(z.ents) || z.ents[ref.slot].id != ref.Entity || z.snap == nil && z.Snapshot() == nil {
		return dst
	}
	e := &z.ents[ref.slot]
	held := z.snap.Len() > z.snapN // held states in this snapshot
	set := e.p().set.Entries()
	// The members' priorities, computed in the loop that reads the members
	// (a set keeps none between ticks) where the set allows, else first.
	pv, direct := z.track.Viewer(&e.p().set)
	fast := z.refFast && z.snap.Len() <= 1<<24
	if z.snapAll && held && fast && direct {
		n := len(dst)
		dst = slices.Grow(dst, len(set))[:n+len(set)]
		px, pz := e.state.Pos[0], e.state.Pos[2]
		if vx, vz := pv.At(); math.Float32bits(vx) == math.Float32bits(px) && math.Float32bits(vz) == math.Float32bits(pz) && z.track.Current(z.grid) {
			z.stats.HeldEntries += z.heldRefsFastDist(dst[n:], set, &pv)
		} else {
			z.stats.HeldEntries += z.heldRefsFastViewer(dst[n:], set, &pv, px, pz)
		}
		return dst
	}
	z.prio = z.track.AppendPriorities(z.prio[:0], &e.p().set)
	prio := z.prio[:len(set)]
	if z.snapAll {
		// Every slot's kind has a class: each member is its slot's entry,
		// or its held one if far (a view is 4 bytes × members, written for
		// every player every tick).
		n := len(dst)
		dst = slices.Grow(dst, len(set))[:n+len(set)]
		out := dst[n:]
		// By refBuckets (fast), if they give every reference this snapshot
		// can have exactly (every index below 1<<24).
		switch {
		case !held && fast:
			w, kinds := &z.refW, z.kinds
			for i, en := range set {
				sl := en.Slot()
				out[i] = fastRef(uint32(sl), w[kinds[sl]%interest.MaxKinds], prio[i])
			}
		case !held:
			w, kinds := &z.refW, z.kinds
			for i, en := range set {
				sl := en.Slot()
				out[i] = ghost.WeightedViewRef(uint32(sl), w[kinds[sl]%interest.MaxKinds], prio[i])
			}
		case fast:
			z.stats.HeldEntries += z.heldRefsFast(out, set, prio, e.state.Pos[0], e.state.Pos[2])
		default:
			z.stats.HeldEntries += z.heldRefs(out, set, prio, e.state.Pos[0], e.state.Pos[2])
		}
		return dst
	}
	px, pz := e.state.Pos[0], e.state.Pos[2]
	for i, en := range set {
		sl := en.Slot()
		if z.cfg.Classes[z.kinds[sl]] == nil {
			continue
		}
		idx := uint32(sl)
		if held {
			p := z.held[sl].xz
			if dx, dz := p[0]-px, p[1]-pz; dx*dx+dz*dz > z.far2 {
				idx += uint32(z.snapN)
				z.stats.HeldEntries++
			}
		}
		dst = append(dst, ghost.WeightedViewRef(idx, z.refW[z.kinds[sl]%interest.MaxKinds], prio[i]))
	}
	return dst
}

// heldRefs writes set's references into out (as long) for a viewer at
// [px, pz]: a far member's to its held entry. It returns how many are held.
// The member's position comes from its held record (8 bytes among 64, in
// a table a fourth of the slots'), not from its slot (≈ 200 bytes), and
// the loop has no data-dependent branch: whether a member is far follows
// no pattern a predictor could learn.
func (z *Zone) heldRefs(out []ghost.ViewRef, set []interest.Entry, prio []float32, px, pz float32) uint64 {
	out = out[:len(set)]
	prio = prio[:len(set)]
	held, far2, n := z.held, z.far2, uint32(z.snapN)
	w, kinds := &z.refW, z.kinds
	var nh uint32
	for i := range set {
		en := set[i]
		sl := uint32(en.Slot())
		// The position's two floats read one by one: read as one [2]float32
		// it went through the stack (37 instructions a member, now 33).
		h := &held[sl]
		dx, dz := h.xz[0]-px, h.xz[1]-pz
		f := uint32(b2u(dx*dx+dz*dz > far2))
		out[i] = ghost.WeightedViewRef(sl+n&-f, w[kinds[sl]%interest.MaxKinds], prio[i])
		nh += f
	}
	return uint64(nh)
}

// heldRefsFast is heldRefs by fastRef (AppendViewRefs checks that it may).
func (z *Zone) heldRefsFast(out []ghost.ViewRef, set []interest.Entry, prio []float32, px, pz float32) uint64 {
	out = out[:len(set)]
	prio = prio[:len(set)]
	far2, n := z.far2, uint32(z.snapN)
	w := z.refW // a copy: the loop then needs no register for z
	// One length for both, so a member's slot is checked once.
	k := min(len(z.held), len(z.kinds))
	held, kinds := z.held[:k], z.kinds[:k]
	// The held members counted by the offsets they took (n each), summed
	// and divided once: a count kept beside the offset took the loop a
	// register it spilled for (40 → 37 instructions a member).
	var sum uint64
	for i := range set {
		en := set[i]
		sl := uint32(en.Slot())
		h := &held[sl]
		dx, dz := h.xz[0]-px, h.xz[1]-pz
		off := n & -uint32(b2u(dx*dx+dz*dz > far2))
		out[i] = fastRef(sl+off, w[kinds[sl]%interest.MaxKinds], prio[i])
		sum += uint64(off)
	}
	if n == 0 {
		return 0
	}
	return sum / uint64(n)
}

// heldRefsFastViewer is heldRefsFast with each member's priority by pv
// (interest.Viewer: its arithmetic and one load, inlined), not from a
// buffer of the view's priorities filled first.
func (z *Zone) heldRefsFastViewer(out []ghost.ViewRef, set []interest.Entry, pv *interest.Viewer, px, pz float32) uint64 {
	out = out[:len(set)]
	far2, n := z.far2, uint32(z.snapN)
	w := z.refW
	k := min(len(z.held), len(z.kinds))
	held, kinds := z.held[:k], z.kinds[:k]
	var sum uint64
	for i := range set {
		en := set[i]
		sl := uint32(en.Slot())
		h := &held[sl]
		dx, dz := h.xz[0]-px, h.xz[1]-pz
		off := n & -uint32(b2u(dx*dx+dz*dz > far2))
		out[i] = fastRef(sl+off, w[kinds[sl]%interest.MaxKinds], pv.Priority(en))
		sum += uint64(off)
	}
	if n == 0 {
		return 0
	}
	return sum / uint64(n)
}

// heldRefsFastDist is heldRefsFastViewer where the member's distance that
// its priority is computed at is the one its far test needs
// (interest.Viewer.PriorityDist2): the viewer is where its set's Update
// saw it, and the tracker's table is of the grid's last Build, whose
// positions buildGrid wrote to the held records too, bit for bit. The
// distance is computed once, not twice, and the held records are not
// read (≈ 58 → ≈ 45 instructions a member). The loop is the tracker's
// (interest.Viewer.BucketRefs), where the Viewer's fields stay in
// registers (≈ 49 → ≈ 44 instructions a member).
func (z *Zone) heldRefsFastDist(out []ghost.ViewRef, set []interest.Entry, pv *interest.Viewer) uint64 {
	n := uint32(z.snapN)
	var sum uint64
	if z.track.Folded() { // the tracker's weights are refW (Snapshot)
		sum = pv.BucketRefsFolded(out, set, &refBuckets, z.far2, n)
	} else {
		sum = pv.BucketRefs(out, set, z.kinds, &z.refW, &refBuckets, z.far2, n)
	}
	if n == 0 {
		return 0
	}
	return sum / uint64(n)
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
