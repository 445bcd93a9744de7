package sim

import (
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/grid"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/interest"
	"github.com/ghostwire/ghostwire/zones/world"
)

// Errors of the zone's entry points.
var (
	ErrOutside  = errors.New("sim: position is not in this zone")
	ErrExists   = errors.New("sim: entity already in this zone")
	ErrNotHere  = errors.New("sim: entity not owned by this zone")
	ErrBusy     = errors.New("sim: entity is being handed off")
	ErrBadState = errors.New("sim: invalid state")
	// ErrBadID: a player id in the NPC range (top bit set). Player ids are
	// the connect token's PlayerID and must stay below 1<<63, so they can
	// never collide with NPC ids (see NPCID).
	ErrBadID = errors.New("sim: player id in the NPC id range")
)

// role of a slot.
type role uint8

const (
	roleFree    role = iota
	roleOwned        // simulated here
	roleFrozen       // owned, offered to a neighbour: not simulated, moves buffered
	roleReplica      // a neighbour's entity, read-only, refreshed by its batches
)

// entity is one slot of the zone's table.
//
// The fields a tick's passes test for every slot come first: the role and
// kind (which pass takes the slot), the player state's pointer, the id and
// the position. The first 16 bytes never straddle a cache line at the
// 160-byte stride (slots start 0 or 32 bytes into one), and the id and
// the position share it for half the slots. With pl last (byte
// 144, its own line) a pass that took a player slot read two lines before
// it reached the player's state: ≈ 1,100 of BenchmarkZoneTick's ≈ 15,700
// D1 misses a tick.
type entity struct {
	role role
	kind uint8
	gen  uint8
	// correct: the next Control carries a full-state correction (players;
	// Teleport and Correct set it for any owned entity).
	correct bool
	health  int32

	// pl is a player's own state: nil in a slot that never held a player
	// (see playerSlot). Read it through p, write it through Zone.pl.
	pl *playerSlot

	id    uint64
	epoch handoff.Epoch
	state move.ControlState
	extra [4]uint32 // written by stepPlayer (seqExtra) with the state

	// rp is a replica's own state: non-nil exactly while the slot is a
	// replica (see replicaSlot). Read it through r, write it through
	// Zone.rep.
	rp *replicaSlot

	flags uint32
	name  ghost.Name
	since time.Duration // arrived here (dwell)

	// np is a wanderer's own state: non-nil for owned NPCs (see npcSlot).
	np *npcSlot
}

// npcSlot is what only a wanderer needs (28 bytes, the 32-byte size
// class). Every slot carried it (176 → 160 bytes a slot): NPCs are a
// minority of a zone's slots, and every per-tick pass over the slots
// streamed their 28 bytes through the cache. Made when an NPC spawns or
// is acquired; it goes with the slot (slotAlloc starts a slot afresh).
type npcSlot struct {
	rng uint64
	// hsin, hcos: the sine and cosine of heading, as float32 (turn): a
	// wanderer's heading changes every few seconds, and stepNPC took them
	// from math.Sincos every tick.
	hsin, hcos float32
	heading    float32
	speed      float32
	turnIn     uint32
}

// noNPC is what n returns for a slot without NPC state: read-only.
var noNPC npcSlot

// n returns e's NPC state for reading: the zero one (heading 0) if the
// slot has none. Never write through it.
func (e *entity) n() *npcSlot {
	if e.np == nil {
		return &noNPC
	}
	return e.np
}

// replicaSlot is what only a replica slot needs (48 bytes, the 48-byte
// size class). Every slot carried it while it sat in entity (208 → 176
// bytes a slot): replicas are the slots near a border, a minority, and
// every per-tick pass over the slots streamed it through the cache. A
// slot's replica state goes when it stops being one (acquired, freed).
type replicaSlot struct {
	owner     string
	seen      time.Duration
	seenBatch uint64
	// wait: its owner handed it on, and a batch its heir built after this
	// time decides (awaitHeir). 0: not waiting.
	wait time.Duration
	// released: this zone handed it to owner, which has not listed it yet.
	released bool
}

// noReplica is what r returns for a slot without replica state:
// read-only.
var noReplica replicaSlot

// r returns e's replica state for reading: the zero one (no owner) if the
// slot has none. Never write through it.
func (e *entity) r() *replicaSlot {
	if e.rp == nil {
		return &noReplica
	}
	return e.rp
}

// rep returns e's replica state for writing, made on first use.
func (z *Zone) rep(e *entity) *replicaSlot {
	if e.rp == nil {
		e.rp = new(replicaSlot)
	}
	return e.rp
}

