package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ghostwire/ghostwire/actors/cluster"
	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/zone"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/proto/pbconv"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/sim"
	"github.com/ghostwire/ghostwire/zones/world"
)

// resolveNodeID is --node-id, or hostname-udpport (hostname-random when the
// UDP port is picked by the OS).
func resolveNodeID(cfg Config) string {
	if cfg.NodeID != "" {
		return cfg.NodeID
	}
	port := 0
	if _, p, err := net.SplitHostPort(cfg.UDPAddr); err == nil {
		port, _ = strconv.Atoi(p)
	}
	if port == 0 {
		var b [3]byte
		_, _ = rand.Read(b[:])
		return hostToken() + "-" + hex.EncodeToString(b[:])
	}
	return fmt.Sprintf("%s-%d", hostToken(), port)
}

// hostToken is the hostname as a KV key and subject token.
func hostToken() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "zoned"
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '-'
	}, h)
}

// membership decides which zones this node runs and keeps the local actor
// under every zone's name right: the zone actor for a zone it owns, a
// bridge proxy for one another node owns. Ownership changes (a lease lost,
// an orphaned zone claimed) happen under its lock, never on an actor.
type membership struct {
	node    string
	auto    bool
	want    []string // explicit --zones (nil: auto)
	wm      *world.World
	sys     *actor.ActorSystem
	zones   *zone.World
	bridge  *cluster.Bridge
	leases  *cluster.Leases
	kvNodes jetstream.KeyValue
	log     *slog.Logger
	// players, when set, puts a claimed zone's players back from their
	// records (restore).
	players *cluster.Players
	nc      *nats.Conn
	world   string
	takeSub *nats.Subscription
	giveSub *nats.Subscription
	leftSub *nats.Subscription

	mu       sync.Mutex
	proxies  map[string]*actor.PID
	placed   map[string]bool // zones an operator moved here: not given away (onGive)
	closed   bool
	draining bool                 // handing its zones over: claims nothing more
	giving   bool                 // handing one zone to a node below its share
	orphan   map[string]time.Time // loop only: zones seen unowned, since when
	// askedBack (loop only): the last owner and answer of each listed zone
	// asked back (askBack), so that a standing refusal is logged once.
	askedBack map[string]string
	lostAt    time.Time // when this node last lost a lease (mayAsk)

	// The game clock (GatewayGone's Before) and the watch of the other
	// nodes as gateways (gateways.go; loop only).
	now       func() time.Duration
	origin    time.Time
	gw        map[string]*gatewaySeen
	gwChecked time.Time
	// left: nodes that announced a clean stop (onLeft), by node: its
	// record's start time. Read by the watch under mu.
	left map[string]int64

	// dropRejoins (fault drills, tests): restore sends no Rejoin, as when
	// the players' gateways were paused while it tried.
	dropRejoins atomic.Bool
	// restoreLook (tests; 0: a second) bounds restore's wait for the zone
	// to say which players are back.
	restoreLook atomic.Int64

	stop chan struct{}
	wg   sync.WaitGroup
}

// liveNodes counts the nodes that hold a zone lease, this one included. A
// dead node drops out when its leases expire; a node that holds nothing yet
// is not counted (it claims unowned zones; taking zones from busy nodes is
// migration, the resilience work). Node records are not used: they expire
// three heartbeats after a crash, and listing a bucket that holds expiry
// markers could block.
func liveNodes(leases *cluster.Leases, self string) int {
	seen := map[string]bool{self: true}
	for _, o := range leases.Owners() {
		seen[o.Node] = true
	}
	return len(seen)
}

// claimInitial claims this node's zones before anything runs: the listed
// ones, or in auto mode unowned zones in map order up to a fair share of
// the live nodes. A listed zone must be free, or held by a node that does
// not list it (left out here: the loop asks for it back once this node
// runs); otherwise a clear error names its owner.
func claimInitial(ctx context.Context, cfg Config, wm *world.World, leases *cluster.Leases, kvNodes jetstream.KeyValue, node string, log *slog.Logger) ([]string, error) {
	want, err := cfg.zoneList()
	if err != nil {
		return nil, err
	}
	if want != nil {
		for _, id := range want {
			if _, ok := wm.Zone(id); !ok {
				return nil, fmt.Errorf("--zones: zone %q is not in world %q", id, wm.Name())
			}
		}
		var got []string
		for _, id := range want {
			if _, err := leases.Claim(ctx, id); err != nil {
				if o, ok := leases.Owner(id); ok && errors.Is(err, cluster.ErrOwned) {
					askBack, listsIt := ownerListing(ctx, kvNodes, id, o.Node)
					if askBack {
						// Asked back once this node runs (the loop).
						log.Info("listed zone held by a node that does not list it: asking for it back once running", "zone", id, "owner", o.Node)
						continue
					}
					also := ""
					if listsIt {
						also = ", whose --zones lists it too"
					}
					err = fmt.Errorf("zone %s is owned by node %s (epoch %d)%s: give this node a different --zones list, or stop that node", id, o.Node, o.Epoch, also)
				}
				for _, z := range got {
					_ = leases.Release(ctx, z)
				}
				return nil, err
			}
			got = append(got, id)
		}
		return got, nil
	}
	return claimFair(ctx, wm, leases, kvNodes, node, 0, handoverGrace, log), nil
}

