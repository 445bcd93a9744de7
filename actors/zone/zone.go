package zone

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/sim"
	"github.com/ghostwire/ghostwire/zones/world"
)

// ActorName returns the name a zone actor is spawned under.
func ActorName(zoneID string) string { return "zone-" + zoneID }

// Params configure one zone actor.
type Params struct {
	// Sim is the zone's simulation config (Sim.Zone names the zone).
	Sim sim.Config
	// Now is the node's monotonic clock (the one connections use).
	// Required.
	Now func() time.Duration
	// Origin is the wall time at which Now read zero. Zones tick on the
	// multiples of their period in wall time, so zones on different
	// nodes tick together (to the hosts' clock sync): a player handed to
	// another process gets its next update one period after its last, not
	// up to two. Zero: on multiples of Now.
	Origin time.Time
	// NPCs, when not nil, are the zone's NPCs as its previous owner handed
	// them over (sim.Zone.AppendNPCs): the zone starts with them in place
	// of the Sim.NPCs it would spawn. One that does not restore (a bad
	// state from another build) is logged and left out.
	NPCs []sim.NPCState
	// NPCGeneration, when set, gives each zone run its Sim.NPCGeneration
	// as World.Spawn starts it (a cluster: from the zone's lease epoch,
	// sim.NPCGenerationOf), so a zone started again spawns NPC ids its
	// earlier runs' NPCs, still walking in its neighbours, do not have.
	NPCGeneration func(zone string) uint64
	// Metrics collects counters; nil gets a private set.
	Metrics *Metrics
	// Log receives the actor's rare events; nil discards them.
	Log *slog.Logger
	// Spawn places a joining player in the zone's rectangle; nil spreads
	// players deterministically by id, away from the borders.
	Spawn func(player uint64, r world.Rect) [3]float32
	// Events is the game's logic for the events clients send. nil means
	// the dev game, &DevGame{Echo: true, Teleport: true}; a production
	// game sets its own handler (or IgnoreEvents).
	Events EventHandler
	// Load, when set, is told the zone's player and NPC counts about once
	// a second (the cluster directory shows them).
	Load func(zone string, players, npcs int)
	// Placed, when set, is told each player that joined this zone (join
	// true) or was acquired by it from another zone, with its handoff
	// epoch here and its checkpoint at that moment (the cluster keeps
	// player records with them, the checkpoint in the placement's own
	// write). It counts as one of the player's periodic checkpoints (see
	// Checkpoint), which then does not get it again. It must not block.
	Placed func(player uint64, zone string, epoch uint64, join bool, cp *handoff.Checkpoint)
	// Restored, when set, is told instead of Placed of a join that put a
	// player back from its record (Join.Restore: a rejoin, a resume), with
	// from, the record's epoch that checkpoint came from. The cluster
	// writes the record only while it still names this zone at from, and
	// calls settled once (from any goroutine) with whether the write
	// landed: the zone applies the player's events only then, and drops
	// the player when it did not (another zone took the player since, or
	// the write failed): two owners otherwise, each applying the player's
	// events. It must not block.
	Restored func(player uint64, zone string, epoch, from uint64, cp *handoff.Checkpoint, settled func(written bool))
	// Checkpoint, when set, gets the checkpoints of the players whose turn
	// it is this tick (each owned player's CheckpointEvery after its
	// previous one, spread over the ticks) and, with leaving true, a
	// player's last one as it leaves. Without Placed it also gets the one
	// a join or an acquisition takes at once. It runs on the zone's
	// goroutine: it must copy what it keeps and never block.
	Checkpoint func(zone string, cps []handoff.Checkpoint, leaving bool)
	// CheckpointChunk, when set, takes the periodic checkpoints instead of
	// Checkpoint: the zone's players split into ChunkSlices chunks by id
	// (sim.Zone.AppendSliceCheckpoints), each chunk — all of its slice's
	// players, or none — given once every CheckpointEvery
	// (sim.SlicesDue), so the cluster writes a chunk, not a record a
	// player. Checkpoint still gets the leaving players' last ones (and,
	// without Placed, a join's). It runs on the zone's goroutine: it must
	// copy what it keeps and never block.
	CheckpointChunk func(zone string, slice int, cps []handoff.Checkpoint)
	// ChunkSlices is CheckpointChunk's slice count (≥ 1 with it).
	ChunkSlices int
	// CheckpointEvery is how often each player is checkpointed (default
	// DefaultCheckpointEvery: a crash loses at most that much progress).
	CheckpointEvery time.Duration
	// MaxEventBytesPerTick bounds the event payload bytes the zone sends
	// each player per tick; beyond it events are dropped and counted
	// (Metrics.EventsOutDropped). Default DefaultMaxEventBytesPerTick.
	MaxEventBytesPerTick int
	// MaxQueuedInputs bounds the inputs waiting in the zone's mailbox, per
	// player joined here (at least 1,024 in all); beyond it the newest
	// inputs without events are dropped and counted (Metrics.InputsShed;
	// see inputMailbox: their connections send the moves again). Default
	// DefaultMaxQueuedInputs.
	MaxQueuedInputs int

	// Acting, when set, is asked whether this node may still run the
	// named zone as its owner (cluster: the lease renewed within its
	// give-up time, cluster.Leases.Acting). While it says no the zone is
	// fenced as a lease's hold fences it (PauseLease, paused.go): no tick,
	// events kept, handoff claims kept or dropped. It is asked before each
	// tick, before applying events and before a handoff message that
	// claims, so a zone whose node wakes from a pause past its lease
	// applies nothing before the node's hold reaches it. nil: always.
	Acting func(zone string) bool

	// afterStep, when set, runs in every tick after the simulation's
	// step, on the zone's goroutine (tests: a tick made to cost more than
	// its period).
	afterStep func(z *sim.Zone)
	// holdWaits, when set, is asked at each run of the actor's waits on
	// handoffs (settleHandoffWaits) with the zone's name; true skips that
	// run (tests: a Leave kept during a handoff is passed on only once
	// the test lets it go, after it has ordered the new owner's messages).
	holdWaits func(zone string) bool
}

// Validate reports missing or unusable parameters.
func (p *Params) Validate() error {
	if p.Now == nil {
		return errors.New("zone: Params.Now is required")
	}
	if p.MaxEventBytesPerTick < 0 {
		return fmt.Errorf("zone: Params.MaxEventBytesPerTick %d is negative", p.MaxEventBytesPerTick)
	}
	if p.MaxQueuedInputs < 0 {
		return fmt.Errorf("zone: Params.MaxQueuedInputs %d is negative", p.MaxQueuedInputs)
	}
	if err := p.Sim.Validate(); err != nil {
		return fmt.Errorf("zone %s: %w", p.Sim.Zone, err)
	}
	return nil
}

// zoneThroughput is how many messages a zone's mailbox run takes before
// it yields the processor (protoactor's default).
const zoneThroughput = 300

// Props returns the props of a zone actor. Spawn it named ActorName(id)
// (Start does), so neighbours can address it.
func Props(p Params) *actor.Props {
	if p.Metrics == nil {
		p.Metrics = new(Metrics) // shared by the actor and its mailbox
	}
	g := new(inputGauge)
	g.max.Store(minQueuedInputs)
	r := newRunner(zoneThroughput)
	// The handed-over NPCs serve the actor's first start only: an actor
	// restarted after a panic spawns a fresh share (the handed ones have
	// walked on, some out of the zone, since) and the producer keeps no
	// copy of them for the zone's life.
	var handed *handedNPCs
	if p.NPCs != nil {
		npcs := p.NPCs // its own variable: p.NPCs is cleared below
		handed = &handedNPCs{}
		handed.npcs.Store(&npcs)
		p.NPCs = nil
	}
	starts := new(atomic.Uint64)
	return actor.PropsFromProducer(func() actor.Actor {
		return &zoneActor{p: p, inputs: g, runner: r, handed: handed, starts: starts}
	},
		actor.WithMailbox(newInputMailbox(g, p.Metrics)), actor.WithDispatcher(r))
}

// handedNPCs holds a zone's handed-over NPCs (Params.NPCs) until its
// actor's first start takes them.
type handedNPCs struct {
	npcs atomic.Pointer[[]sim.NPCState]
}

type zoneActor struct {
	p      Params
	handed *handedNPCs // nil: none were handed over
	// starts counts the actor's starts, its restarts after a panic after
	// the first (nil: tests' actors, never started).
	starts *atomic.Uint64
	m      *Metrics
	log    *slog.Logger
	z      *sim.Zone
	self   *actor.PID
	cps    []handoff.Checkpoint // this tick's, handed to Params.Checkpoint
	root   *actor.RootContext
	addr   string
	// inputs counts the inputs waiting in the mailbox (inputMailbox); nil
	// when the actor is driven without one (benchmarks).
	inputs *inputGauge
	runner *runner // the mailbox's dispatcher (nil: as inputs)

	peers map[string]*actor.PID
	// joins: every player's Join here. Write it with setJoin and
	// dropJoin only: they keep joinAt in step.
	joins map[uint64]*msg.Join
	// joinedAt: when (Now) each player's Join here was set (GatewayGone
	// tells a gateway's joins from before its restart from those after).
	joinedAt map[uint64]time.Duration
	// joinAt[slot] is the Join onTick found last for the player of the
	// zone's slot (sim.ViewRef.Slot) with the fields the tick reads
	// (joinHot), its player checked on use: a slice read a view instead
	// of a map lookup (≈ 80 instructions a player a tick), in slot order.
	// An entry counts only while its gen is joinGen, which every change
	// of joins advances, so an entry is never a Join the map no longer
	// holds for its player.
	joinAt  []joinHot
	joinGen uint32
	began   map[uint64]time.Duration // handoffs this zone started, for latency
	// pendingLeave: Leaves and Joins of players in the middle of a
	// handoff, retried every tick until it settles (keptLeave).
	pendingLeave map[uint64]keptLeave
	// superseded: players a new connection took over while the old one was
	// still joined (a client following a Redirect reconnected first); the
	// old connection's Leave (reason Redirected) is then not theirs.
	superseded map[uint64]bool
	// displaced: per player taken over from another connection that has
	// not left, that connection's Join and where it stood (displacedJoin):
	// if the taker turns out to be the superseded login (its Leave says
	// Duplicate), the player goes back to it. Until one of the two leaves,
	// the displaced connection's inputs wait in it (park).
	displaced map[uint64]*displacedJoin
	// carried: per player given back to its connection (reclaim), the
	// inputs parked for it that its event budget has not yet let through,
	// and any of its inputs that came since, in order (carry).
	carried map[uint64][]*msg.Input
	// awaiting: players whose connection left to follow a Redirect, kept
	// (live) until their new connection's Join or the deadline.
	awaiting map[uint64]time.Duration
	// held: events for awaiting players, sent to their new connection
	// when it joins (holdEvent).
	held map[uint64]*msg.Output
	// unacked: per player this zone sent a Commit for, the Commit's
	// snapshot and the Leave that came since, until the CommitAck or the
	// forwarding record's expiry (unackedCommit).
	unacked map[uint64]unackedCommit
	// incoming: per player whose offer this zone accepted with a Join
	// (its Commit not yet here), the inputs of another login that came
	// meanwhile, waiting for that login's Join (earlyInputs).
	incoming map[uint64]earlyInputs
	// passing: the input being taken was passed on by the zone that handed
	// its player here (onPassedInput), the handed connection's own.
	passing bool
	// Teleports waiting for a handoff in progress to settle.
	pendingTP map[uint64][3]float32
	retryTP   []pendingTeleport
	// Players teleported into another zone: their Commit asks the new
	// owner to force a full control-state send.
	forced map[uint64]bool

	events EventHandler
	ectx   EventContext
	maxOut int
	// budget: event bytes sent per player this tick, only this tick's
	// players (emptied at every tick: newBudgetTick). budgetRoom: the most
	// players it held in a tick since it was made; budgetPeak, the most
	// in the current window of budgetWindow ticks (budgetTicks of it
	// gone).
	budget                 map[uint64]outBudget
	budgetRoom, budgetPeak int
	budgetTicks            int
	outs                   []pendingOut
	// readies: onTick's scratch, the Joins whose view's nudge goes as a
	// ViewReady (usually none: the nudge rides in the Control).
	readies []*msg.Join
	// scratchHot: joinOf's entry for a view without a slot.
	scratchHot joinHot
	// ctls: onTick's Controls for connections that take them in batches
	// (Join.Port), one PostControls a connection shard.
	ctls msg.ControlBatch
	// renvs: the border replica envelopes onTick sent, back once their
	// receivers are done.
	renvs replicaEnvelopes

	timer   *time.Timer
	stopped atomic.Bool
	// late: the timer was armed for a tick already due (arm), which fire
	// posts behind the queued inputs (lateTickMsg).
	late atomic.Bool
	// paused: the owners that hold the zone paused (Pause); it ticks
	// while there are none.
	paused PauseReason
	// leaseKept: handoff messages kept during a lease's hold (paused.go).
	leaseKept []*HandoffEnvelope
	// pausedEvents: inputs whose events came while the zone was frozen
	// for a handover or held for its lease, applied in order if it runs
	// here again (paused.go).
	pausedEvents []*msg.Input
	// unconfirmed: players restored from their records whose record
	// write has not landed, with the inputs their events wait in
	// (restore_hold.go).
	unconfirmed       map[uint64]*heldRestore
	heldRestoreInputs int // the inputs kept in unconfirmed, all players'
	nextAt            time.Duration
	ctx               actor.Context
}

