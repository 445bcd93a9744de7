package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
)

// Owner is who owns a zone, as the directory says.
type Owner struct {
	Zone  string
	Node  string
	Epoch uint64 // the claim's KV revision: the fence
}

// DefaultLeaseTTL is how long a zone lease lives without renewal.
const DefaultLeaseTTL = 3 * time.Second

// storeOutage is how long after its last renewal a held zone waits out a
// zones bucket that answers its renewals with nothing that decides (no
// stream leader, NATS away) before it is given up, when that is longer
// than 2 × TTL. A NATS cluster that lost the server leading the bucket's
// stream (a crash, a pod killed) elects another 4–9 s after the leader's
// last heartbeat (nats-server's Raft election timeout) and a campaign of
// up to 0.8 s; no node can claim anything meanwhile. Given up at TTL −
// TTL/12, every zone whose bucket that server led was stopped and taken
// back from its players' records once the election was over (by hand: one
// of three servers SIGKILLed, all four zones of the world lost and
// restored, 90 of 90 players corrected).
const storeOutage = 12 * time.Second

// heldRetryDiv: a held zone whose renewal decided nothing sends the next
// TTL/heldRetryDiv later (50 ms at the default TTL), not at the next tick
// (TTL/6). A NATS cluster's new stream leader expires every lease older
// than the TTL at its first age check, 0–TTL after it is elected (each
// replica checks the age of the stream's oldest entry every TTL, a
// follower removing nothing): a lease held through the election lives on
// only if a renewal lands first. At the tick's pace the first landed
// 0–TTL/6 after the election, and the new leader expired 9 of 36 leases
// first in three runs of make chaos-nats-cluster; at this pace it lands
// 47–110 ms after, and 20 of 288 were expired first in 24 runs.
const heldRetryDiv = 60

// probeKey is the key a Leases' probes compare-and-set against: no zone
// can have it ('=' is outside a zone ID's characters, zones/world), and a
// probe never writes it (its expected revision is never the key's).
const probeKey = "=probe"

// probeDiv: a Leases probes the zones bucket every TTL/probeDiv (250 ms at
// the default TTL), and judges the other nodes' leases as often.
const probeDiv = 12

// leaseBackstop is the zones bucket's own expiry of an entry for a lease
// TTL: longer than a holder waits out a bucket that decides nothing
// (outage, storeOutage) and than any claimant's judgement (TTL), so that
// the server removes only leases nobody claimed, long dead. A lease's
// expiry is judged by the claimants instead (see Leases): with the
// server's expiry at the TTL, a NATS cluster's new stream leader removed
// every lease older than the TTL at its first age check after an election
// (0–TTL after it), before the renewals held through the election landed
// (20 of 288 leases in 24 runs of make chaos-nats-cluster).
func leaseBackstop(ttl time.Duration) time.Duration {
	return max(2*ttl, storeOutage) + 2*ttl
}

