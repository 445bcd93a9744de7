package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/zone"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/proto/pbconv"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// Subjects. <world> and <zone>/<node> are single tokens (zone ids and node
// ids are validated to [A-Za-z0-9_-]).
func zoneSubject(world, zone string) string { return "gw." + world + ".zone." + zone + ".in" }
func connSubject(world, node string) string { return "gw." + world + ".node." + node + ".conn" }

// linkPrefix names the actor that stands, on a zone's node, for the
// connections held by another node.
const linkPrefix = "link-"

// Config configures a Bridge.
type Config struct {
	// World names the world in subjects (one NATS may carry many worlds).
	World string
	// Node is this node's id.
	Node string
	NC   *nats.Conn
	Sys  *actor.ActorSystem
	// Leases is the zone directory: who owns each zone, at which epoch.
	Leases *Leases
	// Registry resolves ghost class ids in views from other nodes.
	Registry *ghost.Registry
	// Now is the node clock (stamps inputs that arrive from other nodes).
	Now func() time.Duration
	// Origin is the wall time at which Now read zero. Handoff messages are
	// stamped with the sender's node clock and aged by the receiver's
	// (handoff.Config.MaxAge); between processes the stamp travels as wall
	// time and is translated with Origin. Zero: stamps pass unchanged
	// (one clock for every node: tests).
	Origin time.Time
	// Zones tells whether a zone id is in the world map (a Redirect to
	// anything else is refused). Nil: any well-formed id.
	Zones func(id string) bool
	// Players, when set, commits every cross-process handoff of a player
	// to the player records before the zone takes it (see Players).
	Players *Players
	Log     *slog.Logger
	// Gateway, when set, is asked to pass a Rejoin on to the connection of
	// a player the bridge does not know (one whose zone was on this node).
	Gateway func() *actor.PID
	// Metrics collects counters; nil gets a private set.
	Metrics *Metrics
	// MaxBatch bounds the messages one proxy or link batches before it
	// publishes (default 512).
	MaxBatch int
}

// Bridge carries zone and connection messages between this node and the
// others. Create it with NewBridge; Serve a zone this node owns, Proxy one
// it does not.
type Bridge struct {
	cfg Config
	m   *Metrics
	log *slog.Logger

	connSub *nats.Subscription

	mu     sync.Mutex
	served map[string]*nats.Subscription // zones owned here: their inbound subscriptions
	links  map[string]*link              // other gateway nodes: the actor standing for their connections
	locals map[uint64]*msg.Join          // connections held here, by player
	// displaced: per player, the connection of locals a newer one's Join
	// replaced while it had not left (two logins at once: both join after
	// their record lookups, the superseded one's Join can come second).
	// Should the connection in locals leave as the superseded login
	// (Duplicate), the zone gives the player back to this one (actors/zone
	// reclaim), and so does the bridge. Lazily made; rare.
	displaced map[uint64]*msg.Join
	// gone: per player, the local connection that left last (forgetLocal),
	// for a while (goneKeep): a zone elsewhere that had handed the player
	// to a zone of this node before that Leave reached it passes the Leave
	// on here, naming the connection by its tag only (localLeaver).
	gone   map[uint64]goneConn
	added  int             // rememberLocal calls since the last sweep of locals
	warned map[string]bool // log-once keys for hostile or broken input
	// warnedFull: warned reached maxWarnKeys and that was logged.
	warnedFull bool

	// streams numbers the per-player view streams this node's links send.
	streams atomic.Uint64
	// bases: per local player, the last view applied from another node's
	// packed stream (only the connection subscription's goroutine decodes;
	// vmu also lets the sweeps of ended connections drop theirs).
	vmu   sync.Mutex
	bases map[uint64]*viewBase

	// Reliable batches (arq.go): the streams this node sends, by id (their
	// actors take the acks), and the ones it receives.
	ackSub *nats.Subscription
	arqMu  sync.Mutex
	outs   map[uint64]*actor.PID
	ins    map[uint64]*arqIn
	// loseOut: LoseBatches.
	loseOut atomic.Pointer[func(subject string) bool]

	// commits: per player, the record write of the newest cross-process
	// Commit this node took for it (recordCommit).
	cmu     sync.Mutex
	commits map[uint64]recordCommit
	// writeCommit, when set, writes a retried Commit's record instead of
	// cfg.Players.Commit (tests).
	writeCommit func(player uint64, zone string, epoch uint64, done func(ok bool))

	// bg: the goroutines reading refused Commits' records back
	// (readRefused); life ends with Close, which waits for them. closing
	// (under cmu): Close has begun, none is started any more.
	bg      sync.WaitGroup
	life    context.Context
	end     context.CancelFunc
	closing bool
}

// recordCommit is the player record write a cross-process Commit needs
// before its zone takes the player: one write per Commit, not one per
// copy. The source resends its Commit every RetryInterval until it is
// acknowledged; queued as a write each, the copies of one slow write (a
// busy KV: a second a round trip under -race at load) made the writes
// behind them slower still, until the source gave up (CommitGiveUp) with
// the player owned nowhere.
type recordCommit struct {
	zone    string
	epoch   uint64 // the player's epoch in zone once it takes it
	written bool   // false: in flight
	// reading: the write was refused; the record is being read back
	// (readRefused). Copies are coalesced and items held meanwhile, as
	// while the write was in flight.
	reading bool
	// undecided: the write failed and the record read back decided
	// nothing (a KV error, no answer, the record not yet moved): the
	// next copy of the Commit writes afresh, or, with none within
	// undecidedRetry, the bridge writes its newest copy again itself
	// (retryUndecided), until refusedKeep after the first failure (since);
	// what waits behind it waits on meanwhile.
	undecided bool
	since     time.Time
	retry     *time.Timer // the next retryUndecided of an undecided Commit
	at        time.Time
	// newest is the newest copy of the Commit that came while the write was
	// in flight: the write delivers it, not the first copy, which may be
	// older than the zone's MaxAge by the time a slow write completes.
	newest *zone.HandoffEnvelope
	// behind: what came for the player's zone about the player while the
	// write was in flight (a Join, Leave or Teleport its old zone passed
	// on: that zone stopped owning the player when it sent the Commit, and
	// passes them on at once), delivered right after the Commit, in order.
	// Sent on, they overtook the Commit: the zone, not owning the player
	// yet, dropped a Leave, then took the player — for good, its record
	// online, nobody behind it; it spawned the player afresh for a Join (a
	// newer login, actors/zone joinAway), then refused the Commit — the
	// handed-off state lost, the old zone's Commit never acknowledged.
	// Bounded by maxBehind (holdBehindCommit: the oldest Teleport gives
	// way, else the newcomer is dropped; never sent on ahead).
	behind []any
	// refused, when set: the record read back names a newer owner. This
	// Commit can never be written (the record's compare-and-set only
	// moves forward): its copies are dropped, and what comes for the
	// player's zone about the player follows the record (follow), for
	// refusedKeep. A pointer: rare, and the entry stays 96 bytes.
	refused *recordOwner
}

