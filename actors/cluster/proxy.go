package cluster

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/zone"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/proto/pbconv"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// flush asks a proxy or link to publish what it batched. It is sent to
// self when the first message of a batch arrives, so it runs after the
// burst already in the mailbox: one NATS message per burst (a zone's tick
// sends every replica and view at once), not one per actor message.
type flush struct{}

var flushMsg = &flush{}

// zoneProxy stands for a zone another node owns, under that zone's actor
// name: local zones and connections send it what they would send the zone,
// and it publishes them, batched, to the owner.
type zoneProxy struct {
	b        *Bridge
	zone     string
	batch    pb.ZoneBatch
	size     int // encoded bytes batched
	flushing bool
	arq      arqOut
	// reps are the replica items this proxy fills and batches, reps[:nrep]
	// in the batch being made: free again once it is encoded (flush). A
	// zone here sends a batch of its border replicas a tick, ≈ 5 objects
	// a replica when made afresh (pbconv.ReplicaBatchToProto).
	reps    []*pb.ZoneItem
	nrep    int
	scratch []byte // a replica's name (ReplicaBatchToProtoInto)
	subject string // the zone's (made once: it was made a message, an allocation each)
	// ins are the input items this proxy fills and batches, ins[:nin] in
	// the batch being made: free again once it is encoded (flush). At most
	// MaxBatch (a batch goes at that many items). An input made ≈ 6
	// objects afresh (its item, its wrapper, the input, its moves).
	ins []*pb.ZoneItem
	nin int
	// The current spell without an owner (noOwner): since when (zero:
	// the zone has one), items dropped in it, and whether it was warned.
	unownedSince  time.Time
	unownedDrops  uint64
	unownedWarned bool
}

// A zone without an owner for this many lease TTLs is warned about: a
// planned handover leaves it so for a few hundred milliseconds, a dead
// owner's zone until its lease expires and a node claims it (≈ 1.2 TTLs,
// `make chaos`), so past two no node is claiming it (a cluster of fixed
// --zones lists with a node down).
const noOwnerWarnTTLs = 2

// noOwner counts n items dropped because no node owns the zone. The first
// of a spell is logged at debug (the routine tail of every handover);
// the spell is warned about once it has lasted noOwnerWarnTTLs, once.
// Before, the first drop of each zone was warned and nothing after it in
// the process's life: every drain or rebalance warned, and a real outage
// later went unsaid.
func (p *zoneProxy) noOwner(n int, now time.Time) {
	p.b.m.NoOwner.Add(uint64(n))
	p.unownedDrops += uint64(n)
	if p.unownedSince.IsZero() {
		p.unownedSince = now
		p.b.log.Debug("cluster: zone has no owner (handed over, or its node stopped); its messages are dropped until one claims it", "zone", p.zone)
		return
	}
	if d := now.Sub(p.unownedSince); !p.unownedWarned && d >= noOwnerWarnTTLs*p.b.cfg.Leases.TTL() {
		p.unownedWarned = true
		p.b.log.Warn("cluster: zone has no owner: no node claims it; its messages are dropped until one does", "zone", p.zone,
			"for", d.Round(time.Millisecond), "dropped", p.unownedDrops)
	}
}

// owned ends a spell without an owner: said at info if it was warned.
func (p *zoneProxy) owned(owner string, now time.Time) {
	if p.unownedWarned {
		p.b.log.Info("cluster: zone has an owner again", "zone", p.zone, "owner", owner,
			"after", now.Sub(p.unownedSince).Round(time.Millisecond), "dropped", p.unownedDrops)
	}
	p.unownedSince, p.unownedDrops, p.unownedWarned = time.Time{}, 0, false
}

// subj is the subject the proxy publishes on.
func (p *zoneProxy) subj() string {
	if p.subject == "" {
		p.subject = zoneSubject(p.b.cfg.World, p.zone)
	}
	return p.subject
}

// maxReusedReplicas bounds the replica items a proxy keeps: one a zone
// here that borders its zone, sent a batch a tick each.
const maxReusedReplicas = 8

// replicaItem is b as an item of the batch being made.
func (p *zoneProxy) replicaItem(b *sim.ReplicaBatch) *pb.ZoneItem {
	if p.nrep == len(p.reps) {
		it := &pb.ZoneItem{Item: &pb.ZoneItem_Replicas{Replicas: new(pb.ReplicaBatch)}}
		if len(p.reps) == maxReusedReplicas {
			p.scratch = pbconv.ReplicaBatchToProtoInto(it.GetReplicas(), b, p.scratch)
			return it // one more this batch: not kept
		}
		p.reps = append(p.reps, it)
	}
	it := p.reps[p.nrep]
	p.nrep++
	p.scratch = pbconv.ReplicaBatchToProtoInto(it.GetReplicas(), b, p.scratch)
	return it
}

// handoffItemMsgs is a handoff's item, the four messages that carry it
// to another node allocated together: they were four allocations of
// every Offer, Accept, Commit and acknowledgement a zone sent away.
type handoffItemMsgs struct {
	it    pb.ZoneItem
	oneof pb.ZoneItem_Handoff
	h     pb.HandoffItem
	msg   pb.HandoffMessage
}