// Leases claims, renews and releases this node's zone leases in the zones
// bucket and watches every zone's owner. Renewals run on their own
// goroutine, never on an actor's.
//
// Fencing: a lease's epoch is the revision of the Create that claimed it;
// renewals are compare-and-set at the last revision this node wrote, so a
// node whose lease expired and was claimed by another can never renew it
// (it learns it lost the zone instead).
//
// Renewals come every TTL/6 (each may take until the lease is given up),
// each lease's on a goroutine of its own: a renewal slow to come back
// holds back no other lease's, and one that took longer than the interval
// is followed by the next at once. A node that cannot reach the bucket (NATS
// restarting, a partition) is fenced a third of the TTL before the lease
// could expire (Valid turns false: no record or lease is written as owner)
// but keeps the zone and keeps trying: if a renewal lands before the
// lease expires, it owns the zone at the same epoch, nothing moved. It
// gives the zone up (lost) when a renewal finds the lease changed hands or
// gone, or fails when TTL − TTL/12 passed since the last renewal it saw
// succeed (another node may claim it at TTL); a renewal counts from when
// it was sent. At the default 3 s TTL a NATS outage of about 2.2 s (less
// one round trip) or less costs nothing.
//
// A renewal still in flight at that point is not given up: on a starved
// host (the node and its NATS merely busy) the server applies it on time
// and its reply comes seconds late. The zone is held instead (SetHold: no
// tick, nothing acknowledged that a new owner would not have) until the
// renewal's answer, which decides: a renewal that lands proves the lease
// never lapsed up to its landing (it compares-and-sets at the revision
// this node wrote, and an expiry or another node's claim moves it), so the
// lease lives until TTL after its send: the zone goes on at the same epoch
// if that was less than the give-up time ago, else it stays held and the
// next renewal, sent at once, decides. A refused one loses the zone; with
// none by 2 × TTL after the last renewal the lease is read back first, and
// renewed at its revision if it still names this node at its epoch (the
// server applied the renewal, or expires late: starved too), else lost.
// So a lease survives while its renewals reach the server within TTL of
// the one before, whenever their replies come back.
//
// Expiry is judged by the other nodes, each on its own clock: a lease
// whose revision this node's watcher has not seen change for a TTL,
// counted while the bucket answers, is a suspect, and expired if the
// bucket's stream leader still has that revision (the directory drops
// it, Vacated fires, and Claim may replace it, compare-and-set at exactly
// that revision). "While the bucket answers": every TTL/probeDiv a probe,
// a compare-and-set bound to fail, asks the bucket's stream leader for an
// answer, and silence counts only from the first probe of the current
// run of answered ones. The leader's revision, read the same way on the
// zone's key, guards against a watcher that is merely behind. So a lease
// held through a NATS election lives on, its holder's renewals landing at
// once afterwards while every claimant counts a fresh TTL; and a node
// that died is taken over a TTL after its last renewal was seen. The
// judgement is safe on any clocks that run at the same rate: a claimant
// sees a renewal after its holder sent it and waits a whole TTL, and the
// holder gives up (or holds its zone) at TTL − TTL/12 after the send; a
// renewal that lands after the judgement moves the revision, so the
// claim fails. The bucket's own expiry is only a backstop
// (leaseBackstop).
type Leases struct {
	kv    jetstream.KeyValue
	node  string
	ttl   time.Duration
	renew time.Duration // renewal interval
	fence time.Duration // Valid: how long after the last renewal the node may act as owner
	give  time.Duration // how long without a renewal before the lease is given up (or held, one in flight)
	wait  time.Duration // how long after the last renewal one in flight is waited for (held)
	// outage: how long after the last renewal a held zone waits out a
	// bucket that decides nothing (storeOutage).
	outage time.Duration
	kick   chan struct{} // RenewNow
	// heldRetry: how soon a held zone's renewal that decided nothing is
	// followed by the next (heldRetryDiv).
	heldRetry time.Duration
	log       *slog.Logger
	now       func() time.Time

	mu     sync.Mutex
	held   map[string]*held
	owners map[string]Owner
	// lost is told (off the lock, on the renewal goroutine) about every
	// zone this node stopped owning without releasing it.
	lost    func(zone string)
	changed chan struct{} // closed and replaced whenever owners changes
	vacated chan struct{} // closed and replaced whenever a zone loses its owner
	load    func(zone string) (players, npcs int)
	// hold is told (off mu, under holdMu, so its calls for a zone come in
	// order) when a zone is held and let go: past the give-up point with a
	// renewal in flight, and when that renewal lands.
	hold   func(zone string, on bool)
	holdMu sync.Mutex

	// abandon cancels the renewals in flight (RenewNow, halt): a request
	// sent on a connection that NATS lost is never answered, and a renewal
	// waits for its reply until the lease is given up, holding back the
	// next.
	abandon map[*context.CancelFunc]struct{}
	halted  bool // halt ran: no renewal starts any more

	relists atomic.Uint64
	// seen: every zone lease's revision as the watcher last saw it
	// change, and when (now); stale: the leases judged expired, at the
	// revision judged; up: when the first probe of the current run of
	// answered ones went (zero while the bucket answers nothing).
	seen     map[string]seenRev
	stale    map[string]uint64
	up       time.Time
	probe    time.Duration // probe interval (probeDiv)
	expiries atomic.Uint64 // leases judged expired
	probes   atomic.Uint64 // probes the bucket answered
	unproved atomic.Uint64 // probes it did not
	behind   atomic.Uint64 // suspects whose newer revision the leader had (the watcher behind)
	// released: when (now) the watcher saw each zone's lease deleted by
	// its holder (a Release: a handover's, or a clean stop's), until the
	// zone is claimed again.
	released map[string]time.Time
	// behindKick asks the watcher to re-list: a suspect's lease was
	// renewed at the leader, unseen (confirm).
	behindKick chan struct{}
	// unknownOnce: the warning that the bucket's refusals name no
	// revision, logged once.
	unknownOnce sync.Once
	life        context.Context // the watcher's: canceled by Close/Abandon
	kill        context.CancelFunc

	stop chan struct{}
	wg   sync.WaitGroup
}

// seenRev is a lease's revision and when the watcher saw it first.
type seenRev struct {
	rev uint64
	at  time.Time
}

type held struct {
	rev    uint64 // the revision this node wrote last
	epoch  uint64
	since  time.Time
	lastOK time.Time
	// suspended: past the fence without a renewal (logged once); the
	// zone is kept until a renewal lands or the lease is given up.
	suspended bool
	// renewing: a renewal of this lease is in flight (renewChain); the
	// next one waits for it. (One sent beside it would expect the same
	// revision and fail its compare-and-set once the first lands: the
	// server applies them in order.)
	renewing bool
	// onHold: past the give-up point with a renewal in flight; hold was
	// told (it is told again, off, when a renewal lands).
	onHold bool
	// answered: the renewal in flight has its answer (a hold decided
	// after it would never be let go).
	answered bool
	// tookOver: the claim replaced a lease that still stood (TookOver).
	tookOver bool
}

// LeaseBucketConfig is the zones bucket's configuration for a lease TTL:
// the claimants judge a lease's expiry (Leases); the server removes an
// entry only leaseBackstop(ttl) after its last write, and leaves a marker
// when it does, so watchers hear of it.
func LeaseBucketConfig(bucket string, ttl time.Duration) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{Bucket: bucket, History: 1, Storage: jetstream.FileStorage, TTL: leaseBackstop(ttl), LimitMarkerTTL: ttl}
}

// NewLeases starts watching the bucket and renewing what this node claims.
// lost may be nil.
func NewLeases(ctx context.Context, kv jetstream.KeyValue, node string, ttl time.Duration, log *slog.Logger, lost func(zone string)) (*Leases, error) {
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Leases{kv: kv, node: node, ttl: ttl, renew: ttl / 6, heldRetry: ttl / heldRetryDiv, fence: ttl - ttl/3, give: ttl - ttl/12, wait: 2 * ttl,
		outage: max(2*ttl, storeOutage),
		kick:   make(chan struct{}, 1), log: log, now: time.Now,
		held: map[string]*held{}, owners: map[string]Owner{}, lost: lost, changed: make(chan struct{}), vacated: make(chan struct{}),
		seen: map[string]seenRev{}, stale: map[string]uint64{}, released: map[string]time.Time{}, probe: ttl / probeDiv, behindKick: make(chan struct{}, 1),
		stop: make(chan struct{})}
	// The watcher lives as long as the Leases, not as long as ctx (a
	// start-up deadline: a watcher bound to it stopped right after start).
	l.life, l.kill = context.WithCancel(context.Background())
	w, err := l.relist(ctx)
	if err != nil {
		l.kill()
		return nil, err
	}
	l.wg.Add(3)
	go l.watch(w)
	go l.renewLoop()
	go l.probeLoop()
	return l, nil
}