// recordOwner is whom a player's record names: zone at epoch, with the
// record's checkpoint (nil: none).
type recordOwner struct {
	zone  string
	epoch uint64
	cp    *handoff.Checkpoint
}

// maxBehind bounds what one player's Commit holds back (a passed-on
// Join, Leave, a Teleport or two), Inputs apart (maxInputsBehind).
const maxBehind = 16

// maxInputsBehind bounds the Inputs one player's Commit holds back: the
// moves its old zone forwards, a kept login's behind its passed-on Join
// (as many as the old zone keeps behind it, actors/zone), ≈ 3 s of a
// connection's rounds.
const maxInputsBehind = 64

// refusedKeep is how long a Commit refused for good sends what comes for
// its player on to the record's owner: as long as the old zone passes
// things on (its forwarding record lives handoff ForwardTTL, 15 s in a
// cluster).
const refusedKeep = 20 * time.Second

// holdBehindCommit holds m, an item for zoneID, if it is about a player
// whose Commit to zoneID is waiting for its record write (recordCommit.behind),
// or sends it on to the record's owner if that write was refused for
// good (follow); it reports whether it took m.
//
// Full (maxBehind), the oldest Teleport held gives way (an admin move: a
// later one, or the player's own moves, overrides it), else m is dropped.
// Either is counted (DroppedBehindCommit). Sent on, it overtook the Commit
// (a Leave dropped by a zone that did not own the player yet, a Join
// spawning it afresh); dropped, a Leave is still kept by the old zone until
// the CommitAck (actors/zone unackedCommit) and a Join's connection looks
// its record up again when no Control comes.
//
// Inputs are held too, in order with the rest, maxInputsBehind of them
// (past it the newcomer is dropped and released, counted): sent on, the
// moves and events the old zone passed on behind its Commit (a newer
// login's behind its passed-on Join) reached a zone that did not own the
// player yet, which dropped them (zone InputsDropped).
func (b *Bridge) holdBehindCommit(zoneID string, m any) bool {
	var player uint64
	input := false
	switch x := m.(type) {
	case *msg.Join: // decodeItem's: never nil
		player = x.Player
	case *msg.Leave:
		player = x.Player
	case *zone.Teleport:
		player = x.Entity
	case *msg.Input:
		player, input = x.Player, true
	default:
		in, ok := zone.PassedOn(m) // passed on by its old zone (decodeItem)
		if !ok {
			return false
		}
		player, input = in.Player, true
	}
	b.cmu.Lock()
	defer b.cmu.Unlock()
	c, ok := b.commits[player]
	if !ok || c.written || c.zone != zoneID {
		return false
	}
	if c.refused != nil {
		if time.Since(c.at) > refusedKeep {
			return false
		}
		b.follow(&c, m)
		return true
	}
	inputs := 0
	for _, h := range c.behind {
		if behindInput(h) != nil {
			inputs++
		}
	}
	if input && inputs >= maxInputsBehind {
		b.m.DroppedBehindCommit.Add(1)
		behindInput(m).Release()
		return true // dropped
	}
	if !input && len(c.behind)-inputs >= maxBehind {
		b.m.DroppedBehindCommit.Add(1)
		i := slices.IndexFunc(c.behind, func(m any) bool { _, ok := m.(*zone.Teleport); return ok })
		if i < 0 {
			return true // dropped
		}
		c.behind = append(slices.Delete(c.behind, i, i+1), m)
	} else {
		c.behind = append(c.behind, m)
	}
	b.commits[player] = c
	b.m.HeldBehindCommit.Add(1)
	return true
}

// behindInput is the Input m is, plain or passed on (zone.PassedOn); nil
// for any other item.
func behindInput(m any) *msg.Input {
	if in, ok := m.(*msg.Input); ok {
		return in
	}
	in, _ := zone.PassedOn(m)
	return in
}

// follow sends m, an item for the zone of c, a Commit refused for good,
// on to the zone the player's record names (c.refused): the zone that
// should own the player, or its proxy. A Join that came from a record
// lookup of its own (Restore) restores from the record read back instead,
// as the connection's own lookup would (actors/conn relook), and its
// connection — redirected to c's zone by the old zone that passed it on —
// is redirected to the owner at the record's epoch. cmu held.
func (b *Bridge) follow(c *recordCommit, m any) {
	o := c.refused
	pid := b.zonePID(o.zone)
	if j, ok := m.(*msg.Join); ok {
		if j.Restore != nil && o.cp != nil {
			cp := *j // j may be the connection's own (localJoin): never changed
			cp.Restore = o.cp
			j = &cp
		}
		m = j
		if j.Conn != nil {
			b.cfg.Sys.Root.Send(j.Conn, &msg.Redirect{Player: j.Player, Zone: pid, Epoch: o.epoch})
		}
	}
	b.cfg.Sys.Root.Send(pid, m)
	b.m.FollowedRecord.Add(1)
}

// Commit states for a cross-process Commit (commitFor).
const (
	commitNew      = iota // write the record, then deliver
	commitInFlight        // a copy's write is in flight: drop this one
	commitWritten         // the record names zone at epoch: deliver
	commitRefused         // the record names a newer owner: drop this one
)