// playerSlot is what only a player slot needs (192 bytes, the 192-byte
// size class; 208 while it carried its connection's address, which the
// handoff machine's record of the player holds too, now read from there:
// Zone.conn; 232 and the 240-byte class while its interest set carried
// its own counters, now the tracker's; 320 while every queue carried its
// bound, gap timeout and counters and every player a slice for
// handed-over interest, now the zone's: Zone.queues, Zone.seeds;
// TestPlayerSlotSize): its move queue, interest set, event
// fence, whether it has a connection, and time credit. NPC and replica slots — a fifth of a zone's slots, more at
// borders — used to carry all of it, and every per-tick pass over the
// slots streamed it through the cache. A slot's player state goes when
// the player does (slotFree, a handoff out): a player arriving again gets
// a new one.
type playerSlot struct {
	// The fields each tick reads for every player come first, in the
	// order of the tick's passes: hasConn and renumber (emitView: one
	// line), then with burst the queue and the credit (InputBatch,
	// stepPlayer: 88 bytes), then the set (updateInterest, views). With
	// the set first and renumber at byte 64, emitView read two lines of
	// most players and stepPlayer three.
	//
	// hasConn: the player has a connection (emitView); its address is the
	// handoff machine's (Zone.conn), set with it (Join, Restore, Reclaim,
	// acquire: Machine.SetConn or the Commit's snapshot).
	hasConn bool
	// renumber: taken over by a new connection (TakeOver); its first input
	// tells whether it continues the player's move numbering or restarts it.
	renumber bool
	burst    bool // restored: the next input's moves are owed their time (InputBatch)
	// evNew: the event fence changed, or the player's connection did,
	// since ControlInto last wrote the fence into a Control (in the
	// padding after burst: on the line ControlInto reads anyway).
	evNew bool
	// The queue right after renumber and burst: an input reads those and
	// the queue's first 42 bytes (handoff.MoveQueue), bytes 1–50 (16–66
	// while the address came first), one line of a record in the 192-byte
	// class (it starts on one) where with credit and owed between them
	// (bytes 16–98) it read two or three (BenchmarkZoneInput1000: D1 read
	// misses an input). stepPlayer reads the queue, credit and owed, bytes
	// 8–88.
	queue      handoff.MoveQueue
	credit     time.Duration
	owed       time.Duration // input time the player had no move to spend on (late input), repaid by catching up
	set        interest.Set
	renumberAt time.Duration
	events     handoff.EventFence // ordered events applied (TakeEvent)
}

// noPlayer is what p returns for a slot without a player: read-only.
var noPlayer playerSlot

// conn is the address of e's connection, "" if it has none: the handoff
// machine's record of it (a player's record kept a copy, 16 bytes a
// player, for the few reads: checkpoints, handoffs, Control).
func (z *Zone) conn(e *entity) string {
	if e.pl == nil || !e.pl.hasConn {
		return ""
	}
	return z.hand.Conn(e.id)
}

// p returns e's player state for reading: the zero player (no connection,
// nothing queued, an empty set) if the slot has none. Never write through
// it.
func (e *entity) p() *playerSlot {
	if e.pl == nil {
		return &noPlayer
	}
	return e.pl
}

// pl returns e's player state for writing, made on first use.
func (z *Zone) pl(e *entity) *playerSlot {
	if e.pl == nil {
		e.pl = &playerSlot{}
		e.pl.queue.Shared = &z.queues
	}
	return e.pl
}