// relist starts a watcher on the bucket (for the Leases' lifetime) and
// replaces the directory with its initial values (the complete list ends
// with a nil entry); ctx bounds the wait for them.
func (l *Leases) relist(ctx context.Context) (jetstream.KeyWatcher, error) {
	w, err := l.kv.WatchAll(l.life)
	if err != nil {
		return nil, fmt.Errorf("leases: watch %s: %w", l.kv.Bucket(), err)
	}
	fresh := map[string]Owner{}
	revs := map[string]uint64{}
	for done := false; !done; {
		select {
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				return nil, fmt.Errorf("leases: watch %s: closed while listing", l.kv.Bucket())
			case e == nil:
				done = true
			case e.Operation() == jetstream.KeyValuePut:
				if o, ok := decodeOwner(e); ok {
					fresh[e.Key()] = o
					revs[e.Key()] = e.Revision()
				}
			}
		case <-ctx.Done():
			_ = w.Stop()
			return nil, fmt.Errorf("leases: listing %s: %w", l.kv.Bucket(), ctx.Err())
		}
	}
	l.mu.Lock()
	l.owners = fresh
	// Silence counts afresh from the listing: the watcher may have missed
	// renewals while it was away.
	now := l.now()
	clear(l.seen)
	clear(l.stale)
	for z, rev := range revs {
		l.seen[z] = seenRev{rev: rev, at: now}
	}
	for z, h := range l.held { // what this node holds it knows best
		l.owners[z] = Owner{Zone: z, Node: l.node, Epoch: h.epoch}
	}
	l.signal(true) // some may have expired while the watcher was away
	l.mu.Unlock()
	return w, nil
}

// Relists counts how often the watcher had to be started again.
func (l *Leases) Relists() uint64 { return l.relists.Load() }

// TTL is the lease lifetime.
func (l *Leases) TTL() time.Duration { return l.ttl }

// Node is this node's id.
func (l *Leases) Node() string { return l.node }

// DecodeOwner reads a zones-bucket entry the way the leases do: the epoch
// is the value's, or the entry's revision when the value has none (a
// claim not yet rewritten with its epoch). It reports false for a value
// that is not a ZoneOwner naming a node. For tools that read the
// directory without holding leases (zonectl zones).
func DecodeOwner(e jetstream.KeyValueEntry) (Owner, bool) { return decodeOwner(e) }

func decodeOwner(e jetstream.KeyValueEntry) (Owner, bool) {
	var zo pb.ZoneOwner
	if err := proto.Unmarshal(e.Value(), &zo); err != nil || zo.GetNode() == "" {
		return Owner{}, false
	}
	ep := zo.GetEpoch()
	if ep == 0 {
		ep = e.Revision() // the claim itself
	}
	return Owner{Zone: e.Key(), Node: zo.GetNode(), Epoch: ep}, true
}

func (l *Leases) apply(e jetstream.KeyValueEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch e.Operation() {
	case jetstream.KeyValuePut:
		if o, ok := decodeOwner(e); ok {
			l.owners[e.Key()] = o
			// Only forward: a confirmation may have read a newer
			// revision from the leader than the watcher delivers next.
			if s, ok := l.seen[e.Key()]; !ok || e.Revision() > s.rev {
				l.seen[e.Key()] = seenRev{rev: e.Revision(), at: l.now()}
			}
			delete(l.stale, e.Key()) // renewed (or claimed) after all
			delete(l.released, e.Key())
		} else {
			l.log.Warn("zone lease with a bad value ignored", "zone", e.Key(), "revision", e.Revision())
		}
	default: // deleted, purged, expired
		if e.Operation() == jetstream.KeyValueDelete {
			l.released[e.Key()] = l.now()
		}
		delete(l.owners, e.Key())
		delete(l.seen, e.Key())
		delete(l.stale, e.Key())
		l.signal(true)
		return
	}
	l.signal(false)
}

// watch applies the bucket's changes. A watcher whose updates stop (its
// channel closed: a NATS reconnect, a consumer reset) is started again and
// the directory re-listed, with backoff: a directory that silently stops
// changing would let this node act on owners long gone.
func (l *Leases) watch(w jetstream.KeyWatcher) {
	defer l.wg.Done()
	backoff := 100 * time.Millisecond
	for {
		closed, kicked := false, false
		for !closed {
			select {
			case <-l.stop:
				_ = w.Stop()
				return
			case <-l.behindKick:
				// The leader has renewals this watcher never delivered
				// (confirm): a consumer behind the stream, as after a NATS
				// election, catches up only once nats.go resets it (two
				// missed 5 s heartbeats: ≥ 11 s seen), the directory stale
				// meanwhile. A fresh listing has them now.
				l.log.Info("zone directory watcher behind the bucket's leader; re-listing", "bucket", l.kv.Bucket())
				closed, kicked = true, true
			case e, ok := <-w.Updates():
				if !ok {
					closed = true
				} else if e != nil {
					l.apply(e)
					backoff = 100 * time.Millisecond
				}
			}
		}
		_ = w.Stop()
		for {
			l.relists.Add(1)
			if !kicked {
				l.log.Warn("zone directory watcher stopped; re-listing", "bucket", l.kv.Bucket(), "backoff", backoff)
			}
			kicked = false // a failed listing is logged as one
			select {
			case <-l.stop:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			ctx, cancel := context.WithTimeout(context.Background(), l.ttl)
			nw, err := l.relist(ctx)
			cancel()
			if err == nil {
				w = nw
				break
			}
		}
	}
}

// Owner returns the zone's owner as last seen.
func (l *Leases) Owner(zone string) (Owner, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	o, ok := l.owners[zone]
	return o, ok
}

// Owners returns a copy of the directory.
func (l *Leases) Owners() map[string]Owner {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]Owner, len(l.owners))
	for k, v := range l.owners {
		out[k] = v
	}
	return out
}

