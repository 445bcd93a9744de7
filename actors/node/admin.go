package node

import (
	"context"
	"time"

	"github.com/ghostwire/ghostwire/actors/admin"
	"github.com/ghostwire/ghostwire/zones/world"
)

// startAdmin serves the admin API (actors/admin) on the node's NATS
// connection, over the node's zones, gateway and directory.
func (n *Node) startAdmin(ctx context.Context, wm *world.World) (*admin.Service, error) {
	g := n.game
	return admin.Start(ctx, admin.Config{
		NC: n.nats.nc, Node: n.node, World: wm, Version: "dev", Started: time.Now(),
		Nodes: n.nats.kv[BucketNodes], Owners: n.leases.Owners, Tick: n.cfg.Tick.D(),
		Log: n.log.With("component", "admin"),
		Parts: admin.Parts{
			Sys: g.sys, Gateway: g.gw, Zones: g.zones, ZonesMu: &n.member.mu, Held: n.leases.Held,
			UDPAddr: g.gw.PublicAddr().String(), HTTPAddr: n.HTTPAddr,
			// A drain is the graceful shutdown: the zones are handed to the
			// other live nodes first (drain.go).
			Drainer:    admin.DrainFunc(n.Stop),
			MoveZone:   n.MoveZone,
			LiveOthers: n.member.liveOthers,
			EmbedsNATS: n.nats.srv != nil,
			Listed:     n.member.want,
		},
	})
}
