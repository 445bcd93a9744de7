package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"google.golang.org/protobuf/proto"

	"github.com/ghostwire/ghostwire/actors/admin/adminclient"
	"github.com/ghostwire/ghostwire/actors/cluster"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/zones/world"
)

// APIVersion is the admin API's version (the micro service's).
const APIVersion = "1.0.0"

// viaHeader names the node that forwarded a per-node call.
const viaHeader = "Ghostwire-Via"

// Errors the handlers answer with, by code.
var (
	ErrNotFound    = errors.New("not found")
	ErrUnavailable = errors.New("unavailable")
)

// Config is one node's admin service.
type Config struct {
	NC      *nats.Conn
	Node    string
	World   *world.World
	Version string
	Started time.Time
	// Nodes is the node-record bucket of the directory: the nodes a
	// cluster-wide call fans out to.
	Nodes jetstream.KeyValue
	// Owners is the zone directory (cluster.Leases.Owners).
	Owners func() map[string]cluster.Owner
	Parts  Parts
	// Tick is the zone tick period (a node's load is its tick p99 over it).
	Tick time.Duration
	// Timeout bounds one node's answer to a fanned-out call (default 2 s).
	Timeout time.Duration
	// Settle bounds how long a move waits to see the player in its new
	// zone (default 5 s).
	Settle time.Duration
	Log    *slog.Logger
}

// Service is a running admin service. Stop ends it.
type Service struct {
	cfg Config
	loc *local
	svc micro.Service
	log *slog.Logger

	mu    sync.Mutex
	nodes map[string]bool

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start registers the service's endpoints on cfg.NC and starts following
// the node directory. ctx bounds the start only.
func Start(_ context.Context, cfg Config) (*Service, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.Settle <= 0 {
		cfg.Settle = 5 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	s := &Service{cfg: cfg, log: cfg.Log, nodes: map[string]bool{cfg.Node: true},
		loc: &local{p: cfg.Parts, node: cfg.Node, timeout: cfg.Timeout}}
	// The watcher lives as long as the service, not as long as ctx (a
	// start timeout, cancelled once the node is up).
	wctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if cfg.Nodes != nil {
		w, err := cfg.Nodes.WatchAll(wctx)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("admin: watch nodes: %w", err)
		}
		s.wg.Add(1)
		go s.watchNodes(wctx, w)
	}
	svc, err := micro.AddService(cfg.NC, micro.Config{
		Name: adminclient.ServiceName, Version: APIVersion,
		Description: "ghostwire admin API (zonectl); node " + cfg.Node,
		Metadata:    map[string]string{"node": cfg.Node, "version": cfg.Version},
	})
	if err != nil {
		s.Stop()
		return nil, fmt.Errorf("admin: service: %w", err)
	}
	s.svc = svc
	for _, op := range []string{adminclient.OpNodes, adminclient.OpZones, adminclient.OpPlayers, adminclient.OpPlayer,
		adminclient.OpMove, adminclient.OpKick, adminclient.OpDrain, adminclient.OpStats, adminclient.OpMoveZone} {
		op := op
		if err := svc.AddEndpoint(op, s.handler(op, s.cluster), micro.WithEndpointSubject(adminclient.Subject(op))); err != nil {
			s.Stop()
			return nil, fmt.Errorf("admin: endpoint %s: %w", op, err)
		}
		if op == adminclient.OpPlayer {
			continue // per node, a player lookup is a filtered list
		}
		// Per-node endpoints answer on their own subject only: no queue
		// group is shared with other nodes (the subject is unique anyway).
		if err := svc.AddEndpoint("node_"+op, s.handler(op, s.nodeOp),
			micro.WithEndpointSubject(adminclient.NodeSubject(cfg.Node, op))); err != nil {
			s.Stop()
			return nil, fmt.Errorf("admin: endpoint node_%s: %w", op, err)
		}
	}
	// The endpoints' subscriptions reach the server asynchronously: a
	// zonectl call right after the node said ready found no responder.
	// The round trip of a flush makes "started" mean "answering".
	if err := cfg.NC.Flush(); err != nil {
		s.Stop()
		return nil, fmt.Errorf("admin: flush: %w", err)
	}
	return s, nil
}

// Stop ends the service and waits for its goroutines.
func (s *Service) Stop() {
	if s.svc != nil {
		_ = s.svc.Stop()
	}
	s.cancel()
	s.wg.Wait()
}

func (s *Service) watchNodes(ctx context.Context, w jetstream.KeyWatcher) {
	defer s.wg.Done()
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				s.log.Warn("admin: node directory watcher stopped; each call lists the directory, and a failed listing falls back to the nodes last listed")
				return
			}
			if e == nil {
				continue // the initial values are in
			}
			s.mu.Lock()
			if e.Operation() == jetstream.KeyValuePut {
				s.nodes[e.Key()] = true
			} else if e.Key() != s.cfg.Node {
				delete(s.nodes, e.Key())
			}
			s.mu.Unlock()
		}
	}
}