// commitFor reports what to do with a copy of a Commit of player to zone
// at epoch, and marks a new one in flight.
func (b *Bridge) commitFor(player uint64, zoneID string, epoch uint64, env *zone.HandoffEnvelope) int {
	b.cmu.Lock()
	defer b.cmu.Unlock()
	c, ok := b.commits[player]
	if ok && c.zone == zoneID && c.epoch == epoch {
		if c.written {
			return commitWritten
		}
		if c.refused != nil {
			return commitRefused
		}
		if c.undecided {
			// The write before this copy's decided nothing: this one
			// writes afresh, what waited behind the first still behind it.
			if c.retry != nil {
				c.retry.Stop()
			}
			c.undecided, c.newest, c.at, c.retry = false, env, time.Now(), nil
			b.commits[player] = c
			return commitNew
		}
		if c.newest == nil || env.Msg.Sent > c.newest.Msg.Sent {
			c.newest = env
			b.commits[player] = c
		}
		return commitInFlight
	}
	if b.commits == nil {
		b.commits = map[uint64]recordCommit{}
	}
	if len(b.commits) >= 4096 { // players long gone: their Commits are older than any resend
		for id, c := range b.commits {
			if time.Since(c.at) > time.Minute {
				delete(b.commits, id)
			}
		}
	}
	var behind []any
	if ok && !c.written && c.refused == nil { // in flight, read back, or undecided
		// Another Commit of the player takes the place of one still
		// being written (its write will find the entry gone): what waited
		// behind that one waits behind this one, and goes where the
		// player goes. Sent on to the first one's zone, it reached a zone
		// that did not own the player (a Join spawned it afresh there).
		behind = c.behind
	}
	if ok && c.retry != nil {
		c.retry.Stop()
	}
	b.commits[player] = recordCommit{zone: zoneID, epoch: epoch, at: time.Now(), newest: env, behind: behind}
	return commitNew
}

// commitDone records the outcome of a Commit's record write. Written, the
// newest copy that came while the write was in flight goes to the zone
// (env when none did), then what waited behind it. Sent under cmu: an
// item that comes meanwhile is held until then, or finds the Commit sent
// (never overtakes it). Not written, the record is read back
// (readRefused) and what waited stays held until it is. A newer Commit of
// the player that took the entry's place sends nothing here.
func (b *Bridge) commitDone(player uint64, zoneID string, epoch uint64, ok bool, env *zone.HandoffEnvelope) {
	b.cmu.Lock()
	defer b.cmu.Unlock()
	c, have := b.commits[player]
	if !have || c.zone != zoneID || c.epoch != epoch || c.reading || c.refused != nil {
		return // a newer Commit of the player took its place
	}
	if !ok {
		b.m.RecordRefused.Add(1)
		if b.closing {
			delete(b.commits, player)
			return
		}
		c.reading = true
		if c.newest == nil {
			c.newest = env // the copy a retry writes (retryUndecided)
		}
		b.commits[player] = c
		b.bg.Add(1)
		go b.readRefused(player, zoneID, epoch)
		return
	}
	pid := b.zonePID(zoneID)
	if c.newest != nil {
		env = c.newest
	}
	// The record now names this zone at epoch: the write is the
	// commit, and the zone must take the player however old the
	// copy. A write slower than the source's CommitGiveUp plus the
	// zone's MaxAge (a busy KV: seconds a round trip at load, behind
	// the writer's queue) delivered a copy the zone dropped as stale;
	// the source resent no more, and the player was owned nowhere,
	// its record online at the new epoch without a checkpoint. The
	// write's compare-and-set is the fence MaxAge stands for: it
	// succeeds only while no newer owner is recorded.
	env.Msg.Sent = max(env.Msg.Sent, b.cfg.Now())
	b.cfg.Sys.Root.Send(pid, env)
	c.written, c.newest = true, nil
	for _, m := range c.behind {
		b.cfg.Sys.Root.Send(pid, m)
	}
	c.behind = nil
	b.commits[player] = c
}

// readRefused reads back the record of player, whose Commit to zoneID at
// epoch was not written (off the writer goroutine; Close waits for it),
// and settles what waited behind the Commit:
//
//   - the record names a newer owner (an epoch above the Commit's, or
//     the Commit's with another zone: a real conflict, a split brain):
//     the Commit can never be written. What waited follows the player
//     there (follow), and so does what comes later (refusedKeep); the
//     Commit's copies are dropped. Before, it went on to zoneID, which
//     did not own the player: a Join spawned it afresh there, a second
//     owner beside the record's.
//   - otherwise (an older record: a KV error, a full queue, a lost lease;
//     or no answer): a later copy of the Commit may still be written, and
//     is tried afresh (undecided). What waited waits on behind it, and so
//     does what comes meanwhile, never sent to a zone that does not own
//     the player; with no copy within refusedKeep (its source gave up),
//     it is dropped, counted (DroppedBehindCommit): a Leave is kept by
//     the old zone until the CommitAck or its forwarding record's expiry
//     (actors/zone unackedCommit), a Join's connection looks its record
//     up again (no Control comes). Dropped at once, as before, the
//     events in the inputs the old zone had passed on behind the Commit
//     were lost while a NATS cluster elected a new leader for the
//     players bucket (by hand: 5 of 4,487, and 90 in another run).
func (b *Bridge) readRefused(player uint64, zoneID string, epoch uint64) {
	defer b.bg.Done()
	life := b.life
	if life == nil {
		life = context.Background() // a Bridge not made by NewBridge (tests)
	}
	ctx, cancel := context.WithTimeout(life, recordReadTimeout)
	rec, err := b.cfg.Players.Record(ctx, player)
	cancel()
	b.cmu.Lock()
	defer b.cmu.Unlock()
	c, have := b.commits[player]
	if !have || c.zone != zoneID || c.epoch != epoch || !c.reading {
		return // a newer Commit of the player took its place
	}
	if err != nil || rec == nil || !ValidID(rec.GetZone()) ||
		rec.GetEpoch() < epoch || rec.GetEpoch() == epoch && rec.GetZone() == zoneID {
		now := time.Now()
		c.reading, c.undecided, c.at = false, true, now
		if c.since.IsZero() {
			c.since = now
		}
		c.retry = time.AfterFunc(undecidedRetry, func() { b.retryUndecided(player, zoneID, epoch, now, err) })
		b.commits[player] = c
		return
	}
	behind := c.behind
	c.reading, c.behind, c.newest = false, nil, nil
	o := &recordOwner{zone: rec.GetZone(), epoch: rec.GetEpoch()}
	if rec.GetCheckpoint() != nil {
		if cp, err := pbconv.CheckpointFromProto(rec.GetCheckpoint(), rec.GetEpoch()); err == nil && cp.Entity == player {
			o.cp = cp
		}
	}
	c.refused, c.at = o, time.Now()
	for _, m := range behind {
		b.follow(&c, m)
	}
	b.commits[player] = c
}

