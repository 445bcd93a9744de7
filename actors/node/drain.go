package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/ghostwire/ghostwire/actors/cluster"
	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/zone"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// Zone handover: the primitive under drain (and `zonectl move-zone`). The
// owner freezes the zone (no tick applies another move), writes every
// player's final checkpoint to its record and waits for the writes, stops
// the zone and puts a proxy in its place, releases the lease, and asks the
// target node to claim it. The target claims it at a new epoch and puts the
// players back from their records (restore): their connections join again
// and resend every move the old owner never reported applied, so nothing
// is lost or applied twice. Players are frozen from the freeze until the
// target's restore: a few NATS round trips and KV writes.

// errStopping is a take's refusal by a node that is stopping (or
// draining): it takes no zone any more.
var errStopping = errors.New("this node is stopping")

// takeSubject is where a node takes requests to claim a zone now.
func takeSubject(world, node string) string { return "gw." + world + ".node." + node + ".take" }

// giveSubject is where a node takes requests to hand one of its zones to
// the asking node (rebalancing when a node joins), or a listed zone back
// to the node whose --zones names it (giveback.go).
func giveSubject(world, node string) string { return "gw." + world + ".node." + node + ".give" }

// serveTakes answers other nodes' handover requests: claim the zone named
// in the request (it must be in the world map and unowned) and run it.
func (m *membership) serveTakes() error {
	sub, err := m.nc.Subscribe(takeSubject(m.world, m.node), func(r *nats.Msg) {
		reply := func(err error) {
			if err != nil {
				_ = r.Respond([]byte("error: " + err.Error()))
				return
			}
			_ = r.Respond([]byte("ok"))
		}
		req, err := decodeTake(r.Data)
		if err != nil {
			reply(err)
			return
		}
		id := req.zone
		if _, ok := m.wm.Zone(id); !ok {
			reply(fmt.Errorf("zone %q is not in world %q", id, m.wm.Name()))
			return
		}
		m.mu.Lock()
		closed := m.closed || m.draining
		m.mu.Unlock()
		if closed {
			reply(errStopping)
			return
		}
		if _, held := m.leases.Held(id); held {
			reply(nil)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), m.leases.TTL())
		defer cancel()
		if _, err := m.leases.Claim(ctx, id); err != nil {
			reply(err)
			return
		}
		if req.placed { // before the zone runs: no give may pick it meanwhile
			m.mu.Lock()
			m.placed[id] = true
			m.mu.Unlock()
		}
		m.takeWith(id, req.npcs, req.players)
		reply(nil)
	})
	if err != nil {
		return fmt.Errorf("handover subscription: %w", err)
	}
	m.takeSub = sub
	give, err := m.nc.Subscribe(giveSubject(m.world, m.node), m.onGive)
	if err != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("rebalance subscription: %w", err)
	}
	m.giveSub = give
	left, err := m.nc.Subscribe(leftSubject(m.world), m.onLeft)
	if err != nil {
		_ = sub.Unsubscribe()
		_ = give.Unsubscribe()
		return fmt.Errorf("node-left subscription: %w", err)
	}
	m.leftSub = left
	return nil
}