// nodeIDs are the nodes in the directory, this one included, sorted. The
// bucket is listed for each call: its watcher lags a NATS election (its
// consumer is reset only after two missed 5 s heartbeats, ≥ 11 s seen),
// and a node started meanwhile was left out of fan-outs and refused as
// "not in the directory". When the listing fails (the bucket's leader
// being elected), the watcher's view answers, as the last listing left it.
func (s *Service) nodeIDs(ctx context.Context) []string {
	if s.cfg.Nodes != nil {
		lctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout/2)
		keys, err := cluster.Keys(lctx, s.cfg.Nodes)
		cancel()
		if err != nil {
			s.log.Warn("admin: node directory not listed; fanning out to the nodes last seen", "err", err)
		} else {
			nodes := map[string]bool{s.cfg.Node: true}
			for _, k := range keys {
				nodes[k] = true
			}
			s.mu.Lock()
			s.nodes = nodes
			s.mu.Unlock()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.nodes))
}

type call struct {
	op     string
	req    proto.Message
	caller string // the caller header (zonectl: user@host)
	via    string // the node that forwarded a per-node call
}

// handler decodes, runs fn and answers; a panic in fn is answered with a
// 500 and logged, never taken down the node.
func (s *Service) handler(op string, fn func(ctx context.Context, c call) (proto.Message, error)) micro.Handler {
	return micro.HandlerFunc(func(r micro.Request) {
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("admin: handler panicked (a bug)", "op", op, "panic", p)
				_ = r.Error(adminclient.CodeInternal, fmt.Sprintf("internal error in %s", op), nil)
			}
		}()
		req, err := Decode(op, r.Data())
		if err != nil {
			_ = r.Error(adminclient.CodeBadRequest, err.Error(), nil)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Settle+2*s.cfg.Timeout)
		defer cancel()
		resp, err := fn(ctx, call{op: op, req: req, caller: r.Headers().Get(adminclient.CallerHeader), via: r.Headers().Get(viaHeader)})
		if err != nil {
			code := adminclient.CodeInternal
			switch {
			case errors.Is(err, ErrBadRequest):
				code = adminclient.CodeBadRequest
			case errors.Is(err, ErrNotFound), errors.Is(err, ErrNotHere):
				code = adminclient.CodeNotFound
			case errors.Is(err, ErrUnavailable):
				code = adminclient.CodeUnavailable
			}
			_ = r.Error(code, err.Error(), nil)
			return
		}
		b, err := proto.Marshal(resp)
		if err != nil {
			_ = r.Error(adminclient.CodeInternal, err.Error(), nil)
			return
		}
		_ = r.Respond(b)
	})
}

// who is the caller for audit logs: the header (or request field), the
// NATS user class that may publish on the subject, and the forwarding node.
func (c call) who(field string) []any {
	caller := cmp.Or(field, c.caller, "unknown")
	if c.via != "" {
		return []any{"caller", caller, "nats_user", adminclient.UserAdmin, "via_node", c.via}
	}
	return []any{"caller", caller, "nats_user", adminclient.UserAdmin}
}