// Zone is one zone's simulation: the entities it owns, replicas of its
// neighbours' entities near the border, the spatial grid, every player's
// interest set, and the handoff machine. Create it with New; drive it with
// Step at the tick rate and feed it Input, Handoff and Replicas between
// ticks. Not safe for concurrent use: the zone actor owns it.
type Zone struct {
	cfg    Config
	w      *world.World
	self   *world.Zone
	nbrs   []*world.Zone
	period time.Duration
	dt     float32
	leave  float64
	border float64
	far2   float32

	ents  []entity
	free  []int32
	byID  slotIndex
	grid  *grid.Grid
	track *interest.Tracker
	// prio: one view's priorities (interest.Tracker.AppendPriorities), as
	// long as the largest set; the sets keep none between ticks.
	prio []float32
	hand *handoff.Machine
	hout handoff.Output
	// queues: every player's move queue's bound, gap timeout and counters
	// (MovesDropped, MovesLost).
	queues handoff.QueueShared
	// seeds: by slot, the interest a player arriving by handoff brought
	// (the previous owner's set, by id), seeded after the next grid build.
	// Rare and short-lived: a map here, not 24 bytes in every player.
	seeds map[int32][]uint64

	tick     uint64
	now      time.Duration
	prevStep time.Duration
	// gapClock: the move queues' clock, advanced by each tick at most a
	// period (stepPlayer).
	gapClock time.Duration
	// replClock: the replicas' clock, the zone's live time (replicaClock
	// in Step); replAt: the Step that last advanced it.
	replClock, replAt time.Duration

	batchSeq uint64
	npcNext  uint64

	ov overload
	// autoCell: the grid's cell size follows the zone's crowding
	// (adaptCell); Config.CellSize was left 0.
	autoCell bool
	// held: per slot, the state far viewers get (Config.FarEvery,
	// overload); made when far members are first held and dropped while
	// nobody reads them (FarEvery 1 at level 0).
	held  []heldState
	kinds []uint8 // per slot: the entity's kind as of the last Step
	// owned: per slot, an owned player's state (its pl), nil for any other
	// slot and wherever not known yet: an input (InputBatch) and the
	// tick's interest pass (updateInterest) find the player's state here,
	// in 8 bytes a slot, where reading the slot's role and pointer cost
	// them a line of the slot's 176 bytes each (now 160). Filled where either finds
	// it nil (ownedAt); cleared where a slot stops being an owned
	// player's or loses its state (slotAlloc, slotFree, beginHandoff,
	// handedAway). Non-nil only for a slot whose role is roleOwned, kind
	// KindPlayer and pl it (checkRolesAgree in the tests).
	owned []*playerSlot
	// cpDue: per slot, an owned player's tick of its next checkpoint (0:
	// the slot's turn; AppendCheckpoints). In the slot (its third line)
	// it cost AppendCheckpoints' walk over every slot a line more a slot,
	// every tick.
	cpDue []uint64

	// snap is this tick's snapshot of the entities' states (and held),
	// built on the first AppendViewRefs after Step and shared by every
	// view of the tick.
	snapW *ghost.SnapshotWriter
	snap  *ghost.Snapshot
	snapN int // entries before the held states (len(ents) when built)
	// refresh: a bit a slot, the held entries due a refresh this tick
	// (ghost.SealHeld), then those refreshed; reused.
	refresh []uint64
	// snapAll: every slot of snap has a class (AppendViewRefs' fast path).
	snapAll bool
	// refW is each kind's class's ghost.PriorityWeight (0: no class), as
	// of the last Snapshot: a view reference carries its priority's bucket
	// by the class weight (ghost.WeightedViewRef).
	refW [interest.MaxKinds]float32
	// refChecked: refFast is refW's (checkRefBuckets); refFast: references
	// by refBuckets are exact for every priority the tracker gives.
	refChecked, refFast bool

	// replicas: the replica slots, for Replicas' sweep of those its batch
	// did not list (it read every slot's line, three batches a tick, to
	// find them): in ascending order, each once, unless replicasAdded
	// (slots appended since: sorted before the next sweep). It may hold
	// slots that are replicas no longer (roles are checked on use), never
	// lacks one: stepSlots lists them afresh, and a slot that becomes one
	// between (Replicas, handedAway) is appended.
	replicas      []int32
	replicasAdded bool
	// replSlots, replEnds: sendReplicas' list of the slots each
	// neighbour's batch copies (replEnds[i]: end of neighbour i's).
	replSlots []int32
	replEnds  []int
	// replCand: sendReplicas' owned slots outside replInner, this zone's
	// rectangle less BorderRange (empty if no point is that deep inside,
	// or if a neighbour overlaps the zone: then every slot is one); listed
	// by stepSlots (replicaCand).
	replCand  []int32
	replInner world.Rect
	// replSpare: the replica array every receiver of its batches released
	// (ReplicaBatch.Release), for the next tick's.
	replSpare atomic.Pointer[replicaBuf]
	// committing: slots handed away, Commit unacknowledged (sendReplicas
	// lists them); batchClocks: per neighbour (nbrs), its batches' clock.
	committing  []committingSlot
	batchClocks []batchClock

	out   Output
	pend  []handoff.Msg // messages not yet handed out (Pending, or the next Step)
	stats Stats
}

// New builds a zone and spawns its NPCs at time now.
func New(cfg Config, now time.Duration) (*Zone, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	ic, _ := cfg.interestConfig()
	cfg.Interest = ic
	autoCell := cfg.CellSize == 0
	if autoCell {
		cfg.CellSize = float64(ic.LeaveRadius) / 4
	}
	if cfg.BorderRange == 0 {
		cfg.BorderRange = float64(ic.LeaveRadius)
	}
	self, _ := cfg.World.Zone(cfg.Zone)
	g, err := grid.New(grid.Config{Bounds: gridBounds(cfg.World.Bounds(), self.Rect, cfg.BorderRange+float64(ic.LeaveRadius)), CellSize: cfg.CellSize})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	tr, err := interest.NewTracker(ic)
	if err != nil {
		return nil, err
	}
	hm, err := handoff.New(cfg.Zone, cfg.Handoff)
	if err != nil {
		return nil, err
	}
	z := &Zone{
		cfg:    cfg,
		w:      cfg.World,
		self:   self,
		period: time.Second / time.Duration(cfg.TickRate),
		dt:     1 / float32(cfg.TickRate),
		leave:  float64(ic.LeaveRadius),
		border: cfg.BorderRange,
		seeds:  map[int32][]uint64{},
		grid:   g,
		track:  tr,
		hand:   hm,
		queues: handoff.QueueShared{Max: cfg.MaxQueuedMoves, GapTimeout: cfg.GapTimeout},
		now:    now,

		autoCell: autoCell,
	}
	ff := cfg.Overload.FarFraction * ic.EnterRadius
	z.far2 = ff * ff
	z.ov.farEvery = uint64(cfg.FarEvery)
	z.ov.apply()
	for _, id := range self.Neighbours {
		n, _ := cfg.World.Zone(id)
		z.nbrs = append(z.nbrs, n)
	}
	z.replInner = innerRect(self.Rect, cfg.BorderRange, z.nbrs)
	for range cfg.NPCs {
		z.spawnNPC(now)
	}
	return z, nil
}