// undecidedRetry is how long an undecided Commit waits for a copy from its
// source before the bridge writes the newest one it has again.
var undecidedRetry = time.Second // a var: tests shorten it

// retryUndecided writes player's Commit to zoneID at epoch again, undecided
// since at, when no copy came since: its source resends it only up to its
// CommitGiveUp (5 s), and a NATS cluster electing the players bucket's
// leader answers no write for 4–9 s. Past refusedKeep after the first
// failure, what waits behind it is dropped, counted (DroppedBehindCommit),
// and the Commit forgotten.
func (b *Bridge) retryUndecided(player uint64, zoneID string, epoch uint64, at time.Time, err error) {
	b.cmu.Lock()
	c, have := b.commits[player]
	if !have || c.zone != zoneID || c.epoch != epoch || !c.undecided || !c.at.Equal(at) || b.closing {
		b.cmu.Unlock()
		return // written, refused, tried again since, or closing
	}
	if env := c.newest; env != nil && time.Since(c.since) < refusedKeep {
		c.undecided, c.at, c.retry = false, time.Now(), nil
		b.commits[player] = c
		b.cmu.Unlock()
		b.m.CommitsRetried.Add(1)
		write := b.writeCommit
		if write == nil {
			write = b.cfg.Players.Commit
		}
		write(player, zoneID, epoch, func(ok bool) {
			b.commitDone(player, zoneID, epoch, ok, env)
		})
		return
	}
	defer b.cmu.Unlock()
	if len(c.behind) > 0 {
		b.m.DroppedBehindCommit.Add(uint64(len(c.behind)))
		b.warnOnce("behind-dropped", "cluster: items held behind a Commit whose record write failed dropped (not written within 20 s)",
			"player", player, "zone", zoneID, "epoch", epoch, "items", len(c.behind), "err", err)
		for _, m := range c.behind {
			if in := behindInput(m); in != nil {
				in.Release()
			}
		}
	}
	delete(b.commits, player)
}

// recordReadTimeout bounds the read of a refused Commit's record.
const recordReadTimeout = 2 * time.Second

// NewBridge subscribes to this node's connection subject.
func NewBridge(cfg Config) (*Bridge, error) {
	if cfg.NC == nil || cfg.Sys == nil || cfg.Leases == nil || cfg.Registry == nil || cfg.Now == nil {
		return nil, errors.New("cluster: Config needs NC, Sys, Leases, Registry and Now")
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 512
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	b := &Bridge{cfg: cfg, m: cfg.Metrics, log: cfg.Log, served: map[string]*nats.Subscription{},
		links: map[string]*link{}, locals: map[uint64]*msg.Join{}, warned: map[string]bool{}, bases: map[uint64]*viewBase{},
		outs: map[uint64]*actor.PID{}, ins: map[uint64]*arqIn{}}
	b.life, b.end = context.WithCancel(context.Background())
	b.streams.Store(uint64(time.Now().UnixNano()))
	if b.m == nil {
		b.m = new(Metrics)
	}
	sub, err := cfg.NC.Subscribe(connSubject(cfg.World, cfg.Node), b.onConnBatch)
	if err != nil {
		return nil, fmt.Errorf("cluster: subscribe: %w", err)
	}
	_ = sub.SetPendingLimits(1<<16, 256<<20)
	b.connSub = sub
	if b.ackSub, err = cfg.NC.Subscribe(ackSubject(cfg.World, cfg.Node), b.onAck); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("cluster: subscribe: %w", err)
	}
	return b, nil
}

// maxBytes is the size at which a batch is published: well under the
// server's max payload (1 MiB by default), so one big tick (a view per
// player of a crowded zone) goes out as several messages, never as one the
// server refuses.
func (b *Bridge) maxBytes() int {
	limit := 256 << 10
	if b.cfg.NC != nil {
		if mp := int(b.cfg.NC.MaxPayload()); mp > 0 && mp/2 < limit {
			limit = mp / 2
		}
	}
	return limit
}

// Metrics returns the bridge's counters.
func (b *Bridge) Metrics() *Metrics { return b.m }

// Serve starts taking messages for zone, which this node owns (its zone
// actor is spawned under zone.ActorName).
func (b *Bridge) Serve(zoneID string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.served[zoneID]; ok {
		return nil
	}
	sub, err := b.cfg.NC.Subscribe(zoneSubject(b.cfg.World, zoneID), b.zoneHandler(zoneID))
	if err != nil {
		return fmt.Errorf("cluster: serve zone %s: %w", zoneID, err)
	}
	_ = sub.SetPendingLimits(1<<16, 256<<20)
	b.served[zoneID] = sub
	return nil
}

// zoneHandler is the handler of a subscription to zoneID's batches, with
// the subscription's own zoneIn.
func (b *Bridge) zoneHandler(zoneID string) nats.MsgHandler {
	in := new(zoneIn)
	return func(m *nats.Msg) { b.onZoneBatchIn(zoneID, in, m) }
}