func (p *zoneProxy) Receive(ctx actor.Context) {
	if p.b.streamEvent(ctx, &p.arq, p.subj(), KindZone) {
		return
	}
	var it *pb.ZoneItem
	switch m := ctx.Message().(type) {
	case *flush:
		p.flush()
		return
	case *zone.HandoffEnvelope:
		p.b.rememberLocal(m.Join)
		x := new(handoffItemMsgs)
		pbconv.HandoffToProtoInto(&x.msg, &m.Msg)
		h := &x.h
		*h = pb.HandoffItem{Msg: &x.msg, GatewayNode: p.b.gatewayOf(m.Join), Force: m.Force}
		if m.Join != nil {
			h.ConnTag, h.EventGen = connTag(m.Join.Conn), m.Join.EventGen
		}
		h.Msg.SentNs = p.b.wallStamp(m.Msg.Sent)
		if ep, ok := p.b.cfg.Leases.Held(m.Msg.From); ok {
			h.FromEpoch = ep
		}
		x.oneof.Handoff = h
		it = &x.it
		it.Item = &x.oneof
	case *zone.ReplicaEnvelope:
		it = p.replicaItem(&m.Batch)
		m.Batch.Release() // encoded: its zone reuses the array
		m.MarkHandled()   // and the envelope: touch it no more
	case *msg.Input:
		it = p.inputItem(m, time.Now().UnixNano(), false)
	case *msg.Inputs: // a connection shard's round of inputs: each as it came
		now := time.Now().UnixNano()
		for i, in := range m.List {
			m.List[i] = nil
			p.add(ctx, p.inputItem(in, now, false))
		}
		m.Release()
		return
	case *msg.Join:
		p.b.rememberLocal(m)
		pj := &pb.PlayerJoin{Player: m.Player, Conn: connID(m.Conn), LastApplied: m.LastApplied, UserData: m.UserData,
			EventGen: m.EventGen}
		if gw, ok := linkNode(m.Conn); ok {
			// A zone here passes on the Join of a login that came while it
			// handed the player away, whose connection is another node's:
			// name that node and the connection's tag there, or the new
			// owner's node sends what its zone answers to this node, which
			// holds no connection of the player (as for a Leave).
			pj.GatewayNode, pj.ConnTag = gw, m.Conn.RequestId
		}
		if m.Restore != nil {
			pj.Restore, pj.RestoreEpoch = pbconv.CheckpointToProto(m.Restore), uint64(m.Restore.Epoch)
		}
		it = &pb.ZoneItem{Item: &pb.ZoneItem_Join{Join: pj}}
	case *msg.Leave:
		// A Leave(Redirected) does not end the connection: a connection
		// about to redirect its client (a drain) sends it first, so that
		// the zone holds the player's events for the next connection
		// (actors/conn onRedirect), and goes on taking what the zone sent
		// before it saw the Leave — its last Outputs, its Controls, a
		// Rejoin — until it redirects. Forgetting it here dropped those
		// (counted Unknown): the echo the zone sent just before the Leave
		// was lost, the next one came through the new connection
		// (TestZonedDrainedMidRunRedirectsTheBots, 1 run in 3). The entry
		// goes when a newer Join replaces it or the connection ends (its
		// view slot closes: rememberLocal's sweep).
		if m.Reason != handshake.ReasonRedirected {
			p.b.forgetLocal(m.Player, m.Conn, m.Reason)
		}
		pl := &pb.PlayerLeave{Player: m.Player, Conn: connID(m.Conn), Reason: uint32(m.Reason)}
		if gw, ok := linkNode(m.Conn); ok {
			// A zone here passes on the Leave of a player it handed away,
			// whose connection is another node's: name that node and the
			// connection's tag there, or the new owner's node reads it as
			// a connection of this one and its zone keeps the player.
			pl.GatewayNode, pl.ConnTag = gw, m.Conn.RequestId
		}
		it = &pb.ZoneItem{Item: &pb.ZoneItem_Leave{Leave: pl}}
	case *zone.Teleport:
		it = &pb.ZoneItem{Item: &pb.ZoneItem_Teleport{Teleport: &pb.TeleportItem{Entity: m.Entity,
			Pos: &pb.Vec3{X: m.Pos[0], Y: m.Pos[1], Z: m.Pos[2]}}}}
	case *zone.Inspect:
		// Remote zones are inspected and paused by their own node.
		m.Answer(ctx)
		return
	case *zone.Pause:
		if ctx.Sender() != nil {
			ctx.Respond(struct{}{})
		}
		return
	default:
		// An Input a zone here passed on to the player's new owner
		// (actors/zone passInputOn), behind the Forward of its moves:
		// marked, so that the owner's node hands it to the zone at the
		// Forward's priority (decodeItem). Plain, a later Forward
		// overtook its events there.
		in, ok := zone.PassedOn(m)
		if !ok {
			return
		}
		it = p.inputItem(in, time.Now().UnixNano(), true)
	}
	p.add(ctx, it)
}

// inputItem is m, received at now (wall clock, ns), as an item of the
// batch being made, passed on by a zone (passed) or not; it releases m.
func (p *zoneProxy) inputItem(m *msg.Input, now int64, passed bool) *pb.ZoneItem {
	if p.nin == len(p.ins) {
		it := &pb.ZoneItem{Item: &pb.ZoneItem_Input{Input: new(pb.PlayerInput)}}
		if len(p.ins) >= p.b.cfg.MaxBatch {
			fillInput(it.GetInput(), m, now, passed)
			return it // not kept (a MaxBatch changed under a running proxy)
		}
		p.ins = append(p.ins, it)
	}
	it := p.ins[p.nin]
	p.nin++
	fillInput(it.GetInput(), m, now, passed)
	return it
}

// fillInput sets every field of in from m (its moves in in's messages
// again) and passed, and releases m.
func fillInput(in *pb.PlayerInput, m *msg.Input, now int64, passed bool) {
	in.Player, in.Conn, in.LostBefore, in.ReceivedNs, in.EventGen = m.Player, "", m.LostBefore, now, m.EventGen
	in.PassedOn = passed
	in.Moves = pbconv.MovesToProtoInto(in.Moves, m.Moves)
	clear(in.Events) // the events' payloads go
	in.Events = in.Events[:0]
	for _, e := range m.Events {
		in.Events = append(in.Events, &pb.GameEvent{Class: uint32(e.Class), Lane: uint32(e.Lane), Key: uint32(e.Key),
			Payload: append([]byte(nil), e.Payload...), Seq: e.Seq})
	}
	m.Release()
}