// Changed returns a channel closed at the next change of the directory.
func (l *Leases) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// Vacated returns a channel closed the next time a zone loses its owner
// (a lease released, or expired: judged by this node, or the server's
// marker): claimers act at once instead of at their next look.
func (l *Leases) Vacated() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.vacated
}

// ReleasedWithin reports whether this node's watcher saw zone's lease
// released by its holder less than d ago, the zone unclaimed since: a
// handover's target is claiming it now (it does within milliseconds of
// the release), so a node claiming its fair share leaves it alone. An
// expired lease, or a release listed when the watcher started, is not
// one.
func (l *Leases) ReleasedWithin(zone string, d time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok := l.released[zone]
	return ok && l.now().Sub(at) < d
}

// TookOver reports whether this node's claim of zone, which it holds,
// replaced a lease that still stood: its own previous run's (a restart
// before the lease's entry was removed) or one it judged expired. The
// zone ran somewhere a moment ago, so its players' records may be online,
// naming gateways that still hold their connections.
func (l *Leases) TookOver(zone string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.held[zone]
	return ok && h.tookOver
}

// Held returns the epoch of a zone this node holds.
func (l *Leases) Held(zone string) (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.held[zone]
	if !ok {
		return 0, false
	}
	return h.epoch, true
}

// Valid reports whether this node holds zone and may still act as its
// owner: its last successful renewal is recent enough that the lease
// cannot have expired (the self-fence bound). A node that was paused past
// its lease (SIGSTOP) is not valid from the moment it wakes, before its
// renewal loop notices.
func (l *Leases) Valid(zone string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.held[zone]
	return ok && l.now().Sub(h.lastOK) <= l.fence
}

// Acting reports whether this node may still run zone as its owner: it
// holds the lease and its last renewal is within the give-up time, the
// point where the zone is held (SetHold) or lost. It turns false at the
// same moment as the hold would come, and from the moment a node paused
// past it (SIGSTOP) wakes, before its renewal loop notices: the zone's own
// check (zone.Params.Acting), which the hold, sent from that loop, can
// arrive behind. Valid is the stricter bound for writes.
func (l *Leases) Acting(zone string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.held[zone]
	return ok && l.now().Sub(h.lastOK) <= l.give
}

// ErrNotHeld: this node does not hold the zone's lease (any more).
var ErrNotHeld = errors.New("cluster: zone lease not held")