// claimFair claims unowned zones until this node holds its fair share,
// except those released less than grace ago (handoverGrace: a handover's
// target is claiming them).
func claimFair(ctx context.Context, wm *world.World, leases *cluster.Leases, kvNodes jetstream.KeyValue, node string, holding int, grace time.Duration, log *slog.Logger) []string {
	live := liveNodes(leases, node)
	fair := (wm.Len() + live - 1) / live
	var got []string
	owners := leases.Owners()
	for _, zn := range wm.Zones() {
		if holding+len(got) >= fair {
			break
		}
		if _, held := leases.Held(zn.ID); held {
			continue // this node's already (claiming it again would take it over at a new epoch)
		}
		if o, ok := owners[zn.ID]; ok && o.Node != node {
			continue // another node's (a lease in this node's name is a previous run's: Claim takes it over)
		}
		if leases.ReleasedWithin(zn.ID, grace) {
			// Released for a handover a moment ago: its target claims it.
			// Claimed here, the handover failed ("zone owned by another
			// node"), and the zone was not restored if this node was
			// starting (found by hand: two nodes starting at once, one
			// given a zone by a rebalance while the other claimed its
			// share). The zone still unowned past the grace is claimed
			// then (the loop's next look, or as an orphan).
			continue
		}
		if _, err := leases.Claim(ctx, zn.ID); err == nil {
			got = append(got, zn.ID)
		} else if !errors.Is(err, cluster.ErrOwned) && log != nil {
			log.Warn("zone not claimed", "zone", zn.ID, "err", err)
		}
	}
	return got
}

// start spawns a proxy under the name of every zone this node does not run,
// serves the ones it does, and starts the loop that takes orphaned zones.
func (m *membership) start(owned []string) error {
	m.proxies = map[string]*actor.PID{}
	m.placed = map[string]bool{}
	for _, id := range owned {
		if err := m.bridge.Serve(id); err != nil {
			return err
		}
	}
	for _, zn := range m.wm.Zones() {
		if slices.Contains(owned, zn.ID) {
			continue
		}
		if err := m.spawnProxy(zn.ID); err != nil {
			return err
		}
	}
	if m.nc != nil {
		if err := m.serveTakes(); err != nil {
			return err
		}
	}
	m.stop = make(chan struct{})
	m.orphan = map[string]time.Time{}
	m.wg.Add(1)
	go m.loop()
	// A zone claimed at the start by taking over a lease that still stood
	// (this node's previous run's, a crash and a quick restart; or one
	// judged expired) is restored as a zone claimed later is: its players
	// still play through other gateways. Left to look their records up
	// themselves, they stood still for the 3 s their zone was silent
	// (make chaos: players moving again 2.98 s after each kill, 1.9 s
	// after their zone was owned again). The other zones are not: a
	// restore reads the whole players bucket, every player who ever
	// played, and a zone whose lease had lapsed long before has clients
	// that looked their records up long ago.
	if m.players != nil {
		for _, id := range owned {
			if m.leases.TookOver(id) {
				m.wg.Add(1)
				go m.restore(id, nil)
			}
		}
	}
	return nil
}

func (m *membership) spawnProxy(id string) error {
	pid, err := m.sys.Root.SpawnNamed(m.bridge.ProxyProps(id), zone.ActorName(id))
	if err != nil {
		return fmt.Errorf("proxy for zone %s: %w", id, err)
	}
	m.proxies[id] = pid
	return nil
}

// lost runs when the lease of a zone this node ran is gone (taken, or not
// renewed in time): the zone stops here at once and its name points at
// the new owner.
func (m *membership) lost(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	m.lostAt = time.Now()
	m.bridge.Unserve(id)
	m.zones.Remove(id)
	delete(m.placed, id)
	if err := m.spawnProxy(id); err != nil {
		m.log.Error("zone lost, and no proxy for it", "zone", id, "err", err)
	}
}