// Receive implements actor.Actor.
func (a *zoneActor) Receive(ctx actor.Context) {
	a.ctx = ctx
	defer func() { a.ctx = nil }()
	defer a.recoverLoudly(ctx)
	switch ctx.Message().(type) {
	case *actor.Started:
		if err := a.start(ctx); err != nil {
			a.log.Error("zone not started", "zone", a.p.Sim.Zone, "err", err)
			ctx.Stop(ctx.Self())
		}
		return
	case *actor.Stopping:
		a.stopped.Store(true)
		if a.timer != nil {
			a.timer.Stop()
		}
		a.dropPausedEvents()
		a.dropUnconfirmed()
		return
	case *actor.Stopped:
		if a.runner != nil {
			a.runner.Stop() // its goroutine ends after this run
		}
		return
	}
	if a.z == nil {
		return
	}
	switch m := ctx.Message().(type) {
	case *tickMsg, *lateTickMsg:
		a.tickDue()
	case *msg.Input:
		a.onInput(m)
	case *msg.Inputs:
		a.onInputs(m)
	case *passedInput:
		a.onPassedInput(m) // passed.go
	case *msg.Join:
		a.onJoin(m)
	case *msg.Leave:
		a.onLeave(m)
	case *unplace:
		a.onUnplace(m)
	case *restoreSettled:
		a.onRestoreSettled(m)
	case *HandoffEnvelope:
		a.onHandoff(m)
	case *ReplicaEnvelope:
		a.z.Replicas(a.p.Now(), &m.Batch)
		m.Batch.Release() // copied: its zone reuses the array
		m.MarkHandled()   // its zone may fill it again: touch it no more
	case *Teleport:
		a.onTeleport(m)
	case *Pause:
		a.setPaused(m)
	case *GatewayGone:
		a.onGatewayGone(m)
	case *Inspect:
		m.Fn(a.z)
		m.Answer(ctx)
	}
}

// recoverLoudly logs a panic with its stack and counts it before passing it
// on to the supervisor. The supervisor restarts the actor with an empty
// zone: its players' connections keep sending to it and get nothing back,
// so a panic here is an outage of the zone that must never pass quietly.
func (a *zoneActor) recoverLoudly(ctx actor.Context) {
	r := recover()
	if r == nil {
		return
	}
	if a.m != nil {
		a.m.Panics.Add(1)
	}
	if a.log != nil {
		a.log.Error("zone actor panicked; its supervisor restarts it empty", "zone", a.p.Sim.Zone,
			"panic", fmt.Sprint(r), "message", fmt.Sprintf("%T", ctx.Message()), "stack", string(debug.Stack()))
	}
	panic(r)
}

// restartCount counts this start and returns how many came before it.
func (a *zoneActor) restartCount() uint64 {
	if a.starts == nil {
		return 0
	}
	return a.starts.Add(1) - 1
}

func (a *zoneActor) start(ctx actor.Context) error {
	if err := a.p.Validate(); err != nil {
		return err
	}
	a.m = a.p.Metrics
	if a.m == nil {
		a.m = new(Metrics)
	}
	a.log = a.p.Log
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	now := a.p.Now()
	cfg := a.p.Sim
	if n := a.restartCount(); n > 0 {
		// Restarted empty after a panic, under the same lease epoch: the
		// NPCs the run before spawned may live on in the neighbour zones
		// (emigrants), so a fresh share takes ids of a generation of its
		// own, not theirs again (two NPCs of one id, each one's handoffs
		// refused).
		cfg.NPCGeneration = sim.NPCGenerationOfRestart(cfg.NPCGeneration, n)
	}
	var npcs *[]sim.NPCState
	if a.handed != nil {
		npcs = a.handed.npcs.Swap(nil)
	}
	if npcs != nil {
		cfg.NPCs = 0
	} else {
		npcs = new([]sim.NPCState)
	}
	z, err := sim.New(cfg, now)
	if err != nil {
		return err
	}
	bad := 0
	for _, st := range *npcs {
		if err := z.RestoreNPC(now, st); err != nil {
			if bad++; bad == 1 {
				a.log.Warn("zone: a handed-over NPC not restored", "zone", cfg.Zone, "npc", st.Snap.Entity, "err", err)
			}
		}
	}
	if bad > 1 {
		a.log.Warn("zone: handed-over NPCs not restored", "zone", cfg.Zone, "count", bad, "of", len(*npcs))
	}
	a.init(z)
	a.self = ctx.Self()
	a.root = ctx.ActorSystem().Root
	a.addr = ctx.ActorSystem().Address()
	a.timer = time.AfterFunc(time.Hour, a.fire)
	a.nextAt = nextSlot(now, z.Period(), a.p.Origin)
	a.arm()
	return nil
}

type pendingTeleport struct {
	id  uint64
	pos [3]float32
}

// init sets up everything but the actor system's parts (benchmarks drive
// the event path without one).
func (a *zoneActor) init(z *sim.Zone) {
	a.z = z
	a.peers = map[string]*actor.PID{}
	a.joins = map[uint64]*msg.Join{}
	a.joinedAt = map[uint64]time.Duration{}
	a.joinGen = 1 // joinAt's zero entries never count
	a.began = map[uint64]time.Duration{}
	a.pendingLeave = map[uint64]keptLeave{}
	a.superseded = map[uint64]bool{}
	a.displaced = map[uint64]*displacedJoin{}
	a.carried = map[uint64][]*msg.Input{}
	a.incoming = map[uint64]earlyInputs{}
	a.awaiting = map[uint64]time.Duration{}
	a.held = map[uint64]*msg.Output{}
	a.pendingTP = map[uint64][3]float32{}
	a.unacked = map[uint64]unackedCommit{}
	a.forced = map[uint64]bool{}
	a.budget = map[uint64]outBudget{}
	a.events = a.p.Events
	if a.events == nil {
		a.events = &DevGame{Echo: true, Teleport: true}
	}
	a.maxOut = a.p.MaxEventBytesPerTick
	if a.maxOut == 0 {
		a.maxOut = DefaultMaxEventBytesPerTick
	}
	a.maxOut = min(a.maxOut, math.MaxUint32) // outBudget counts in 32 bits
	a.ectx = EventContext{a: a}
}

// fire runs on the timer's goroutine: it only posts the tick, behind the
// queued inputs when it was already due as the timer was armed.
func (a *zoneActor) fire() {
	if a.stopped.Load() {
		return
	}
	if a.late.Load() {
		if a.m != nil {
			a.m.LateTicks.Add(1)
		}
		a.root.Send(a.self, theLateTick)
		return
	}
	a.root.Send(a.self, theTick)
}

// arm sets the timer for the tick at nextAt. All the ticks come from this
// one timer, so a re-arm (a resume) replaces the tick it had armed rather
// than start a second chain of them.
func (a *zoneActor) arm() {
	if a.paused != 0 || a.stopped.Load() {
		return
	}
	d := a.nextAt - a.p.Now()
	a.late.Store(d <= 0)
	a.timer.Reset(max(d, 0))
}

// tickDue runs the tick a timer's message asks for, unless it is early: a
// tick posted before a pause and a resume (at default priority a late
// one waits behind the inputs, and the resume's Pause overtakes it) comes
// after the resume re-armed the timer for a later slot. Run then, it
// would run that slot before its time, and the timer's own tick would
// come on top of it; dropped, the armed timer ticks the slot when due.
func (a *zoneActor) tickDue() {
	if a.paused == 0 && a.fenceLapsed() {
		return // fenced: its paused timers armed (paused.go)
	}
	if a.paused != 0 {
		a.pausedTimers() // the handoffs' timers alone (paused.go)
		return
	}
	if a.p.Now() < a.nextAt {
		a.arm() // armed for nextAt already: the same deadline
		return
	}
	a.onTick()
}

// setPaused adds or takes off m's owners; the ticks stop with the first
// owner and restart once the last one has let go.
func (a *zoneActor) setPaused(m *Pause) {
	was := a.paused
	if m.Paused {
		a.paused |= m.owners()
	} else {
		a.paused &^= m.owners()
	}
	if a.paused&pauseFence != 0 && a.paused != was && a.acting() {
		a.paused &^= pauseFence // the hold's let-go: the lease renewed (paused.go)
	}
	if was&pausesClaims != 0 && a.paused&pausesClaims == 0 {
		a.letGo() // the handoff messages kept during the hold (paused.go)
	}
	if was&pausesEvents != 0 && a.paused&pausesEvents == 0 {
		a.applyPausedEvents() // a freeze that handed nothing over, a hold let go (paused.go)
	}
	if (was == 0) == (a.paused == 0) {
		return
	}
	if a.paused != 0 {
		a.armPaused() // the handoffs' timers go on (paused.go)
		return
	}
	a.nextAt = nextSlot(a.p.Now(), a.z.Period(), a.p.Origin)
	a.arm()
}

// nextSlot is the first slot after now: a multiple of period in wall time
// (origin is the wall time of now = 0; zero origin: multiples of now).
// Every zone ticks on these slots, so a player handed from one zone to
// another gets its next update exactly one period after its last one: with
// phases chosen at each zone's start (or each process's), the new owner's
// next tick could come up to a whole period late (one update skipped at
// every crossing).
func nextSlot(now, period time.Duration, origin time.Time) time.Duration {
	var off time.Duration
	if !origin.IsZero() {
		off = time.Duration(origin.UnixNano() % int64(period))
		if off < 0 {
			off += period
		}
	}
	return ((now+off)/period+1)*period - off
}