// innerRect is r less margin on every side: a point strictly inside it is
// farther than margin from every rectangle that does not overlap r. Empty
// (Min above Max) if r is too small, or if one of nbrs overlaps r (a world
// that failed validation): then no point counts as inside.
func innerRect(r world.Rect, margin float64, nbrs []*world.Zone) world.Rect {
	in := world.Rect{Min: [2]float64{r.Min[0] + margin, r.Min[1] + margin}, Max: [2]float64{r.Max[0] - margin, r.Max[1] - margin}}
	for _, n := range nbrs {
		if n.Min[0] < r.Max[0] && r.Min[0] < n.Max[0] && n.Min[1] < r.Max[1] && r.Min[1] < n.Max[1] {
			return world.Rect{Min: [2]float64{1, 1}, Max: [2]float64{-1, -1}}
		}
	}
	return in
}

// gridBounds is the area the zone's grid covers: its rectangle and margin
// metres around it (replicas come from within BorderRange of it; its
// players look LeaveRadius beyond it), within the world. Not the whole
// world: every Build clears and sums the grid's cells, and a world of many
// zones made every zone pay for all of them (2,000 m square, the default:
// 5,329 cells a zone where 2,809 cover it). An entity beyond the bounds is
// filed in an edge cell, which queries near the edge scan: still found.
func gridBounds(w, zone world.Rect, margin float64) world.Rect {
	return world.Rect{
		Min: [2]float64{max(w.Min[0], zone.Min[0]-margin), max(w.Min[1], zone.Min[1]-margin)},
		Max: [2]float64{min(w.Max[0], zone.Max[0]+margin), min(w.Max[1], zone.Max[1]+margin)},
	}
}

// ID returns the zone id.
func (z *Zone) ID() string { return z.cfg.Zone }

// Config returns the effective config (defaults filled in).
func (z *Zone) Config() Config { return z.cfg }

// Rect returns the zone's rectangle.
func (z *Zone) Rect() world.Rect { return z.self.Rect }

// Neighbours returns the ids of the neighbouring zones.
func (z *Zone) Neighbours() []string { return z.self.Neighbours }

// Period returns the tick period.
func (z *Zone) Period() time.Duration { return z.period }

// Tick returns the number of Steps so far.
func (z *Zone) Tick() uint64 { return z.tick }

// Handoffs exposes the handoff machine (read-only use: Status, Stats).
func (z *Zone) Handoffs() *handoff.Machine { return z.hand }

// Stats returns the zone's counters.
func (z *Zone) Stats() Stats {
	s := z.stats
	s.Level = z.ov.level
	s.MovesDropped, s.MovesLost = z.queues.Stats.Dropped, z.queues.Stats.Lost
	for i := range z.ents {
		e := &z.ents[i]
		switch e.role {
		case roleOwned, roleFrozen:
			if e.kind == KindPlayer {
				s.Players++
			} else {
				s.NPCs++
			}
			if e.role == roleFrozen {
				s.Frozen++
			}
		case roleReplica:
			s.Replicas++
		}
	}
	return s
}

// slotAlloc returns a free slot for a new entity (bumping its generation,
// so interest sets tell it from the slot's previous occupant).
func (z *Zone) slotAlloc(id uint64) int32 {
	var s int32
	if n := len(z.free); n > 0 {
		s = z.free[n-1]
		z.free = z.free[:n-1]
	} else {
		s = int32(len(z.ents))
		z.growSlots(len(z.ents) + 1)
	}
	gen := z.ents[s].gen + 1
	z.ents[s] = entity{id: id, gen: gen} // a free slot has no player state (slotFree)
	z.owned[s], z.cpDue[s] = nil, 0
	z.byID.set(id, s)
	return s
}

// growSlots makes n slots. Every per-slot slice gets one capacity, grown
// by an eighth (in multiples of 8) rather than doubled by append: the
// table only grows, one slot at a time, so doubling left up to half of
// each slice's room (≈ 530 B a slot) unused for the zone's life.
func (z *Zone) growSlots(n int) {
	if n > cap(z.ents) {
		c := slotRoom(cap(z.ents), n)
		z.ents = grown(z.ents, c)
		z.kinds = grown(z.kinds, c)
		z.owned = grown(z.owned, c)
		z.cpDue = grown(z.cpDue, c)
		if z.held != nil {
			z.held = grown(z.held, c)
		}
	}
	z.ents, z.kinds, z.owned, z.cpDue = z.ents[:n], z.kinds[:n], z.owned[:n], z.cpDue[:n]
	if z.held != nil {
		z.held = z.held[:n]
	}
	z.grid.Resize(n)
	z.track.Resize(n)
}