// onGive hands one zone to the asking node if this node holds more than its
// fair share (an auto node only: an explicit --zones list is the
// operator's). The zone with the fewest players goes: the cheapest move.
// A zone an operator moved here (`zonectl move-zone`) stays: given away,
// it went back at the next look of the node it came from — the operator's
// move undone within a second (by hand: the zone back 200 ms later).
func (m *membership) onGive(r *nats.Msg) {
	if len(r.Data) > 0 && r.Data[0] == giveBackMark {
		id, to, err := decodeGiveBack(r.Data)
		if err != nil {
			_ = r.Respond([]byte("error: " + err.Error()))
			return
		}
		m.onGiveBack(r, id, to)
		return
	}
	to := string(r.Data)
	if !m.auto || !cluster.ValidID(to) || to == m.node || !m.beginGiving() {
		_ = r.Respond([]byte("error: not giving"))
		return
	}
	defer m.endGiving()
	// Give while this node holds at least two more than the asker: the
	// shares then differ by at most one (4 zones on 3 nodes: 2, 1, 1).
	ids := m.zones.IDs()
	theirs := 0
	for _, o := range m.leases.Owners() {
		if o.Node == to {
			theirs++
		}
	}
	if len(ids) < theirs+2 {
		_ = r.Respond([]byte("error: at fair share"))
		return
	}
	m.mu.Lock()
	placed := maps.Clone(m.placed)
	m.mu.Unlock()
	pick, fewest := "", -1
	for _, id := range ids {
		if placed[id] {
			continue
		}
		p, _, _ := m.zones.Load(id)
		if fewest < 0 || p < fewest {
			pick, fewest = id, p
		}
	}
	if pick == "" {
		_ = r.Respond([]byte("error: every zone beyond the share was placed here by an operator"))
		return
	}
	m.give(r, pick, to, "rebalance", "a node below its share")
}

// beginGiving marks this node as handing a zone to an asking node (onGive,
// onGiveBack): false when it already is, or it is stopping.
func (m *membership) beginGiving() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.draining || m.giving {
		return false
	}
	m.giving = true
	return true
}

func (m *membership) endGiving() {
	m.mu.Lock()
	m.giving = false
	m.mu.Unlock()
}

// give answers the asking node's request yes and hands zone id to it;
// kept if it does not take it (handOver). what and whom name the request
// in the log.
func (m *membership) give(r *nats.Msg, id, to, what, whom string) {
	_ = r.Respond([]byte("ok " + id))
	ctx, cancel := context.WithTimeout(context.Background(), 2*m.leases.TTL())
	defer cancel()
	if _, err := m.handOver(ctx, id, []string{to}, false, true, nil); err != nil {
		m.log.Warn(what+": zone not handed over", "zone", id, "to", to, "err", err)
		return
	}
	m.log.Info(what+": zone handed to "+whom, "zone", id, "to", to)
}

// rebalance asks the busiest node for a zone when this auto node holds
// less than its share and nothing is unowned (a node joined a running
// world): one zone per call, so shares even out over a few loops.
func (m *membership) rebalance(ctx context.Context, holding int) {
	live := liveNodes(m.leases, m.node)
	total := m.wm.Len()
	if holding >= total/live {
		return
	}
	counts := map[string]int{}
	for _, o := range m.leases.Owners() {
		counts[o.Node]++
	}
	busiest, most := "", 0
	for node, c := range counts {
		if node != m.node && (c > most || c == most && node < busiest) {
			busiest, most = node, c
		}
	}
	if busiest == "" || most <= holding+1 {
		return
	}
	r, err := m.nc.RequestWithContext(ctx, giveSubject(m.world, busiest), []byte(m.node))
	switch {
	case err != nil:
		m.log.Debug("rebalance: no answer", "from", busiest, "err", err)
	case strings.HasPrefix(string(r.Data), "ok "):
		m.log.Info("rebalance: a zone is coming", "from", busiest, "zone", strings.TrimPrefix(string(r.Data), "ok "))
	default: // a fixed --zones node, or the shares changed meanwhile
		m.log.Debug("rebalance: refused", "from", busiest, "answer", string(r.Data))
	}
}

// liveOthers lists the other nodes with a fresh directory record that
// are not draining: the ones that may take a zone.
func (m *membership) liveOthers(ctx context.Context) []string {
	out, _ := m.liveOthersListing(ctx)
	return out
}

// liveOthersListing is liveOthers with each one's --zones list (nil for
// an auto node).
func (m *membership) liveOthersListing(ctx context.Context) ([]string, map[string][]string) {
	recs, err := nodeRecords(ctx, m.kvNodes, m.node)
	if recs == nil {
		m.log.Warn("live nodes not listed", "err", err)
		return nil, nil
	}
	var out []string
	lists := map[string][]string{}
	for k, rec := range recs {
		if time.Since(time.UnixMilli(rec.GetHeartbeatUnixMs())) > 3*heartbeat || rec.GetDraining() {
			continue
		}
		out = append(out, k)
		lists[k] = rec.GetListed()
	}
	slices.Sort(out)
	return out, lists
}