func (a *zoneActor) peer(id string) *actor.PID {
	pid, ok := a.peers[id]
	if !ok {
		pid = actor.NewPID(a.addr, ActorName(id))
		a.peers[id] = pid
	}
	return pid
}

func (a *zoneActor) onTick() {
	if a.paused != 0 {
		return
	}
	start := time.Now()
	now := a.p.Now()
	period := a.z.Period()
	at := a.nextAt
	if late := now - at; late >= period {
		// Behind by whole periods: skip them (the simulation is stamped
		// with scheduled times, so skipped ticks are lost time, counted,
		// not a burst of catch-up ticks that would fall further behind).
		missed := int(late / period)
		at += time.Duration(missed) * period
		a.z.ReportMissedTicks(missed)
		a.m.MissedTicks.Add(uint64(missed))
	}
	if len(a.pendingTP) > 0 {
		retry := a.retryTP[:0]
		for id, pos := range a.pendingTP {
			retry = append(retry, pendingTeleport{id, pos})
		}
		clear(a.pendingTP)
		for _, t := range retry {
			a.teleport(t.id, t.pos) // puts it back while still busy
		}
		a.retryTP = retry
	}
	if a.inputs != nil {
		per := a.p.MaxQueuedInputs
		if per == 0 {
			per = DefaultMaxQueuedInputs
		}
		a.inputs.max.Store(int64(max(minQueuedInputs, per*len(a.joins))))
	}
	out := a.z.Step(at)
	a.newBudgetTick()
	if a.p.afterStep != nil {
		a.p.afterStep(a.z)
	}
	a.sendHandoff(out.Send)
	if len(a.carried) > 0 { // usually none
		a.replayCarried()
	}
	if a.p.CheckpointChunk != nil {
		slices := uint64(max(1, a.p.ChunkSlices))
		from, to := sim.SlicesDue(a.z.Tick(), a.checkpointTicks(), slices)
		for k := from; k < to; k++ {
			a.cps = a.z.AppendSliceCheckpoints(a.cps[:0], slices, k)
			a.p.CheckpointChunk(a.p.Sim.Zone, int(k), a.cps) // an empty one too: it clears the slice
		}
	} else if a.p.Checkpoint != nil {
		a.cps = a.z.AppendCheckpoints(a.cps[:0], a.checkpointTicks())
		if len(a.cps) > 0 {
			a.p.Checkpoint(a.p.Sim.Zone, a.cps, false)
		}
	}
	for id := range a.forced { // usually empty
		if ph, _, _ := a.z.Handoffs().Status(id); ph != handoff.PhaseOffering && ph != handoff.PhaseCommitting {
			delete(a.forced, id) // committed and acknowledged, or aborted (the zone corrects it itself)
		}
	}
	// Each player's view, then its Control: a connection that joined with
	// ViewWithControl takes its view's nudge in its Control (Control.View),
	// one message a player a tick; the others get a ViewReady as before,
	// after all the controls.
	readies := a.readies[:0] // Joins whose view's nudge is still to send
	// Counted here and added once: the node's zone actors share the
	// counters, and an atomic add a view bounced their cache line
	// between the cores 20 times a player-second.
	controls, views := 0, 0
	// The tick's snapshot, built on the first view that takes references
	// (none: a zone whose takers all pass views on builds none).
	var snap *ghost.Snapshot
	for i, ref := range out.Views {
		a.prefetchViews(out.Views, i)
		// The Join's fields the tick reads, from its slot's entry: the
		// entries are read in slot order, as the views come, where the
		// Joins themselves were a cache miss a player a tick.
		h := a.joinFiled(&ref)
		if h == nil {
			h = a.joinOf(ref)
		}
		nudge := false // the view's nudge is owed
		if h != nil && h.views != nil {
			var v *msg.View
			refs := h.views.AcceptsRefs()
			if refs && snap == nil {
				snap = a.z.Snapshot()
			}
			if refs && snap != nil {
				v = h.views.NewViewRefs(a.z.ViewLen(ref), uint64(ref.Epoch))
				v.SetSnap(snap) // the view holds it: the writer reuses it after
				v.Refs = a.z.AppendViewRefs(v.Refs[:0], ref)
			} else {
				v = msg.NewView()
				v.Entries = a.z.AppendView(v.Entries[:0], ref)
			}
			v.Player, v.Tick, v.ServerTime, v.Epoch = ref.Entity, a.z.Tick(), at, uint64(ref.Epoch)
			nudge = h.views.Publish(v) && h.ghosts
			views++
		}
		if a.z.HasControl(ref) {
			controls++
			if h != nil && h.conn {
				var m *msg.Control
				if h.views != nil {
					m = h.views.NewControl()
				} else {
					m = msg.NewControl()
				}
				// The state and the events' fence written into the message
				// in place (sim.Zone.ControlInto: Control and ControlEvents
				// in one).
				m.LastApplied, m.Force, _ = a.z.ControlInto(ref, &m.State, &m.Events)
				m.Player, m.Tick, m.At, m.Epoch = ref.Entity, a.z.Tick(), at, uint64(ref.Epoch)
				if h.withControl {
					m.View, nudge = nudge, false
				}
				if h.port.Queue != nil {
					a.ctls.Add(&h.port, m) // posted with its shard's within msg.DefaultControlWait, the rest at Flush below
				} else {
					a.ctx.Send(a.joins[h.player].Conn, m) // the entry counts: the map holds its Join
				}
			}
		}
		if nudge {
			readies = append(readies, a.joins[h.player])
		}
	}
	// The batched Controls before anything else the tick sends a
	// connection (the ViewReadys below): a connection takes its messages
	// from a zone in the order the zone made them.
	a.ctls.Flush()
	a.m.Controls.Add(uint64(controls))
	a.m.Views.Add(uint64(views))
	for _, j := range readies {
		a.ctx.Send(j.Ghosts, msg.ViewReadyMsg)
	}
	clear(readies)
	a.readies = readies[:0]
	for i := range out.Replicas {
		e := a.renvs.get()
		e.Batch = out.Replicas[i]
		a.ctx.Send(a.peer(out.Replicas[i].To), e)
	}
	a.settleHandoffWaits()
	if len(a.incoming) > 0 {
		a.sweepEarly()
	}
	if a.z.Tick()%64 == 0 {
		a.sweepJoins()
	}
	if a.p.Load != nil && a.z.Tick()%20 == 1 {
		st := a.z.Stats()
		a.p.Load(a.p.Sim.Zone, st.Players, st.NPCs)
	}
	a.nextAt = at + period
	a.arm()
	cost := time.Since(start)
	a.z.ReportTickCost(cost)
	a.m.Ticks.Add(1)
	a.m.TickNanos.Add(uint64(cost))
	a.m.TickCost.Add(cost)
	a.m.ZoneTicks.Observe(a.p.Sim.Zone, cost)
}

// joinHot is a player's Join as the tick reads it, filed at the player's
// slot (zoneActor.joinAt): the fields of the Join a view and a Control
// need, copied (a Join never changes once filed), in one dense slice the
// tick walks in slot order. Read through the *msg.Join, each player's
// was a cache miss a tick (joinFiled, ≈ 1 % of a node's CPU at 1,000
// players): the Joins are spread over the heap, and by the next tick the
// connections' work has evicted them.
//
// What the tick seldom needs (the Conn of a Join without a Port, Ghosts)
// it looks up in the joins map by player: the Join's pointer here made an
// entry 56 bytes, one for every slot of the zone (NPCs' and replicas'
// too), now 48.
type joinHot struct {
	player uint64
	views  *msg.ViewSlot
	port   msg.ControlPort
	gen    uint32 // the entry counts while it is zoneActor.joinGen
	// conn, ghosts: the Join's Conn, Ghosts are set; withControl: its
	// ViewWithControl.
	conn, ghosts, withControl bool
}

// prefetchViews asks the CPU for what the tick's loop will write of the
// players after views[i] (the Conns' view slots, then the spare view and
// Control each slot holds for the zone, then the spare view's references'
// room), in three stages a player apart, each reading only lines the
// stage before asked for, so that these lines, gone from the caches since
// the last tick, come while the players before them are served. Hints:
// they read only the zone's own entries and atomic words (the slots', the
// spare views' room hints), so they never race a handoff's other
// publisher, and change nothing.
func (a *zoneActor) prefetchViews(views []sim.ViewRef, i int) {
	if k := i + 3; k < len(views) {
		if h := a.joinFiled(&views[k]); h != nil && h.views != nil {
			h.views.PrefetchSlot()
		}
	}
	if k := i + 2; k < len(views) {
		if h := a.joinFiled(&views[k]); h != nil && h.views != nil {
			h.views.PrefetchSpare()
		}
	}
	if k := i + 1; k < len(views) {
		if h := a.joinFiled(&views[k]); h != nil && h.views != nil {
			h.views.PrefetchRoom()
		}
	}
}

// joinFiled is joinOf's usual case, inlined in the tick's loop over the
// views: ref's player's entry filed at its slot, else nil (ask joinOf).
// The call to joinOf cost ≈ 48 instructions a view, this ≈ 12.
func (a *zoneActor) joinFiled(ref *sim.ViewRef) *joinHot {
	if s := ref.Slot(); uint(s) < uint(len(a.joinAt)) {
		if h := &a.joinAt[s]; h.gen == a.joinGen && h.player == ref.Entity {
			return h
		}
	}
	return nil
}

// joinOf is ref's player's Join (a.joins[ref.Entity]) as the tick reads
// it, nil if it has none: its entry in joinAt by ref's slot when the
// player there is still ref's (the slot reused, it is looked up again and
// filed). The entry is valid until the next change of joins.
func (a *zoneActor) joinOf(ref sim.ViewRef) *joinHot {
	s := int(ref.Slot())
	switch {
	case s < 0:
		return a.hotOf(&a.scratchHot, ref.Entity, a.joins[ref.Entity])
	case s < len(a.joinAt):
		if h := &a.joinAt[s]; h.gen == a.joinGen && h.player == ref.Entity {
			return h
		}
	case s < cap(a.joinAt):
		a.joinAt = a.joinAt[:s+1] // past len: never written, zero (gen 0 never counts)
	default:
		// Grown to the zone's slots (and an eighth) when a view names a
		// slot past it, not by the doubling of append.
		grown := make([]joinHot, s+1, s+1+s/8)
		copy(grown, a.joinAt)
		a.joinAt = grown
	}
	return a.hotOf(&a.joinAt[s], ref.Entity, a.joins[ref.Entity])
}

// hotOf files j's fields in h for player id (its key in joins, where the
// tick finds the Join again) and returns h; nil (h cleared) if j is nil.
func (a *zoneActor) hotOf(h *joinHot, id uint64, j *msg.Join) *joinHot {
	if j == nil {
		*h = joinHot{}
		return nil
	}
	*h = joinHot{player: id, views: j.Views, port: j.Port, gen: a.joinGen,
		conn: j.Conn != nil, ghosts: j.Ghosts != nil, withControl: j.ViewWithControl}
	return h
}

// setJoin makes j its player's Join.
func (a *zoneActor) setJoin(j *msg.Join) { a.setJoinFor(j.Player, j) }

// setJoinFor makes j player id's Join.
func (a *zoneActor) setJoinFor(id uint64, j *msg.Join) {
	if a.joins[id] != j {
		a.joinedAt[id] = a.p.Now()
	}
	a.joins[id] = j
	a.joinsChanged()
}

// dropJoin forgets player id's Join.
func (a *zoneActor) dropJoin(id uint64) {
	delete(a.joins, id)
	delete(a.joinedAt, id)
	a.joinsChanged()
}