// slotRoom is the capacity for n slots when c is too small: an eighth
// more than c, rounded up to a multiple of 8.
func slotRoom(c, n int) int {
	return (max(n, c+c/8) + 7) &^ 7
}

// grown returns s's elements in a new slice of capacity c.
func grown[T any](s []T, c int) []T {
	out := make([]T, len(s), c)
	copy(out, s)
	return out
}

func (z *Zone) slotFree(s int32) {
	e := &z.ents[s]
	z.byID.del(e.id)
	e.role, e.id = roleFree, 0
	// Its player state goes with it: kept for the slot's next player, it
	// stayed with slots that NPCs and replicas took over, or that stayed
	// free (a quarter more player states than players in a capacity run,
	// each ≈ 0.8 KB with its interest set and move queue).
	e.pl, e.rp, e.np = nil, nil, nil
	z.owned[s] = nil
	delete(z.seeds, s)
	z.grid.Clear(s)
	if z.held != nil {
		z.held[s].t = 0 // the next occupant's is taken afresh, not this one's shown
	}
	z.free = append(z.free, s)
}

// Join adds a player owned by this zone at pos (X/Z on the ground), with
// its connection's address and display name. The position must be in this
// zone (world.ZoneAt tells which zone to join). Moves start after
// lastApplied (0 for a new connection).
func (z *Zone) Join(now time.Duration, entity uint64, conn, name string, pos [3]float32, lastApplied uint64) error {
	if IsNPC(entity) {
		return fmt.Errorf("%w: %#x", ErrBadID, entity)
	}
	if s, ok := z.byID.get(entity); ok && z.ents[s].role != roleReplica {
		return fmt.Errorf("%w: %d", ErrExists, entity)
	}
	if !z.w.Owns(z.self, float64(pos[0]), float64(pos[2])) {
		return fmt.Errorf("%w: [%g, %g] is outside zone %s %v", ErrOutside, pos[0], pos[2], z.cfg.Zone, z.self.Rect)
	}
	nm, err := ghost.MakeName(name)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadState, err)
	}
	epoch, err := z.hand.Spawn(entity, now)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrExists, err)
	}
	e := z.ownSlot(entity, KindPlayer, epoch, now)
	e.state = move.ControlState{Pos: pos}
	e.health, e.name = 1000, nm
	p := z.pl(e)
	p.hasConn = conn != ""
	p.events, p.evNew = handoff.EventFence{}, true
	p.queue.Reset(lastApplied)
	z.seqExtra(e)
	p.credit, p.owed, p.burst = z.cfg.MaxCredit, 0, false
	e.correct = true // the client learns its spawn state
	z.hand.SetConn(entity, conn)
	z.stats.Joins++
	return nil
}

// TakeOver marks an owned player just restored from its own live state for
// a new connection (a client that followed a Redirect, or reconnected while
// the old entity was still here): its move sequence is kept, unless the new
// connection's first input starts again at move 1 (a new session that
// numbers its moves afresh). A continuing client resends what the old
// connection left unacknowledged and the queue drops what was applied.
// Until that first input the player's Control is held back: an ack in the
// old numbering would acknowledge moves a new session never sent.
func (z *Zone) TakeOver(now time.Duration, entity uint64) {
	if s, ok := z.byID.get(entity); ok && z.ents[s].role == roleOwned && z.ents[s].kind == KindPlayer {
		p := z.pl(&z.ents[s])
		p.renumber, p.renumberAt = true, now
		p.evNew = true // the new connection learns the fence
	}
}

// Reclaim gives an owned player back to connection conn, which a newer
// connection's TakeOver took it from and which turned out to be the one
// that stays (the newer was a superseded login whose Join came late). The
// move queue restarts after lastApplied and the event fence is ev — both
// as they stood when conn lost the player, in conn's numbering — unless
// events of ev's numbering were applied since (the fence is then newer);
// until conn's next input the player's Control is held back as after
// TakeOver. Moves or events of conn's that the zone applied between the
// two (a few ms: the superseded connection's Leave follows its Join) are
// applied again if resent. False if the zone does not own the player.
func (z *Zone) Reclaim(now time.Duration, entity uint64, conn string, lastApplied uint64, ev handoff.EventFence) bool {
	s, ok := z.byID.get(entity)
	if !ok || z.ents[s].role != roleOwned || z.ents[s].kind != KindPlayer {
		return false
	}
	p := z.pl(&z.ents[s])
	p.hasConn = conn != ""
	z.hand.SetConn(entity, conn)
	p.queue.Reset(lastApplied)
	if p.events.Gen != ev.Gen {
		p.events = ev
	}
	p.evNew = true // conn learns the fence again
	p.renumber, p.renumberAt = true, now
	return true
}

