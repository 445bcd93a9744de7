package node

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/ghostwire/ghostwire/actors/zone"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
)

// heartbeat is how often the node record is refreshed in the directory.
const heartbeat = 5 * time.Second

// directory keeps this node's entries in the JetStream KV world directory:
// one NodeRecord (refreshed every heartbeat with its load) and one ZoneOwner
// per zone it runs. The cluster work adds leases and watchers; until then
// the records let operators and tools see what runs where.
type directory struct {
	node  string
	kvN   jetstream.KeyValue
	kvZ   jetstream.KeyValue
	zones []string
	rec   *pb.NodeRecord
	conns func() int64

	stop chan struct{}
	wg   sync.WaitGroup
}

func nodeName(udpPort uint16) string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "zoned"
	}
	// KV keys allow [-/_=.a-zA-Z0-9].
	h = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '-'
	}, h)
	return fmt.Sprintf("%s-%d", h, udpPort)
}

func startDirectory(ctx context.Context, l *natsLink, g *game, httpAddr string) (*directory, error) {
	d := &directory{
		node: nodeName(g.gw.Addr().Port()), kvN: l.kv[BucketNodes], kvZ: l.kv[BucketZones],
		zones: g.zones.IDs(), conns: func() int64 { return g.gw.Stats().Conns }, stop: make(chan struct{}),
	}
	now := time.Now().UnixMilli()
	d.rec = &pb.NodeRecord{
		Node: d.node, UdpAddr: g.gw.PublicAddr().String(), HttpAddr: httpAddr,
		Zones: uint32(len(d.zones)), StartedUnixMs: now, HeartbeatUnixMs: now, Version: "dev",
	}
	if err := d.putNode(ctx); err != nil {
		return nil, err
	}
	for _, z := range d.zones {
		b, err := proto.Marshal(&pb.ZoneOwner{Zone: z, Node: d.node, AcquiredUnixMs: now})
		if err != nil {
			return nil, err
		}
		if _, err := d.kvZ.Put(ctx, z, b); err != nil {
			return nil, fmt.Errorf("directory: zone %s: %w", z, err)
		}
	}
	d.wg.Add(1)
	go d.loop()
	return d, nil
}

func (d *directory) putNode(ctx context.Context) error {
	d.rec.Players = uint32(max(d.conns(), 0))
	d.rec.HeartbeatUnixMs = time.Now().UnixMilli()
	b, err := proto.Marshal(d.rec)
	if err != nil {
		return err
	}
	if _, err := d.kvN.Put(ctx, d.node, b); err != nil {
		return fmt.Errorf("directory: node %s: %w", d.node, err)
	}
	return nil
}

func (d *directory) loop() {
	defer d.wg.Done()
	t := time.NewTicker(heartbeat)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), heartbeat)
			_ = d.putNode(ctx) // a missed heartbeat is retried on the next tick
			cancel()
		}
	}
}

// close stops the heartbeat and removes this node's records: a node that
// shut down cleanly owns nothing.
func (d *directory) close(ctx context.Context) {
	close(d.stop)
	d.wg.Wait()
	for _, z := range d.zones {
		_ = d.kvZ.Delete(ctx, z)
	}
	_ = d.kvN.Delete(ctx, d.node)
}

// registerZoneMetrics exports the zone actors' shared counters on /metrics.
func registerZoneMetrics(reg prometheus.Registerer, m *zone.Metrics) error {
	counters := []struct {
		name, help string
		v          func() uint64
	}{
		{"ticks_total", "zone ticks run", m.Ticks.Load},
		{"missed_ticks_total", "zone ticks skipped because the actor fell a whole period behind", m.MissedTicks.Load},
		{"views_total", "view updates sent to ghost managers", m.Views.Load},
		{"controls_total", "control-object updates sent to connections", m.Controls.Load},
		{"joins_total", "players joined", m.Joins.Load},
		{"joins_rejected_total", "player joins a zone refused (the connection is kicked)", m.JoinsRejected.Load},
		{"leaves_total", "players left", m.Leaves.Load},
		{"inputs_total", "input batches received from connections", m.Inputs.Load},
		{"inputs_dropped_total", "input batches for a player the zone does not know", m.InputsDropped.Load},
		{"events_total", "client events received", m.Events.Load},
		{"events_out_total", "events sent to clients", m.EventsOut.Load},
		{"events_out_dropped_total", "events to clients dropped by the per-tick budget", m.EventsOutDropped.Load},
		{"events_malformed_total", "client events with a malformed payload", m.EventsMalformed.Load},
		{"handoffs_in_total", "entities acquired from a neighbouring zone", m.HandoffsIn.Load},
		{"redirects_total", "connections redirected to a new owning zone", m.Redirects.Load},
		{"panics_total", "zone actors that panicked and were restarted empty (a bug: see the error log)", m.Panics.Load},
		{"tick_seconds_total", "measured zone tick cost", func() uint64 { return m.TickNanos.Load() }},
	}
	for _, q := range []float64{0.5, 0.99} {
		if err := reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "ghostwire", Subsystem: "zone", Name: "tick_cost_seconds",
			Help:        "measured zone tick cost over the most recent ticks of all zones, by quantile",
			ConstLabels: prometheus.Labels{"quantile": fmt.Sprint(q)},
		}, func() float64 { return m.TickCost.Quantiles(q)[0].Seconds() })); err != nil {
			return fmt.Errorf("zone metrics: %w", err)
		}
	}
	for _, c := range counters {
		v := c.v
		f := func() float64 { return float64(v()) }
		if c.name == "tick_seconds_total" {
			f = func() float64 { return float64(v()) / 1e9 }
		}
		if err := reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "ghostwire", Subsystem: "zone", Name: c.name, Help: c.help,
		}, f)); err != nil {
			return fmt.Errorf("zone metrics: %w", err)
		}
	}
	return nil
}