// joinsChanged makes every joinAt entry stale (joins changed): one
// increment, where clearing the entries cost 48 bytes a slot a change.
func (a *zoneActor) joinsChanged() {
	if a.joinGen++; a.joinGen == 0 { // wrapped: entries of gen 0 may be about
		clear(a.joinAt)
		a.joinGen = 1
	}
}

// sweepJoins forgets the connections of players that are no longer here.
func (a *zoneActor) sweepJoins() {
	for id := range a.joins {
		if ph, _, _ := a.z.Handoffs().Status(id); ph == handoff.PhaseUnknown {
			if _, ok := a.z.Handoffs().Reserved(id); !ok {
				a.dropJoin(id)
			}
		}
	}
	now := a.p.Now()
	for id, d := range a.displaced {
		if a.joins[id] == nil || now >= d.until {
			a.undisplace(id)
		}
	}
	for id := range a.carried {
		if a.joins[id] == nil {
			a.dropCarried(id, 0)
		}
	}
	for id, t := range a.began {
		if now-t > time.Minute {
			delete(a.began, id)
		}
	}
}

// forget drops everything this zone holds for player id: what leftAway
// drops, and the player's Join, its handoff's start and forced control.
func (a *zoneActor) forget(id uint64) {
	if h := a.unconfirmed[id]; h != nil {
		a.releaseHeld(h)
		delete(a.unconfirmed, id)
	}
	a.leftAway(id)
	a.dropJoin(id)
	delete(a.began, id)
	delete(a.forced, id)
}

// sendHandoff delivers handoff messages: Route becomes a Redirect to the
// player's connection, the rest go to the zone they name.
func (a *zoneActor) sendHandoff(msgs []handoff.Msg) {
	for i := range msgs {
		m := &msgs[i]
		if m.Kind == handoff.KindRoute {
			if j := a.joins[m.Entity]; j != nil && j.Conn != nil {
				a.ctx.Send(j.Conn, &msg.Redirect{Player: m.Entity, Zone: a.self, Epoch: uint64(m.Epoch)})
				a.m.Redirects.Add(1)
			}
			continue
		}
		env := &HandoffEnvelope{Msg: *m}
		switch m.Kind {
		case handoff.KindOffer, handoff.KindCommit:
			if m.Kind == handoff.KindCommit && !sim.IsNPC(m.Entity) {
				a.sentCommit(m) // a player's: its Leave may come meanwhile
			}
			env.Join = a.joins[m.Entity]
			env.Force = m.Kind == handoff.KindCommit && a.forced[m.Entity]
			t, ok := a.began[m.Entity]
			if !ok || m.Kind == handoff.KindOffer && m.Sent-t > a.z.Config().Handoff.OfferTimeout {
				t = m.Sent // a new handoff (not a resend of the last one)
				a.began[m.Entity] = t
			}
			env.Began = t
		}
		a.ctx.Send(a.peer(m.To), env)
	}
}

func (a *zoneActor) flushPending() { a.sendHandoff(a.z.Pending()) }

func (a *zoneActor) onInput(in *msg.Input) {
	if a.inputs != nil {
		a.inputs.queued.Add(-1)
	}
	var c inputCounts
	if now := a.p.Now(); len(a.displaced)+len(a.carried)+len(a.pendingLeave)+len(a.incoming) == 0 || !a.hold(in, now, &c) {
		a.apply(in, now, &c)
	}
	c.add(a.m)
	a.flushOutputs()
	a.flushPending()
}

// onInputs takes a connection shard's round of inputs, each as onInput
// would, and sends what they produced once.
func (a *zoneActor) onInputs(b *msg.Inputs) {
	if a.inputs != nil {
		a.inputs.queued.Add(-int64(len(b.List)))
	}
	now := a.p.Now()
	var c inputCounts
	// Checked once a round, not in apply nor for each input: nothing an
	// input does makes an entry in these maps (only a Join, Leave or
	// handoff message does, hold only adds to one that is there), so a
	// round that starts with none holds nothing.
	held := len(a.displaced)+len(a.carried)+len(a.pendingLeave)+len(a.incoming) > 0
	for _, in := range b.List {
		if !held || !a.hold(in, now, &c) {
			a.apply(in, now, &c)
		}
	}
	c.add(a.m)
	b.ReleaseTaken() // apply released each, or hold kept it
	a.flushOutputs()
	a.flushPending()
}

// inputCounts are a round of inputs' counts, added to the shared Metrics
// once: the node's zone actors share them, and three atomic adds an input
// bounced their cache line between the cores.
type inputCounts struct{ inputs, events, dropped uint64 }

func (c *inputCounts) add(m *Metrics) {
	m.Inputs.Add(c.inputs)
	if c.events > 0 {
		m.Events.Add(c.events)
	}
	if c.dropped > 0 {
		m.InputsDropped.Add(c.dropped)
	}
}

// hold keeps in for later when it comes from a login whose Join has not
// come for a player this zone is taking over (holdEarly), from the
// connection of its player's kept Join (holdKept), its player has a
// takeover undecided (park) or inputs carried (carry), and reports
// whether it did. Its callers ask only when there is any: the usual input
// goes straight to apply.
func (a *zoneActor) hold(in *msg.Input, now time.Duration, c *inputCounts) bool {
	if len(a.incoming) > 0 && a.holdEarly(in) {
		return true
	}
	if len(a.pendingLeave) > 0 && a.holdKept(in) {
		return true
	}
	if len(a.displaced) > 0 && a.park(in) {
		return true
	}
	return len(a.carried) > 0 && a.carry(in, now, c)
}

// apply applies in's moves and events and releases it.
func (a *zoneActor) apply(in *msg.Input, now time.Duration, c *inputCounts) {
	c.inputs++
	act := handoff.InputLocal
	if len(in.Moves) > 0 {
		if act = a.z.InputBatch(now, in.Player, in.LostBefore, in.Moves); act == handoff.InputDropped {
			c.dropped++
		}
	}
	// After the moves: an event acts on the state its packet's moves led
	// to. Those of a player handed away go on to its owner behind them.
	if len(in.Events) > 0 {
		// Moves taken here (queued, or buffered by an open offer) say the
		// zone owns the player: no lookup.
		here := len(in.Moves) > 0 && (act == handoff.InputLocal || act == handoff.InputBuffered)
		if !here && (act == handoff.InputForwarded || !a.z.OwnsEvents(in.Player)) && a.eventsAway(in) {
			return // passed on: the owner releases it
		}
		c.events += uint64(len(in.Events))
		if a.keepUnconfirmed(in) {
			return // restore_hold.go
		}
		if a.paused&pausesEvents != 0 || a.fenceLapsed() {
			a.pauseEvents(in) // paused.go
			return
		}
		a.handleEvents(in)
	}
	in.Release()
}

// spawnPos spreads players over the zone by id, 50 m clear of its borders
// (so a new player does not start mid-handoff).
func spawnPos(player uint64, r world.Rect) [3]float32 {
	h := player*0x9E3779B97F4A7C15 + 1
	h ^= h >> 29
	fx := float64(h&0xFFFF) / 0xFFFF
	fz := float64(h>>16&0xFFFF) / 0xFFFF
	sx, sz := r.Size()
	mx, mz := min(50, sx/4), min(50, sz/4)
	return [3]float32{float32(r.Min[0] + mx + fx*(sx-2*mx)), 0, float32(r.Min[1] + mz + fz*(sz-2*mz))}
}

func (a *zoneActor) onJoin(j *msg.Join) {
	if a.keepJoin(j) || a.joinAway(j) {
		return
	}
	now := a.p.Now()
	spawn := a.p.Spawn
	if spawn == nil {
		spawn = spawnPos
	}
	pos := spawn(j.Player, a.z.Rect())
	conn := ""
	if j.Conn != nil {
		conn = msg.ConnName(j.Conn)
	}
	name := fmt.Sprintf("p%d", j.Player)
	if len(name) > 31 {
		name = name[:31]
	}
	join := func() error { return a.z.Join(now, j.Player, conn, name, pos, j.LastApplied) }
	r := j.Restore
	takeover := false
	_, awaited := a.awaiting[j.Player]
	delete(a.awaiting, j.Player)
	if e, ok := a.z.Entity(j.Player); ok && e.Owned {
		if old := a.joins[j.Player]; old != nil && old.Conn != nil && j.Conn != nil && !old.Conn.Equal(j.Conn) {
			// Another connection for a player still here: its client
			// followed a Redirect and reconnected before the old
			// connection's Leave came, or logged in afresh (a relaunch,
			// a second device). Go on from the live state, not the older
			// record, and from its move sequence: a client that follows
			// a Redirect continues its numbering, a fresh one starts at
			// move 1 (sim.TakeOver) and numbers its events in a new
			// generation, which starts the event fence again. The
			// displaced connection is kept in case this one turns out
			// to be the superseded login (reclaim).
			if cp, ok := a.z.CheckpointOf(j.Player); ok {
				r = &cp
				takeover = true
				if !awaited {
					a.undisplace(j.Player) // a third connection: the one before has lost it
					d := &displacedJoin{j: old, lastApplied: cp.LastApplied, events: cp.Events,
						gen: cmp.Or(old.EventGen, cp.Events.Gen), taker: j.EventGen, until: now + displacedGrace}
					a.displaced[j.Player] = d
					// Inputs still carried for the displaced connection
					// (its player given back to it a moment ago) wait with
					// the ones it sends next.
					d.parked = a.dropCarried(j.Player, maxParked)
				}
			}
			if !awaited {
				a.superseded[j.Player] = true
			}
		} else if r != nil && r.Entity == j.Player {
			// Restored already (a rejoin is resent until the player is
			// back), or taken by a Commit while this Join, the player's
			// connection's rejoin, was passed on behind it: keep the live
			// state, only the route may be new. Its inputs that came
			// before it (its old zone redirected it here with the Join)
			// are taken behind it, in order: left waiting for a Join
			// already come, they were dropped at earlyGrace, their events
			// lost (by hand: a NATS server of three killed, the zones held
			// for their leases, 2–6 of 4,487).
			a.rejoined(j)
			return
		}
	}
	if r != nil && r.Entity == j.Player {
		// Put back from the player's record (a reconnect, or its zone's
		// node died): where it was, unless that is no longer this zone's
		// ground (the world map changed), then at a fresh spawn point.
		join = func() error {
			err := a.z.Restore(now, *r, conn, j.LastApplied)
			if errors.Is(err, sim.ErrOutside) || errors.Is(err, sim.ErrBadState) {
				a.log.Warn("player record not restorable here; spawning afresh", "zone", a.p.Sim.Zone, "player", j.Player, "err", err)
				err = a.z.Join(now, j.Player, conn, name, pos, j.LastApplied)
			}
			return err
		}
	}
	if takeover {
		join = func() error { return a.z.Restore(now, *r, conn, r.LastApplied) }
	}
	err := join()
	if errors.Is(err, sim.ErrExists) {
		// A reconnect while the old entity is still here: replace it.
		if a.z.Leave(j.Player) == nil {
			err = join()
		}
	}
	if err == nil && takeover {
		a.z.TakeOver(now, j.Player)
	}
	if err != nil {
		a.dropEarly(j.Player)
		a.m.JoinsRejected.Add(1)
		// sim.ErrBadID: the token's PlayerID is in the NPC id range.
		a.log.Warn("join refused", "zone", a.p.Sim.Zone, "player", j.Player, "err", err)
		// A fresh join refused ends the session. A restore (a rejoin, a
		// resume) does not: the connection looks the record up again
		// when no Control comes, and the player may be back elsewhere.
		if j.Conn != nil && j.Restore == nil {
			a.ctx.Send(j.Conn, &msg.Kick{Player: j.Player})
		}
		return
	}
	a.setJoin(j)
	a.flushHeld(j)
	a.m.Joins.Add(1)
	// The record a join writes (Placed) starts afresh: it carries the
	// player's checkpoint at once, so a reconnect right after finds where
	// it is. One put back from its record is written only over that record,
	// and its events wait for that write, those that came before it too
	// (restore_hold.go).
	restoring := r != nil && r.Entity == j.Player && !takeover && a.p.Restored != nil
	if restoring {
		_, ep, _ := a.z.Handoffs().Status(j.Player)
		a.holdRestore(j.Player, uint64(ep))
	}
	a.takeKept(a.takeEarly(j, nil)) // its inputs that came before it, in order
	if restoring {
		a.restored(j.Player, uint64(r.Epoch))
		return
	}
	a.placed(j.Player, true)
}