// zoneIn is what one subscription to a served zone's batches keeps
// between them: the replica arrays it decoded into, to decode into again
// once the zone is done with them. Its handler's alone: nats.go delivers
// a subscription's messages one at a time, on one goroutine.
type zoneIn struct {
	kept [maxKeptReplicas]keptReplicas
	next int // the entry a full kept replaces next
}

// maxKeptReplicas bounds the replica arrays a subscription keeps: one a
// neighbouring zone in another process, each usually done with before
// that zone's next batch comes.
const maxKeptReplicas = 8

// keptReplicas is an array of replicas sent to the zone in env: free
// again once the zone marked env handled (it copied the batch, released
// it and holds nothing of it, actors/zone).
type keptReplicas struct {
	env  *zone.ReplicaEnvelope
	ents []sim.Replica
}

// replicas decodes p into an envelope for the zone, its entities in an
// array the zone is done with if there is one. The envelope itself is
// new each time: marking a handled one unhandled again is actors/zone's
// (its own envelopes' reuse), not exported. Allocated a batch before: the
// envelope, the ReplicaBatch and its array (64 replicas: 6.7 KB).
func (in *zoneIn) replicas(p *pb.ReplicaBatch) (any, error) {
	var ents []sim.Replica
	for i := range in.kept {
		if k := &in.kept[i]; k.env != nil && k.env.Handled() {
			ents = k.ents
			*k = keptReplicas{}
			break
		}
	}
	env := new(zone.ReplicaEnvelope)
	if err := pbconv.ReplicaBatchFromProtoInto(&env.Batch, ents, p); err != nil {
		return nil, err
	}
	if cap(env.Batch.Entities) == 0 {
		return env, nil
	}
	k := keptReplicas{env: env, ents: env.Batch.Entities}
	for i := range in.kept {
		if in.kept[i].env == nil {
			in.kept[i] = k
			return env, nil
		}
	}
	// Full: forget one (a zone that never handles its envelopes, a dead
	// letter, costs an array a batch, as before).
	in.kept[in.next] = k
	in.next = (in.next + 1) % maxKeptReplicas
	return env, nil
}

// Unserve stops taking messages for zone (lost or released).
func (b *Bridge) Unserve(zoneID string) {
	b.mu.Lock()
	sub := b.served[zoneID]
	delete(b.served, zoneID)
	b.mu.Unlock()
	if sub != nil {
		_ = sub.Unsubscribe()
	}
	b.forgetStreams(zoneID)
}

// ProxyProps are the props of the actor that stands for zone when another
// node owns it: spawn it under zone.ActorName(zoneID). Its mailbox takes
// posts that come while it is spawned (msg.EarlyPosts): zones and the node
// send to the zone's name, and a handover spawns the proxy while they do
// (-race saw a zone's send read the dispatcher the spawn was writing).
func (b *Bridge) ProxyProps(zoneID string) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return newZoneProxy(b, zoneID) },
		actor.WithMailbox(msg.EarlyPosts(actor.Unbounded())))
}

// newZoneProxy is the proxy of zoneID: its held batches give up their
// replicas first when the owner stops acknowledging (arqOut.thin).
func newZoneProxy(b *Bridge, zoneID string) *zoneProxy {
	return &zoneProxy{b: b, zone: zoneID, arq: arqOut{thin: thinZoneBatch}}
}

// Close unsubscribes everything and stops the links.
func (b *Bridge) Close() {
	b.mu.Lock()
	subs := []*nats.Subscription{b.connSub, b.ackSub}
	for _, s := range b.served {
		subs = append(subs, s)
	}
	b.served = map[string]*nats.Subscription{}
	links := b.links
	b.links = map[string]*link{}
	b.mu.Unlock()
	for _, s := range subs {
		if s != nil {
			_ = s.Unsubscribe()
		}
	}
	for _, l := range links {
		_ = b.cfg.Sys.Root.StopFuture(l.pid).Wait()
	}
	b.cmu.Lock()
	b.closing = true // no read-back starts after the Wait below
	for _, c := range b.commits {
		if c.retry != nil {
			c.retry.Stop()
		}
	}
	b.cmu.Unlock()
	if b.end != nil {
		b.end()
	}
	b.bg.Wait()
}

// warnOnce logs a problem the first time it is seen per key (hostile or
// broken peers must not flood the log); the counters count every one.
func (b *Bridge) warnOnce(key, text string, args ...any) {
	b.mu.Lock()
	seen := b.warned[key]
	full := false
	if !seen {
		if len(b.warned) < maxWarnKeys {
			b.warned[key] = true
		} else {
			// Past the bound a key is not remembered: logged at every
			// message, hostile input would flood the log. Say so once;
			// the metrics count the rest.
			seen, full = true, !b.warnedFull
			b.warnedFull = true
		}
	}
	b.mu.Unlock()
	if !seen {
		b.log.Warn(text, args...)
	}
	if full {
		b.log.Warn("cluster: more kinds of bad input than the log names; the rest are counted only", "keys", maxWarnKeys, "key", key)
	}
}

// maxWarnKeys bounds Bridge.warned.
const maxWarnKeys = 1024

// rememberLocal records the local connection of a player whose zone is
// elsewhere, so what that zone sends back can be delivered.
func (b *Bridge) rememberLocal(j *msg.Join) {
	if j == nil || j.Conn == nil || strings.HasPrefix(j.Conn.Id, linkPrefix) {
		return
	}
	b.mu.Lock()
	if cur := b.locals[j.Player]; cur != nil && !cur.Conn.Equal(j.Conn) && !closed(cur) {
		if b.displaced == nil {
			b.displaced = map[uint64]*msg.Join{}
		}
		b.displaced[j.Player] = cur
	}
	b.locals[j.Player] = j
	if b.added++; b.added >= localsSweep {
		// A connection that ended while its player was in a zone of this
		// node sent its Leave there, not through a proxy: its entry is only
		// found closed here. Swept every localsSweep additions, so the map
		// stays bounded by the live connections plus that many.
		b.added = 0
		for p, l := range b.locals {
			if closed(l) {
				delete(b.locals, p)
			}
		}
		for p, d := range b.displaced {
			if closed(d) || b.locals[p] == nil {
				delete(b.displaced, p)
			}
		}
		now := time.Since(monoBase)
		for p, g := range b.gone {
			if now-g.at > goneKeep {
				delete(b.gone, p)
			}
		}
		b.vmu.Lock()
		for p := range b.bases {
			if b.locals[p] == nil {
				delete(b.bases, p)
			}
		}
		b.vmu.Unlock()
	}
	b.mu.Unlock()
}

