package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/ghostwire/ghostwire/actors/cluster"
	"github.com/ghostwire/ghostwire/actors/zone"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
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

	mu      sync.Mutex
	proxies map[string]*actor.PID
	closed  bool

	stop chan struct{}
	wg   sync.WaitGroup
}

// liveNodes counts the nodes whose record is fresh (this one included).
func liveNodes(ctx context.Context, kv jetstream.KeyValue, self string) int {
	n := 1
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return n
	}
	cutoff := time.Now().Add(-3 * heartbeat).UnixMilli()
	for k := range keys.Keys() {
		if k == self {
			continue
		}
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue
		}
		var rec pb.NodeRecord
		if proto.Unmarshal(e.Value(), &rec) == nil && rec.GetHeartbeatUnixMs() >= cutoff && !rec.GetDraining() {
			n++
		}
	}
	return n
}

// claimInitial claims this node's zones before anything runs: the listed
// ones (each must be free: a clear error names its owner), or in auto mode
// unowned zones in map order up to a fair share of the live nodes.
func claimInitial(ctx context.Context, cfg Config, wm *world.World, leases *cluster.Leases, kvNodes jetstream.KeyValue, node string) ([]string, error) {
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
					err = fmt.Errorf("zone %s is owned by node %s (epoch %d): give it a different --zones list, or stop that node", id, o.Node, o.Epoch)
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
	return claimFair(ctx, wm, leases, kvNodes, node, 0), nil
}

// claimFair claims unowned zones until this node holds its fair share.
func claimFair(ctx context.Context, wm *world.World, leases *cluster.Leases, kvNodes jetstream.KeyValue, node string, holding int) []string {
	live := liveNodes(ctx, kvNodes, node)
	fair := (wm.Len() + live - 1) / live
	var got []string
	owners := leases.Owners()
	for _, zn := range wm.Zones() {
		if holding+len(got) >= fair {
			break
		}
		if _, ok := owners[zn.ID]; ok {
			continue
		}
		if _, err := leases.Claim(ctx, zn.ID); err == nil {
			got = append(got, zn.ID)
		}
	}
	return got
}

// start spawns a proxy under the name of every zone this node does not run,
// serves the ones it does, and starts the loop that takes orphaned zones.
func (m *membership) start(owned []string) error {
	m.proxies = map[string]*actor.PID{}
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
	m.stop = make(chan struct{})
	if m.auto {
		m.wg.Add(1)
		go m.loop()
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
	m.bridge.Unserve(id)
	m.zones.Remove(id)
	if err := m.spawnProxy(id); err != nil {
		m.log.Error("zone lost, and no proxy for it", "zone", id, "err", err)
	}
}

// take runs a zone this node just claimed.
func (m *membership) take(id string) {
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
	if err := m.zones.Spawn(id); err != nil {
		m.log.Error("claimed zone not started", "zone", id, "err", err)
		return
	}
	ep, _ := m.leases.Held(id)
	m.log.Info("zone claimed", "zone", id, "epoch", ep)
}

// loop claims zones nobody owns (a node died and its leases expired) up to
// this node's fair share.
func (m *membership) loop() {
	defer m.wg.Done()
	t := time.NewTicker(m.leases.TTL())
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), m.leases.TTL())
		m.mu.Lock()
		holding := len(m.zones.IDs())
		m.mu.Unlock()
		for _, id := range claimFair(ctx, m.wm, m.leases, m.kvNodes, m.node, holding) {
			m.take(id)
		}
		cancel()
	}
}

// close stops claiming; the caller releases the leases.
func (m *membership) close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
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