// add queues it for the zone's next batch.
func (p *zoneProxy) add(ctx actor.Context, it *pb.ZoneItem) {
	p.batch.Items = append(p.batch.Items, it)
	p.size += proto.Size(it) + 4
	if len(p.batch.Items) >= p.b.cfg.MaxBatch || p.size >= p.b.maxBytes() {
		p.flush()
		return
	}
	if !p.flushing {
		p.flushing = true
		ctx.Send(ctx.Self(), flushMsg)
	}
}

func (p *zoneProxy) flush() {
	p.flushing = false
	p.size = 0
	p.nrep, p.nin = 0, 0 // encoded below, or dropped: the items are free once flush returns
	if len(p.batch.Items) == 0 {
		return
	}
	defer func() {
		clear(p.batch.Items)
		p.batch.Items = p.batch.Items[:0]
	}()
	o, ok := p.b.cfg.Leases.Owner(p.zone)
	if !ok {
		p.noOwner(len(p.batch.Items), time.Now())
		return
	}
	if !p.unownedSince.IsZero() {
		p.owned(o.Node, time.Now())
	}
	p.batch.Zone, p.batch.ZoneEpoch, p.batch.FromNode = p.zone, o.Epoch, p.b.cfg.Node
	p.b.sendReliable(&p.arq, p.subj(), KindZone, &p.batch, func(stream, seq, floor uint64) {
		p.batch.Stream, p.batch.Seq, p.batch.Floor = stream, seq, floor
	})
}

// link stands, on a zone's node, for the connections another node holds:
// zones send it Controls, views (through per-player slots), Redirects,
// Kicks and events, as they would a local connection, and it publishes
// them, batched, to that node.
type link struct {
	// pid is the name zones hold for the node's connections (linkProcess:
	// tagged copies of it name one connection each); actor is the link
	// actor behind it.
	pid   *actor.PID
	actor *actor.PID
	node  string

	mu    sync.Mutex
	slots map[uint64]*slotRec
	// streams numbers the players' view streams; it starts at the wall
	// clock's nanoseconds, so a restarted node does not reuse a stream a
	// receiver still holds a base for.
	streams *atomic.Uint64
}

type slotRec struct {
	slot *msg.ViewSlot
	used time.Duration // since monoBase: a time.Time's 24 bytes took the record to the 96-byte class
	enc  viewEnc       // the link actor's alone
	// conn: the tag of the connection whose Join came last (0: any). The
	// player's connections on the link's node share the slot: what it
	// takes goes to whichever the bridge there holds for the player.
	conn uint32
	// untagged: that Join named no connection (a handoff from a node
	// before tags, during a rolling update): the zone holds the link's
	// plain PID, so a Leave goes to it untagged too, or the zone would
	// take it for another connection's and keep the player.
	untagged bool
}

// monoBase is the origin of slotRec.used (monotonic).
var monoBase = time.Now()

// linkIdle drops a player's view slot that saw no view this long (its
// entity moved to a zone on another node, or left without a Leave here).
const linkIdle = time.Minute

// slot is player's view slot, made for connection conn's Join.
func (l *link) slot(player uint64, conn uint32) *msg.ViewSlot {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.slots[player]
	if !ok {
		r = &slotRec{slot: new(msg.ViewSlot), used: time.Since(monoBase)}
		r.enc.stream = l.streams.Add(1)
		l.slots[player] = r
	}
	r.conn, r.untagged = conn, conn == 0
	return r.slot
}

// leaver is the PID a Leave of player's connection conn names to a zone
// here: tagged, unless the player's last Join through the link was not.
func (l *link) leaver(player uint64, conn uint32) *actor.PID {
	l.mu.Lock()
	r := l.slots[player]
	untagged := r != nil && r.untagged
	l.mu.Unlock()
	if untagged {
		return l.pid
	}
	return l.connPID(conn)
}

// left drops player's view slot when connection conn left: not when the
// slot is a newer connection's Join's (conn is the older of two logins),
// nor at once for a superseded login (Duplicate) whose Join came last —
// the zone gives the player back to the connection that Join displaced,
// whose Join holds the same slot — which leaves the slot to the next
// Leave, or to the idle sweep.
func (l *link) left(player uint64, conn uint32, reason handshake.Reason) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.slots[player]
	switch {
	case r == nil:
	case conn == 0: // a sender that names no connection: as before tags
		if r.untagged { // else the zone holds a tagged Join and keeps the player (leaver)
			delete(l.slots, player)
		}
	case r.conn != 0 && r.conn != conn:
	case reason == handshake.ReasonDuplicate:
		r.conn = 0
	default:
		delete(l.slots, player)
	}
}

// connPID is the link's PID tagged for connection conn (connTag).
func (l *link) connPID(conn uint32) *actor.PID {
	if conn == 0 {
		return l.pid
	}
	return &actor.PID{Address: l.pid.Address, Id: l.pid.Id, RequestId: conn}
}

// knownLink is node's link if there is one (link makes it).
func (b *Bridge) knownLink(node string) *link {
	if node == "" {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.links[node]
}

func (b *Bridge) link(node string) *link {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l, ok := b.links[node]; ok {
		return l
	}
	l := &link{node: node, slots: map[uint64]*slotRec{}, streams: &b.streams}
	sys := b.cfg.Sys
	name := linkPrefix + node
	pid, err := sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return newLinkActor(b, l) }), name+linkActorSuffix)
	if err != nil { // the name is taken: an earlier link that was stopped
		pid = actor.NewPID(sys.Address(), name+linkActorSuffix)
	}
	l.actor = pid
	lp := &linkProcess{sys: sys, actor: pid}
	if l.pid, err = addProcess(sys, lp, name); err != nil {
		b.warnOnce("link-name:"+node, "cluster: link name taken; its connections' tags are lost", "node", node, "err", err)
		l.pid = pid
	}
	b.links[node] = l
	return l
}

