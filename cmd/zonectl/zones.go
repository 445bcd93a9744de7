package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/ghostwire/ghostwire/actors/admin/adminclient"
	"github.com/ghostwire/ghostwire/actors/cluster"
	"github.com/ghostwire/ghostwire/actors/tokenkey"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/zones/world"
)

// The directory's buckets, as actors/node names them (BucketZones,
// BucketNodes; a test checks they agree). Spelt out here so zonectl does
// not link the whole zone server.
const (
	bucketZones = "ghostwire_zones"
	bucketNodes = "ghostwire_nodes"
)

// defaultNATS is where a dev `go run ./cmd/zoned` embeds its NATS.
const defaultNATS = "nats://127.0.0.1:4222"

const zonesHead = `zonectl zones — list the world's zones and who runs them.

Asks the admin API (every zone of the world, with its owner's tick p99);
where no zoned serves it, reads the cluster directory in NATS JetStream KV
(read-only) instead: for each zone,
the node owning its lease, the lease's epoch, and the players and NPCs the
zone had at the owner's last lease renewal. Zones are those with a lease in
the directory, sorted by id; with --world, also the map's zones nobody owns
(shown as "-", null in JSON). Read from the directory, a lease whose
holder's expiry has passed (a dead node's, until another node claims the
zone) is said on standard error and is "lease_expired": true in JSON.

Usage: zonectl zones [--nats URL] [--creds FILE] [--timeout D] [-o table|json|yaml] [--world FILE]

Example:

  $ zonectl zones --world world.json
  ZONE  NODE          EPOCH  PLAYERS  NPCS  UDP_ADDR
  x0z0  zoned-a-7777  12     41       50    10.0.0.5:7777
  x0z1  -             -      -        -     -
  x1z0  zoned-b-7777  15     3        50    10.0.0.6:7777
  x1z1  zoned-b-7777  16     0        50    10.0.0.6:7777

  $ zonectl zones -o json | jq -r '.[] | select(.node == null) | .zone'

Exit status: 0 listed, 1 runtime error (NATS unreachable, no JetStream,
unreadable --world), 2 usage error.

Flags:
`

// zoneRow is one zone in the output. Its JSON field names are stable:
// scripts depend on them. Pointers are null for a zone nobody owns (and
// node_udp_addr for an owner without a node record).
type zoneRow struct {
	Zone        string  `json:"zone" yaml:"zone"`
	Node        *string `json:"node" yaml:"node"`
	Epoch       *uint64 `json:"epoch" yaml:"epoch"`
	Players     *uint32 `json:"players" yaml:"players"`
	NPCs        *uint32 `json:"npcs" yaml:"npcs"`
	NodeUDPAddr *string `json:"node_udp_addr" yaml:"node_udp_addr"`
	// From the admin API only (null when read from the directory):
	// the owning node's zone tick p99 and the zone's overload level.
	TickP99Ms *float64 `json:"tick_p99_ms" yaml:"tick_p99_ms"`
	Level     *int32   `json:"level" yaml:"level"`
	// From the directory only (null from the admin API, whose zoned
	// judges the leases itself and lists no expired one): whether the
	// expiry its holder wrote at its last renewal has passed by
	// zonectl's clock. The bucket keeps a lease well past it (the
	// server's expiry is only a backstop: the nodes judge it), so a
	// dead node's lease stays listed until another node claims the zone.
	LeaseExpired *bool `json:"lease_expired" yaml:"lease_expired"`
}

func runZones(e env, args []string) error { return runZonesWith(e, &globals{}, args) }