// nodeOp is this node's own answer to op.
func (s *Service) nodeOp(ctx context.Context, c call) (proto.Message, error) {
	switch req := c.req.(type) {
	case *pb.ListNodesRequest:
		return s.loc.info(s.worldName(), s.cfg.Version, s.cfg.Started)
	case *pb.ListZonesRequest:
		zs, err := s.loc.zones()
		return &pb.ListZonesResponse{Zones: zs}, err
	case *pb.ListPlayersRequest:
		ps, err := s.loc.players(req.Player)
		return &pb.ListPlayersResponse{Players: ps}, err
	case *pb.ClusterStatsRequest:
		ni, err := s.loc.info(s.worldName(), s.cfg.Version, s.cfg.Started)
		if err != nil {
			return nil, err
		}
		return s.loc.stats(ni), nil
	case *pb.MovePlayerRequest:
		pos := [3]float32{req.Position.GetX(), 0, req.Position.GetZ()}
		z, err := s.loc.teleport(req.Player, pos)
		if err != nil {
			return nil, fmt.Errorf("player %d: %w", req.Player, err)
		}
		s.log.Info("admin: player teleported", append([]any{"player", req.Player, "from_zone", z, "to_zone", req.Zone,
			"x", pos[0], "z", pos[2]}, c.who(req.Caller)...)...)
		return &pb.MovePlayerResponse{AppliedBy: s.cfg.Node, Player: &pb.PlayerInfo{Player: req.Player, Zone: z, Node: s.cfg.Node}}, nil
	case *pb.KickPlayerRequest:
		reason, note := KickReason(req.Reason)
		if err := s.loc.kick(req.Player, reason); err != nil {
			return nil, fmt.Errorf("player %d: %w", req.Player, err)
		}
		s.log.Info("admin: player kicked", append([]any{"player", req.Player, "reason", reason.String(), "note", note}, c.who(req.Caller)...)...)
		return &pb.KickPlayerResponse{Node: s.cfg.Node, Reason: reason.String(), Note: note}, nil
	case *pb.MoveZoneRequest:
		if s.loc.p.Held == nil {
			return nil, errors.New("admin: this node holds no zones")
		}
		if _, held := s.loc.p.Held(req.Zone); !held {
			return nil, fmt.Errorf("%w: zone %q does not run on node %q", ErrNotFound, req.Zone, s.cfg.Node)
		}
		if s.loc.p.MoveZone == nil {
			return nil, errors.New("admin: this node cannot move zones")
		}
		s.log.Warn("admin: zone moving", append([]any{"zone", req.Zone, "to", req.ToNode}, c.who(req.Caller)...)...)
		if err := s.loc.p.MoveZone(ctx, req.Zone, req.ToNode); err != nil {
			return nil, fmt.Errorf("zone %s to %s: %w", req.Zone, req.ToNode, err)
		}
		resp := &pb.MoveZoneResponse{Zone: req.Zone, FromNode: s.cfg.Node, ToNode: req.ToNode}
		// The target's claim reaches this node's directory a moment later.
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if o, ok := s.owners()[req.Zone]; ok && o.Node == req.ToNode {
				resp.Owner, resp.Epoch = o.Node, o.Epoch
				break
			}
		}
		return resp, nil
	case *pb.DrainRequest:
		if req.Node != s.cfg.Node {
			return nil, fmt.Errorf("%w: drain of node %q sent to node %q", ErrBadRequest, req.Node, s.cfg.Node)
		}
		ni, err := s.loc.info(s.worldName(), s.cfg.Version, s.cfg.Started)
		if err != nil {
			return nil, err
		}
		// A drain promises that the zones play on elsewhere: on the last
		// node it would stop them, so that takes the caller's say-so.
		var others []string
		if s.loc.p.LiveOthers != nil {
			others = s.loc.p.LiveOthers(ctx)
			if !req.Last && len(ni.Zones) > 0 && len(others) == 0 {
				return nil, fmt.Errorf("%w: node %s is the last live node: no other node would take its %d zones, so its %d players would be disconnected and the zones stop until a node starts (zonectl drain --last drains it anyway)",
					ErrBadRequest, s.cfg.Node, len(ni.Zones), ni.Players)
			}
		}
		// The zones it would hand over would stop a moment later on the
		// nodes that took them, their NATS gone: the drain's promise
		// broken, the world stopped. No --last overrides it: the other
		// nodes can be drained first.
		if s.loc.p.EmbedsNATS && len(others) > 0 {
			slices.Sort(others)
			return nil, fmt.Errorf("%w: node %s embeds the NATS server that %s use: draining it stops NATS under them, and the zones it hands over would stop with it; drain %s first (the last of them with --last), or, in a cluster, run NATS apart from zoned (zoned --nats URL)",
				ErrBadRequest, s.cfg.Node, strings.Join(others, ", "), strings.Join(others, ", "))
		}
		s.log.Warn("admin: node draining", append([]any{"node", s.cfg.Node, "zones", len(ni.Zones), "players", ni.Players, "last", req.Last}, c.who(req.Caller)...)...)
		deadline := time.Duration(req.DeadlineMs) * time.Millisecond
		// The drain stops this node, this service included: it runs after
		// the answer is on its way.
		go func() {
			ctx := context.Background()
			if deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, deadline)
				defer cancel()
			}
			if err := s.loc.drain(ctx); err != nil {
				s.log.Error("admin: drain", "node", s.cfg.Node, "err", err)
			}
		}()
		return &pb.DrainResponse{Node: s.cfg.Node, Zones: uint32(len(ni.Zones)), Players: ni.Players, State: "draining"}, nil
	}
	return nil, fmt.Errorf("%w: operation %s is cluster-wide only", ErrBadRequest, c.op)
}