// linkActorSuffix names the link actor behind its linkProcess.
const linkActorSuffix = "$actor"

// addProcess registers p under id (replacing a linkProcess left there by
// a bridge before, on the same actor system).
func addProcess(sys *actor.ActorSystem, p actor.Process, id string) (*actor.PID, error) {
	pid, ok := sys.ProcessRegistry.Add(p, id)
	if ok {
		return pid, nil
	}
	if old, found := sys.ProcessRegistry.GetLocal(id); found {
		if _, stale := old.(*linkProcess); stale {
			sys.ProcessRegistry.Remove(pid)
			if pid, ok = sys.ProcessRegistry.Add(p, id); ok {
				return pid, nil
			}
		}
	}
	return nil, fmt.Errorf("process %q exists", id)
}

// linkProcess is what a link's name (link.pid) resolves to: every
// connection of the link's node reaches a zone here as that name, each
// tagged with its connection (connTag, the PID's RequestId), and a zone
// sends a connection's Controls, Outputs, Redirects and Kicks to the PID
// it holds for it. An actor's mailbox sees the message alone, not the PID
// it was sent to, so the tag would be lost at the link, and the gateway
// node delivered everything to the player's newest connection there: with
// two logins of one player on that node, the older was never redirected,
// and what was meant for it (the old zone's Redirect, a Kick) reached the
// newer. The process takes the PID and writes its tag into the message
// (ConnTag: the message is the receiver's once sent, and each is made for
// one send), which the link actor names to the gateway node
// (ControlUpdate.conn_tag and the like). A wrapper carrying the tag cost
// 24 bytes a message, 256 a tick of 256 players. Safe for concurrent use
// (any sender's goroutine).
type linkProcess struct {
	sys   *actor.ActorSystem
	actor *actor.PID
}

func (p *linkProcess) ref() actor.Process {
	r, _ := p.sys.ProcessRegistry.Get(p.actor)
	return r
}

// SendUserMessage sets the tag of pid on m (0 for the link's plain PID:
// whatever a reused message held is not a connection of this link).
func (p *linkProcess) SendUserMessage(pid *actor.PID, m any) {
	tag := pid.RequestId
	switch x := m.(type) {
	case *msg.Control:
		x.ConnTag = tag
	case *msg.Output:
		x.ConnTag = tag
	case *msg.Redirect:
		x.ConnTag = tag
	case *msg.Kick:
		x.ConnTag = tag
	}
	// Through the actor's PID, which caches its process (a registry
	// lookup hashes the name under a lock: every Control of the link).
	p.sys.Root.Send(p.actor, m)
}

func (p *linkProcess) SendSystemMessage(_ *actor.PID, m any) {
	p.ref().SendSystemMessage(p.actor, m)
}

// Stop stops the link actor; the name goes with it.
func (p *linkProcess) Stop(pid *actor.PID) {
	p.sys.ProcessRegistry.Remove(pid)
	p.ref().Stop(p.actor)
}

type linkActor struct {
	b        *Bridge
	l        *link
	batch    pb.ConnBatch
	views    bool
	n        int
	size     int // encoded bytes batched
	flushing bool
	swept    time.Duration // since monoBase
	// pending: views taken from the slots, encoded and published a chunk
	// at a time (one NATS message each), so a Redirect or Control that
	// arrives meanwhile goes out between chunks instead of after a whole
	// tick of views (a crowded zone's are megabytes).
	pending  []pendingView
	draining bool
	arq      arqOut
	// ctls are the Controls' messages this link fills and batches,
	// ctls[:nctl] in the batch being made: free again once it is
	// published. At most MaxBatch (a batch goes at that many items). A
	// Control made four objects afresh (its update, state, two vectors).
	ctls []*pb.ControlUpdate
	nctl int
	// subject is the node's (made once: it was made a message, an
	// allocation each).
	subject string
}

// subj is the subject the link publishes on.
func (a *linkActor) subj() string {
	if a.subject == "" {
		a.subject = connSubject(a.b.cfg.World, a.l.node)
	}
	return a.subject
}

// controlUpdate is a free ControlUpdate for the batch being made; the
// caller sets every field.
func (a *linkActor) controlUpdate() *pb.ControlUpdate {
	if a.nctl == len(a.ctls) {
		c := new(pb.ControlUpdate)
		if len(a.ctls) >= a.b.cfg.MaxBatch {
			return c // not kept (a MaxBatch changed under a running link)
		}
		a.ctls = append(a.ctls, c)
	}
	c := a.ctls[a.nctl]
	a.nctl++
	return c
}

// add accounts for one item of size n and publishes the batch once it is
// as large as one NATS message should be.
func (a *linkActor) add(n int) {
	a.n++
	a.size += n + 4
	if a.n >= a.b.cfg.MaxBatch || a.size >= a.b.maxBytes() {
		a.publish()
	}
}

type pendingView struct {
	v   *msg.View
	rec *slotRec
}

// newLinkActor is the link actor of l: its held batches give up their
// views first when its peer stops acknowledging (arqOut.thin).
func newLinkActor(b *Bridge, l *link) *linkActor {
	a := &linkActor{b: b, l: l}
	a.arq.thin = thinConnBatch
	return a
}

// drainViews is sent to self while pending views remain.
type drainViews struct{}

var drainMsg = &drainViews{}

