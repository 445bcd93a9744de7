package node

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
)

// redirectWait bounds how long a stopping node waits for its clients to
// follow their Redirects: the session's RedirectTimeout (1 s) and the
// Disconnect copies of the ones that do not, with room to spare.
const redirectWait = 2 * time.Second

// redirectClients moves this node's client connections to the gateways of
// the other live nodes before its own gateway closes (issue 11, drain
// without disconnects): every client gets a Redirect with a fresh token for
// its player and resumes from its record there. With no other live node it
// does nothing, and the gateway's Close tells every client ServerShutdown,
// as before.
func (n *Node) redirectClients(ctx context.Context) {
	if n.game == nil || n.game.gw == nil || n.nats == nil {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, time.Second)
	targets, err := liveGateways(lctx, n.nats.kv[BucketNodes], n.node, time.Now())
	cancel()
	if err != nil {
		n.log.Warn("drain: live nodes not listed; clients will be disconnected", "err", err)
		return
	}
	if len(targets) == 0 {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, redirectWait)
	defer cancel()
	moved, err := n.game.gw.RedirectAll(wctx, targets)
	if err != nil {
		n.log.Warn("drain: clients redirected, some not acknowledged", "conns", moved, "targets", len(targets), "err", err)
		return
	}
	n.log.Info("drain: clients redirected", "conns", moved, "targets", len(targets))
}

// liveGateways lists the public gateway addresses of the nodes other than
// self whose record in the nodes bucket is fresh (a heartbeat within three
// heartbeats of now) and not draining, sorted. A watcher, not a key listing: it ends at the
// end of the current values instead of blocking on expiry markers.
func liveGateways(ctx context.Context, kv jetstream.KeyValue, self string, now time.Time) ([]netip.AddrPort, error) {
	if kv == nil {
		return nil, nil
	}
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("watch nodes: %w", err)
	}
	defer func() { _ = w.Stop() }()
	var out []netip.AddrPort
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("list nodes: %w", ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("list nodes: watcher closed")
			}
			if e == nil { // the current values are all in
				slices.SortFunc(out, func(a, b netip.AddrPort) int { return a.Compare(b) })
				return slices.Compact(out), nil
			}
			var rec pb.NodeRecord
			if proto.Unmarshal(e.Value(), &rec) != nil || rec.GetNode() == self {
				continue
			}
			if now.Sub(time.UnixMilli(rec.GetHeartbeatUnixMs())) >= 3*heartbeat || rec.GetDraining() {
				continue // stale or draining: that node is gone or going
			}
			a, err := netip.ParseAddrPort(rec.GetUdpAddr())
			if err != nil || a.Addr().IsUnspecified() || a.Port() == 0 {
				continue
			}
			out = append(out, a)
		}
	}
}
