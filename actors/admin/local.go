package admin

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/conn"
	"github.com/ghostwire/ghostwire/actors/gateway"
	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/zone"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// ErrNotHere: the player (entity or connection) is not on this node.
var ErrNotHere = errors.New("admin: not on this node")

// Drainer takes a node out of service. Today's implementation is the
// node's graceful shutdown (its zone leases are released, so the other
// nodes claim the zones); a later one may migrate zones first.
type Drainer interface {
	Drain(ctx context.Context) error
}

// ZoneMover hands a zone this node runs to another node.
type ZoneMover func(ctx context.Context, zone, toNode string) error

// DrainFunc adapts a function to Drainer.
type DrainFunc func(ctx context.Context) error

// Drain implements Drainer.
func (f DrainFunc) Drain(ctx context.Context) error { return f(ctx) }

// Parts is what the admin service reads and steers on its node.
type Parts struct {
	Sys     *actor.ActorSystem
	Gateway *gateway.Gateway
	// Zones are the zone actors running here; ZonesMu (the node's
	// membership lock) keeps their set still while they are looked at.
	Zones   *zone.World
	ZonesMu sync.Locker
	// Held is the epoch of a zone lease this node holds.
	Held     func(zone string) (uint64, bool)
	Drainer  Drainer
	MoveZone ZoneMover
	// LiveOthers lists the other live nodes (a drain's targets); nil: not
	// known, and a drain of the last node is not refused.
	LiveOthers func(ctx context.Context) []string
	// EmbedsNATS: this node's process runs the NATS server the cluster
	// uses (zoned's embedded default). A drain stops it, and with it NATS
	// for every other node: such a drain is refused while others live.
	EmbedsNATS bool
	UDPAddr    string
	HTTPAddr   func() string
	// Listed is the node's --zones list; nil: auto.
	Listed []string
}

// local is this node's side of every operation.
type local struct {
	p       Parts
	node    string
	timeout time.Duration
}

// inspect runs fn inside every zone running here, the set held still.
func (l *local) inspect(fn func(id string, z *sim.Zone)) error {
	l.p.ZonesMu.Lock()
	defer l.p.ZonesMu.Unlock()
	for _, id := range l.p.Zones.IDs() {
		pid := l.p.Zones.PID(id)
		if pid == nil {
			continue
		}
		f := zone.RequestInspect(l.p.Sys.Root, pid, func(z *sim.Zone) { fn(id, z) }, l.timeout)
		if _, err := msg.Await(f); err != nil {
			return fmt.Errorf("zone %s: %w", id, err)
		}
	}
	return nil
}

func (l *local) tickP99() float64 {
	return float64(l.p.Zones.Metrics().TickCost.Quantiles(0.99)[0]) / 1e6
}

func (l *local) zones() ([]*pb.ZoneInfo, error) {
	p99 := l.tickP99()
	var out []*pb.ZoneInfo
	err := l.inspect(func(id string, z *sim.Zone) {
		s := z.Stats()
		zi := &pb.ZoneInfo{Zone: id, Node: l.node, Players: uint32(s.Players), Npcs: uint32(s.NPCs),
			TickP99Ms: p99, Level: int32(s.Level), Tick: z.Tick()}
		if ep, ok := l.p.Held(id); ok {
			zi.Epoch = ep
		}
		out = append(out, zi)
	})
	return out, err
}

func (l *local) info(world string, version string, started time.Time) (*pb.NodeInfo, error) {
	zs, err := l.zones()
	if err != nil {
		return nil, err
	}
	ni := &pb.NodeInfo{Node: l.node, UdpAddr: l.p.UDPAddr, Version: version, World: world,
		StartedUnixMs: started.UnixMilli(), UptimeMs: time.Since(started).Milliseconds(), TickP99Ms: l.tickP99(),
		Listed: l.p.Listed, Auto: l.p.Listed == nil}
	if l.p.HTTPAddr != nil {
		ni.HttpAddr = l.p.HTTPAddr()
	}
	for _, z := range zs {
		ni.Zones = append(ni.Zones, z.Zone)
		ni.Players += z.Players
		ni.Npcs += z.Npcs
	}
	if l.p.Gateway != nil {
		ni.Connections = uint32(max(l.p.Gateway.Stats().Conns, 0))
	}
	return ni, nil
}