// localsSweep is how many connections are remembered between two sweeps of
// the ended ones.
const localsSweep = 1024

// Locals returns how many local connections the bridge remembers.
func (b *Bridge) Locals() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.locals)
}

// closed: j's connection ended (its view slot closed).
func closed(j *msg.Join) bool { return j.Views != nil && j.Views.Closed() }

// forgetLocal forgets the local connection conn of player, which left for
// reason. Another connection's Leave forgets nothing: the player plays on
// through the newer one. The superseded login's (Duplicate), when its
// Join came after the newer connection's, hands the player back to that
// one, as the zone does (reclaim).
func (b *Bridge) forgetLocal(player uint64, conn *actor.PID, reason handshake.Reason) {
	b.mu.Lock()
	defer b.mu.Unlock()
	j := b.locals[player]
	if j == nil {
		return
	}
	d := b.displaced[player]
	if conn != nil && !j.Conn.Equal(conn) {
		if d != nil && d.Conn.Equal(conn) {
			delete(b.displaced, player) // as the zone forgets it: gone, nothing to give back to
			b.leftLocal(player, conn)
		}
		return
	}
	b.leftLocal(player, j.Conn)
	delete(b.displaced, player)
	if reason == handshake.ReasonDuplicate && d != nil && !closed(d) {
		b.locals[player] = d // its view stream goes on: the base stays
		return
	}
	delete(b.locals, player)
	b.vmu.Lock()
	delete(b.bases, player)
	b.vmu.Unlock()
}

// goneConn is a local connection that left (Bridge.gone).
type goneConn struct {
	conn *actor.PID
	at   time.Duration // since monoBase
}

// goneKeep is how long a left connection is remembered: longer than a
// zone passes on the Leaves of a player it handed away (the handoff's
// ForwardTTL, 15 s by default).
const goneKeep = time.Minute

// leftLocal remembers that player's local connection conn left (b.mu held).
func (b *Bridge) leftLocal(player uint64, conn *actor.PID) {
	if b.gone == nil {
		b.gone = map[uint64]goneConn{}
	}
	b.gone[player] = goneConn{conn: conn, at: time.Since(monoBase)}
}

// localLeaver is the connection a Leave of player names to a zone here
// when a zone on another node passes it back to this one, the player's
// gateway: the local connection tagged tag (connTag), live or recently
// gone. A tag this node does not know names none of its connections (a
// PID no zone holds: its own link's), so the zone keeps the player for
// whichever connection holds it now. Tag 0 (the passing zone could not
// tell the node's connections apart) names the connection that left
// last, while the player has no live one here.
func (b *Bridge) localLeaver(player uint64, tag uint32) *actor.PID {
	b.mu.Lock()
	defer b.mu.Unlock()
	j, d, g := b.locals[player], b.displaced[player], b.gone[player]
	switch {
	case tag == 0:
		if (j == nil || closed(j)) && g.conn != nil {
			return g.conn
		}
	case j != nil && connTag(j.Conn) == tag:
		return j.Conn
	case d != nil && connTag(d.Conn) == tag:
		return d.Conn
	case g.conn != nil && connTag(g.conn) == tag:
		return g.conn
	}
	return &actor.PID{Address: b.cfg.Sys.Address(), Id: linkPrefix + b.cfg.Node, RequestId: tag}
}

func (b *Bridge) local(player uint64) *msg.Join {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.locals[player]
}

// gatewayOf names the node holding j's connection.
func (b *Bridge) gatewayOf(j *msg.Join) string {
	if j == nil || j.Conn == nil {
		return ""
	}
	if n, ok := strings.CutPrefix(j.Conn.Id, linkPrefix); ok {
		return n
	}
	return b.cfg.Node
}

// GatewayOfConn names the node holding the connection whose address is
// conn (msg.ConnName, as zones keep it: `Address:"…" Id:"link-n2"`; a
// PID's String, as older releases kept it, reads the same): a link's
// node, else this node.
func (b *Bridge) GatewayOfConn(conn string) string {
	i := strings.Index(conn, "Id:\""+linkPrefix)
	if i < 0 {
		return b.cfg.Node
	}
	rest := conn[i+len("Id:\"")+len(linkPrefix):]
	if j := strings.IndexByte(rest, '"'); j >= 0 && ValidID(rest[:j]) {
		return rest[:j]
	}
	return b.cfg.Node
}

// joinFor rebuilds a Join here for a player whose connection is on node
// gw, tagged conn there (connTag; 0: not known), in event generation
// eventGen (0: not known).
func (b *Bridge) joinFor(player uint64, gw string, conn uint32, lastApplied uint64, userData []byte, eventGen uint64) *msg.Join {
	switch gw {
	case "":
		return nil
	case b.cfg.Node:
		return b.localJoin(player, conn)
	}
	l := b.link(gw)
	return &msg.Join{Player: player, Conn: l.connPID(conn), Ghosts: l.pid, Views: l.slot(player, conn), LastApplied: lastApplied,
		UserData: userData, EventGen: eventGen}
}

// localJoin is the Join of player's local connection tagged conn: the one
// the bridge delivers to, or the one a newer login's Join displaced (two
// logins at once), else (0: not known; a connection gone) the one it
// delivers to.
func (b *Bridge) localJoin(player uint64, conn uint32) *msg.Join {
	b.mu.Lock()
	defer b.mu.Unlock()
	j := b.locals[player]
	if d := b.displaced[player]; conn != 0 && d != nil && connTag(d.Conn) == conn && (j == nil || connTag(j.Conn) != conn) {
		return d
	}
	return j
}