// renumberWait bounds how long a taken-over player's Control waits for the
// new connection's first input; a session that sends no move that long
// numbers afresh (a continuing one resends its unacknowledged moves in
// every packet).
const renumberWait = time.Second

// Leave removes an owned player. ErrNotHere if another zone owns it (ask
// the zone its route points to), ErrBusy while it is being handed off
// (retry next tick).
func (z *Zone) Leave(entity uint64) error {
	s, ok := z.byID.get(entity)
	if !ok || z.ents[s].role == roleReplica {
		return fmt.Errorf("%w: %d", ErrNotHere, entity)
	}
	if z.ents[s].role == roleFrozen {
		return fmt.Errorf("%w: %d", ErrBusy, entity)
	}
	if err := z.hand.Despawn(entity); err != nil {
		return fmt.Errorf("%w: %w", ErrBusy, err)
	}
	z.slotFree(s)
	z.stats.Leaves++
	return nil
}

// Input takes moves (in sequence order; duplicates are fine) for a player.
// Moves for a player this zone owns are queued for the next tick; for one
// it handed off they are forwarded (a message in Pending()); for one it is
// offering they are held. It reports what happened.
func (z *Zone) Input(now time.Duration, entity uint64, moves []move.Move) handoff.InputAction {
	return z.InputBatch(now, entity, 0, moves)
}

// InputBatch is Input for a connection's batch (actors/msg.Input): the
// lostBefore moves right before the first, and any missing between two of
// them, were lost at the client, so the player's queue does not wait for
// them (handoff.MoveQueue.PushBatch).
//
// A slot owned here is owned in the handoff machine too (applyHandoff
// follows every machine call, so the two never disagree between calls:
// checkRolesAgree in the tests), and the machine has nothing to do for
// such input: it is not asked (one map lookup an input instead of two).
func (z *Zone) InputBatch(now time.Duration, entity, lostBefore uint64, moves []move.Move) handoff.InputAction {
	s, ok := z.byID.get(entity)
	if ok {
		if p := z.owned[s]; p != nil {
			// An owned player's, its state known (Zone.owned): the slot
			// itself is not read.
			z.pushLocal(p, lostBefore, moves)
			if !z.hout.Empty() {
				z.applyHandoff(now)
			}
			return handoff.InputLocal
		}
	}
	act := handoff.InputLocal
	if !ok || z.ents[s].role != roleOwned {
		act = z.hand.Input(now, entity, moves, &z.hout)
	}
	if act == handoff.InputLocal && ok {
		e := &z.ents[s]
		p := z.pl(e)
		if e.role == roleOwned && e.kind == KindPlayer {
			z.owned[s] = p
		}
		z.pushLocal(p, lostBefore, moves)
	}
	if !z.hout.Empty() { // a local input's usual case: the machine said nothing
		z.applyHandoff(now)
	}
	return act
}

// pushLocal queues a batch of moves for player e, owned here.
func (z *Zone) pushLocal(e *playerSlot, lostBefore uint64, moves []move.Move) {
	if e.burst {
		// The first input after a restore carries the moves the dead
		// owner never applied: they get the time they took, or the
		// player would lag that far behind its input for as long as it
		// keeps moving.
		e.burst = false
		var d time.Duration
		for _, m := range moves {
			if m.Seq > e.queue.LastApplied() {
				d += time.Duration(m.Dt) * time.Second / move.DtHz
			}
		}
		e.credit += min(d, maxRestoreBurst)
	}
	if e.renumber && len(moves) > 0 {
		// A new connection's first moves: a client that followed a
		// Redirect continues the numbering (the queue drops what was
		// applied already), one that reconnected starts at 1.
		e.renumber = false
		if moves[0].Seq == 1 && lostBefore == 0 {
			e.queue.Reset(0)
		}
	}
	e.queue.PushBatch(lostBefore, moves) // drops counted in z.queues
}

// maxRestoreBurst bounds the input time a restored player's first input
// may replay at once (a failover takes a few seconds).
const maxRestoreBurst = 10 * time.Second

// Handoff takes a handoff message from another zone.
func (z *Zone) Handoff(now time.Duration, m handoff.Msg) {
	z.hand.Step(now, m, &z.hout)
	z.applyHandoff(now)
}

// Teleport moves an owned entity to pos at once (an admin command, a
// respawn). The player gets a correction; if pos is in another zone the
// entity is offered to it right away, dwell time or not.
func (z *Zone) Teleport(now time.Duration, entity uint64, pos [3]float32) error {
	s, ok := z.byID.get(entity)
	if !ok || z.ents[s].role == roleReplica {
		return fmt.Errorf("%w: %d", ErrNotHere, entity)
	}
	e := &z.ents[s]
	if e.role == roleFrozen {
		return fmt.Errorf("%w: %d", ErrBusy, entity)
	}
	x, zz := z.w.Clamp(float64(pos[0]), float64(pos[2]))
	e.state.Pos = [3]float32{float32(x), max(pos[1], 0), float32(zz)}
	e.state.Vel = [3]float32{}
	e.correct = true
	z.stats.Teleports++
	if !z.w.Owns(z.self, x, zz) {
		if to, ok := z.w.ZoneAt(x, zz); ok {
			z.beginHandoff(now, s, to.ID)
		}
	}
	return nil
}