func (a *linkActor) Receive(ctx actor.Context) {
	if a.b.streamEvent(ctx, &a.arq, a.subj(), KindConn) {
		return
	}
	switch m := ctx.Message().(type) {
	case *flush:
		a.flush(ctx)
		return
	case *drainViews:
		a.drain(ctx)
		return
	case *msg.Control:
		c := a.controlUpdate()
		c.Player, c.Zone, c.Tick, c.LastApplied, c.Force, c.ConnTag, c.Epoch = m.Player, "", m.Tick, m.LastApplied, m.Force, m.ConnTag, m.Epoch
		c.State = pbconv.ControlToProtoInto(c.State, m.State)
		c.EventGen, c.EventLast = 0, nil
		if m.Events.Gen != 0 {
			c.EventGen, c.EventLast = pbconv.FenceToProto(&m.Events)
		}
		m.Release()
		a.batch.Controls = append(a.batch.Controls, c)
		a.add(proto.Size(c))
	case *msg.ViewReady:
		a.views = true
	case *msg.Redirect:
		zid := ""
		if m.Zone != nil {
			zid = strings.TrimPrefix(m.Zone.Id, "zone-")
		}
		r := &pb.Redirect{Player: m.Player, Zone: zid, Epoch: m.Epoch, ConnTag: m.ConnTag}
		a.batch.Redirects = append(a.batch.Redirects, r)
		a.add(proto.Size(r))
	case *msg.Kick:
		a.batch.Kicks = append(a.batch.Kicks, &pb.ConnKick{Player: m.Player, Reason: uint32(m.Reason), ConnTag: m.ConnTag})
		a.add(8)
	case *rejoin:
		r := &pb.Rejoin{Player: m.cp.Entity, Zone: m.zone, Epoch: uint64(m.cp.Epoch), Checkpoint: pbconv.CheckpointToProto(m.cp)}
		a.batch.Rejoins = append(a.batch.Rejoins, r)
		a.add(proto.Size(r))
	case *msg.Output:
		o := outputToProto(m)
		m.Release()
		a.batch.Outputs = append(a.batch.Outputs, o)
		a.add(proto.Size(o))
	default:
		return
	}
	if !a.flushing {
		a.flushing = true
		ctx.Send(ctx.Self(), flushMsg)
	}
}

// flush publishes the small items at once, then takes every ready view
// and starts publishing them a chunk at a time.
func (a *linkActor) flush(ctx actor.Context) {
	a.flushing = false
	a.publish()
	now := time.Since(monoBase)
	if a.views {
		a.views = false
		a.l.mu.Lock()
		for _, r := range a.l.slots {
			if v := r.slot.Take(); v != nil {
				r.used = now
				a.pending = append(a.pending, pendingView{v, r})
			}
		}
		a.l.mu.Unlock()
	}
	if now-a.swept > linkIdle/4 {
		a.swept = now
		a.l.mu.Lock()
		for player, r := range a.l.slots {
			if now-r.used > linkIdle {
				delete(a.l.slots, player)
			}
		}
		a.l.mu.Unlock()
	}
	if len(a.pending) > 0 && !a.draining {
		a.draining = true
		a.drain(ctx)
	}
}

// drain encodes and publishes one message's worth of pending views, and
// comes back for the rest after whatever else reached the mailbox.
func (a *linkActor) drain(ctx actor.Context) {
	limit := a.b.maxBytes()
	i := 0
	for ; i < len(a.pending) && len(a.batch.PackedViews) < limit; i++ {
		p := a.pending[i]
		a.batch.PackedViews = p.rec.enc.appendView(a.batch.PackedViews, p.v.Player, p.v.Tick, int64(p.v.ServerTime), p.v.Epoch, p.v.Entries)
		p.v.Release()
	}
	clear(a.pending[:i])
	a.pending = a.pending[i:]
	a.publish()
	if len(a.pending) == 0 {
		a.pending, a.draining = a.pending[:0], false
		return
	}
	ctx.Send(ctx.Self(), drainMsg)
}

// publish sends what is batched as one ConnBatch.
func (a *linkActor) publish() {
	a.n, a.size = 0, 0
	cb := &a.batch
	if len(cb.Controls)+len(cb.Views)+len(cb.Redirects)+len(cb.Kicks)+len(cb.Outputs)+len(cb.PackedViews)+len(cb.Rejoins) == 0 {
		return
	}
	cb.FromNode = a.b.cfg.Node
	a.b.sendReliable(&a.arq, a.subj(), KindConn, cb, func(stream, seq, floor uint64) {
		cb.Stream, cb.Seq, cb.Floor = stream, seq, floor
	})
	a.nctl = 0 // encoded: the Controls' messages are free
	clear(cb.Controls)
	clear(cb.Views)
	clear(cb.Redirects)
	clear(cb.Kicks)
	clear(cb.Outputs)
	cb.Controls, cb.Views, cb.Redirects, cb.Kicks, cb.Outputs = cb.Controls[:0], cb.Views[:0], cb.Redirects[:0], cb.Kicks[:0], cb.Outputs[:0]
	cb.PackedViews = cb.PackedViews[:0]
	clear(cb.Rejoins)
	cb.Rejoins = cb.Rejoins[:0]
}