// players lists the players whose entity a zone here owns and those whose
// connection this node's gateway holds (one row each, merged when both
// are here); only player if it is not 0.
func (l *local) players(player uint64) ([]*pb.PlayerInfo, error) {
	rows := map[uint64]*pb.PlayerInfo{}
	err := l.inspect(func(id string, z *sim.Zone) {
		visit := func(e sim.EntityInfo) {
			if e.Kind != sim.KindPlayer || !e.Owned || sim.IsNPC(e.ID) {
				return
			}
			rows[e.ID] = &pb.PlayerInfo{Player: e.ID, Zone: id, Node: l.node, Epoch: uint64(e.Epoch), View: uint32(e.View),
				Position: &pb.Vec3{X: e.State.Pos[0], Y: e.State.Pos[1], Z: e.State.Pos[2]}, Frozen: e.Frozen, LastApplied: e.LastApplied}
		}
		if player != 0 {
			if e, ok := z.Entity(player); ok {
				visit(e)
			}
			return
		}
		z.Entities(visit)
	})
	if err != nil {
		return nil, err
	}
	if l.p.Gateway != nil {
		ss, err := l.p.Gateway.Sessions(l.timeout)
		if err != nil {
			return nil, err
		}
		type pending struct {
			row *pb.PlayerInfo
			f   *actor.Future
		}
		var ps []pending
		now := time.Now()
		for _, s := range ss {
			if player != 0 && s.Player != player {
				continue
			}
			r := rows[s.Player]
			if r == nil {
				r = &pb.PlayerInfo{Player: s.Player}
				rows[s.Player] = r
			}
			r.GatewayNode, r.SessionAgeMs = l.node, now.Sub(s.Since).Milliseconds()
			if s.Addr.IsValid() { // the connection's answer below says for sure
				r.Addr = s.Addr.String()
			}
			ps = append(ps, pending{r, l.p.Sys.Root.RequestFuture(s.PID, &conn.StatsRequest{}, l.timeout)})
		}
		for _, p := range ps {
			if res, err := msg.Await(p.f); err == nil {
				if st, ok := res.(*conn.Stats); ok {
					p.row.RttMs = float64(st.Session.RTT) / 1e6
					if st.Addr.IsValid() {
						p.row.Addr = st.Addr.String()
					}
				}
			}
		}
	}
	out := make([]*pb.PlayerInfo, 0, len(rows))
	for _, r := range rows {
		out = append(out, r)
	}
	sortPlayers(out)
	return out, nil
}

// teleport sends the teleport to the zone here that owns player.
func (l *local) teleport(player uint64, pos [3]float32) (string, error) {
	var at string
	err := l.inspect(func(id string, z *sim.Zone) {
		if e, ok := z.Entity(player); ok && e.Owned && e.Kind == sim.KindPlayer {
			at = id
		}
	})
	if err != nil {
		return "", err
	}
	if at == "" {
		return "", ErrNotHere
	}
	l.p.ZonesMu.Lock()
	pid := l.p.Zones.PID(at)
	l.p.ZonesMu.Unlock()
	if pid == nil {
		return "", ErrNotHere
	}
	// A zone that handed the player on meanwhile passes the teleport to
	// the new owner (zone.Teleport), so a race with a handoff is benign.
	l.p.Sys.Root.Send(pid, &zone.Teleport{Entity: player, Pos: pos})
	return at, nil
}

// kick ends player's connection here with reason.
func (l *local) kick(player uint64, reason handshake.Reason) error {
	if l.p.Gateway == nil {
		return ErrNotHere
	}
	ss, err := l.p.Gateway.Sessions(l.timeout)
	if err != nil {
		return err
	}
	for _, s := range ss {
		if s.Player == player {
			l.p.Sys.Root.Send(s.PID, &msg.Kick{Player: player, Reason: reason})
			return nil
		}
	}
	return ErrNotHere
}

// stats is this node's counters.
func (l *local) stats(ni *pb.NodeInfo) *pb.NodeStats {
	m := l.p.Zones.Metrics()
	return &pb.NodeStats{Info: ni, Handoffs: m.HandoffsIn.Load(), RemoteHandoffs: m.HandoffsInRemote.Load(), Teleports: m.Teleports.Load()}
}

// drain runs the Drainer; ctx bounds it.
func (l *local) drain(ctx context.Context) error {
	if l.p.Drainer == nil {
		return errors.New("admin: this node cannot be drained (no drain hook)")
	}
	return l.p.Drainer.Drain(ctx)
}