// WaitValid returns once this node may act as zone's owner (Valid): at
// once if it may; else it asks for a renewal now and waits until one lands
// (a renewal in flight is not abandoned: on a busy host it is only slow).
// It fails when the lease is no longer held (lost, released) or ctx ends.
// For a write that must not be fenced by a renewal that was merely late:
// a drained zone's final checkpoints.
func (l *Leases) WaitValid(ctx context.Context, zone string) error {
	for {
		if l.Valid(zone) {
			return nil
		}
		if _, ok := l.Held(zone); !ok {
			return fmt.Errorf("%w: %s", ErrNotHeld, zone)
		}
		select {
		case l.kick <- struct{}{}:
		default: // a renewal is asked for already
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("zone %s: lease not renewed: %w", zone, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// RenewNow renews every held lease at once instead of at the next
// interval: after a NATS reconnect, a lease close to its expiry is renewed
// before it lapses. Renewals in flight are abandoned first: sent before the
// reconnect, their replies may never come.
func (l *Leases) RenewNow() {
	l.mu.Lock()
	for cancel := range l.abandon {
		(*cancel)()
	}
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// SetLoad makes renewals write each zone's player and NPC counts into its
// lease (what zonectl zones shows). Call it before the first renewal.
func (l *Leases) SetLoad(fn func(zone string) (players, npcs int)) {
	l.mu.Lock()
	l.load = fn
	l.mu.Unlock()
}

// SetHold makes a lease past its give-up point with a renewal in flight
// hold its zone (fn(zone, true): the zone must apply nothing, as if it
// stopped here) until the renewal's answer: fn(zone, false) when it lands;
// the lost callback when it is refused or does not come. Calls for one
// zone come in order; fn must not block. Call it before the first
// renewal. Without it a renewal is cut off at the give-up point and the
// zone lost, as a zone that runs on must not outlive its lease.
func (l *Leases) SetHold(fn func(zone string, on bool)) {
	l.mu.Lock()
	l.hold = fn
	l.mu.Unlock()
}

// holdOverdue runs when the renewal of h in flight passed the give-up
// point: the zone is held until its answer (unless it came meanwhile).
func (l *Leases) holdOverdue(z string, h *held, epoch uint64) {
	l.hold1(z, h, epoch, true, nil)
}

// putOnHold holds h's zone after a renewal past the give-up point ended
// without a decision (err): until a renewal lands or is refused, or
// outage passed since the last.
func (l *Leases) putOnHold(z string, h *held, epoch uint64, err error) {
	l.hold1(z, h, epoch, false, err)
}

// hold1 tells hold that h's zone is held, once, unless h is no longer
// this node's lease (or, inFlight, its renewal was answered meanwhile).
func (l *Leases) hold1(z string, h *held, epoch uint64, inFlight bool, err error) {
	l.holdMu.Lock()
	defer l.holdMu.Unlock()
	l.mu.Lock()
	if l.held[z] != h || (inFlight && h.answered) || h.onHold || l.halted {
		l.mu.Unlock()
		return
	}
	h.onHold = true
	fn := l.hold
	unrenewed := l.now().Sub(h.lastOK)
	l.mu.Unlock()
	if inFlight {
		l.log.Warn("zone lease renewal overdue: zone held (nothing applied) until its answer", "zone", z, "epoch", epoch,
			"unrenewed", unrenewed.Round(time.Millisecond), "wait", l.wait)
	} else {
		l.log.Warn("zone lease not renewed, the bucket deciding nothing: zone held (nothing applied) while renewals go on", "zone", z, "epoch", epoch,
			"unrenewed", unrenewed.Round(time.Millisecond), "up_to", l.outage, "err", err)
	}
	if fn != nil {
		fn(z, true)
	}
}

// letGo ends h's hold after a renewal landed.
func (l *Leases) letGo(z string, h *held) {
	l.holdMu.Lock()
	defer l.holdMu.Unlock()
	l.mu.Lock()
	on := h.onHold && l.held[z] == h
	h.onHold = false
	fn := l.hold
	l.mu.Unlock()
	if on && fn != nil {
		fn(z, false)
	}
}

// ErrOwned is returned by Claim for a zone another node holds.
var ErrOwned = errors.New("zone owned by another node")

func (l *Leases) value(zone string, epoch uint64, since time.Time) []byte {
	now := l.now()
	zo := &pb.ZoneOwner{Zone: zone, Node: l.node, AcquiredUnixMs: since.UnixMilli(),
		ExpiresUnixMs: now.Add(l.ttl).UnixMilli(), Epoch: epoch}
	l.mu.Lock()
	load := l.load
	l.mu.Unlock()
	if load != nil {
		p, n := load(zone)
		zo.Players, zo.Npcs = uint32(max(p, 0)), uint32(max(n, 0))
	}
	b, _ := proto.Marshal(zo)
	return b
}

// Claim takes zone if nobody holds it and returns its new epoch.
func (l *Leases) Claim(ctx context.Context, zone string) (uint64, error) {
	now := l.now()
	rev, err := l.kv.Create(ctx, zone, l.value(zone, 0, now))
	createErr := err
	if errors.Is(err, jetstream.ErrKeyExists) {
		// A lease in this node's own name is a previous run of this node
		// (restarted before the lease expired: a crash, a pod restart with
		// a stable name). Take it over at a new epoch instead of waiting out
		// the TTL; compare-and-set, so a lease that changed hands meanwhile
		// is not touched.
		//
		// A lease this node judged expired (no renewal seen for a TTL
		// while the bucket answered) is replaced the same way, at exactly
		// the revision judged: a renewal since moved it.
		e, gerr := l.kv.Get(ctx, zone)
		if gerr != nil {
			return 0, fmt.Errorf("claim %s: %w", zone, ErrOwned)
		}
		o, ok := decodeOwner(e)
		mine := ok && o.Node == l.node
		if !mine && !l.judgedExpired(zone, e.Revision()) {
			return 0, fmt.Errorf("claim %s: %w", zone, ErrOwned)
		}
		if rev, err = l.kv.Update(ctx, zone, l.value(zone, 0, now), e.Revision()); err != nil {
			return 0, fmt.Errorf("claim %s: %w", zone, ErrOwned)
		}
		if mine {
			l.log.Info("zone lease taken over from this node's previous run", "zone", zone, "old_revision", e.Revision())
		} else {
			l.log.Info("zone lease taken over: expired", "zone", zone, "node", o.Node, "epoch", o.Epoch, "old_revision", e.Revision())
		}
	}
	if err != nil {
		return 0, fmt.Errorf("claim %s: %w", zone, err)
	}
	tookOver := createErr != nil // the entry existed, and was taken over above
	// Write the epoch into the value, so readers need not know that a
	// renewed entry's revision is not its epoch.
	rev2, err := l.kv.Update(ctx, zone, l.value(zone, rev, now), rev)
	if err != nil {
		rev2 = rev // the next renewal retries; the epoch is still rev
	}
	l.mu.Lock()
	l.held[zone] = &held{rev: rev2, epoch: rev, since: now, lastOK: now, tookOver: tookOver}
	l.owners[zone] = Owner{Zone: zone, Node: l.node, Epoch: rev}
	l.mu.Unlock()
	return rev, nil
}

// Release gives zone up (only if the lease still names this node at the
// epoch it holds: at the revision it wrote, or a renewal's in flight).
func (l *Leases) Release(ctx context.Context, zone string) error {
	l.mu.Lock()
	h, ok := l.held[zone]
	delete(l.held, zone)
	l.mu.Unlock()
	if !ok {
		return nil
	}
	err := l.kv.Delete(ctx, zone, jetstream.LastRevision(h.rev))
	// A renewal in flight as the zone left held (the server wrote it, its
	// reply not yet taken) moved the revision: the lease still names this
	// node at this epoch, so it is deleted at its current revision. (At the
	// old one the release failed, and a draining node kept the lease until
	// it expired, its players owned by nobody meanwhile.) No renewal starts
	// after the zone left held, so one more try suffices; two, to be sure.
	for try := 0; try < 2 && err != nil && isWrongSequence(err); try++ {
		e, gerr := l.kv.Get(ctx, zone)
		if errors.Is(gerr, jetstream.ErrKeyNotFound) {
			return nil
		}
		if gerr != nil {
			break
		}
		if o, ok := decodeOwner(e); !ok || o.Node != l.node || o.Epoch != h.epoch {
			break // another node's lease now: not this node's to delete
		}
		err = l.kv.Delete(ctx, zone, jetstream.LastRevision(e.Revision()))
	}
	if err != nil {
		return fmt.Errorf("release %s: %w", zone, err)
	}
	return nil
}

// judgedExpired reports whether this node judged zone's lease expired at
// revision rev.
func (l *Leases) judgedExpired(zone string, rev uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.stale[zone]
	return ok && r == rev
}

// LeaseStats are the counters of a Leases' expiry judgement, for metrics.
type LeaseStats struct {
	Expiries uint64 // other nodes' leases judged expired
	Probes   uint64 // probes and confirmations the bucket's leader answered
	Unproved uint64 // probes and confirmations nothing answered (no leader, NATS away)
	Behind   uint64 // suspects the leader had a newer revision of: the watcher behind
	Relists  uint64 // watchers started again
}

// Stats returns the judgement's counters.
func (l *Leases) Stats() LeaseStats {
	return LeaseStats{Expiries: l.expiries.Load(), Probes: l.probes.Load(), Unproved: l.unproved.Load(),
		Behind: l.behind.Load(), Relists: l.relists.Load()}
}

// probeLoop probes the bucket every probe interval and judges the other
// nodes' leases after each probe.
func (l *Leases) probeLoop() {
	defer l.wg.Done()
	t := time.NewTicker(l.probe)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		sent := l.now()
		_, _, answered := l.leaderRevision(probeKey)
		l.mu.Lock()
		switch {
		case !answered:
			l.up = time.Time{}
		case l.up.IsZero():
			l.up = sent
		}
		suspects := l.suspects(l.now())
		l.mu.Unlock()
		for _, sus := range suspects {
			l.confirm(sus)
		}
	}
}

// leaderRevision asks the bucket's stream leader for key's revision (0:
// none): a compare-and-set at a revision no key has, which a leader
// refuses with "wrong last sequence: N", N the key's last revision; with
// no leader (an election) nothing answers (no responders, a timeout), and
// answered is false. Reads would not do: a KV's followers answer them,
// from their copy.
//
// known is false when the refusal names no revision (a server whose
// error text differs from nats-server 2.15's "wrong last sequence: N"):
// the bucket answered, but no lease can be confirmed expired, and the
// server's backstop is all that expires them (logged once).
func (l *Leases) leaderRevision(key string) (rev uint64, known, answered bool) {
	ctx, cancel := context.WithTimeout(l.life, l.renew)
	defer cancel()
	_, err := l.kv.Update(ctx, key, nil, math.MaxUint64)
	if !isWrongSequence(err) {
		l.unproved.Add(1)
		return 0, false, false
	}
	l.probes.Add(1)
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		if _, serr := fmt.Sscanf(apiErr.Description, "wrong last sequence: %d", &rev); serr == nil {
			return rev, true, true
		}
	}
	l.unknownOnce.Do(func() {
		l.log.Warn("zones bucket's refusal names no revision: leases are not judged expired (the bucket's backstop expires them)", "err", err)
	})
	return 0, false, true
}

// suspect is a lease the watcher has seen no renewal of for a TTL.
type suspect struct {
	zone string
	seen seenRev
}

// suspects lists every other node's lease whose revision the watcher has
// not seen move for a TTL since max(when it was seen, l.up) (under mu).
func (l *Leases) suspects(now time.Time) []suspect {
	if l.up.IsZero() {
		return nil
	}
	var out []suspect
	for z, s := range l.seen {
		if _, mine := l.held[z]; mine {
			continue
		}
		if _, listed := l.owners[z]; !listed {
			continue
		}
		if r, judged := l.stale[z]; judged && r == s.rev {
			continue
		}
		from := s.at
		if l.up.After(from) {
			from = l.up
		}
		if now.Sub(from) >= l.ttl {
			out = append(out, suspect{zone: z, seen: s})
		}
	}
	return out
}

// confirm judges a suspect: the watcher's silence alone is not enough
// (after a NATS election its consumer can stay behind the stream for
// seconds, and the renewals that landed meanwhile are not seen), so the
// lease is expired only if the stream's leader still has the revision
// the watcher saw. Then it is dropped from the directory, vacated closes,
// and Claim may replace it at that revision. A later revision restarts
// the silence from now.
func (l *Leases) confirm(sus suspect) {
	rev, known, _ := l.leaderRevision(sus.zone)
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !known || l.up.IsZero() || l.seen[sus.zone] != sus.seen {
		return // the bucket away again, or the watcher saw a change meanwhile
	}
	o, listed := l.owners[sus.zone]
	if !listed {
		return
	}
	if rev != sus.seen.rev {
		l.behind.Add(1)
		l.log.Debug("zone lease renewed unseen: the directory's watcher is behind", "zone", sus.zone, "watcher_revision", sus.seen.rev, "leader_revision", rev)
		select {
		case l.behindKick <- struct{}{}:
		default: // a re-listing is asked for already
		}
		l.seen[sus.zone] = seenRev{rev: max(rev, sus.seen.rev), at: now}
		return
	}
	delete(l.owners, sus.zone)
	l.stale[sus.zone] = rev
	l.expiries.Add(1)
	l.log.Info("zone lease expired: no renewal for the TTL", "zone", sus.zone, "node", o.Node, "epoch", o.Epoch, "revision", rev)
	l.signal(true)
}

// signal wakes the waiters on Changed, and on Vacated too when a zone lost
// its owner (under mu).
func (l *Leases) signal(vacated bool) {
	close(l.changed)
	l.changed = make(chan struct{})
	if vacated {
		close(l.vacated)
		l.vacated = make(chan struct{})
	}
}

func (l *Leases) renewLoop() {
	defer l.wg.Done()
	t := time.NewTicker(l.renew)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		case <-l.kick:
		}
		l.startRenewals()
	}
}

// startRenewals starts a renewal of every held lease that has none in
// flight, each on a goroutine of its own (renewChain), and returns a
// channel per renewal started, closed when it ends. Renewing them one at a
// time, a node with many zones would renew its last one, or notice it
// cannot, only after the others' timeouts: past its expiry; waiting for
// all of them before the next round, one slow reply held back every other
// lease's renewal.
func (l *Leases) startRenewals() []chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	var started []chan struct{}
	for z, h := range l.held {
		if h.renewing {
			continue
		}
		h.renewing = true
		done := make(chan struct{})
		started = append(started, done)
		l.wg.Add(1)
		go l.renewChain(z, h, done)
	}
	return started
}