// decodeItem turns one item of a batch from node from into the zone
// actor's message.
func (b *Bridge) decodeItem(it *pb.ZoneItem, from string) (any, error) {
	switch x := it.GetItem().(type) {
	case *pb.ZoneItem_Handoff:
		hm, err := pbconv.HandoffFromProto(x.Handoff.GetMsg())
		if err != nil {
			return nil, err
		}
		hm.Sent = b.localStamp(x.Handoff.GetMsg().GetSentNs())
		// The sending zone's epoch must not be older than the one this
		// node's directory knows: a fenced owner's late messages are dropped.
		if o, ok := b.cfg.Leases.Owner(hm.From); ok && x.Handoff.GetFromEpoch() < o.Epoch {
			b.m.StaleEpoch.Add(1)
			// Warned once a zone, not an epoch: the keys stay bounded by
			// the world's zones however many moves a long run sees.
			b.warnOnce("stale-from:"+hm.From, "cluster: handoff from a zone at a stale epoch dropped",
				"from", hm.From, "epoch", x.Handoff.GetFromEpoch(), "known_epoch", o.Epoch)
			return nil, nil
		}
		env := &zone.HandoffEnvelope{Msg: hm, Force: x.Handoff.GetForce(), Remote: true}
		if hm.Kind == handoff.KindOffer || hm.Kind == handoff.KindCommit {
			var last uint64
			if hm.State != nil {
				last = hm.State.LastApplied
			}
			env.Join = b.joinFor(hm.Entity, x.Handoff.GetGatewayNode(), x.Handoff.GetConnTag(), last, nil, x.Handoff.GetEventGen())
			if hm.State != nil && hm.State.Conn != "" && env.Join != nil && env.Join.Conn != nil {
				// The snapshot names the connection as the sending node
				// does: its own connection's address there. Kept, it named
				// this node as the player's gateway in every record the
				// zone writes here (GatewayOfConn), and a restore of the
				// zone (a drain, a crash) sent the player's Rejoin to a
				// node that had never held it: the player stood still
				// until its connection looked its record up again (2–3 s,
				// by hand with a drain while bots crossed a node border).
				hm.State.Conn = msg.ConnName(env.Join.Conn)
			}
		}
		return env, nil
	case *pb.ZoneItem_Replicas:
		rb, err := pbconv.ReplicaBatchFromProto(x.Replicas)
		if err != nil {
			return nil, err
		}
		return &zone.ReplicaEnvelope{Batch: *rb}, nil
	case *pb.ZoneItem_Input:
		p := x.Input
		in := msg.NewInput()
		in.Player = p.GetPlayer()
		var err error
		if in.Moves, err = pbconv.MovesFromProtoInto(in.Moves[:0], p.GetMoves()); err != nil {
			in.Release()
			return nil, err
		}
		in.LostBefore = p.GetLostBefore()
		in.EventGen = p.GetEventGen()
		for _, e := range p.GetEvents() {
			if e.GetClass() > uint32(event.Staggered) || e.GetLane() > 255 || e.GetKey() > 65535 {
				in.Release()
				return nil, fmt.Errorf("event class %d lane %d key %d out of range", e.GetClass(), e.GetLane(), e.GetKey())
			}
			in.AddSeq(event.Class(e.GetClass()), uint8(e.GetLane()), uint16(e.GetKey()), e.GetPayload(), e.GetSeq())
		}
		in.Received = b.cfg.Now()
		if sent := p.GetReceivedNs(); sent > 0 {
			if d := time.Now().UnixNano() - sent; d >= 0 && d < int64(time.Minute) {
				b.m.RemoteInputNanos.Add(uint64(d))
				b.m.RemoteInputs.Add(1)
			}
		}
		if p.GetPassedOn() {
			// Passed on by the zone that handed the player away, behind
			// the Forward of its moves: at the Forward's priority, as a
			// zone of this process passes it (actors/zone passed.go).
			return zone.PassOn(in), nil
		}
		return in, nil
	case *pb.ZoneItem_Join:
		j := x.Join
		var restore *handoff.Checkpoint
		if j.GetRestore() != nil {
			cp, err := pbconv.CheckpointFromProto(j.GetRestore(), j.GetRestoreEpoch())
			if err != nil {
				return nil, err
			}
			if cp.Entity != j.GetPlayer() {
				return nil, fmt.Errorf("join of player %d restores entity %d", j.GetPlayer(), cp.Entity)
			}
			restore = cp
		}
		// The connection is one of its gateway node's, told from the
		// player's others there by its tag. The gateway is the sender,
		// unless a zone there passes the Join on (a login that came while
		// it handed the player here).
		gw, tag := from, idTag(j.GetConn())
		if g := j.GetGatewayNode(); g != "" {
			if !ValidID(g) {
				return nil, fmt.Errorf("join of player %d through gateway %q", j.GetPlayer(), g)
			}
			gw, tag = g, j.GetConnTag()
		}
		if gw == b.cfg.Node {
			// Back to the gateway: the connection's own Join, as it
			// joined (the bridge's, shared with the connection: not
			// written here). None: the connection is gone, and so is
			// the Join (a nil *msg.Join would reach the zone).
			if join := b.localJoin(j.GetPlayer(), tag); join != nil {
				return join, nil
			}
			b.m.Unknown.Add(1)
			return nil, nil
		}
		if gw == "" {
			// A batch naming no sender, for a Join naming no gateway: no
			// node to send the zone's answers to. (joinFor's nil, returned
			// as a typed nil, reached the bridge's hold and the zone as a
			// non-nil message: FuzzZoneBatch's join-no-gateway panicked.)
			return nil, fmt.Errorf("join of player %d names no gateway node", j.GetPlayer())
		}
		join := b.joinFor(j.GetPlayer(), gw, tag, j.GetLastApplied(), append([]byte(nil), j.GetUserData()...), j.GetEventGen())
		join.Restore = restore
		return join, nil
	case *pb.ZoneItem_Leave:
		l := x.Leave
		if l.GetReason() > 255 {
			return nil, fmt.Errorf("leave reason %d out of range", l.GetReason())
		}
		lv := &msg.Leave{Player: l.GetPlayer(), Reason: handshake.Reason(l.GetReason())}
		if from == b.cfg.Node {
			return lv, nil
		}
		// The connection that left is one of its gateway node's, told from
		// the player's others there by its tag: a zone ignores its Leave
		// if the player plays through another connection by now
		// (reconnected elsewhere, redirected, logged in again). The gateway
		// is the sender, unless a zone there passes the Leave on (it had
		// handed the player here).
		gw, tag := from, idTag(l.GetConn())
		if g := l.GetGatewayNode(); g != "" {
			if !ValidID(g) {
				return nil, fmt.Errorf("leave of player %d through gateway %q", l.GetPlayer(), g)
			}
			gw, tag = g, l.GetConnTag()
		} else if g, ok := strings.CutPrefix(l.GetConn(), linkPrefix); ok && ValidID(g) {
			// Passed on by a node from before gateway_node (a rolling
			// update): the connection's tag is lost. It matches a Join
			// that named no connection only (leaver, left).
			gw, tag = g, 0
		}
		if gw == b.cfg.Node {
			lv.Conn = b.localLeaver(l.GetPlayer(), tag)
			return lv, nil
		}
		lk := b.knownLink(gw)
		if lk == nil {
			// No Join named a connection of gw here, so no zone holds one
			// (and a sender naming node after node spawns no links).
			lv.Conn = &actor.PID{Address: b.cfg.Sys.Address(), Id: linkPrefix + gw, RequestId: tag}
			return lv, nil
		}
		lv.Conn = lk.leaver(l.GetPlayer(), tag)
		lk.left(l.GetPlayer(), tag, lv.Reason)
		return lv, nil
	case *pb.ZoneItem_Teleport:
		pos, err := pbconv.ControlFromProto(&pb.ControlState{Pos: x.Teleport.GetPos()})
		if err != nil {
			return nil, err
		}
		return &zone.Teleport{Entity: x.Teleport.GetEntity(), Pos: pos.Pos}, nil
	}
	return nil, fmt.Errorf("empty item")
}