// Correct asks for a full-state correction of an owned player's control
// state with the next Control (msg.Control.Force): game logic that moved
// the player by other means than its moves (a respawn; a teleport that
// another zone started and handed over). ErrNotHere if the zone does not
// own it.
func (z *Zone) Correct(entity uint64) error {
	s, ok := z.byID.get(entity)
	if !ok || z.ents[s].role == roleReplica {
		return fmt.Errorf("%w: %d", ErrNotHere, entity)
	}
	z.ents[s].correct = true
	return nil
}

// seqExtra writes a player's last applied move sequence into Extra[0]
// (low 32 bits) and Extra[1] (high 32 bits), unless the game keeps Extra
// to itself (Config.NoSeqExtra). It travels with the state in views,
// replicas and handoff snapshots, so every copy of the state names the
// move it reflects.
func (z *Zone) seqExtra(e *entity) {
	if z.cfg.NoSeqExtra || e.kind != KindPlayer {
		return
	}
	la := e.p().queue.LastApplied()
	e.extra[0], e.extra[1] = uint32(la), uint32(la>>32)
}

// Pending returns the messages produced between ticks (by Input, Handoff,
// Teleport) and forgets them: handoff messages to zones, Route messages to
// connections. The zone actor sends them right away; any it has not
// fetched go out with the next Step's Output.Send. The caller owns the
// returned slice.
func (z *Zone) Pending() []handoff.Msg {
	msgs := z.pend
	z.pend = nil
	return msgs
}

// push queues moves for a player (those the full queue drops are counted
// in z.queues).
func (z *Zone) push(e *entity, moves []move.Move) {
	if len(moves) == 0 {
		return
	}
	z.pl(e).queue.Push(moves...)
}

// applyHandoff turns the machine's output into zone changes and pending
// messages.
func (z *Zone) applyHandoff(now time.Duration) {
	o := &z.hout
	if o.Empty() {
		return
	}
	z.pend = append(z.pend, o.Send...)
	for _, a := range o.Acquired {
		z.acquire(now, a)
	}
	for _, r := range o.Released {
		if s, ok := z.byID.get(r.Entity); ok {
			e := &z.ents[s]
			// It stays here as a replica of the new owner, unchanged, so
			// players here keep seeing it (same slot, same generation: no
			// leave and re-enter) until the new owner's batches take over.
			z.handedAway(s, r.To)
			delete(z.seeds, s)
			e.pl = nil // a replica has no connection, moves, interest or events here
			z.stats.HandoffsOut++
		}
	}
	for _, r := range o.Resumed {
		if s, ok := z.byID.get(r.Entity); ok {
			e := &z.ents[s]
			e.role = roleOwned
			// The dwell starts again: a neighbour that did not answer in
			// time (busy, or its node is slow to reach) is not offered the
			// entity again next tick, so the player plays on here between
			// attempts instead of staying frozen.
			e.since = now
			z.push(e, r.Moves)
			z.stats.HandoffsAborted++
		}
	}
	for _, d := range o.Deliver {
		if s, ok := z.byID.get(d.Entity); ok {
			z.push(&z.ents[s], d.Moves)
		}
	}
	o.Reset()
}

func (z *Zone) acquire(now time.Duration, a handoff.Acquired) {
	st := a.State
	s, ok := z.byID.get(st.Entity)
	if !ok {
		s = z.slotAlloc(st.Entity)
	}
	e := &z.ents[s]
	nm, _ := ghost.MakeName(st.Name) // names were valid where they were made
	e.kind, e.role, e.epoch, e.since, z.cpDue[s] = st.Kind, roleOwned, a.Epoch, now, 0
	e.state, e.health, e.flags, e.name, e.extra = st.Control, st.Health, st.Flags, nm, st.Extra
	e.np = nil
	// Any entity whose snapshot carries wanderer state keeps it (by bits:
	// a -0 too), so it travels on as it did in every slot.
	if st.Kind == KindNPC || st.Rng[0] != 0 || st.TurnIn != 0 || math.Float32bits(st.Speed)|math.Float32bits(st.Heading) != 0 {
		e.np = &npcSlot{rng: st.Rng[0], speed: st.Speed, turnIn: st.TurnIn}
		e.np.turn(st.Heading)
	}
	e.rp = nil // no longer a replica
	if e.pl != nil || st.Conn != "" || st.Events != (handoff.EventFence{}) {
		p := z.pl(e)
		p.hasConn, p.events, p.evNew = st.Conn != "", st.Events, true // the machine's record has st.Conn (Commit)
	}
	e.correct = false // not a leftover from an earlier stay (Correct asks for one)
	if e.kind == KindPlayer {
		p := z.pl(e)
		p.queue.Reset(st.LastApplied)
		z.seqExtra(e)
		z.push(e, a.Moves)
		p.credit, p.owed, p.burst = z.cfg.MaxCredit, 0, false
		p.set.Reset()
		if len(st.Interest) > 0 {
			z.seeds[s] = slices.Clone(st.Interest)
		} else {
			delete(z.seeds, s)
		}
	}
	z.stats.HandoffsIn++
}