func (s *Service) worldName() string {
	if s.cfg.World == nil {
		return ""
	}
	return s.cfg.World.Name()
}

// callNode runs op on node: in process for this node, over NATS otherwise.
func (s *Service) callNode(ctx context.Context, node string, c call, resp proto.Message) error {
	if node == s.cfg.Node {
		m, err := s.nodeOp(ctx, c)
		if err != nil {
			return err
		}
		proto.Merge(resp, m)
		return nil
	}
	b, err := proto.Marshal(c.req)
	if err != nil {
		return err
	}
	m := nats.NewMsg(adminclient.NodeSubject(node, c.op))
	m.Data = b
	m.Header.Set(viaHeader, s.cfg.Node)
	if c.caller != "" {
		m.Header.Set(adminclient.CallerHeader, c.caller)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	reply, err := s.cfg.NC.RequestMsgWithContext(ctx, m)
	if err != nil {
		return fmt.Errorf("%w: node %s did not answer: %v", ErrUnavailable, node, err)
	}
	if code := reply.Header.Get("Nats-Service-Error-Code"); code != "" {
		desc := reply.Header.Get("Nats-Service-Error")
		switch code {
		case adminclient.CodeNotFound:
			return fmt.Errorf("%w: node %s: %s", ErrNotFound, node, desc)
		case adminclient.CodeBadRequest:
			return fmt.Errorf("%w: node %s: %s", ErrBadRequest, node, desc)
		}
		return fmt.Errorf("%w: node %s: %s", ErrUnavailable, node, desc)
	}
	if err := proto.Unmarshal(reply.Data, resp); err != nil {
		return fmt.Errorf("%w: node %s: undecodable answer: %v", ErrUnavailable, node, err)
	}
	return nil
}

// fanout runs c on every node at once; it returns the answers by node
// and an error per node that failed.
func fanout[T proto.Message](s *Service, ctx context.Context, c call, newResp func() T) (map[string]T, []*pb.NodeError) {
	nodes := s.nodeIDs(ctx)
	out := make(map[string]T, len(nodes))
	var errs []*pb.NodeError
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := newResp()
			err := s.callNode(ctx, n, c, r)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, &pb.NodeError{Node: n, Error: err.Error()})
				return
			}
			out[n] = r
		}()
	}
	wg.Wait()
	slices.SortFunc(errs, func(a, b *pb.NodeError) int { return strings.Compare(a.Node, b.Node) })
	return out, errs
}