// restored tells Params.Restored of a player put back from its record as
// it stood at epoch from; the zone applies the player's events once the
// record's write lands, and drops the player if it does not (the record
// moved on meanwhile: restoreSettled).
func (a *zoneActor) restored(id, from uint64) {
	cp, ok := a.z.CheckpointNow(id, a.checkpointTicks())
	_, ep, _ := a.z.Handoffs().Status(id)
	var c *handoff.Checkpoint
	if ok {
		c = &cp
	}
	root, self := a.ctx.ActorSystem().Root, a.ctx.Self()
	a.p.Restored(id, a.p.Sim.Zone, uint64(ep), from, c, func(written bool) {
		root.Send(self, &restoreSettled{player: id, epoch: uint64(ep), written: written})
	})
}

// unplace: the record of a player this zone restored at epoch was not
// written (it had moved on to another owner, or the write failed:
// Params.Restored): the player is dropped here, if it is still here at
// that epoch. Its connection hears no Control from this zone
// and looks the record up again (it names the owner).
type unplace struct{ player, epoch uint64 }

func (a *zoneActor) onUnplace(u *unplace) {
	e, ok := a.z.Entity(u.player)
	if _, ep, _ := a.z.Handoffs().Status(u.player); !ok || !e.Owned || uint64(ep) != u.epoch {
		return
	}
	a.log.Warn("restored player dropped: its record was not written (another owner's, or the write failed)", "zone", a.p.Sim.Zone, "player", u.player, "epoch", u.epoch)
	a.m.Unplaced.Add(1)
	a.leave(u.player, a.ownLeave(u.player, handshake.ReasonKicked))
}

// ownLeave is a Leave the zone makes itself for player id (a Redirect's
// grace over, a refused restore), naming the connection the player is
// joined through: taken here like a connection's, and, when the player
// is being handed off or was handed away, passed on to its new owner,
// which would otherwise keep it with no client (as for a connection's
// Leave, the new owner ignores it if another login took the player over
// there).
func (a *zoneActor) ownLeave(id uint64, reason handshake.Reason) *msg.Leave {
	l := &msg.Leave{Player: id, Reason: reason}
	if j := a.joins[id]; j != nil {
		l.Conn = j.Conn
	}
	return l
}

// checkpointTicks is CheckpointEvery in ticks.
func (a *zoneActor) checkpointTicks() uint64 {
	every := a.p.CheckpointEvery
	if every <= 0 {
		every = DefaultCheckpointEvery
	}
	return uint64(max(1, every/a.z.Period()))
}

// placed tells Params.Placed of a player that joined (join) or was
// acquired, with its checkpoint now, or, without Placed, hands that
// checkpoint to Params.Checkpoint. Either way it is one of the player's
// periodic checkpoints (sim.CheckpointNow).
func (a *zoneActor) placed(id uint64, join bool) {
	if a.p.Placed == nil && a.p.Checkpoint == nil {
		return
	}
	cp, ok := a.z.CheckpointNow(id, a.checkpointTicks())
	if a.p.Placed != nil {
		_, ep, _ := a.z.Handoffs().Status(id)
		var c *handoff.Checkpoint
		if ok {
			c = &cp
		}
		a.p.Placed(id, a.p.Sim.Zone, uint64(ep), join, c)
		return
	}
	if ok {
		a.p.Checkpoint(a.p.Sim.Zone, []handoff.Checkpoint{cp}, false)
	}
}

// passOn forwards a message about an entity this zone handed away to the
// zone it went to; it reports whether it did.
//
// In one process what it passes on cannot overtake the Commit: the Commit
// went first from this actor with the handoff priority (zonePriority), m
// goes after it at the default one, and the new owner's mailbox takes the
// higher priority first; nothing waits between them (the acquisition's
// record is written after the zone takes the player, asynchronously).
// Across processes the Commit waits for its record write on the new
// owner's node, and the bridge there holds what follows it
// (actors/cluster holdBehindCommit).
func (a *zoneActor) passOn(id uint64, m any) bool {
	ph, _, peer := a.z.Handoffs().Status(id)
	if ph != handoff.PhaseCommitting && ph != handoff.PhaseForwarding {
		return false
	}
	a.ctx.Send(a.peer(peer), m)
	a.m.Forwarded.Add(1)
	return true
}

// DefaultCheckpointEvery is how often a player's record is checkpointed
// by default: the recovery point objective of a crash.
const DefaultCheckpointEvery = time.Second

// lastCheckpoint hands on a leaving player's final state.
func (a *zoneActor) lastCheckpoint(cp handoff.Checkpoint) {
	if a.p.Checkpoint != nil {
		a.p.Checkpoint(a.p.Sim.Zone, []handoff.Checkpoint{cp}, true)
	}
}

func (a *zoneActor) onLeave(l *msg.Leave) {
	if j := a.joins[l.Player]; j != nil && j.Conn != nil && l.Conn != nil && !j.Conn.Equal(l.Conn) {
		if d, ok := a.displaced[l.Player]; ok && d.j.Conn.Equal(l.Conn) {
			// The connection the takeover superseded: gone, nothing to
			// give the player back to, and its Leave has come — the
			// player's next Leave(Redirected) is the new connection's own
			// (a client redirected back: the zone must hold its events).
			a.undisplace(l.Player)
			delete(a.superseded, l.Player)
		}
		return // an older connection's, ending after the player reconnected (a redirect's): not this one's leave
	}
	if l.Reason == handshake.ReasonDuplicate && a.reclaim(l.Player) {
		return
	}
	if l.Reason == handshake.ReasonRedirected && a.superseded[l.Player] {
		// The superseded connection's (a Leave that names no
		// connection): its player plays on through the new one, and the
		// takeover is decided — the connection it displaced is gone, its
		// Join and parked inputs with it, as when its Leave names it.
		delete(a.superseded, l.Player)
		a.undisplace(l.Player)
		return
	}
	if l.Reason == handshake.ReasonRedirected {
		if e, ok := a.z.Entity(l.Player); ok && e.Owned {
			// Its client follows a Redirect to another gateway: keep the
			// player as it is for the new connection's Join, which goes
			// on from the live state (the record may be a second old).
			a.awaiting[l.Player] = a.p.Now() + redirectGrace
			a.confirmHold(l.Player)
			return
		}
	}
	a.leave(l.Player, l)
}

// displacedJoin is a Join a takeover replaced, with the player's move
// and event fences as they stood in that connection's numbering, and the
// inputs that connection sent since (park).
type displacedJoin struct {
	j           *msg.Join
	lastApplied uint64
	events      handoff.EventFence
	// gen and taker: the event generations of the displaced connection
	// (its Join's, else the fence's) and of the one that took over (0:
	// not known).
	gen, taker uint64
	parked     []*msg.Input
	// until: the takeover undecided then (neither connection's Leave
	// came: lost on its way), the displaced connection is forgotten and
	// its parked inputs dropped (sweepJoins).
	until time.Duration
}

// displacedGrace bounds how long a displaced connection's Join and parked
// inputs are kept for a takeover nobody decides: the superseded login's
// Leave follows its Join within a message or two, and a displaced client
// that hears nothing for 3 s looks its player up again anyway.
var displacedGrace = 10 * time.Second // a var: tests shorten it

// maxParked bounds the inputs kept for a displaced connection: its
// takeover is decided within a message or two (the superseded login's
// Leave follows its Join at once), ≈ 2 s of a 30 Hz client.
const maxParked = 64

// park keeps in when it comes from the connection a takeover of its
// player displaced (its event generation, when the two differ) while the
// takeover is undecided, and reports whether it did. Two logins of one
// player at once: applied now, the older login's inputs (still coming
// until its Shutdown reaches it) moved the player the newer one plays and
// their echoes and acknowledgements went to the newer connection (its
// client: "ack of an unsent move", someone else's echoes); and when the
// older's Join came second, the newer login's inputs went to the older
// connection until its Leave(Duplicate) gave the player back, their
// echoes lost. Parked, they are applied when the player goes back to
// their connection (reclaim) and dropped when that connection leaves.
// A connection whose generation the zone does not know (0), and a client
// that continues its numbering on the new connection (a Redirect's:
// the same generation), are not told apart: their inputs are taken.
func (a *zoneActor) park(in *msg.Input) bool {
	d := a.displaced[in.Player]
	if d == nil || in.EventGen == 0 || in.EventGen != d.gen || d.taker == 0 || d.taker == d.gen {
		return false
	}
	if len(d.parked) >= maxParked {
		a.m.InputsDropped.Add(1)
		in.Release()
		return true
	}
	d.parked = append(d.parked, in)
	return true
}

// undisplace forgets player id's displaced connection and drops the
// inputs parked for it.
func (a *zoneActor) undisplace(id uint64) {
	d := a.displaced[id]
	if d == nil {
		return
	}
	delete(a.displaced, id)
	for _, in := range d.parked {
		in.Release()
	}
	if n := len(d.parked); n > 0 {
		a.m.InputsDropped.Add(uint64(n))
	}
}

// reclaim gives player id back to the connection a takeover displaced,
// when the taker's connection ends as superseded (Leave, Duplicate). Two
// fresh logins of one player at once: the gateway keeps the newer session
// and ends the older, but each joins the zone after its record lookup, so
// the older's Join can come second and take the player over; its Leave
// follows. Without this the Leave took the player out and the newer
// session's inputs and events went nowhere until its connection looked
// the record up again (seconds). False when no connection was displaced.
func (a *zoneActor) reclaim(id uint64) bool {
	d := a.displaced[id]
	if d == nil {
		return false
	}
	if !a.z.Reclaim(a.p.Now(), id, msg.ConnName(d.j.Conn), d.lastApplied, d.events) {
		a.undisplace(id)
		return false
	}
	delete(a.displaced, id)
	a.setJoin(d.j)
	delete(a.superseded, id)
	a.placed(id, true)
	if len(d.parked) > 0 {
		// Its inputs that came meanwhile, in order, for it now: as many
		// as its event budget lets through this tick, the rest carried.
		a.carried[id] = append(a.carried[id], d.parked...)
		var c inputCounts
		a.replay(id, a.p.Now(), &c)
		c.add(a.m)
		a.flushOutputs()
		a.flushPending()
	}
	return true
}

// maxCarried bounds the inputs carried for one player: the parked ones
// and as many of the connection's newer inputs. Full, the oldest is
// applied at once, its events beyond the budget dropped and counted as
// they are without a carry: a client whose events' answers outrun its
// budget for good is not held back further than this.
const maxCarried = 2 * maxParked