func runZonesWith(e env, g *globals, args []string) error {
	fs := newFlags(e, "zones", zonesHead)
	natsURL := fs.String("nats", defaultNATS, "NATS `URL` of the cluster (the directory's JetStream KV); user:password@ in the URL authenticates")
	timeout := fs.Duration("timeout", 5*time.Second, "give up connecting and reading the directory after this long")
	output := fs.StringP("output", "o", "table", "output format: table, json or yaml")
	fs.StringVar(&g.creds, "creds", "", "credentials `FILE` (as for the admin commands); default $GHOSTWIRE_CREDS, else DATA/admin.creds")
	fs.StringVar(&g.data, "data", tokenkey.DefaultDataDir, "zoned data `DIR` whose admin.creds is used when neither --creds nor $GHOSTWIRE_CREDS is set")
	worldFile := fs.String("world", "", "world map `FILE` (JSON, as zoned --world reads): also list its zones nobody owns")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *output != "table" && *output != "json" && *output != "yaml" {
		return fmt.Errorf("%w: -o %q: want table, json or yaml", errUsage, *output)
	}
	if *timeout <= 0 {
		return fmt.Errorf("%w: --timeout %s: want a positive duration", errUsage, *timeout)
	}
	var w *world.World
	if *worldFile != "" {
		var err error
		if w, err = world.Load(*worldFile); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	g.nats, g.timeout = *natsURL, *timeout
	creds := credsPath(e, g)
	rows, err := adminZones(ctx, e, g)
	if errors.Is(err, adminclient.ErrNoService) {
		// No zoned serves the admin API here (an older one, or a bare
		// NATS): read the directory itself.
		rows, err = readZones(ctx, *natsURL, creds, *timeout, e.now(), e.stderr)
	}
	if err != nil {
		return err
	}
	if w != nil {
		rows = addUnowned(rows, w)
	}
	switch *output {
	case "json":
		return writeZonesJSON(e.stdout, rows)
	case "yaml":
		o := outputFormat{format: "yaml"}
		if rows == nil {
			rows = []zoneRow{}
		}
		return o.write(e.stdout, rows, nil)
	}
	return writeZonesTable(e.stdout, rows)
}

// adminZones lists the zones through the admin API: every zone of the
// world, unowned ones with a null node.
func adminZones(ctx context.Context, e env, g *globals) ([]zoneRow, error) {
	c, err := connect(ctx, e, g)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var zs pb.ListZonesResponse
	if err := c.Call(ctx, adminclient.Subject(adminclient.OpZones), &pb.ListZonesRequest{}, &zs); err != nil {
		return nil, err
	}
	var ns pb.ListNodesResponse
	if err := c.Call(ctx, adminclient.Subject(adminclient.OpNodes), &pb.ListNodesRequest{}, &ns); err != nil {
		return nil, err
	}
	warnNodes(e, zs.Errors)
	silent := map[string]bool{} // owners that did not answer: their counts are unknown
	for _, ne := range zs.Errors {
		silent[ne.Node] = true
	}
	udp := map[string]string{}
	for _, n := range ns.Nodes {
		udp[n.Node] = n.UdpAddr
	}
	rows := make([]zoneRow, 0, len(zs.Zones))
	for _, z := range zs.Zones {
		r := zoneRow{Zone: z.Zone}
		if z.Node != "" {
			node, epoch := z.Node, z.Epoch
			r.Node, r.Epoch = &node, &epoch
			if !silent[node] {
				players, npcs, p99, level := z.Players, z.Npcs, round3(z.TickP99Ms), z.Level
				r.Players, r.NPCs, r.TickP99Ms, r.Level = &players, &npcs, &p99, &level
			}
			if a, ok := udp[node]; ok {
				r.NodeUDPAddr = &a
			}
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b zoneRow) int { return cmp.Compare(a.Zone, b.Zone) })
	return rows, nil
}

// redact hides a password in a NATS URL for messages.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}

// readZones lists the zones with a lease, joined with their owners' node
// records, sorted by zone id; a lease whose holder's expiry is before now
// is marked and said on warn.
func readZones(ctx context.Context, natsURL, creds string, timeout time.Duration, now time.Time, warn io.Writer) ([]zoneRow, error) {
	where := redact(natsURL)
	opts := []nats.Option{nats.Name("zonectl"), nats.Timeout(timeout), nats.NoReconnect()}
	if creds != "" {
		o, err := adminclient.CredsOption(creds)
		if err != nil {
			return nil, err
		}
		opts = append(opts, o)
	}
	nc, err := nats.Connect(natsURL, opts...)
	if err != nil {
		return nil, fmt.Errorf("cannot reach NATS at %s: %w (is zoned running there? point --nats at its NATS)", where, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream at %s: %w", where, err)
	}
	zones, err := readBucket(ctx, js, bucketZones, where, warn)
	if err != nil {
		return nil, err
	}
	nodes, err := readBucket(ctx, js, bucketNodes, where, warn)
	if err != nil {
		return nil, err
	}
	udp := make(map[string]string, len(nodes))
	for _, ent := range nodes {
		var rec pb.NodeRecord
		if err := proto.Unmarshal(ent.Value(), &rec); err != nil {
			fmt.Fprintf(warn, "zonectl zones: node %s: undecodable record ignored: %v\n", ent.Key(), err)
			continue
		}
		if rec.GetUdpAddr() != "" {
			udp[ent.Key()] = rec.GetUdpAddr()
		}
	}
	// By key, so that the notes on standard error come in the rows' order.
	slices.SortFunc(zones, func(a, b jetstream.KeyValueEntry) int { return cmp.Compare(a.Key(), b.Key()) })
	rows := make([]zoneRow, 0, len(zones))
	for _, ent := range zones {
		o, ok := cluster.DecodeOwner(ent)
		if !ok {
			fmt.Fprintf(warn, "zonectl zones: zone %s: lease value is not a ZoneOwner naming a node; ignored\n", ent.Key())
			continue
		}
		var zo pb.ZoneOwner
		_ = proto.Unmarshal(ent.Value(), &zo) // DecodeOwner succeeded on the same bytes
		players, npcs := zo.GetPlayers(), zo.GetNpcs()
		r := zoneRow{Zone: o.Zone, Node: &o.Node, Epoch: &o.Epoch, Players: &players, NPCs: &npcs}
		if a, ok := udp[o.Node]; ok {
			r.NodeUDPAddr = &a
		}
		if ms := zo.GetExpiresUnixMs(); ms > 0 {
			// Judged on two clocks (the holder's and this one), so a
			// lease within their skew of its expiry may be either.
			past := now.Sub(time.UnixMilli(ms))
			expired := past > 0
			r.LeaseExpired = &expired
			if expired {
				fmt.Fprintf(warn, "zonectl zones: zone %s: %s's lease expired %s ago (no renewal since: the node is gone or cut off from NATS; another node takes the zone over once it judges the lease expired)\n",
					o.Zone, o.Node, past.Round(100*time.Millisecond))
			}
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b zoneRow) int { return cmp.Compare(a.Zone, b.Zone) })
	return rows, nil
}

// readBucket returns the live entries of a bucket. A bucket that does not
// exist yet is empty (no zoned has written the directory through this
// NATS), said on warn.
func readBucket(ctx context.Context, js jetstream.JetStream, bucket, where string, warn io.Writer) ([]jetstream.KeyValueEntry, error) {
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		fmt.Fprintf(warn, "zonectl zones: no bucket %s at %s (no zoned has written the directory there)\n", bucket, where)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("directory bucket %s at %s: %w", bucket, where, err)
	}
	// A watcher delivers every live entry with its revision (the epoch of
	// a lease without one), then nil; deleted and expired leases are
	// markers it skips.
	kw, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("read %s at %s: %w", bucket, where, err)
	}
	defer func() { _ = kw.Stop() }()
	var out []jetstream.KeyValueEntry
	for {
		select {
		case ent, ok := <-kw.Updates():
			if !ok {
				return nil, fmt.Errorf("read %s at %s: watcher closed", bucket, where)
			}
			if ent == nil {
				return out, nil
			}
			out = append(out, ent)
		case <-ctx.Done():
			return nil, fmt.Errorf("read %s at %s: %w", bucket, where, ctx.Err())
		}
	}
}

// addUnowned adds a row for every zone of w without a lease, keeping the
// rows sorted by zone id. Leased zones missing from w stay listed.
func addUnowned(rows []zoneRow, w *world.World) []zoneRow {
	have := make(map[string]bool, len(rows))
	for _, r := range rows {
		have[r.Zone] = true
	}
	for _, z := range w.Zones() {
		if !have[z.ID] {
			rows = append(rows, zoneRow{Zone: z.ID})
		}
	}
	slices.SortFunc(rows, func(a, b zoneRow) int { return cmp.Compare(a.Zone, b.Zone) })
	return rows
}

func writeZonesJSON(out io.Writer, rows []zoneRow) error {
	if rows == nil {
		rows = []zoneRow{} // [] rather than null: scripts iterate it
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(rows)
}

func writeZonesTable(out io.Writer, rows []zoneRow) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ZONE\tNODE\tEPOCH\tPLAYERS\tNPCS\tTICK_P99_MS\tUDP_ADDR")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Zone, orDash(r.Node), orDash(r.Epoch), orDash(r.Players), orDash(r.NPCs), orDash(r.TickP99Ms), orDash(r.NodeUDPAddr))
	}
	return tw.Flush()
}

func orDash[T any](p *T) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}