// cluster is the cluster-wide answer to op.
func (s *Service) cluster(ctx context.Context, c call) (proto.Message, error) {
	switch req := c.req.(type) {
	case *pb.ListNodesRequest:
		got, errs := fanout(s, ctx, c, func() *pb.NodeInfo { return new(pb.NodeInfo) })
		resp := &pb.ListNodesResponse{Errors: errs}
		for _, ni := range got {
			if tick := s.tickPeriod(); tick > 0 {
				ni.Load = ni.TickP99Ms / tick
			}
			resp.Nodes = append(resp.Nodes, ni)
		}
		slices.SortFunc(resp.Nodes, func(a, b *pb.NodeInfo) int { return strings.Compare(a.Node, b.Node) })
		return resp, nil
	case *pb.ListZonesRequest:
		return s.clusterZones(ctx, c)
	case *pb.ListPlayersRequest:
		// A filter naming no zone or node of the world is a typo, not an
		// empty world: say so, as move and move-zone do.
		if req.Zone != "" && s.cfg.World != nil {
			if _, ok := s.cfg.World.Zone(req.Zone); !ok {
				return nil, fmt.Errorf("%w: zone %q is not in world %q", ErrNotFound, req.Zone, s.worldName())
			}
		}
		if req.Node != "" && !slices.Contains(s.nodeIDs(ctx), req.Node) {
			return nil, fmt.Errorf("%w: node %q is not in the directory (zonectl nodes lists them)", ErrNotFound, req.Node)
		}
		ps, errs := s.findPlayers(ctx, c, req.Player)
		resp := &pb.ListPlayersResponse{Errors: errs}
		for _, p := range ps {
			if req.Zone != "" && p.Zone != req.Zone {
				continue
			}
			if req.Node != "" && p.Node != req.Node && p.GatewayNode != req.Node {
				continue
			}
			resp.Players = append(resp.Players, p)
			if req.Limit > 0 && len(resp.Players) >= int(req.Limit) {
				break
			}
		}
		return resp, nil
	case *pb.GetPlayerRequest:
		p, errs := s.findPlayer(ctx, c, req.Player)
		if p == nil {
			return nil, notFoundPlayer(req.Player, errs)
		}
		return &pb.GetPlayerResponse{Player: p}, nil
	case *pb.MovePlayerRequest:
		return s.move(ctx, c, req)
	case *pb.KickPlayerRequest:
		p, errs := s.findPlayer(ctx, c, req.Player)
		if p == nil || p.GatewayNode == "" {
			return nil, notFoundPlayer(req.Player, errs)
		}
		resp := new(pb.KickPlayerResponse)
		if err := s.callNode(ctx, p.GatewayNode, call{op: c.op, req: req, caller: c.caller}, resp); err != nil {
			return nil, err
		}
		return resp, nil
	case *pb.DrainRequest:
		if !slices.Contains(s.nodeIDs(ctx), req.Node) {
			return nil, fmt.Errorf("%w: node %q is not in the directory (zonectl nodes lists them)", ErrNotFound, req.Node)
		}
		resp := new(pb.DrainResponse)
		if err := s.callNode(ctx, req.Node, call{op: c.op, req: req, caller: c.caller}, resp); err != nil {
			return nil, err
		}
		return resp, nil
	case *pb.MoveZoneRequest:
		if s.cfg.World != nil {
			if _, ok := s.cfg.World.Zone(req.Zone); !ok {
				return nil, fmt.Errorf("%w: zone %q is not in world %q", ErrNotFound, req.Zone, s.worldName())
			}
		}
		if !slices.Contains(s.nodeIDs(ctx), req.ToNode) {
			return nil, fmt.Errorf("%w: node %q is not in the directory (zonectl nodes lists them)", ErrNotFound, req.ToNode)
		}
		o, ok := s.owners()[req.Zone]
		if !ok {
			return nil, fmt.Errorf("%w: zone %q has no owner right now (a node claims it within a few seconds)", ErrNotFound, req.Zone)
		}
		if o.Node == req.ToNode {
			return &pb.MoveZoneResponse{Zone: req.Zone, FromNode: o.Node, ToNode: req.ToNode, Owner: o.Node, Epoch: o.Epoch}, nil
		}
		resp := new(pb.MoveZoneResponse)
		if err := s.callNode(ctx, o.Node, call{op: c.op, req: req, caller: c.caller}, resp); err != nil {
			return nil, err
		}
		return resp, nil
	case *pb.ClusterStatsRequest:
		got, errs := fanout(s, ctx, c, func() *pb.NodeStats { return new(pb.NodeStats) })
		resp := &pb.ClusterStatsResponse{Errors: errs, World: s.worldName(), Nodes: uint32(len(got))}
		for _, st := range got {
			ni := st.Info
			resp.Zones += uint32(len(ni.GetZones()))
			resp.Players += ni.GetPlayers()
			resp.Npcs += ni.GetNpcs()
			resp.Connections += ni.GetConnections()
			resp.TickP99MsMax = math.Max(resp.TickP99MsMax, ni.GetTickP99Ms())
			resp.Handoffs += st.Handoffs
			resp.RemoteHandoffs += st.RemoteHandoffs
			resp.Teleports += st.Teleports
		}
		if s.cfg.World != nil {
			owners := s.owners()
			for _, z := range s.cfg.World.Zones() {
				if _, ok := owners[z.ID]; !ok {
					resp.ZonesUnowned++
				}
			}
		}
		return resp, nil
	}
	return nil, fmt.Errorf("%w: unknown operation %s", ErrBadRequest, c.op)
}