// carry keeps in behind its player's carried inputs, if it has any, and
// reports whether it did: a player's inputs are applied in the order they
// came.
func (a *zoneActor) carry(in *msg.Input, now time.Duration, c *inputCounts) bool {
	q, ok := a.carried[in.Player]
	if !ok {
		return false
	}
	if len(q) >= maxCarried {
		a.apply(q[0], now, c)
		n := copy(q, q[1:])
		q[n] = nil
		q = q[:n]
	}
	a.carried[in.Player] = append(q, in)
	return true
}

// replay applies player id's carried inputs in order while its event
// budget this tick lets them through: the first of a tick always, each
// next one while the events it brings fit in what the budget has left,
// counting an answer as large as its event (the dev game's echo; a game
// that answers nothing never waits). The rest wait for the next tick
// (replayCarried).
func (a *zoneActor) replay(id uint64, now time.Duration, c *inputCounts) {
	q := a.carried[id]
	n := 0
	for ; n < len(q); n++ {
		if spent := a.spent(id); spent > 0 && spent+eventBytes(q[n]) > a.maxOut {
			break
		}
		a.apply(q[n], now, c)
		q[n] = nil
	}
	if n == len(q) {
		delete(a.carried, id)
		return
	}
	rest := copy(q, q[n:])
	clear(q[rest:])
	a.carried[id] = q[:rest]
}

// replayCarried goes on with every carried replay at the start of a tick,
// with the players' budgets new.
func (a *zoneActor) replayCarried() {
	now := a.p.Now()
	var c inputCounts
	for id := range a.carried {
		a.replay(id, now, &c)
	}
	c.add(a.m)
	a.flushOutputs()
	a.flushPending()
}

// dropCarried takes player id's carried inputs away: the first keep of
// them are returned, the rest released and counted as dropped.
func (a *zoneActor) dropCarried(id uint64, keep int) []*msg.Input {
	q, ok := a.carried[id]
	if !ok {
		return nil
	}
	delete(a.carried, id)
	if len(q) > keep {
		for _, in := range q[keep:] {
			in.Release()
		}
		a.m.InputsDropped.Add(uint64(len(q) - keep))
		clear(q[keep:])
		q = q[:keep]
	}
	return q
}

// eventBytes is what in's events count against a budget: their payload
// bytes, each at least one (as sendEvent counts).
func eventBytes(in *msg.Input) int {
	n := 0
	for i := range in.Events {
		n += max(len(in.Events[i].Payload), 1)
	}
	return n
}

// redirectGrace is how long a player whose client follows a Redirect is
// kept for its new connection: a reconnect takes a round trip or two and
// a record lookup; a client that has not come back by then has left.
var redirectGrace = 10 * time.Second // a var: tests shorten it

// leave takes the player out with its final checkpoint; l is passed on
// when the player was handed away, kept while it is being handed off. A
// nil l is the zone's own Leave for a player whose client did not come
// back within a Redirect's grace: a Leave(Timeout) naming the player's
// connection (ownLeave), so that it too reaches a new owner.
func (a *zoneActor) leave(id uint64, l *msg.Leave) {
	if l == nil {
		l = a.ownLeave(id, handshake.ReasonTimeout)
	}
	cp, hadCP := a.z.CheckpointOf(id)
	switch err := a.z.Leave(id); {
	case err == nil:
		if hadCP {
			a.lastCheckpoint(cp)
		}
		a.forget(id)
		a.m.Leaves.Add(1)
	case errors.Is(err, sim.ErrBusy):
		k := a.pendingLeave[id] // a Join kept before it stays
		k.l, k.j = l, a.joins[id]
		a.pendingLeave[id] = k // retried every tick until the handoff settles
	case errors.Is(err, sim.ErrNotHere):
		a.passLeave(id, l)
	}
}

// keptLeave is what came for a player while it was being handed off and
// waits for the handoff to settle: a Leave (nil: none) with the player's
// Join when it came, and the newest Join of another login (nil: none).
type keptLeave struct {
	l *msg.Leave
	j *msg.Join
	// join: a login's Join that came while the player was frozen (the
	// zone can neither take it over nor spawn it then: sim.ErrExists,
	// then ErrBusy), kept instead of refused and its client kicked.
	join *msg.Join
	// inputs: that login's inputs that came while its Join was kept
	// (holdKept), in order: they go behind it (passJoin, or taken here).
	inputs []*msg.Input
}

// holdKept keeps in behind its player's kept Join when it comes from that
// Join's connection — its event generation, when the player plays here in
// another — and reports whether it did. A newer login whose Join came
// while the player was frozen in a handoff sends its inputs to this zone
// (its route) until it is redirected: applied here, its moves (numbered
// from 1) were taken as the older connection's and its events echoed to
// the older connection, lost to the login that sent them. Kept, they go
// on behind the Join to the new owner (passJoin) or are taken here after
// it (retryLeave). Bounded as parked inputs are (maxParked; past it
// dropped, counted). A connection whose generation the zone does not know
// (0) is not told apart: its inputs are taken as before.
func (a *zoneActor) holdKept(in *msg.Input) bool {
	k, ok := a.pendingLeave[in.Player]
	if !ok || k.join == nil || in.EventGen == 0 || in.EventGen != k.join.EventGen {
		return false
	}
	if j := a.joins[in.Player]; j != nil && j.EventGen == in.EventGen {
		return false
	}
	if len(k.inputs) >= maxParked {
		a.m.InputsDropped.Add(1)
		in.Release()
		return true
	}
	k.inputs = append(k.inputs, in)
	a.pendingLeave[in.Player] = k
	return true
}

// keep makes j the kept Join of k; the inputs kept for a Join of another
// generation are dropped (that login was superseded in turn).
func (k *keptLeave) keep(j *msg.Join, m *Metrics) {
	if k.join != nil && k.join.EventGen != j.EventGen && len(k.inputs) > 0 {
		for _, in := range k.inputs {
			in.Release()
		}
		m.InputsDropped.Add(uint64(len(k.inputs)))
		k.inputs = nil
	}
	k.join = j
}

// takeKept applies inputs held behind a kept Join taken here, in order.
func (a *zoneActor) takeKept(inputs []*msg.Input) {
	if len(inputs) == 0 {
		return
	}
	now := a.p.Now()
	var c inputCounts
	for _, in := range inputs {
		if !a.hold(in, now, &c) {
			a.apply(in, now, &c)
		}
	}
	c.add(a.m)
	a.flushOutputs()
}

// rejoined takes j, a restore's Join for a player this zone owns through
// j's connection already (see onJoin): the route only, and the inputs
// held for it before it came, in order.
func (a *zoneActor) rejoined(j *msg.Join) {
	a.setJoin(j)
	a.takeKept(a.takeEarly(j, nil))
}

// conn is the connection the kept Leave is for: the one it names, else
// the one the player was joined through when it came (nil: not known).
func (k keptLeave) conn() *actor.PID {
	if k.l != nil && k.l.Conn != nil {
		return k.l.Conn
	}
	if k.j != nil {
		return k.j.Conn
	}
	return nil
}

// keepJoin keeps j, the Join of a player frozen here in a handoff, until
// the handoff settles (retryLeave), and reports whether it did. A rejoin
// resent for the connection the player is joined through is not kept:
// onJoin keeps the live state and takes its route.
func (a *zoneActor) keepJoin(j *msg.Join) bool {
	e, ok := a.z.Entity(j.Player)
	if !ok || !e.Frozen {
		return false
	}
	if old := a.joins[j.Player]; j.Restore != nil && j.Restore.Entity == j.Player &&
		(old == nil || old.Conn == nil || j.Conn == nil || old.Conn.Equal(j.Conn)) {
		return false
	}
	k := a.pendingLeave[j.Player]
	k.keep(j, a.m) // a newer login's Join supersedes an older one's
	k.inputs = a.takeEarly(j, k.inputs)
	a.pendingLeave[j.Player] = k
	return true
}

// joinAway passes j on to the zone that player j.Player was handed to
// when this zone has handed it away (committing: the Commit sent, not yet
// acknowledged; forwarding), and reports whether it did. The new owner
// takes the player over for it as it takes a kept Join passed on
// (passJoin), and the connection is redirected there. Here the Join was
// refused while committing (the machine still knows the player: spawn
// fails) and the client kicked, and while forwarding it spawned the
// player afresh beside the new owner: two owners. What was kept for the
// player while it was frozen is settled with it (retryLeave: this Join in
// place of one kept, the Join first, a kept Leave after it). A restore
// from a record newer than the handoff (the player came back here since,
// or its new owner's node died and the record put it back elsewhere) is
// not this handoff's: onJoin restores it as before.
func (a *zoneActor) joinAway(j *msg.Join) bool {
	ph, ep, _ := a.z.Handoffs().Status(j.Player)
	if ph != handoff.PhaseCommitting && ph != handoff.PhaseForwarding {
		return false
	}
	if ph == handoff.PhaseCommitting {
		ep++ // the new owner's (forwarding: the machine's already)
	}
	if r := j.Restore; r != nil && r.Entity == j.Player && r.Epoch >= ep {
		return false
	}
	k := a.pendingLeave[j.Player]
	k.keep(j, a.m) // a newer login's Join supersedes an older one's
	k.inputs = a.takeEarly(j, k.inputs)
	a.retryLeave(j.Player, k)
	return true
}

// retryLeave settles what was kept for player id (k) while a handoff of
// the player was in progress, once the handoff has settled: here when it
// was aborted, at the new owner when it completed. A kept Join goes
// first: taken here as it would have been before the handoff, or passed
// on (passJoin). A kept Leave follows: taken here as onLeave takes one (a
// Join taken over the player's makes the older connection's Leave that
// connection's, not the player's), or passed on as a Leave that comes
// after the handoff is, naming the connection it was kept for, so that
// the new owner ignores it if a newer login has taken the player over
// there meanwhile.
func (a *zoneActor) retryLeave(id uint64, k keptLeave) {
	if ph, _, _ := a.z.Handoffs().Status(id); ph == handoff.PhaseOffering {
		return // still in progress
	}
	if e, ok := a.z.Entity(id); ok && e.Frozen {
		return
	}
	delete(a.pendingLeave, id)
	if k.join != nil && !a.passJoin(id, k) {
		a.onJoin(k.join)
		a.takeKept(k.inputs)
	}
	if k.l == nil {
		return
	}
	l := k.l
	if conn := k.conn(); l.Conn == nil && conn != nil {
		l = &msg.Leave{Player: l.Player, Conn: conn, Reason: l.Reason}
	}
	if e, ok := a.z.Entity(id); ok && e.Owned {
		a.onLeave(l)
		return
	}
	a.passLeave(id, l)
	a.leftAway(id)
}