// drainOrder is the order in which a drain asks targets for zone id, its
// i-th: round robin, except that a target whose --zones list names the
// zone is asked first (it would ask for the zone back from any other,
// a second handover and a second freeze for its players).
func drainOrder(targets []string, lists map[string][]string, id string, i int) []string {
	order := append(slices.Clone(targets[i%len(targets):]), targets[:i%len(targets)]...)
	if j := slices.IndexFunc(order, func(t string) bool { return slices.Contains(lists[t], id) }); j > 0 {
		lister := order[j]
		order = append([]string{lister}, slices.Delete(order, j, j+1)...)
	}
	return order
}

// nodeRecords reads the directory's records of the nodes other than self.
// A record gone between the listing and its read (expired) is left out;
// recs is nil when the listing failed, and err tells of any read that
// failed otherwise (recs then lacks that node).
func nodeRecords(ctx context.Context, kv jetstream.KeyValue, self string) (recs map[string]*pb.NodeRecord, err error) {
	keys, err := cluster.Keys(ctx, kv)
	if err != nil {
		return nil, err
	}
	recs = map[string]*pb.NodeRecord{}
	for _, k := range keys {
		if k == self {
			continue
		}
		e, gerr := kv.Get(ctx, k)
		if gerr != nil {
			if !errors.Is(gerr, jetstream.ErrKeyNotFound) {
				err = gerr
			}
			continue
		}
		rec := new(pb.NodeRecord)
		if proto.Unmarshal(e.Value(), rec) != nil {
			continue
		}
		recs[k] = rec
	}
	return recs, err
}

// drain hands every zone this node runs to the other live nodes, round
// robin (a node whose --zones list names the zone first), and stops
// claiming. With no other live node it does nothing (the
// zones stop with the node, as before). It returns how many zones were
// handed over.
//
// A target that cannot take any zone (no answer: it stopped or hangs; or
// it says it is stopping: drained at the same time, its record not yet
// saying so) is asked for no further zone: each ask of a hung target
// costs up to half of what the drain has left (handOver). The zones
// nobody took are warned about once, not once each: a whole cluster
// stopped at once (a scale-down to zero) warned for every zone of every
// node.
func (m *membership) drain(ctx context.Context) int {
	m.mu.Lock()
	if m.closed || m.draining {
		m.mu.Unlock()
		return 0
	}
	m.draining = true
	m.mu.Unlock()
	targets, lists := m.liveOthersListing(ctx)
	if len(targets) == 0 {
		m.log.Info("no other live node: the zones stop with this one")
		return 0
	}
	start := time.Now()
	n := 0
	gone := map[string]bool{}
	var left []string
	var leftErr error
	for i, id := range slices.Clone(m.zones.IDs()) {
		// Round robin, a lister first; a target that refuses passes the
		// zone to the next.
		order := drainOrder(targets, lists, id, i)
		if _, err := m.handOver(ctx, id, order, false, false, gone); err != nil {
			m.log.Debug("zone not handed over", "zone", id, "to", strings.Join(order, ","), "err", err)
			left = append(left, id)
			if leftErr == nil {
				leftErr = err
			}
			continue
		}
		n++
	}
	if len(left) > 0 {
		m.log.Warn("zones not handed over; they stop with this node and their players are restored from their checkpoints",
			"zones", len(left), "ids", strings.Join(left, ","), "err", leftErr)
	}
	m.log.Info("drained", "zones", n, "to", strings.Join(targets, ","), "took", time.Since(start).Round(time.Millisecond))
	return n
}

// takeError is one target's failure to take a zone. gone: the target can
// take no zone now (it did not answer, or it is stopping), as opposed to a
// refusal of this zone (its lease claim failed).
type takeError struct {
	target string
	gone   bool
	err    error
}