// renewAll renews every held lease (those with a renewal in flight: that
// one) and returns when the renewals it started end.
func (l *Leases) renewAll() {
	for _, done := range l.startRenewals() {
		<-done
	}
}

// renewChain renews zone's lease h until a renewal ends within the
// interval: one that took longer (a busy host, a busy server) is followed
// by the next at once, not at the next tick, and one abandoned (RenewNow)
// is sent again at once. It stops when the lease is no longer held, and
// on halt.
func (l *Leases) renewChain(z string, h *held, done chan struct{}) {
	defer l.wg.Done()
	defer close(done)
	defer func() {
		l.mu.Lock()
		h.renewing = false
		l.mu.Unlock()
	}()
	for {
		// Real time, as the ticker's: the leases' clock (now) may be a
		// test's.
		start := time.Now()
		next := l.renewOne(z, h)
		if d := l.heldRetry - time.Since(start); next == renewSoon && d > 0 {
			// A held zone's renewal that decided nothing: the next one
			// heldRetry after it went (at once after a slow one), so
			// that it lands as soon as the bucket has a leader again
			// (heldRetryDiv).
			t := time.NewTimer(d)
			select {
			case <-l.stop:
				t.Stop()
				return
			case <-t.C:
			}
		}
		select {
		case <-l.stop:
			return
		default:
		}
		if next == renewDone && time.Since(start) < l.renew {
			return
		}
		l.mu.Lock()
		held := l.held[z] == h
		l.mu.Unlock()
		if !held {
			return
		}
	}
}