// passJoin passes the Join kept in k on to the zone that player id was
// handed to, and reports whether it did. That zone takes the player over
// for it as it would a Join that came after the handoff. The connection
// is redirected there (its route is still this zone, and the new owner
// routes only the connection the player was handed with): the Redirect
// names the new owner's epoch, above any this connection took. A player
// whose client was awaited after a Redirect (awaiting) gets that client
// back through this Join: the events held for it go with it, and the
// older connection's Leave(Redirected) is passed on behind the Join, so
// that the new owner forgets the connection its takeover displaced.
func (a *zoneActor) passJoin(id uint64, k keptLeave) bool {
	ph, ep, peer := a.z.Handoffs().Status(id)
	if ph != handoff.PhaseCommitting && ph != handoff.PhaseForwarding {
		return false
	}
	j, to := k.join, a.peer(peer)
	a.ctx.Send(to, j)
	for _, in := range k.inputs { // behind it, in order (holdKept)
		a.ctx.Send(to, in)
	}
	if old := a.joins[id]; j.EventGen != 0 && (old == nil || old.EventGen != j.EventGen) {
		// Its inputs that come here still go on behind it (earlyInputs).
		if e, ok := a.incoming[id]; ok {
			a.releaseEarly(e.inputs) // none: takeEarly took them with j
			a.releaseEarly(e.handed) // none: the player was owned here
		}
		a.incoming[id] = earlyInputs{passed: j.EventGen, until: a.p.Now() + earlyGrace}
	}
	a.m.Forwarded.Add(1)
	if j.Conn != nil {
		a.flushHeld(j)
		if ph == handoff.PhaseCommitting {
			ep++ // the new owner's (Forwarding: the machine's already)
		}
		a.ctx.Send(j.Conn, &msg.Redirect{Player: id, Zone: to, Epoch: uint64(ep)})
	}
	if _, ok := a.awaiting[id]; ok {
		delete(a.awaiting, id)
		if old := a.joins[id]; k.l == nil && old != nil && old.Conn != nil {
			a.passOn(id, &msg.Leave{Player: id, Conn: old.Conn, Reason: handshake.ReasonRedirected})
		}
	}
	return true
}

// leftAway forgets what this zone kept for the connection of player id,
// handed away, once its Leave has been passed on to the new owner. The
// player's Join stays, and whether the Commit forces its control state:
// a Commit resent (unacknowledged; across processes, while the new
// owner's record write is slow) carries them, and the zone that receives
// it rebuilds the player's Join from them (actors/cluster). sweepJoins
// drops the Join once the handoff's record is gone.
func (a *zoneActor) leftAway(id uint64) {
	delete(a.superseded, id)
	a.undisplace(id)
	delete(a.awaiting, id)
	a.dropHeld(id)
	delete(a.budget, id)
	delete(a.pendingTP, id)
	a.dropCarried(id, 0)
}

func (a *zoneActor) onTeleport(t *Teleport) {
	a.teleport(t.Entity, t.Pos)
	a.flushPending()
}

// teleport applies a teleport here, passes it on to the entity's new
// owner, or keeps it for the next tick while a handoff is in progress.
// When it starts a handoff, the entity's Commit will ask the new owner to
// force a full control-state send (the correction this zone owes the
// player can no longer travel in its own Control).
func (a *zoneActor) teleport(id uint64, pos [3]float32) {
	err := a.z.Teleport(a.p.Now(), id, pos)
	switch {
	case err == nil:
		a.m.Teleports.Add(1)
		if ph, _, _ := a.z.Handoffs().Status(id); ph == handoff.PhaseOffering {
			a.forced[id] = true
		}
	case errors.Is(err, sim.ErrBusy):
		a.pendingTP[id] = pos
	case errors.Is(err, sim.ErrNotHere):
		if !a.passOn(id, &Teleport{Entity: id, Pos: pos}) {
			a.m.TeleportsDropped.Add(1)
		}
	}
}

func (a *zoneActor) onHandoff(env *HandoffEnvelope) {
	if a.paused&pausesClaims == 0 && claims(env.Msg.Kind) {
		a.fenceLapsed() // kept below if so (paused.go)
	}
	if a.keepDuringHold(env) { // a lease's hold: paused.go
		return
	}
	now := a.p.Now()
	id := env.Msg.Entity
	owned := a.z.Handoffs().Owns(id)
	// A copy that comes once the player is here (a Commit resent before
	// its CommitAck reached the source; across processes every copy once
	// the record is written) carries the Join the player was handed with:
	// a newer login may have taken it over since, and that Join set again
	// sent the player's Controls and Outputs to the older connection while
	// the newer played it (TestResentCommitAfterATakeoverKeepsTheNewerLogin,
	// TestLateCommitCopyKeepsTheNewerLogin).
	if env.Join != nil && !owned && (env.Msg.Kind == handoff.KindOffer || env.Msg.Kind == handoff.KindCommit) {
		a.setJoinFor(id, env.Join)
	}
	a.z.Handoff(now, env.Msg)
	if !owned {
		a.expectJoin(id, env, now)
	}
	if env.Msg.Kind == handoff.KindCommit && !owned && a.z.Handoffs().Owns(id) {
		if env.Force {
			_ = a.z.Correct(id) // owned: cannot fail
		}
		a.m.HandoffsIn.Add(1)
		// Counted before the record's write goes (placed): a reader who
		// sees the record name this zone sees the handoff counted too
		// (TestDrainRejoinsAPlayerHandedAcrossNodes read the record, then
		// the count, and once under -race found it not yet added).
		if env.Remote {
			a.m.HandoffsInRemote.Add(1)
		}
		if a.p.Placed != nil && !sim.IsNPC(id) {
			// The record the acquisition writes carries the checkpoint:
			// without one, a node that died before its first periodic
			// one (up to a second) left a record nobody could restore,
			// and the player's live connection looked it up in vain for
			// good (make chaos: a stranded player, a stale record). As a
			// join does.
			a.placed(id, false)
		}
		if env.Began != 0 {
			a.m.HandoffLatency.Add(now - env.Began)
		}
	}
	if env.Msg.Kind == handoff.KindAccept && !a.z.Handoffs().Owns(id) {
		delete(a.began, id) // committed: the target measures the rest
	}
	if env.Msg.Kind == handoff.KindCommitAck {
		a.commitAcked(id, env.Msg)
	}
	a.flushPending()
}

// unackedCommit is a Commit this zone sent for a player and has not seen
// acknowledged: the snapshot it carries, at the epoch it hands on, and
// the player's Leave if one came meanwhile (passed on at once as well).
// Across processes the new owner takes the player only once it has
// written the player's record, and that write can be refused for good (a
// real conflict, its zone's lease truly lost): the Leave passed on then
// reached a zone that did not own the player and was dropped, and nobody
// ended the player — its record stayed online, naming this zone, and the
// zone refused to put it back until it forgot the handoff (ForwardTTL).
// Kept, the Leave goes on again with a late CommitAck (the new owner took
// the player after all: a duplicate of one it has taken is ignored
// there), and with none by the forwarding record's expiry the player is
// ended here as a Leave ends it: its last checkpoint, the Commit's state,
// is handed on (Params.Checkpoint, leaving; the cluster writes it only
// while the record still names this zone at that epoch: never over a new
// owner's) and the zone forgets it.
type unackedCommit struct {
	snap  *handoff.Snapshot
	epoch handoff.Epoch
	leave *msg.Leave
}

// sentCommit remembers the Commit m until its CommitAck (commitAcked) or
// its forwarding record's expiry (settleUnacked).
func (a *zoneActor) sentCommit(m *handoff.Msg) {
	u := a.unacked[m.Entity]
	if u.epoch != m.Epoch {
		u = unackedCommit{epoch: m.Epoch}
	}
	u.snap = m.State
	a.unacked[m.Entity] = u
}

// passLeave passes l on to the zone player id was handed to and, while
// that zone has not acknowledged the player's Commit, keeps it
// (unackedCommit), naming the connection the player was joined through.
func (a *zoneActor) passLeave(id uint64, l *msg.Leave) {
	a.passOn(id, l)
	u, ok := a.unacked[id]
	if !ok || u.leave != nil {
		return
	}
	if j := a.joins[id]; l.Conn == nil && j != nil && j.Conn != nil {
		l = &msg.Leave{Player: l.Player, Conn: j.Conn, Reason: l.Reason}
	}
	u.leave = l
	a.unacked[id] = u
}

// commitAcked ends the wait for player id's Commit acknowledged by ack; a
// Leave kept meanwhile goes on again (unackedCommit).
func (a *zoneActor) commitAcked(id uint64, ack handoff.Msg) {
	u, ok := a.unacked[id]
	if ph, _, peer := a.z.Handoffs().Status(id); !ok || u.epoch != ack.Epoch || ph != handoff.PhaseForwarding || peer != ack.From {
		return
	}
	delete(a.unacked, id)
	if u.leave != nil {
		a.passOn(id, u.leave)
	}
}

// settleUnacked ends the wait for player id's unacknowledged Commit (u)
// once the handoff machine has forgotten the handoff (its forwarding
// record expired with no CommitAck): a Leave kept for the player ends it
// here (unackedCommit). A player owned here again (acquired back from
// the zone that took it) is not this Commit's.
func (a *zoneActor) settleUnacked(id uint64, u unackedCommit) {
	ph, _, _ := a.z.Handoffs().Status(id)
	if ph == handoff.PhaseCommitting || ph == handoff.PhaseForwarding {
		return
	}
	delete(a.unacked, id)
	if ph != handoff.PhaseUnknown || u.leave == nil || u.snap == nil {
		return
	}
	s := u.snap
	a.lastCheckpoint(handoff.Checkpoint{Entity: id, Epoch: u.epoch, Control: s.Control, LastApplied: s.LastApplied,
		Health: s.Health, Flags: s.Flags, Name: s.Name, Extra: s.Extra, Conn: s.Conn, Events: s.Events})
	a.forget(id)
	a.m.Leaves.Add(1)
	a.m.LeftUnacked.Add(1)
	a.log.Warn("player left during a handoff its new owner never acknowledged: ended here", "zone", a.p.Sim.Zone, "player", id, "epoch", u.epoch)
}

// earlyInputs are the inputs held for a player this zone accepted an
// offer of (reserved: its Commit not yet here) or has just taken, from a
// login other than the one the player is handed with: a newer login whose
// Join the old zone passed on behind its Commit (joinAway, passJoin) and
// whose connection it redirected here at once. Its inputs come straight
// from the connection while the Join waits behind the Commit (across
// processes, for its record write: actors/cluster holdBehindCommit):
// taken as they came, the moves were stashed for the Commit as the older
// connection's, numbered from 1 and so dropped as applied already, and
// the events handled for a player not owned here, outside its fence —
// lost, uncounted (TestInputsBehindAHeldJoinWaitForIt, back to the
// gateway's node).
//
// Before the Commit every input of the player is held, whatever its
// event generation: no connection is routed to a zone for a player it
// has only reserved but one the old owner redirected there (the handed
// connection follows the new owner's Route, sent once the Commit is
// taken), so none is the older connection's, and its events cannot be
// fenced before the Commit brings the fence (sim.Zone.TakeEvent). A
// login that continues the older connection's numbering (the same
// generation: a client that followed a Redirect) or has none (0) was
// taken as the older connection's
// (TestSameGenerationLoginsInputsBeforeTheCommitWaitForItsJoin). Once the
// player is taken, the inputs of the generation it was taken with (and
// of none) are its connection's: only another generation's are held.
//
// Held, they go behind their login's Join, in order (takeEarly), or,
// when the Commit names their generation as the player's (a login that
// took the player over at the old owner meanwhile), behind the Commit.
// When the offer ends without a Commit they go back to where the player
// is: to the offerer, or on to the zone it was handed to
// (returnEarly, TestAbortedOffersHeldInputsGoBackToTheOwner). Bounded as
// parked inputs are (maxParked; past it the newest dropped), and dropped
// when a third login's come, their Join is refused, or none came by until
// (sweepEarly): counted apart from other inputs (HeldInputsDropped,
// HeldInputsReturned).
type earlyInputs struct {
	gen    uint64 // the event generation of the Join the player is handed with
	from   string // the zone that offered the player: where it is if the offer fails
	until  time.Duration
	inputs []*msg.Input
	// passed, on the zone that handed the player away: the generation of
	// the login whose Join it passed on to the new owner (passJoin). That
	// login's inputs that still come here, its connection not yet
	// redirected, go on behind it whole (holdEarly): applied here they
	// were taken as the older connection's, the moves forwarded into its
	// queue and the events handled here, echoed to the older login
	// (actors/cluster TestInputsBehindAHeldJoinWaitForIt, which failed
	// about one run in eight so; TestInputsAfterAPassedJoinGoOnBehindIt).
	passed uint64
	// handed: inputs the offering zone passed on (passInputOn) of the
	// Offer's generation, the handed connection's own, that came before
	// the Commit (a Commit kept by a lease's hold, paused.go, or one that
	// waited for its record write on another node while they overtook
	// it). They are the player's as it is handed: taken at the Commit,
	// first (expectJoin). Held with the other login's inputs, they waited
	// for a Join that never comes and were dropped at until. Bounded by
	// maxParked too.
	handed []*msg.Input
}