// hold stops (on) or restarts the ticks of zone id while its lease's
// renewal is overdue (Leases.SetHold): a held zone applies no move and
// begins no handoff, so nothing is acknowledged that a new owner, should
// the lease have lapsed, would not have. Its inputs' moves wait in its
// queues, and so do their events (applied at the let-go; dropped with the
// zone if it is lost, for the clients to send again to the next owner:
// actors/zone paused.go). Its neighbours' handoff messages that would make
// it claim something wait too (zone.PauseLease, actors/zone paused.go):
// an Offer goes unanswered (its sender resends it, or withdraws it at its
// timeout), an Accept or a Commit is kept for the let-go (no player
// committed away, taken, written or acknowledged meanwhile); a zone lost
// meanwhile is stopped with them, and their senders resend to its new
// owner. The let-go takes off only the hold's own pause
// (zone.PauseLease): a zone paused for another reason too (frozen for a
// handover, a test's census) stays paused, and a hold during a handover
// that fails keeps the zone held.
func (m *membership) hold(id string, on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	pid := m.zones.PID(id)
	if pid == nil {
		return
	}
	m.sys.Root.Send(pid, &zone.Pause{Paused: on, By: zone.PauseLease})
	if on {
		m.log.Warn("zone held: its lease's renewal is overdue", "zone", id)
	} else {
		m.log.Info("zone let go: its lease was renewed", "zone", id)
	}
}

// take runs a zone this node just claimed, its share of the world's NPCs
// spawned afresh.
func (m *membership) take(id string) { m.takeWith(id, nil, nil) }

// takeWith is take with the zone's NPCs as its previous owner handed them
// over, when npcs is not nil, and its players as it listed them, when
// players is not nil (a handover's take request).
func (m *membership) takeWith(id string, npcs []sim.NPCState, players []uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	if pid := m.proxies[id]; pid != nil {
		_ = m.sys.Root.StopFuture(pid).Wait()
		delete(m.proxies, id)
	}
	if err := m.bridge.Serve(id); err != nil {
		m.log.Error("claimed zone not served", "zone", id, "err", err)
	}
	if err := m.zones.SpawnWith(id, npcs); err != nil {
		m.log.Error("claimed zone not started", "zone", id, "err", err)
		return
	}
	ep, _ := m.leases.Held(id)
	m.log.Info("zone claimed", "zone", id, "epoch", ep)
	if m.players != nil && m.stop != nil {
		m.wg.Add(1)
		go m.restore(id, players)
	}
}