// renewNext is what renewChain does after a renewal: wait for the tick
// (renewDone, unless the renewal took longer than the interval), send the
// next at once (renewAgain: abandoned on RenewNow, the lease still held),
// or soon (renewSoon: the zone held, the renewal decided nothing).
type renewNext uint8

const (
	renewDone renewNext = iota
	renewAgain
	renewSoon
)

// renewOne renews one held lease, or gives it up (lost), and says when
// the next renewal goes (renewNext).
func (l *Leases) renewOne(z string, h *held) renewNext {
	l.mu.Lock()
	if l.held[z] != h || l.halted {
		l.mu.Unlock()
		return renewDone
	}
	rev, epoch, since, lastOK := h.rev, h.epoch, h.since, h.lastOK
	h.answered = false
	// Without a hold, a renewal is cut off at the give-up point: a zone
	// that cannot be held must not run on where another node may own it.
	wait, holding := l.give, l.hold != nil
	if holding {
		wait = l.wait
	}
	parent, abandon := context.WithCancel(context.Background())
	if l.abandon == nil {
		l.abandon = map[*context.CancelFunc]struct{}{}
	}
	l.abandon[&abandon] = struct{}{}
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.abandon, &abandon)
		l.mu.Unlock()
		abandon()
	}()
	// A renewal may take longer than the interval (a busy host, a busy
	// server): ticks meanwhile are skipped, not piled up. A reply that
	// comes late still renews: it is waited for up to wait after the
	// last renewal, the zone held from the give-up point on. (Cut off at
	// TTL/3, a renewal whose round trip took a second, as under -race on
	// a loaded host, was abandoned though the server still applied it;
	// the next one then found the revision moved and needed two more
	// round trips. Cut off at the give-up point, a node starved to a
	// seventh of a core (round trips of 2-4 s) lost every zone in the
	// middle of renewals the server had applied, and took them back at
	// new epochs from its players' records.)
	sent := l.now()
	ctx, cancel := context.WithTimeout(parent, max(lastOK.Add(wait).Sub(sent), l.renew))
	overdue := time.AfterFunc(max(lastOK.Add(l.give).Sub(sent), 0), func() { l.holdOverdue(z, h, epoch) })
	nrev, err := l.kv.Update(ctx, z, l.value(z, epoch, since), rev)
	if err != nil && (errors.Is(err, jetstream.ErrKeyExists) || isWrongSequence(err)) {
		// The revision moved. If the lease still names this node at
		// this epoch, the move was this node's own renewal, applied
		// by the server but its reply lost (NATS went away mid-way):
		// adopt the revision and renew again.
		nrev, err = l.renewAfterLostReply(ctx, z, epoch, since)
	}
	if err != nil && holding && ctx.Err() != nil && parent.Err() == nil {
		// No answer within the wait, the zone held: the server may have
		// applied the renewal all the same (a starved host's reply is
		// merely later still). Read the lease back before giving it up:
		// one that still names this node at its epoch never lapsed, and
		// is renewed at its revision, as of the read's start (the write
		// lands after it). Given up unread, 6 of 21 zones lost at load
		// 12 (TestClusterThreeNodesAcrossBorders) were leases the server
		// still held, taken back at new epochs from their players'
		// records.
		rctx, rcancel := context.WithTimeout(parent, l.ttl)
		read := l.now()
		nrev, err = l.renewAfterLostReply(rctx, z, epoch, since)
		rcancel()
		if err == nil {
			sent = read
		}
	}
	cancel()
	overdue.Stop()
	l.mu.Lock()
	h.answered = true
	l.mu.Unlock()
	abandoned := err != nil && parent.Err() != nil
	if abandoned {
		select {
		case <-l.stop:
			return renewDone // halted: nothing is given up on the way out
		default:
		}
	}
	now := l.now()
	l.mu.Lock()
	if l.held[z] != h {
		l.mu.Unlock()
		return renewDone // released meanwhile
	}
	var why string
	putOnHold := false
	stale := false // renewed, but sent too long ago to let a held zone go
	switch {
	case err == nil:
		if h.suspended {
			l.log.Info("zone lease renewed after an outage: still the owner, same epoch", "zone", z, "epoch", epoch,
				"unrenewed", now.Sub(h.lastOK).Round(time.Millisecond))
		}
		// Renewed as of when it was sent, not when the reply came: the
		// server wrote it in between, so the lease lives at least TTL
		// from sent. (From the reply, a renewal whose reply took a
		// second let this node act as owner up to a second past the
		// lease's possible expiry: a second owner's window.)
		h.rev, h.lastOK, h.suspended = nrev, sent, false
		// A held zone goes on only if this renewal was sent less than
		// the give-up time ago: it proves the lease lived until TTL
		// after its send, not until its reply. (Let go by any renewal
		// that landed, 15 of 167 zones let go at load 12 ran on a
		// renewal 2.75-5.9 s old, 8 of them older than the 3 s TTL: a
		// lease that may have expired, until the next renewal held them
		// again.) Older, the zone stays held and the next renewal, sent
		// at once, decides.
		stale = now.Sub(sent) > l.give
		if h.onHold && !stale {
			l.log.Info("zone lease renewed after its renewal was overdue: still the owner, same epoch; zone let go", "zone", z, "epoch", epoch,
				"unrenewed", now.Sub(lastOK).Round(time.Millisecond))
		}
	case errors.Is(err, ErrOwned), errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyNotFound), isWrongSequence(err):
		why = "lease taken or expired: " + err.Error()
	case now.Sub(h.lastOK) > l.give && (!holding || now.Sub(h.lastOK) > l.outage):
		// Cannot reach the bucket: a zone that cannot be held is given
		// up before the lease can expire and another node claim it; a
		// held one once the bucket stayed silent past outage.
		why = "lease not renewed in time (" + err.Error() + ")"
	case now.Sub(h.lastOK) > l.give:
		// The bucket decided nothing (no stream leader while a NATS
		// cluster elects one, NATS away, a renewal abandoned on a
		// reconnect): the zone is held — it applies nothing, so it
		// cannot act where another node may own it — and the renewals
		// go on. The first that lands proves the lease never lapsed (it
		// compares-and-sets at the revision this node wrote: an expiry
		// or a claim moves it) and lets the zone go on at the same
		// epoch; a refusal loses it.
		putOnHold = !h.onHold
	case now.Sub(h.lastOK) > l.fence && !h.suspended:
		h.suspended = true
		l.log.Warn("zone lease not renewed: fenced (no writes as owner) until a renewal lands", "zone", z, "epoch", epoch, "err", err)
	}
	if why != "" {
		delete(l.held, z)
	}
	letGo := err == nil && h.onHold && !stale
	soon := err != nil && why == "" && (h.onHold || putOnHold)
	l.mu.Unlock()
	if letGo {
		l.letGo(z, h)
	}
	if putOnHold {
		l.putOnHold(z, h, epoch, err)
	}
	if why != "" {
		l.log.Error("zone lease lost: this node no longer owns the zone", "zone", z, "epoch", epoch, "why", why)
		if l.lost != nil {
			l.lost(z)
		}
		return renewDone
	}
	switch {
	case abandoned:
		return renewAgain
	case soon:
		return renewSoon
	}
	return renewDone
}