func (s *Service) owners() map[string]cluster.Owner {
	if s.cfg.Owners == nil {
		return nil
	}
	return s.cfg.Owners()
}

// tickPeriod is the zone tick period in milliseconds (0: unknown).
func (s *Service) tickPeriod() float64 {
	return s.cfg.Tick.Seconds() * 1000
}

func (s *Service) clusterZones(ctx context.Context, c call) (proto.Message, error) {
	got, errs := fanout(s, ctx, c, func() *pb.ListZonesResponse { return new(pb.ListZonesResponse) })
	byZone := map[string]*pb.ZoneInfo{}
	for _, r := range got {
		for _, z := range r.Zones {
			byZone[z.Zone] = z
		}
	}
	owners := s.owners()
	resp := &pb.ListZonesResponse{Errors: errs}
	add := func(id string) {
		z := byZone[id]
		if z == nil {
			z = &pb.ZoneInfo{Zone: id}
			if o, ok := owners[id]; ok {
				z.Node, z.Epoch = o.Node, o.Epoch
			}
		}
		resp.Zones = append(resp.Zones, z)
	}
	if s.cfg.World != nil {
		for _, zn := range s.cfg.World.Zones() {
			add(zn.ID)
			delete(byZone, zn.ID)
		}
	}
	for id := range byZone {
		add(id)
	}
	return resp, nil
}

// findPlayers fans out a player lookup (all players when player is 0) and
// merges each player's entity (from the node whose zone owns it) with its
// connection (from the node whose gateway holds it).
func (s *Service) findPlayers(ctx context.Context, c call, player uint64) ([]*pb.PlayerInfo, []*pb.NodeError) {
	got, errs := fanout(s, ctx, call{op: adminclient.OpPlayers, req: &pb.ListPlayersRequest{Player: player}, caller: c.caller},
		func() *pb.ListPlayersResponse { return new(pb.ListPlayersResponse) })
	merged := map[uint64]*pb.PlayerInfo{}
	for _, r := range got {
		for _, p := range r.Players {
			m := merged[p.Player]
			if m == nil {
				merged[p.Player] = p
				continue
			}
			if p.Zone != "" && (m.Zone == "" || betterEntity(p, m)) {
				m.Zone, m.Node, m.Position, m.Epoch, m.View, m.Frozen, m.LastApplied = p.Zone, p.Node, p.Position, p.Epoch, p.View, p.Frozen, p.LastApplied
			}
			if p.GatewayNode != "" {
				m.GatewayNode, m.RttMs, m.Addr, m.SessionAgeMs = p.GatewayNode, p.RttMs, p.Addr, p.SessionAgeMs
			}
		}
	}
	out := make([]*pb.PlayerInfo, 0, len(merged))
	for _, p := range merged {
		out = append(out, p)
	}
	sortPlayers(out)
	return out, errs
}

// betterEntity: mid-handoff two zones may both report the player; the one
// that is not frozen (the new owner) or has the newer epoch wins.
func betterEntity(p, than *pb.PlayerInfo) bool {
	if p.Frozen != than.Frozen {
		return !p.Frozen
	}
	return p.Epoch > than.Epoch
}

func (s *Service) findPlayer(ctx context.Context, c call, player uint64) (*pb.PlayerInfo, []*pb.NodeError) {
	ps, errs := s.findPlayers(ctx, c, player)
	for _, p := range ps {
		if p.Player == player {
			return p, errs
		}
	}
	return nil, errs
}