func (e *takeError) Error() string { return e.err.Error() }
func (e *takeError) Unwrap() error { return e.err }

// handOver moves zone id to the first of targets that takes it (see the
// top of the file) and returns that node; placed: an operator's move,
// which the target keeps against its rebalancing. When every target
// refuses (it is stopping too, or gone), or there is none, keep: this
// node claims the zone back and runs it on (a rebalance, an operator's
// move: better here than unowned); else it is left unowned (a drain: a
// node claims it as an orphan).
//
// gone, when not nil, is a drain's set of targets that can take no zone:
// handOver asks none of them and adds each that answers so. With every
// target gone it asks nobody, and still writes the zone's final
// checkpoints and frees its lease.
func (m *membership) handOver(ctx context.Context, id string, targets []string, placed, keep bool, gone map[string]bool) (string, error) {
	pid := m.zones.PID(id)
	if pid == nil {
		return "", fmt.Errorf("zone %s does not run here", id)
	}
	// Freeze, then take every owned player's state: nothing changes after
	// (a lease's hold let go meanwhile takes off only its own pause,
	// zone.PauseLease, and leaves this one).
	m.sys.Root.Send(pid, &zone.Pause{Paused: true, By: zone.PauseHandover})
	var cps []handoff.Checkpoint
	var npcs []sim.NPCState
	f := zone.RequestInspect(m.sys.Root, pid, func(z *sim.Zone) {
		cps = z.AppendCheckpoints(nil, 1)
		npcs = z.AppendNPCs(make([]sim.NPCState, 0, 64))
	}, 5*time.Second)
	if _, err := msg.Await(f); err != nil {
		m.sys.Root.Send(pid, &zone.Pause{Paused: false, By: zone.PauseHandover})
		return "", fmt.Errorf("freeze: %w", err)
	}
	if m.players != nil && len(cps) > 0 {
		if err := m.finalCheckpoints(ctx, id, cps); err != nil {
			// Those players come back from their last periodic checkpoint
			// (at most a second old; their connections resend the moves).
			m.log.Warn("final checkpoints not all written", "zone", id, "err", err)
		}
	}
	// Stop it here; what arrives meanwhile waits in the connections
	// (unacknowledged moves are resent after the restore).
	m.mu.Lock()
	m.bridge.Unserve(id)
	m.zones.Remove(id)
	delete(m.placed, id)
	if err := m.spawnProxy(id); err != nil {
		m.log.Error("zone handed over, and no proxy for it", "zone", id, "err", err)
	}
	m.mu.Unlock()
	if err := m.leases.Release(ctx, id); err != nil {
		return "", fmt.Errorf("release: %w", err)
	}
	// The NPCs go with the take: they walk on at the target as they were.
	// So do the players' ids: the target restores them from their records
	// (their final checkpoints, just written) without reading the whole
	// players bucket.
	req := takeRequest{zone: id, npcs: npcs, placed: placed, players: make([]uint64, len(cps))}
	for i := range cps {
		req.players[i] = cps[i].Entity
	}
	var errs []error
	for k, target := range targets {
		if gone[target] {
			continue
		}
		// Each ask bounded: a target that hangs (paused, its record still
		// fresh) must leave time to ask the next — half of what is left
		// when another target follows. At 2 × TTL alone, a hung first
		// target took a stopping node's whole shutdown (6 s against the
		// default 5), and no zone was handed over.
		bound := 2 * m.leases.TTL()
		if dl, ok := ctx.Deadline(); ok && slices.ContainsFunc(targets[k+1:], func(t string) bool { return !gone[t] }) {
			bound = min(bound, time.Until(dl)/2)
		}
		actx, cancel := context.WithTimeout(ctx, bound)
		err := m.askTake(actx, target, req)
		cancel()
		if err == nil {
			m.log.Info("zone handed over", "zone", id, "to", target, "players", len(cps), "npcs", len(npcs))
			return target, nil
		}
		errs = append(errs, err)
		if te := (*takeError)(nil); gone != nil && errors.As(err, &te) && te.gone {
			gone[target] = true
		}
		if len(targets) > 1 {
			m.log.Info("zone handover: the target did not take it; asking the next", "zone", id, "to", target, "err", err)
		}
	}
	if len(errs) == 0 { // no target, or every one gone
		errs = append(errs, errors.New("no node left to take it"))
	}
	err := errors.Join(errs...)
	if keep {
		// Nobody took it: it stays here, claimed again and its players
		// restored from the checkpoints just written.
		if _, cerr := m.leases.Claim(ctx, id); cerr != nil {
			return "", fmt.Errorf("%w; and not claimed back: %v (another node claims it as an orphan)", err, cerr)
		}
		m.takeWith(id, npcs, req.players)
		return "", fmt.Errorf("%w (the zone runs on here)", err)
	}
	return "", fmt.Errorf("%w (another node claims it as an orphan)", err)
}