// snapshot captures an owned entity for a handoff.
func (z *Zone) snapshot(s int32) *handoff.Snapshot {
	e := &z.ents[s]
	p := e.p()
	snap := &handoff.Snapshot{
		Entity: e.id, Kind: e.kind, Control: e.state, LastApplied: p.queue.LastApplied(),
		Health: e.health, Flags: e.flags, Name: e.name.String(), Extra: e.extra,
		Rng: [2]uint64{e.n().rng}, Heading: e.n().heading, Speed: e.n().speed, TurnIn: e.n().turnIn,
		Conn: z.conn(e), Events: p.events,
	}
	if e.kind == KindPlayer {
		for _, en := range p.set.Entries() {
			snap.Interest = append(snap.Interest, z.ents[en.Slot()].id)
		}
	}
	return snap
}

// beginHandoff offers slot s to zone to and freezes it.
func (z *Zone) beginHandoff(now time.Duration, s int32, to string) {
	e := &z.ents[s]
	offer, err := z.hand.Begin(now, z.snapshot(s), to, e.p().queue.Queued())
	if err != nil {
		z.stats.HandoffErrors++
		return
	}
	e.role = roleFrozen
	z.owned[s] = nil
	// Its views keep the priorities of its last Update (the set is not
	// updated while frozen; interest.Tracker.Hold).
	z.track.Hold(&e.p().set)
	z.pend = append(z.pend, offer)
	z.stats.HandoffsBegun++
}

// Checksum is a CRC-32 over the owned entities' ids and states in ascending
// id order (checklist TICK-5): two zones, or two runs, with the same state
// give the same value whatever their slot layout.
func (z *Zone) Checksum() uint32 {
	var ids []uint64
	for i := range z.ents {
		if r := z.ents[i].role; r == roleOwned || r == roleFrozen {
			ids = append(ids, z.ents[i].id)
		}
	}
	slices.Sort(ids)
	h := crc32.NewIEEE()
	var b [8]byte
	put := func(v uint64) {
		for i := range b {
			b[i] = byte(v >> (8 * i))
		}
		h.Write(b[:])
	}
	for _, id := range ids {
		s, _ := z.byID.get(id)
		e := &z.ents[s]
		put(id)
		put(uint64(e.state.CRC()))
		put(e.p().queue.LastApplied())
		put(uint64(math.Float32bits(e.n().heading)))
	}
	return h.Sum32()
}

// EntityInfo is a read-only view of one entity, for tests, admin and logs.
type EntityInfo struct {
	ID          uint64
	Kind        uint8
	Owned       bool // owned here (possibly frozen)
	Frozen      bool
	Replica     bool
	Owner       string // replicas: the owning zone
	Epoch       handoff.Epoch
	State       move.ControlState
	LastApplied uint64
	Conn        string
	View        int // players: interest set size
	Queued      int // players: moves waiting (for time credit or a missing move)
}

// Entity returns what the zone knows about an entity.
func (z *Zone) Entity(id uint64) (EntityInfo, bool) {
	s, ok := z.byID.get(id)
	if !ok {
		return EntityInfo{}, false
	}
	e := &z.ents[s]
	return EntityInfo{
		ID: e.id, Kind: e.kind, Owned: e.role == roleOwned || e.role == roleFrozen, Frozen: e.role == roleFrozen,
		Replica: e.role == roleReplica, Owner: e.r().owner, Epoch: e.epoch, State: e.state,
		LastApplied: e.p().queue.LastApplied(), Conn: z.conn(e), View: e.p().set.Len(), Queued: e.p().queue.Len(),
	}, true
}

// Entities calls fn for every entity the zone holds (owned and replicas).
func (z *Zone) Entities(fn func(EntityInfo)) {
	for i := range z.ents {
		if z.ents[i].role != roleFree {
			info, _ := z.Entity(z.ents[i].id)
			fn(info)
		}
	}
}

// InterestIDs returns the entity ids in a player's interest set.
func (z *Zone) InterestIDs(player uint64) []uint64 {
	s, ok := z.byID.get(player)
	if !ok {
		return nil
	}
	var ids []uint64
	for _, en := range z.ents[s].p().set.Entries() {
		ids = append(ids, z.ents[en.Slot()].id)
	}
	return ids
}