// deliverConn hands a ConnBatch's updates to this node's connections.
func (b *Bridge) deliverConn(cb *pb.ConnBatch) error {
	root := b.cfg.Sys.Root
	for _, c := range cb.GetControls() {
		j := b.localTo(c.GetPlayer(), c.GetConnTag())
		if j == nil {
			continue
		}
		st, err := pbconv.ControlFromProto(c.GetState())
		if err != nil {
			return err
		}
		m := msg.NewControl()
		m.Player, m.LastApplied, m.State, m.Force, m.Tick, m.Epoch = c.GetPlayer(), c.GetLastApplied(), st, c.GetForce(), c.GetTick(), c.GetEpoch()
		m.Events = pbconv.FenceFromProto(c.GetEventGen(), c.GetEventLast())
		root.Send(j.Conn, m)
	}
	for _, pv := range cb.GetViews() {
		j := b.local(pv.GetPlayer())
		if j == nil || j.Views == nil {
			b.m.Unknown.Add(1)
			continue
		}
		v := msg.NewView()
		entries, err := pbconv.ViewEntriesFromProto(v.Entries[:0], pv, b.cfg.Registry)
		if err != nil {
			v.Release()
			return err
		}
		v.Player, v.Tick, v.ServerTime, v.Entries, v.Epoch = pv.GetPlayer(), pv.GetTick(), time.Duration(pv.GetServerTimeNs()), entries, pv.GetEpoch()
		if j.Views.Publish(v) && j.Ghosts != nil {
			root.Send(j.Ghosts, msg.ViewReadyMsg)
		}
	}
	if err := b.deliverPacked(cb.GetFromNode(), cb.GetPackedViews()); err != nil {
		return err
	}
	for _, r := range cb.GetRedirects() {
		j := b.localTo(r.GetPlayer(), r.GetConnTag())
		if j == nil {
			continue
		}
		if !ValidID(r.GetZone()) || b.cfg.Zones != nil && !b.cfg.Zones(r.GetZone()) {
			return fmt.Errorf("redirect to zone %q", r.GetZone())
		}
		root.Send(j.Conn, &msg.Redirect{Player: r.GetPlayer(), Zone: b.zonePID(r.GetZone()), Epoch: r.GetEpoch()})
	}
	for _, r := range cb.GetRejoins() {
		cp, err := pbconv.CheckpointFromProto(r.GetCheckpoint(), r.GetEpoch())
		if err != nil {
			return err
		}
		if cp.Entity != r.GetPlayer() || !ValidID(r.GetZone()) {
			return fmt.Errorf("rejoin of player %d to zone %q restores entity %d", r.GetPlayer(), r.GetZone(), cp.Entity)
		}
		b.rejoinLocal(cp)
	}
	for _, k := range cb.GetKicks() {
		if k.GetReason() > 255 {
			b.m.Unknown.Add(1)
			continue
		}
		j := b.localTo(k.GetPlayer(), k.GetConnTag())
		if j == nil {
			continue
		}
		root.Send(j.Conn, &msg.Kick{Player: k.GetPlayer(), Reason: handshake.Reason(k.GetReason())})
	}
	for _, o := range cb.GetOutputs() {
		j := b.localTo(o.GetPlayer(), o.GetConnTag())
		if j == nil {
			continue
		}
		out, err := outputFromProto(o)
		if err != nil {
			return err
		}
		root.Send(j.Conn, out)
	}
	return nil
}

// localTo is the local connection of player that a zone on another node
// sent an update to, named by its tag (connTag; the link there carries it,
// linkProcess): the connection the bridge delivers the player's updates to,
// or the one a newer login's Join displaced (two logins of the player here
// at once: the zone still plays through the older until it takes the
// newer's Join, and redirects or kicks it apart from the newer). Tag 0 (a
// sender from before tags, a rolling update) names the player's newest
// connection, as before. Nil, counted, when there is none: Unknown when
// the player has no connection here, ConnGone when the tagged one has
// gone (left, or ended) while the player plays on through another —
// delivered to that other, the older login's Redirect sent the newer away
// and its Kick ended the newer.
func (b *Bridge) localTo(player uint64, tag uint32) *msg.Join {
	b.mu.Lock()
	defer b.mu.Unlock()
	j := b.locals[player]
	switch {
	case j == nil:
		b.m.Unknown.Add(1)
		return nil
	case tag == 0 || connTag(j.Conn) == tag:
		return j
	}
	if d := b.displaced[player]; d != nil && connTag(d.Conn) == tag && !closed(d) {
		return d
	}
	b.m.ConnGone.Add(1)
	return nil
}