// connTag tells a player's connections on one gateway node apart across
// the link that stands for them elsewhere: every connection of that node
// reaches a zone of another as the link's actor, so without it the zone
// could not tell the older of two logins at once from the newer — the
// older's Leave (Duplicate) took the player out from under the newer for
// the seconds until it looked its record up again. The tag rides as the
// link PID's RequestId (the zone compares connections with PID.Equal,
// which reads it; a send finds the actor by Id alone), and between nodes
// as the connection's id (PlayerJoin.conn, PlayerLeave.conn) or the tag
// itself (HandoffItem.conn_tag). 0 for no connection.
func connTag(pid *actor.PID) uint32 {
	if pid == nil {
		return 0
	}
	if strings.HasPrefix(pid.Id, linkPrefix) {
		return pid.RequestId // a connection of another node: tagged there
	}
	return idTag(pid.Id)
}

// idTag is the tag of the connection whose actor id on its gateway node is
// id: its FNV-32a hash, never 0 (0: "" — a sender that names none).
func idTag(id string) uint32 {
	if id == "" {
		return 0
	}
	h := uint32(2166136261)
	for i := 0; i < len(id); i++ {
		h ^= uint32(id[i])
		h *= 16777619
	}
	return max(h, 1)
}

// linkNode names the node whose connection pid stands for, if pid is a
// link's (a connection of another node, as a zone here holds it).
func linkNode(pid *actor.PID) (string, bool) {
	if pid == nil {
		return "", false
	}
	return strings.CutPrefix(pid.Id, linkPrefix)
}

// connID names pid's connection to another node (PlayerJoin.conn).
func connID(pid *actor.PID) string {
	if pid == nil {
		return ""
	}
	return pid.Id
}

func (b *Bridge) zonePID(zoneID string) *actor.PID {
	return actor.NewPID(b.cfg.Sys.Address(), zone.ActorName(zoneID))
}

// publishRaw sends an encoded message, counting it by kind.
func (b *Bridge) publishRaw(subject string, kind Kind, data []byte) {
	if b.cfg.NC == nil {
		return // a bridge built without a connection (the fuzz harness)
	}
	if err := b.cfg.NC.Publish(subject, data); err != nil {
		b.m.count(kind, dirOut, len(data), errPublish)
		b.warnOnce("publish:"+subject, "cluster: publish failed", "subject", subject, "err", err)
		return
	}
	b.m.count(kind, dirOut, len(data), nil)
}

// onZoneBatch handles a batch for a zone this node serves, keeping
// nothing for the next (tests, the fuzz harness).
func (b *Bridge) onZoneBatch(zoneID string, nm *nats.Msg) { b.onZoneBatchIn(zoneID, nil, nm) }

// onZoneBatchIn handles a batch for a zone this node serves (NATS
// goroutine), decoding its replicas into in's arrays (in nil: new ones).
func (b *Bridge) onZoneBatchIn(zoneID string, in *zoneIn, nm *nats.Msg) {
	var zb pb.ZoneBatch
	if !b.decode(KindZone, nm, &zb) {
		return
	}
	if !b.admitBatch(zb.GetFromNode(), zoneID, zb.GetStream(), zb.GetSeq(), zb.GetFloor()) {
		return // had it, or one before it is missing (asked for again)
	}
	epoch, ok := b.cfg.Leases.Held(zoneID)
	switch {
	case zb.GetZone() != zoneID:
		b.m.Misrouted.Add(1)
		b.warnOnce("misrouted:"+zb.GetZone(), "cluster: batch for another zone dropped", "subject", nm.Subject, "zone", zb.GetZone())
		return
	case ok && zb.GetZoneEpoch() < epoch:
		// The tail of a handover: the sender had not yet heard of this
		// owner. Routine at every zone move (a drain, a rebalance), so
		// counted and logged at debug; warned once an epoch, it filled the
		// warnings' bound after 1,024 moves and said "more kinds of bad
		// input" for good.
		b.m.StaleEpoch.Add(1)
		b.log.Debug("cluster: batch of an older zone epoch dropped", "zone", zoneID, "epoch", zb.GetZoneEpoch(), "owned_epoch", epoch, "from", zb.GetFromNode())
		return
	case !ok || zb.GetZoneEpoch() != epoch:
		b.m.StaleEpoch.Add(1)
		b.warnOnce("stale:"+zoneID, "cluster: batch with a zone epoch this node does not hold dropped",
			"zone", zoneID, "epoch", zb.GetZoneEpoch(), "owned_epoch", epoch, "held", ok, "from", zb.GetFromNode())
		return
	}
	pid := b.zonePID(zoneID)
	root := b.cfg.Sys.Root
	for _, it := range zb.GetItems() {
		var m any
		var err error
		if r := it.GetReplicas(); r != nil && in != nil {
			m, err = in.replicas(r)
		} else {
			m, err = b.decodeItem(it, zb.GetFromNode())
		}
		if env, ok := m.(*zone.HandoffEnvelope); ok && err == nil && b.cfg.Players != nil &&
			env.Msg.Kind == handoff.KindCommit && !sim.IsNPC(env.Msg.Entity) {
			// Commit the player record first; the zone takes the player
			// only if that worked (a late or duplicated Commit never makes
			// a second owner). The old owner resends the Commit meanwhile:
			// one write for all its copies.
			player, epoch := env.Msg.Entity, uint64(env.Msg.Epoch)+1
			switch b.commitFor(player, zoneID, epoch, env) {
			case commitWritten:
				root.Send(pid, env) // the zone acknowledges it again
			case commitInFlight:
				b.m.CommitsCoalesced.Add(1)
			case commitRefused:
				b.m.RecordRefused.Add(1)
			default:
				b.cfg.Players.Commit(player, zoneID, epoch, func(ok bool) {
					b.commitDone(player, zoneID, epoch, ok, env)
				})
			}
			continue
		}
		if err != nil {
			b.m.Malformed.Add(1)
			b.warnOnce("malformed:"+zb.GetFromNode(), "cluster: malformed item dropped", "zone", zoneID, "from", zb.GetFromNode(), "err", err)
			continue
		}
		if m != nil && !b.holdBehindCommit(zoneID, m) {
			root.Send(pid, m)
		}
	}
}