func notFoundPlayer(player uint64, errs []*pb.NodeError) error {
	if len(errs) > 0 {
		return fmt.Errorf("%w: player %d not found on the nodes that answered (%s did not: %s)", ErrUnavailable, player, errs[0].Node, errs[0].Error)
	}
	return fmt.Errorf("%w: player %d is not connected", ErrNotFound, player)
}

func sortPlayers(ps []*pb.PlayerInfo) {
	slices.SortFunc(ps, func(a, b *pb.PlayerInfo) int { return cmp.Compare(a.Player, b.Player) })
}

// move resolves the target, has the node whose zone owns the player
// teleport it, and waits until the player is seen settled in the target
// zone near the target position.
func (s *Service) move(ctx context.Context, c call, req *pb.MovePlayerRequest) (proto.Message, error) {
	if s.cfg.World == nil {
		return nil, fmt.Errorf("%w: no world map", ErrUnavailable)
	}
	target, pos, err := resolveTarget(s.cfg.World, req)
	if err != nil {
		return nil, err
	}
	p, errs := s.findPlayer(ctx, c, req.Player)
	if p == nil || p.Zone == "" {
		return nil, notFoundPlayer(req.Player, errs)
	}
	fwd := &pb.MovePlayerRequest{Player: req.Player, Zone: target, Position: &pb.Vec3{X: pos[0], Z: pos[1]}, Caller: cmp.Or(req.Caller, c.caller)}
	applied := new(pb.MovePlayerResponse)
	if err := s.callNode(ctx, p.Node, call{op: adminclient.OpMove, req: fwd, caller: c.caller}, applied); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(s.cfg.Settle)
	for {
		q, _ := s.findPlayer(ctx, c, req.Player)
		if q != nil && q.Zone == target && !q.Frozen && near(q.Position, pos, 25) {
			return &pb.MovePlayerResponse{Player: q, AppliedBy: applied.AppliedBy}, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			where := "gone"
			if q != nil {
				where = fmt.Sprintf("in zone %s at (%.1f, %.1f)", q.Zone, q.Position.GetX(), q.Position.GetZ())
			}
			return nil, fmt.Errorf("%w: player %d teleported by node %s, but not seen settled in zone %s within %s (now %s)",
				ErrUnavailable, req.Player, applied.AppliedBy, target, s.cfg.Settle, where)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func near(v *pb.Vec3, pos [2]float32, d float64) bool {
	dx, dz := float64(v.GetX()-pos[0]), float64(v.GetZ()-pos[1])
	return dx*dx+dz*dz <= d*d
}

// resolveTarget turns a move request into a zone and a ground position in
// it: the zone's centre when no position is given, the zone at the
// position when no zone is.
func resolveTarget(w *world.World, req *pb.MovePlayerRequest) (string, [2]float32, error) {
	if req.Position == nil {
		zn, ok := w.Zone(req.Zone)
		if !ok {
			return "", [2]float32{}, fmt.Errorf("%w: zone %q is not in world %q", ErrNotFound, req.Zone, w.Name())
		}
		r := zn.Rect
		return zn.ID, [2]float32{float32((r.Min[0] + r.Max[0]) / 2), float32((r.Min[1] + r.Max[1]) / 2)}, nil
	}
	x, z := float64(req.Position.GetX()), float64(req.Position.GetZ())
	at, ok := w.ZoneAt(x, z)
	if !ok {
		b := w.Bounds()
		return "", [2]float32{}, fmt.Errorf("%w: position (%g, %g) is outside world %q (x in [%g, %g), z in [%g, %g))",
			ErrBadRequest, x, z, w.Name(), b.Min[0], b.Max[0], b.Min[1], b.Max[1])
	}
	if req.Zone != "" && req.Zone != at.ID {
		if _, ok := w.Zone(req.Zone); !ok {
			return "", [2]float32{}, fmt.Errorf("%w: zone %q is not in world %q", ErrNotFound, req.Zone, w.Name())
		}
		return "", [2]float32{}, fmt.Errorf("%w: position (%g, %g) lies in zone %s, not %s", ErrBadRequest, x, z, at.ID, req.Zone)
	}
	return at.ID, [2]float32{float32(x), float32(z)}, nil
}