// deliverPacked applies a batch's packed views to their players' bases and
// hands each result to the player's ghost manager.
func (b *Bridge) deliverPacked(from string, blob []byte) error {
	r := packReader{b: blob}
	for r.off < len(blob) && r.err == nil {
		h := r.header()
		if r.err != nil {
			break
		}
		body := packReader{b: r.b[:r.off+h.body], off: r.off}
		r.off += h.body
		j := b.local(h.player)
		if j == nil || j.Views == nil {
			b.m.Unknown.Add(1)
			continue
		}
		b.vmu.Lock()
		vb := b.bases[h.player]
		var base []ghost.ViewEntry
		switch {
		case h.baseSeq == 0:
			if vb == nil {
				vb = &viewBase{}
				b.bases[h.player] = vb
			}
		case vb != nil && vb.from == from && vb.stream == h.stream && vb.seq == h.baseSeq:
			base = vb.cur
		default:
			b.vmu.Unlock()
			b.m.ViewGaps.Add(1)
			continue
		}
		vb.next = body.entries(vb.next, base, h.count, b.cfg.Registry)
		if body.err == nil && body.off != len(body.b) {
			body.fail(fmt.Errorf("%w: %d bytes after the entries", errPackRange, len(body.b)-body.off))
		}
		if body.err != nil {
			delete(b.bases, h.player)
			b.vmu.Unlock()
			return body.err
		}
		vb.cur, vb.next = vb.next, vb.cur
		vb.from, vb.stream, vb.seq = from, h.stream, h.seq
		v := msg.NewView()
		v.Entries = append(v.Entries[:0], vb.cur...)
		b.vmu.Unlock()
		v.Player, v.Tick, v.ServerTime, v.Epoch = h.player, h.tick, time.Duration(h.serverNs), h.epoch
		if j.Views.Publish(v) && j.Ghosts != nil {
			b.cfg.Sys.Root.Send(j.Ghosts, msg.ViewReadyMsg)
		}
	}
	return r.err
}

// rejoin is a Rejoin on its way to another node's connection.
type rejoin struct {
	zone string
	cp   *handoff.Checkpoint
}

// Rejoin asks the node holding a player's connection (gateway, from its
// record) to join the player again to zone, restored from cp. A gateway
// that no longer holds the connection drops it (counted as unknown): a
// record names whoever held the player last, not who holds it now.
func (b *Bridge) Rejoin(gateway, zoneID string, cp *handoff.Checkpoint) {
	if gateway == b.cfg.Node {
		b.rejoinLocal(cp)
		return
	}
	if !ValidID(gateway) {
		b.m.Unknown.Add(1)
		return
	}
	b.cfg.Sys.Root.Send(b.link(gateway).pid, &rejoin{zone: zoneID, cp: cp})
}

func (b *Bridge) rejoinLocal(cp *handoff.Checkpoint) {
	j := b.local(cp.Entity)
	if j == nil || j.Conn == nil || j.Views != nil && j.Views.Closed() {
		if b.cfg.Gateway != nil {
			if g := b.cfg.Gateway(); g != nil {
				b.m.Rejoins.Add(1)
				b.cfg.Sys.Root.Send(g, &msg.Rejoin{Player: cp.Entity, Restore: cp})
				return
			}
		}
		b.m.Unknown.Add(1)
		return
	}
	b.m.Rejoins.Add(1)
	b.cfg.Sys.Root.Send(j.Conn, &msg.Rejoin{Player: cp.Entity, Restore: cp})
}

// ValidID reports whether s can name a zone or node: a NATS subject
// token, a KV key and part of an actor name ([A-Za-z0-9_-], 1-64).
func ValidID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// LinkID is the actor id under which the connections of gateway node
// appear in the Joins of zones on other nodes (msg.Join.Conn.Id): what a
// zone.GatewayGone names.
func LinkID(node string) string { return linkPrefix + node }

// outputToProto is a zone's Output for the link to another node (the
// payloads copied: m goes back to its pool).
func outputToProto(m *msg.Output) *pb.EventsOut {
	o := &pb.EventsOut{Player: m.Player, Epoch: m.Epoch, ConnTag: m.ConnTag}
	if m.Applied.Gen != 0 {
		o.EventGen, o.EventLast = pbconv.FenceToProto(&m.Applied)
	}
	for _, e := range m.Events {
		o.Events = append(o.Events, &pb.GameEvent{Class: uint32(e.Class), Lane: uint32(e.Lane), Key: uint32(e.Key),
			Payload: append([]byte(nil), e.Payload...)})
	}
	return o
}

// outputFromProto is an Output another node's zone sent (pooled: the
// connection releases it); an event out of range refuses the batch.
func outputFromProto(o *pb.EventsOut) (*msg.Output, error) {
	out := msg.NewOutput()
	out.Player, out.Epoch = o.GetPlayer(), o.GetEpoch()
	out.Applied = pbconv.FenceFromProto(o.GetEventGen(), o.GetEventLast())
	for _, e := range o.GetEvents() {
		if e.GetClass() > uint32(event.Staggered) || e.GetLane() > 255 || e.GetKey() > 65535 {
			out.Release()
			return nil, fmt.Errorf("event class %d out of range", e.GetClass())
		}
		out.Add(event.Class(e.GetClass()), uint8(e.GetLane()), uint16(e.GetKey()), e.GetPayload())
	}
	return out, nil
}