// decode unmarshals a message from another node into m, counting it by
// kind; an undecodable one is counted, logged once and dropped.
func (b *Bridge) decode(kind Kind, nm *nats.Msg, m proto.Message) bool {
	if err := proto.Unmarshal(nm.Data, m); err != nil {
		b.m.count(kind, dirIn, len(nm.Data), errDecode)
		b.warnOnce("garbage:"+nm.Subject, "cluster: undecodable message dropped", "subject", nm.Subject, "err", err)
		return false
	}
	b.m.count(kind, dirIn, len(nm.Data), nil)
	return true
}

// onConnBatch delivers what another node's zones sent this node's
// connections (NATS goroutine).
func (b *Bridge) onConnBatch(nm *nats.Msg) {
	var cb pb.ConnBatch
	if !b.decode(KindConn, nm, &cb) {
		return
	}
	if !b.admitBatch(cb.GetFromNode(), "", cb.GetStream(), cb.GetSeq(), cb.GetFloor()) {
		return
	}
	if err := b.deliverConn(&cb); err != nil {
		b.m.Malformed.Add(1)
		b.warnOnce("malformed-conn:"+cb.GetFromNode(), "cluster: malformed connection update dropped", "from", cb.GetFromNode(), "err", err)
	}
}

// Kind names a message stream in the metrics.
type Kind uint8

// Kinds.
const (
	KindZone Kind = iota // ZoneBatch: handoffs, replicas, inputs, joins, leaves, teleports
	KindConn             // ConnBatch: controls, views, redirects, kicks, events
	KindAck              // LinkAck: a reliable stream's acknowledgements
	kinds
)

func (k Kind) String() string { return [...]string{"zone", "conn", "ack"}[k] }

const (
	dirIn = iota
	dirOut
)

var (
	errDecode  = errors.New("decode")
	errEncode  = errors.New("encode")
	errPublish = errors.New("publish")
)

// Metrics counts the bridge's traffic and what it dropped.
type Metrics struct {
	Msgs  [kinds][2]atomic.Uint64 // [kind][in/out]
	Bytes [kinds][2]atomic.Uint64
	// StaleEpoch: batches for a zone this node does not own at the epoch
	// they name (a sender with an old directory, or a fenced node).
	StaleEpoch atomic.Uint64
	Misrouted  atomic.Uint64 // a batch naming another zone than its subject
	Malformed  atomic.Uint64 // undecodable batches and items that fail validation
	Errors     atomic.Uint64 // encode or publish failures
	NoOwner    atomic.Uint64 // messages for a zone nobody owns (dropped)
	Unknown    atomic.Uint64 // connection updates for a player with no connection here
	// ConnGone: connection updates naming (by its tag) a connection of the
	// player here that has gone, while the player has another (localTo).
	ConnGone atomic.Uint64
	// ViewGaps: packed views dropped because the view they are relative to
	// never arrived (a lost message, a restarted peer); the stream
	// recovers at its next keyframe.
	ViewGaps atomic.Uint64
	// BatchGaps: batches that came before one missing on their stream (a
	// resend was asked for); BatchDuplicates: batches had already;
	// BatchesResent: batches sent again (asked for, or unacknowledged);
	// BatchesSkipped: batches found missing that their sender no longer
	// held (lost for good).
	BatchGaps, BatchDuplicates, BatchesResent, BatchesSkipped atomic.Uint64
	// StreamsEvicted: receiving streams forgotten to stay within
	// arqMaxStreams (a peer opening stream after stream).
	StreamsEvicted atomic.Uint64
	// Rejoins: players of a restarted zone asked to join it again here.
	Rejoins atomic.Uint64
	// RecordRefused: cross-process Commits not delivered because the
	// player record could not be written (a newer owner recorded, KV down).
	RecordRefused atomic.Uint64
	// CommitsCoalesced: resent Commits that came while their record write
	// was in flight, dropped (that write delivers the Commit).
	CommitsCoalesced atomic.Uint64
	// HeldBehindCommit: Joins, Leaves, Teleports and Inputs for a player whose
	// Commit here waited for its record write, delivered after it.
	HeldBehindCommit atomic.Uint64
	// FollowedRecord: items held behind a Commit whose record write was
	// refused for good (the record names a newer owner), sent on to the
	// zone the record names instead (refusedCommit).
	FollowedRecord atomic.Uint64
	// DroppedBehindCommit: items for a player whose Commit here waited
	// for its record write dropped rather than sent on ahead of it: past
	// maxBehind (maxInputsBehind for Inputs), or held behind a write that failed (not refused by a
	// newer owner) and was not written within refusedKeep, by a copy or a retry.
	DroppedBehindCommit atomic.Uint64
	// CommitsRetried: writes of an undecided Commit's record the bridge
	// made again itself, no copy of it having come (retryUndecided).
	CommitsRetried atomic.Uint64
	// RemoteInputNanos/RemoteInputs: time from a connection's Input to the
	// owning zone's node, for inputs that crossed (sender and receiver
	// clocks differ: an estimate, exact on one machine).
	RemoteInputNanos atomic.Uint64
	RemoteInputs     atomic.Uint64
}

func (m *Metrics) count(k Kind, dir, n int, err error) {
	if err != nil {
		if errors.Is(err, errDecode) {
			m.Malformed.Add(1)
		} else {
			m.Errors.Add(1)
		}
		return
	}
	m.Msgs[k][dir].Add(1)
	m.Bytes[k][dir].Add(uint64(n))
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// wallStamp turns a node-clock time into wall nanoseconds for the wire.
func (b *Bridge) wallStamp(d time.Duration) int64 {
	if b.cfg.Origin.IsZero() {
		return int64(d)
	}
	return b.cfg.Origin.Add(d).UnixNano()
}

// localStamp turns wall nanoseconds from the wire into this node's clock.
func (b *Bridge) localStamp(ns int64) time.Duration {
	if b.cfg.Origin.IsZero() {
		return time.Duration(ns)
	}
	return time.Unix(0, ns).Sub(b.cfg.Origin)
}