// askTake asks node target to take req's zone with its NPCs and players.
func (m *membership) askTake(ctx context.Context, target string, req takeRequest) error {
	id := req.zone
	take := encodeTake(req, int(m.nc.MaxPayload()))
	r, err := m.nc.RequestWithContext(ctx, takeSubject(m.world, target), take)
	if err == nil && take[0] == takeMark && strings.Contains(string(r.Data), "is not in world") {
		// A node of an older build reads the request as a zone id, which
		// no world has, and refuses it so (a rolling update): ask again
		// with the id alone, the NPCs spawned afresh there. A refusal for
		// another reason (the target is stopping) is not asked again: it
		// was warned about as the NPCs' refusal, which it was not.
		m.log.Warn("zone handover: the target refused the NPCs; asking with the zone alone", "zone", id, "to", target, "answer", string(r.Data))
		r, err = m.nc.RequestWithContext(ctx, takeSubject(m.world, target), []byte(id))
	}
	if err != nil {
		// No answer: no responders (it stopped) or none in time (it hangs).
		return &takeError{target: target, gone: true, err: fmt.Errorf("ask %s to take it: %w", target, err)}
	}
	if s := string(r.Data); s != "ok" {
		why := strings.TrimPrefix(s, "error: ")
		return &takeError{target: target, gone: why == errStopping.Error(), err: fmt.Errorf("%s refused it: %s", target, why)}
	}
	return nil
}

// finalCheckpoints writes the checkpoints of zone id, frozen for a
// handover, each while this node may act as the zone's owner. A renewal
// late on a busy host fences the writes for a moment though the lease is
// still this node's: refused then, the target restored the players from
// their periodic checkpoints, up to a second older than the state their
// clients had seen acknowledged (corrections of 4–5 m in
// TestDrainRedirectsClientsWithoutDisconnects under load). So the writes
// wait for a renewal, and what a fence refused is written again.
func (m *membership) finalCheckpoints(ctx context.Context, id string, cps []handoff.Checkpoint) error {
	var err error
	for range 3 {
		if err := m.leases.WaitValid(ctx, id); err != nil {
			return err
		}
		fenced := m.players.Fenced.Load()
		err = m.players.CheckpointSync(ctx, id, cps, m.bridge.GatewayOfConn)
		if err == nil || m.players.Fenced.Load() == fenced {
			return err
		}
	}
	return err
}

// MoveZone hands zone id, which this node runs, to node target (a live
// node of the world): the `zonectl move-zone` primitive.
func (n *Node) MoveZone(ctx context.Context, id, target string) error {
	if n.member == nil {
		return errors.New("not clustered")
	}
	if target == n.node || !cluster.ValidID(target) {
		return fmt.Errorf("target node %q: not another node's id", target)
	}
	if !slices.Contains(n.member.liveOthers(ctx), target) {
		return fmt.Errorf("target node %q is not alive (or is draining)", target)
	}
	_, err := n.member.handOver(ctx, id, []string{target}, true, true, nil)
	return err
}