// renewAfterLostReply re-reads zone's lease after a renewal was refused for
// a moved revision: when it still names this node at epoch, the revision
// is adopted and the lease renewed at it; otherwise the refusal stands.
// A renewal at the revision read that is refused for a moved revision too
// reads again (up to rereads times): a busy server answers reads and
// writes on different queues, so another late write of this node's own (a
// claim's epoch write, a renewal cut off) can land behind the read. (Read
// once, that lost the zone twice in a run at load 12, the lease still this
// node's at the server.) Each write it adopts names this node at epoch, so
// the lease never lapsed meanwhile.
func (l *Leases) renewAfterLostReply(ctx context.Context, z string, epoch uint64, since time.Time) (uint64, error) {
	const rereads = 3
	for try := 0; ; try++ {
		e, err := l.kv.Get(ctx, z)
		if err != nil {
			return 0, err
		}
		if o, ok := decodeOwner(e); !ok || o.Node != l.node || o.Epoch != epoch {
			return 0, fmt.Errorf("%w: now %s epoch %d", ErrOwned, o.Node, o.Epoch)
		}
		l.mu.Lock()
		if h, ok := l.held[z]; ok && h.epoch == epoch {
			h.rev = e.Revision()
		}
		l.mu.Unlock()
		nrev, err := l.kv.Update(ctx, z, l.value(z, epoch, since), e.Revision())
		if err == nil || try+1 >= rereads || !(errors.Is(err, jetstream.ErrKeyExists) || isWrongSequence(err)) {
			return nrev, err
		}
	}
}

// isWrongSequence reports whether err is a compare-and-set refused: the
// key's last sequence was not the one expected. A stream of one replica
// says so with code 10071, a replicated one (R>1, --kv-replicas) with
// 10164; KV's Update wraps either in ErrKeyRevisionMismatch.
func isWrongSequence(err error) bool {
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// halt stops renewing and watching (once) and returns the zones still
// held; false if it was already halted.
func (l *Leases) halt() ([]string, bool) {
	select {
	case <-l.stop:
		return nil, false
	default:
	}
	close(l.stop)
	l.kill()
	// The renewals in flight end now: waited for, one could take until
	// its lease is given up. A renewal the server applies all the same
	// only moves the revision: Release deletes at the current one.
	l.mu.Lock()
	l.halted = true
	for cancel := range l.abandon {
		(*cancel)()
	}
	l.mu.Unlock()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	zones := make([]string, 0, len(l.held))
	for z := range l.held {
		zones = append(zones, z)
	}
	return zones, true
}

// Abandon stops renewing and watching and forgets the held leases without
// releasing them: what a crash looks like to the other nodes (the leases
// expire after their TTL). For tests and fault drills.
func (l *Leases) Abandon() {
	if _, ok := l.halt(); ok {
		l.mu.Lock()
		clear(l.held)
		l.mu.Unlock()
	}
}

// Close stops renewing and watching and releases every lease this node
// holds (within ctx).
func (l *Leases) Close(ctx context.Context) {
	zones, _ := l.halt()
	for _, z := range zones {
		if err := l.Release(ctx, z); err != nil {
			l.log.Warn("zone lease not released (it expires by itself)", "zone", z, "err", err)
		}
	}
}
