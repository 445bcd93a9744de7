package node

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/ghostwire/ghostwire/actors/cluster"
	"github.com/ghostwire/ghostwire/actors/zone"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
)

// Gateways that are gone. A player whose connection is on another node
// leaves its zone when that connection ends: the gateway's bridge sends
// the Leave. When the gateway node dies, nothing does: its players stood
// in this node's zones for good, frozen where their clients stopped,
// their records online (found by hand: 8 players left behind by a
// kill -9). The nodes' directory records tell: a record that expired
// (no heartbeat for its TTL) and stays away gatewayGoneAfter is a dead
// node; a record whose start time changed is a node that started again,
// whose old connections died with the old process (acted on
// gatewayGoneAfter later too, so that clients reconnecting take their
// players over live first). The zones here are
// then told to take out the players that joined through it before
// (zone.GatewayGone), each as a Leave(Timeout) would.

const (
	// gatewayGoneAfter: how long a node's record must stay away before its
	// connections count as gone. Longer than a NATS hiccup; a client that
	// fails over (its own timeout, 10 s by default) has reconnected
	// elsewhere by then, its new Join replacing the one taken out.
	gatewayGoneAfter = 10 * time.Second
	// gatewayCheckEvery: how often the records are read, at least; with
	// more nodes, gatewayCheckPerNode more for each: every node reads
	// every other's record, so a bigger cluster reads less often rather
	// than the directory's load growing with the square of its nodes
	// (100 nodes: every 10 s, ≈ 1,000 reads a second in all).
	gatewayCheckEvery   = 2 * time.Second
	gatewayCheckPerNode = 100 * time.Millisecond
)

// gatewaySeen is what the watch knows of another node.
type gatewaySeen struct {
	started int64     // its record's start time (Unix ms)
	absent  time.Time // when its record was first found missing (zero: present)
	// restarted: when its record was first found with a new start time
	// (zero: none pending). Its old connections' players are taken out
	// gatewayGoneAfter later: their clients reconnecting meanwhile take
	// them over live, as they did before the watch.
	restarted time.Time
	// left: the node announced a clean stop of the run the watch knew
	// (announceLeft: a drain, its clients redirected). Its leftover
	// players go all the same, but that is routine, not a warning — also
	// when it started again (a rolling restart).
	left bool
}

// watchGateways reads the nodes' records (at most every
// gatewayCheckEvery) and tells the zones here of the gateways that are
// gone. A failed read decides nothing: a node cut off from NATS must not
// take everyone's records for missing.
func (m *membership) watchGateways(ctx context.Context, now time.Time) {
	if now.Sub(m.gwChecked) < max(gatewayCheckEvery, time.Duration(len(m.gw))*gatewayCheckPerNode) || m.kvNodes == nil {
		return
	}
	m.gwChecked = now
	recs, err := nodeRecords(ctx, m.kvNodes, m.node)
	if err != nil {
		return
	}
	present := make(map[string]int64, len(recs))
	for k, rec := range recs {
		present[k] = rec.GetStartedUnixMs()
	}
	if m.gw == nil {
		m.gw = map[string]*gatewaySeen{}
	}
	for k, started := range present {
		s := m.gw[k]
		if s == nil {
			m.gw[k] = &gatewaySeen{started: started}
			continue
		}
		s.absent = time.Time{}
		if s.started != started {
			// Started again: what joined through it before this start
			// was the old process's.
			s.left = s.left || m.tookLeft(k, s.started)
			s.started, s.restarted = started, now
		}
		if !s.restarted.IsZero() && now.Sub(s.restarted) >= gatewayGoneAfter {
			s.restarted = time.Time{}
			why := "started again"
			if s.left {
				why = "stopped and started again"
			}
			m.gatewayGone(k, why, s.left, time.UnixMilli(s.started).Sub(m.origin))
			s.left = false
		}
	}
	for k, s := range m.gw {
		if _, ok := present[k]; ok {
			continue
		}
		if s.absent.IsZero() {
			s.absent, s.left = now, m.tookLeft(k, s.started)
			continue
		}
		if now.Sub(s.absent) >= gatewayGoneAfter {
			delete(m.gw, k)
			why := "no heartbeat"
			if s.left {
				why = "stopped"
			}
			m.gatewayGone(k, why, s.left, m.now())
		}
	}
}

// gatewayGone tells every zone here that the connections of node that
// joined before (the game clock) are gone.
func (m *membership) gatewayGone(node, why string, clean bool, before time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	ids := m.zones.IDs()
	for _, id := range ids {
		if pid := m.zones.PID(id); pid != nil {
			m.sys.Root.Send(pid, &zone.GatewayGone{Link: cluster.LinkID(node), Before: before})
		}
	}
	if clean {
		m.log.Info("gateway node left: the zones here take out any player that joined through it", "node", node, "why", why, "zones", len(ids))
		return
	}
	m.log.Warn("gateway node gone: the zones here take out the players that joined through it", "node", node, "why", why, "zones", len(ids))
}

// leftSubject is where a node announces its clean stop (announceLeft).
func leftSubject(world string) string { return "gw." + world + ".node-left" }

// maxLeft bounds the announced stops a node remembers: each is taken by
// the watch when the node's record goes (tookLeft); one the watch never
// saw stays, so a flood of announcements must not grow the map.
const maxLeft = 1024

// announceLeft tells the other nodes that this node stops cleanly (its
// zones handed over, its clients redirected), just before its record
// is deleted: they log its going at info level, not as a crash. The
// record's delete alone does not tell them: it ages out of the nodes
// bucket with the record's TTL (3 s), before a watch reading every few
// seconds sees it (the race detector's load showed it). Lost (NATS cut
// off), the others warn: the safe side.
func announceLeft(ctx context.Context, nc *nats.Conn, world string, rec *pb.NodeRecord) {
	b, err := proto.Marshal(&pb.NodeRecord{Node: rec.GetNode(), StartedUnixMs: rec.GetStartedUnixMs()})
	if err != nil || nc == nil {
		return
	}
	if nc.Publish(leftSubject(world), b) == nil {
		ctx, cancel := context.WithTimeout(ctx, heartbeat) // NATS out of reach: not the stop's whole budget
		defer cancel()
		_ = nc.FlushWithContext(ctx)
	}
}

// onLeft remembers another node's announced clean stop for the watch.
func (m *membership) onLeft(msg *nats.Msg) {
	var rec pb.NodeRecord
	if proto.Unmarshal(msg.Data, &rec) != nil || !cluster.ValidID(rec.GetNode()) || rec.GetNode() == m.node {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.left == nil {
		m.left = map[string]int64{}
	}
	if len(m.left) < maxLeft {
		m.left[rec.GetNode()] = rec.GetStartedUnixMs()
	}
}

// tookLeft reports (and forgets) that node announced a clean stop of its
// run that started at started.
func (m *membership) tookLeft(node string, started int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.left[node]
	delete(m.left, node)
	return ok && at == started
}