// earlyGrace bounds how long inputs wait for their Join: the Commit's
// record write (seconds at worst, behind a busy KV) and the Join behind
// it; a client that hears nothing for 3 s looks its player up again.
var earlyGrace = 10 * time.Second // a var: tests shorten it

// expectJoin notes, for an Offer this zone accepted, which login's inputs
// are the player's once it is taken (the Join's it is handed with) and
// where the player is if the offer fails (earlyInputs); a Commit that
// takes the player first takes the inputs the offering zone passed on
// before it (earlyInputs.handed: the handed connection's, told from a
// newer login's of the same generation by the passed-on flag), then ends the wait if
// nothing else is held, and one whose Join is of the held inputs'
// generation, another than the Offer's, takes them behind it.
func (a *zoneActor) expectJoin(id uint64, env *HandoffEnvelope, now time.Duration) {
	e, ok := a.incoming[id]
	switch env.Msg.Kind {
	case handoff.KindOffer:
		if sim.IsNPC(id) {
			return
		}
		if _, reserved := a.z.Handoffs().Reserved(id); !reserved {
			return
		}
		if env.Join != nil {
			e.gen = env.Join.EventGen
		}
		e.from, e.until, e.passed = env.Msg.From, now+earlyGrace, 0
		a.incoming[id] = e
	case handoff.KindCommit:
		if !ok || !a.z.Handoffs().Owns(id) {
			return
		}
		if len(e.handed) > 0 {
			// Passed on by the old zone: the handed connection's, taken
			// now, ahead of anything held for another login.
			handed := e.handed
			e.handed = nil
			a.incoming[id] = e
			a.takePassed(handed)
			if e, ok = a.incoming[id]; !ok {
				return
			}
		}
		if len(e.inputs) == 0 {
			delete(a.incoming, id)
			return
		}
		if env.Join == nil {
			return
		}
		if g := env.Join.EventGen; g != 0 && g != e.gen && e.inputs[0].EventGen == g {
			// The login that took the player over at the old owner
			// after its Offer: the held inputs are its connection's.
			delete(a.incoming, id)
			a.takeKept(e.inputs)
			return
		}
		e.gen = env.Join.EventGen
		a.incoming[id] = e
	}
}

// holdEarly keeps in while its player is being taken over here and in
// comes from another login than the one the player is handed with, whose
// Join has not come (earlyInputs), and reports whether it did. Before the
// Commit every input of the player is held; after it, one of the
// generation the player was taken with, or of none, is not told apart
// from the player's connection. On the zone that handed the player away
// and passed a login's Join on, that login's inputs go on behind it.
func (a *zoneActor) holdEarly(in *msg.Input) bool {
	e, ok := a.incoming[in.Player]
	if !ok {
		return false
	}
	if e.passed != 0 {
		if in.EventGen != e.passed {
			return false
		}
		if !a.passOn(in.Player, in) { // the handoff settled: not passed on
			delete(a.incoming, in.Player)
			return false
		}
		return true
	}
	if a.passing && (in.EventGen == 0 || in.EventGen == e.gen) && !a.z.Handoffs().Owns(in.Player) {
		// Passed on by the zone that offered the player, of the Offer's
		// generation: the handed connection's, not a redirected newer
		// login's of that generation (whose inputs come from its
		// connection, plain). Before the Commit, held for it
		// (earlyInputs.handed), never for a Join. Another generation's
		// (a login that took the player over at the old zone after its
		// Offer) waits with the rest, for the Commit naming it or its
		// Join; once owned, all go as the connection's.
		if len(e.handed) >= maxParked {
			a.m.HeldInputsDropped.Add(1)
			in.Release()
			return true
		}
		e.handed = append(e.handed, in)
		a.incoming[in.Player] = e
		return true
	}
	if a.z.Handoffs().Owns(in.Player) {
		if in.EventGen == 0 || in.EventGen == e.gen {
			return false
		}
		if j := a.joins[in.Player]; j != nil && j.EventGen == in.EventGen {
			return false
		}
	}
	if len(e.inputs) > 0 && e.inputs[0].EventGen != in.EventGen {
		// A third login's: the one before is superseded.
		a.releaseEarly(e.inputs)
		clear(e.inputs)
		e.inputs = e.inputs[:0]
	}
	if len(e.inputs) >= maxParked {
		a.m.HeldInputsDropped.Add(1)
		in.Release()
		return true
	}
	e.inputs = append(e.inputs, in)
	a.incoming[in.Player] = e
	return true
}

// takeEarly ends the wait of player j.Player's early inputs for j: those
// of j's login (its generation) come back, in order, followed by after;
// the rest are dropped, counted.
func (a *zoneActor) takeEarly(j *msg.Join, after []*msg.Input) []*msg.Input {
	e, ok := a.incoming[j.Player]
	if !ok {
		return after
	}
	a.endEarly(j.Player, e)
	if len(e.inputs) == 0 {
		return after
	}
	if e.inputs[0].EventGen != j.EventGen {
		a.releaseEarly(e.inputs)
		return after
	}
	return append(e.inputs, after...)
}

// dropEarly drops player id's early inputs, counted.
func (a *zoneActor) dropEarly(id uint64) {
	if e, ok := a.incoming[id]; ok {
		a.endEarly(id, e)
		a.releaseEarly(e.inputs)
		a.releaseEarly(e.handed)
	}
}

// endEarly ends the wait of player id's early inputs (e, which the caller
// takes, but for the passed-on ones: handed): while the player is still
// reserved here a new wait starts, so that its inputs are still held for
// the Commit, none applied early, and the passed-on ones wait on for it.
// Not reserved, the passed-on ones are taken if the player is owned here
// (their Commit came), else dropped.
func (a *zoneActor) endEarly(id uint64, e earlyInputs) {
	if _, reserved := a.z.Handoffs().Reserved(id); reserved && !a.z.Handoffs().Owns(id) {
		a.incoming[id] = earlyInputs{gen: e.gen, from: e.from, until: e.until, handed: e.handed}
		return
	}
	delete(a.incoming, id)
	if len(e.handed) > 0 {
		if a.z.Handoffs().Owns(id) {
			a.takePassed(e.handed)
		} else {
			a.releaseEarly(e.handed)
		}
	}
}

// takePassed takes inputs the offering zone passed on, held before the
// Commit (earlyInputs.handed), in order, as it would have as they came
// once the player was owned here.
func (a *zoneActor) takePassed(inputs []*msg.Input) {
	passing := a.passing
	a.passing = true
	a.takeKept(inputs)
	a.passing = passing
}

func (a *zoneActor) releaseEarly(inputs []*msg.Input) {
	for _, in := range inputs {
		in.Release()
	}
	if n := len(inputs); n > 0 {
		a.m.HeldInputsDropped.Add(uint64(n))
	}
}

// returnEarly passes player id's early inputs, in order, to where the
// player is now that this zone will not take it for them: the zone it
// was handed to from here (it was taken, then went on before their Join
// came), else the zone that offered it (the offer ended without a
// Commit: the player stays there, which holds a newer login's inputs
// with its kept Join or takes them as the player's). With neither known
// they are dropped. Counted either way.
func (a *zoneActor) returnEarly(id uint64, e earlyInputs) {
	delete(a.incoming, id)
	if len(e.inputs)+len(e.handed) == 0 {
		return
	}
	var to *actor.PID
	switch ph, _, peer := a.z.Handoffs().Status(id); {
	case ph == handoff.PhaseCommitting || ph == handoff.PhaseForwarding:
		to = a.peer(peer)
	case ph == handoff.PhaseUnknown && e.from != "" && e.from != a.p.Sim.Zone:
		to = a.peer(e.from)
	}
	if to == nil {
		a.releaseEarly(e.handed)
		a.releaseEarly(e.inputs)
		return
	}
	for _, in := range e.handed { // passed on again, as they came
		a.ctx.Send(to, &passedInput{in: in})
	}
	for _, in := range e.inputs {
		a.ctx.Send(to, in)
	}
	a.m.HeldInputsReturned.Add(uint64(len(e.handed) + len(e.inputs)))
}

// sweepEarly ends the wait of a player no longer reserved here (its offer
// aborted or expired) or taken with nothing held, passes the held inputs
// of one neither reserved nor owned here on to where it is (returnEarly),
// and drops those whose Join did not come in time.
func (a *zoneActor) sweepEarly() {
	now := a.p.Now()
	for id, e := range a.incoming {
		if e.passed != 0 {
			if ph, _, _ := a.z.Handoffs().Status(id); now >= e.until || ph != handoff.PhaseCommitting && ph != handoff.PhaseForwarding {
				delete(a.incoming, id)
			}
			continue
		}
		if _, reserved := a.z.Handoffs().Reserved(id); reserved {
			if now >= e.until {
				a.dropEarly(id)
			}
			continue
		}
		switch owned := a.z.Handoffs().Owns(id); {
		case owned && len(e.handed) > 0: // taken here after all (endEarly)
			a.endEarly(id, earlyInputs{handed: e.handed})
			if len(e.inputs) > 0 {
				e.handed = nil
				a.incoming[id] = e
			}
		case len(e.inputs)+len(e.handed) == 0 && !owned:
			delete(a.incoming, id)
		case !owned:
			a.returnEarly(id, e)
		case now >= e.until:
			a.dropEarly(id)
		}
	}
}

// GatewayGone tells a zone that the connections of one gateway node (a
// cluster node's link: its players' Join.Conn.Id is Link) that joined
// before Before (the zone's Now) are gone: the node died (no heartbeat)
// or started again (its connections died with the old process). Nobody
// else would ever send their Leaves, and the players would stand in the
// zone for good, frozen where their clients stopped, their records
// online. Each leaves as a connection's Leave(Timeout) would: final
// checkpoint, record offline. One that joined again since (through the
// restarted node: a later Join) stays.
type GatewayGone struct {
	Link   string
	Before time.Duration
}

func (a *zoneActor) onGatewayGone(m *GatewayGone) {
	var gone []uint64
	for id, j := range a.joins {
		if j != nil && j.Conn != nil && j.Conn.Id == m.Link && a.joinedAt[id] < m.Before {
			gone = append(gone, id)
		}
	}
	for _, id := range gone {
		a.leave(id, a.ownLeave(id, handshake.ReasonTimeout))
	}
	if len(gone) > 0 {
		a.m.GatewayGoneLeaves.Add(uint64(len(gone)))
		a.log.Warn("zone: players of a gateway node that is gone taken out", "zone", a.p.Sim.Zone, "link", m.Link, "players", len(gone))
	}
}