// restore puts the players of a zone just claimed back from their records:
// those its previous owner had when it died (or stopped without a drain),
// or those it listed in its handover (listed not nil): their records are
// read one by one, where otherwise the whole players bucket is, every
// player who ever played (BenchmarkRestoreRead: ≈ 3.4 µs a record, so a
// second per 300,000; the players frozen meanwhile).
// The nodes holding their connections join them again (Rejoin); a rejoin
// can beat the news of the new owner to a gateway, so it is resent to the
// players not back yet, a few times.
func (m *membership) restore(id string, listed []uint64) {
	defer m.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		select {
		case <-m.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	var recs []*pb.PlayerRecord
	var err error
	if listed != nil {
		recs, err = m.players.Listed(ctx, id, listed)
	} else {
		recs, err = m.players.InZone(ctx, id)
	}
	if err != nil {
		select {
		case <-m.stop: // this node is stopping: the read was cut short on purpose
			m.log.Debug("zone claimed; its players' records not read: stopping", "zone", id, "err", err)
		default:
			m.log.Warn("zone claimed; its players' records not read", "zone", id, "err", err)
		}
		return
	}
	pending := map[uint64]*pb.PlayerRecord{}
	for _, r := range recs {
		if r.GetGateway() != "" {
			pending[r.GetPlayer()] = r
		}
	}
	if len(pending) == 0 {
		return
	}
	total := len(pending)
	pid := actor.NewPID(m.sys.Address(), zone.ActorName(id))
	for try := 0; try < 5 && len(pending) > 0; try++ {
		for _, r := range pending {
			cp, err := pbconv.CheckpointFromProto(r.GetCheckpoint(), r.GetEpoch())
			if err != nil || cp.Entity != r.GetPlayer() {
				delete(pending, r.GetPlayer())
				continue
			}
			if !m.dropRejoins.Load() {
				m.bridge.Rejoin(r.GetGateway(), id, cp)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
		look := time.Duration(m.restoreLook.Load())
		if look <= 0 {
			look = time.Second
		}
		back, err := lookBack(m.sys.Root, pid, slices.Collect(maps.Keys(pending)), look)
		if errors.Is(err, actor.ErrTimeout) {
			// A busy zone, not a gone one: the players not known back get
			// their Rejoin again and, at the end, their records go
			// offline. (Stopping here, as on a zone gone, left them with
			// neither: a record naming a dead gateway, online.)
			continue
		}
		if err != nil {
			return // the zone is gone again: its next owner restores
		}
		for _, p := range back {
			delete(pending, p)
		}
	}
	m.log.Info("zone restored from player records", "zone", id, "players", total-len(pending), "not_back", len(pending))
	// The players not back have no connection where their records say
	// (it died with its node, or its client left as another player): their
	// records go offline, keeping zone and checkpoint for a reconnect
	// (Resume) and for a connection that was only slow (it looks its
	// record up when its zone stays silent, and joins again).
	var gone []handoff.Checkpoint
	for _, r := range pending {
		if cp, err := pbconv.CheckpointFromProto(r.GetCheckpoint(), r.GetEpoch()); err == nil && cp.Entity == r.GetPlayer() {
			gone = append(gone, *cp)
		}
	}
	if len(gone) > 0 {
		m.players.Checkpoint(id, gone, true, func(string) string { return "" })
	}
}

// errZoneGone: lookBack's answer came from whatever stands under the
// zone's name now, not from the zone.
var errZoneGone = errors.New("node: the zone is no longer here")

// lookBack asks the zone actor at pid which of ids it owns, waiting up to
// look (actor.ErrTimeout past it: a busy zone). The look reads its own
// copy of the ids and answers on its own channel: a look that outlives
// its wait still runs, and must write nothing the caller reads.
//
// A zone lost while its restore runs (its lease lapsed again) has a
// bridge proxy under its name, which answers an Inspect without running
// it (remote zones are inspected by their own node): that is errZoneGone.
// Waiting for the look's result then, as restore did, waited for good, and
// the node's Stop with it (TestClusterThreeNodesAcrossBorders at load ≈ 20,
// where leases lapsed again and again).
func lookBack(root *actor.RootContext, pid *actor.PID, ids []uint64, look time.Duration) ([]uint64, error) {
	found := make(chan []uint64, 1)
	f := zone.RequestInspect(root, pid, func(z *sim.Zone) {
		var back []uint64
		for _, p := range ids {
			if e, ok := z.Entity(p); ok && e.Owned {
				back = append(back, p)
			}
		}
		found <- back
	}, look)
	if _, err := msg.Await(f); err != nil {
		return nil, err
	}
	// A zone answers after its look ran (zoneActor: Fn, then Answer), so
	// an answer without a result is not the zone's.
	select {
	case back := <-found:
		return back, nil
	default:
		return nil, errZoneGone
	}
}

// handoverGrace is how long a node that saw a lease vacated waits before
// claiming: a zone handed over (MoveZone, drain) is claimed by its target
// within milliseconds of the release; an expired lease is an outage.
const handoverGrace = 200 * time.Millisecond

// loop claims zones nobody owns (a node died and its leases expired) up to
// this node's fair share.
func (m *membership) loop() {
	defer m.wg.Done()
	t := time.NewTicker(m.leases.TTL() / 3)
	defer t.Stop()
	// orphanDue wakes the loop when a zone seen unowned is due to be
	// taken whatever the share, not at the ticker's next turn after that
	// (up to TTL/3 later: a paused node's zone came back 4.9 s after the
	// signal at the default 3 s TTL, against the chaos audit's 5 s).
	orphanTimer := time.NewTimer(time.Hour)
	orphanTimer.Stop()
	defer orphanTimer.Stop()
	for {
		// A lease expiring (its marker) wakes the loop at once: a dead
		// node's zones are claimed when their leases lapse, not up to a
		// loop later.
		// (After a short grace: a zone released for a handover is the
		// target's to claim, which it does at once.)
		select {
		case <-m.stop:
			return
		case <-t.C:
		case <-orphanTimer.C:
		case <-m.leases.Vacated():
			select {
			case <-m.stop:
				return
			case <-time.After(handoverGrace):
			}
		}
		m.mu.Lock()
		draining := m.draining
		m.mu.Unlock()
		if draining {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), m.leases.TTL())
		m.watchGateways(ctx, time.Now())
		if !m.auto {
			// A fixed --zones list: take back a listed zone this node lost
			// (its lease expired while NATS was unreachable, say) once
			// nobody owns it.
			// A listed zone another node holds without listing it (a
			// drain handed it there, an auto spare claimed it while
			// this node was down) is asked back (giveback.go).
			owners := m.leases.Owners()
			ask := m.askBackDue(time.Now())
			for _, id := range m.want {
				if _, held := m.leases.Held(id); held {
					delete(m.askedBack, id)
					continue
				}
				// The directory naming this node is a lease it lost (NATS
				// was away past its expiry): Claim takes it over.
				if o, owned := owners[id]; owned && o.Node != m.node {
					if ask {
						m.askBack(ctx, id, o.Node)
					}
					continue
				}
				if _, err := m.leases.Claim(ctx, id); err == nil {
					m.take(id)
				}
			}
			cancel()
			continue
		}
		m.mu.Lock()
		holding := len(m.zones.IDs())
		m.mu.Unlock()
		claimed := claimFair(ctx, m.wm, m.leases, m.kvNodes, m.node, holding, handoverGrace, m.log)
		for _, id := range claimed {
			m.take(id)
		}
		if len(claimed) == 0 && m.nc != nil && m.mayAsk(time.Now()) {
			m.rebalance(ctx, holding)
		}
		// A zone still unowned TTL/4 after this node first saw it so
		// (every live node already at its fair share, or running a fixed
		// --zones list) is taken whatever the share, the loop woken for it
		// then: an orphaned zone is an outage. (Waiting half a TTL, as
		// before, put a dead node's second zone back after 5-6 s at the
		// default 3 s TTL.)
		unowned := unownedZones(m.wm.Zones(), m.leases.Owners())
		claim, next := orphansDue(m.orphan, unowned, time.Now(), m.leases.TTL()/4)
		for _, id := range claim {
			if _, err := m.leases.Claim(ctx, id); err == nil {
				delete(m.orphan, id)
				m.take(id)
			} else {
				m.log.Warn("orphaned zone not claimed", "zone", id, "err", err)
			}
		}
		if next > 0 {
			orphanTimer.Reset(next)
		}
		cancel()
	}
}

// unownedZones lists the world's zones that owners does not name.
func unownedZones(zones []world.Zone, owners map[string]cluster.Owner) []string {
	var out []string
	for _, zn := range zones {
		if _, ok := owners[zn.ID]; !ok {
			out = append(out, zn.ID)
		}
	}
	return out
}

// orphansDue keeps orphan (each zone seen unowned, since when) in step
// with unowned at now, and returns the zones unowned for wait or longer
// (to be claimed whatever the share) and how long until the next one
// still waiting is due (0: none waits). A zone owned again leaves the
// map; one seen unowned for the first time enters it at now.
func orphansDue(orphan map[string]time.Time, unowned []string, now time.Time, wait time.Duration) (claim []string, next time.Duration) {
	for id := range orphan {
		if !slices.Contains(unowned, id) {
			delete(orphan, id)
		}
	}
	for _, id := range unowned {
		since, seen := orphan[id]
		if !seen {
			orphan[id], since = now, now
		}
		if left := since.Add(wait).Sub(now); left > 0 {
			if next == 0 || left < next {
				next = left
			}
			continue
		}
		claim = append(claim, id)
	}
	return claim, next
}

// mayAsk reports whether this node may ask another for a zone
// (rebalance) at now: not within two lease TTLs of losing one. A node
// that lost its lease was paused past it (SIGSTOP, a stalled VM), starved
// or cut off from NATS; asking at once, a node that woke from a 10 s
// pause was handed a zone within 130 ms, while it still worked through
// its backlog, and the zone's players were restored twice in five
// seconds. It claims unowned zones meanwhile (an outage otherwise).
func (m *membership) mayAsk(now time.Time) bool {
	m.mu.Lock()
	lost := m.lostAt
	m.mu.Unlock()
	return lost.IsZero() || now.Sub(lost) >= 2*m.leases.TTL()
}

// close stops claiming; the caller releases the leases.
func (m *membership) close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	if m.takeSub != nil {
		_ = m.takeSub.Unsubscribe()
	}
	if m.giveSub != nil {
		_ = m.giveSub.Unsubscribe()
	}
	if m.leftSub != nil {
		_ = m.leftSub.Unsubscribe()
	}
	if m.stop != nil {
		close(m.stop)
	}
	m.wg.Wait()
}

// worldToken makes a world map's name a NATS subject token.
func worldToken(name string) string {
	if name == "" {
		return "default"
	}
	out := []rune(name)
	for i, r := range out {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			out[i] = '_'
		}
	}
	return string(out)
}
