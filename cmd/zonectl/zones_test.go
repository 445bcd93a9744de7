package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/ghostwire/ghostwire/actors/cluster"
	"github.com/ghostwire/ghostwire/actors/cluster/natstest"
	"github.com/ghostwire/ghostwire/actors/node"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/zones/world"
)

// startNATS runs a real nats-server with JetStream on a random loopback
// port, as zoned embeds it. The caller shuts it down (stopNATS, deferred
// after goleak's check so that it runs first).
func startNATS(t *testing.T) *natsserver.Server {
	t.Helper()
	return natstest.Run(t, natstest.Options(t))
}

func stopNATS(srv *natsserver.Server) {
	srv.Shutdown()
	srv.WaitForShutdown()
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeDirectory fills the buckets the way nodes do: node-a claimed x0z0
// (Create, then Update writing the epoch and its load), node-b claimed
// x1z1 (Create only: the epoch is the entry's revision) but has no node
// record, and x1z0 was claimed and released (deleted: not listed).
func writeDirectory(t *testing.T, url string) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	kvZ, err := js.CreateOrUpdateKeyValue(ctx, cluster.LeaseBucketConfig(node.BucketZones, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	kvN, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: node.BucketNodes, History: 1, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	owner := func(zone, nod string, epoch uint64, players, npcs uint32) []byte {
		return mustMarshal(t, &pb.ZoneOwner{Zone: zone, Node: nod, AcquiredUnixMs: now.UnixMilli(),
			ExpiresUnixMs: now.Add(time.Minute).UnixMilli(), Epoch: epoch, Players: players, Npcs: npcs})
	}
	expectRev := func(what string, got, want uint64) {
		t.Helper()
		if got != want {
			t.Fatalf("%s: revision %d, the test expects %d", what, got, want)
		}
	}
	rev, err := kvZ.Create(ctx, "x0z0", owner("x0z0", "node-a", 0, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	expectRev("claim x0z0", rev, 1)
	rev, err = kvZ.Update(ctx, "x0z0", owner("x0z0", "node-a", rev, 41, 50), rev)
	if err != nil {
		t.Fatal(err)
	}
	expectRev("renew x0z0", rev, 2) // the epoch stays 1
	rev, err = kvZ.Create(ctx, "x1z1", owner("x1z1", "node-b", 0, 0, 7))
	if err != nil {
		t.Fatal(err)
	}
	expectRev("claim x1z1", rev, 3)
	rev, err = kvZ.Create(ctx, "x1z0", owner("x1z0", "node-a", 0, 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := kvZ.Delete(ctx, "x1z0", jetstream.LastRevision(rev)); err != nil {
		t.Fatal(err)
	}
	if _, err := kvN.Put(ctx, "node-a", mustMarshal(t, &pb.NodeRecord{Node: "node-a", UdpAddr: "10.0.0.5:7777",
		HttpAddr: "10.0.0.5:8080", Zones: 1, Players: 41, HeartbeatUnixMs: now.UnixMilli()})); err != nil {
		t.Fatal(err)
	}
}

func zones(t *testing.T, args ...string) result {
	t.Helper()
	return runWith(t, noEnv, time.Now(), append([]string{"zones"}, args...)...)
}

func TestZonesListsDirectory(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := startNATS(t)
	defer stopNATS(srv)
	url := srv.ClientURL()
	writeDirectory(t, url)

	worldPath := filepath.Join(t.TempDir(), "world.json")
	w, err := world.Grid("test", 2, 2, 1000, [2]float64{0, 0})
	if err != nil {
		t.Fatal(err)
	}
	b, err := w.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(worldPath, b, 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "leased zones only, sorted", args: []string{"--nats", url}, want: "" +
			"ZONE  NODE    EPOCH  PLAYERS  NPCS  TICK_P99_MS  UDP_ADDR\n" +
			"x0z0  node-a  1      41       50    -            10.0.0.5:7777\n" +
			"x1z1  node-b  3      0        7     -            -\n"},
		{name: "world adds unowned zones", args: []string{"--nats", url, "--world", worldPath, "-o", "table"}, want: "" +
			"ZONE  NODE    EPOCH  PLAYERS  NPCS  TICK_P99_MS  UDP_ADDR\n" +
			"x0z0  node-a  1      41       50    -            10.0.0.5:7777\n" +
			"x0z1  -       -      -        -     -            -\n" +
			"x1z0  -       -      -        -     -            -\n" +
			"x1z1  node-b  3      0        7     -            -\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := zones(t, tc.args...)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("code %d, stderr %q", r.code, r.stderr)
			}
			if r.stdout != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", r.stdout, tc.want)
			}
		})
	}

	t.Run("json", func(t *testing.T) {
		r := zones(t, "--nats", url, "--world", worldPath, "-o", "json")
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("code %d, stderr %q", r.code, r.stderr)
		}
		var got []map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("%v in\n%s", err, r.stdout)
		}
		// The field names are an interface: scripts use them.
		unowned := func(z string) map[string]any {
			return map[string]any{"zone": z, "node": nil, "epoch": nil, "players": nil, "npcs": nil, "node_udp_addr": nil, "tick_p99_ms": nil, "level": nil, "lease_expired": nil}
		}
		want := []map[string]any{
			{"zone": "x0z0", "node": "node-a", "epoch": 1.0, "players": 41.0, "npcs": 50.0, "node_udp_addr": "10.0.0.5:7777", "tick_p99_ms": nil, "level": nil, "lease_expired": false},
			unowned("x0z1"),
			unowned("x1z0"),
			{"zone": "x1z1", "node": "node-b", "epoch": 3.0, "players": 0.0, "npcs": 7.0, "node_udp_addr": nil, "tick_p99_ms": nil, "level": nil, "lease_expired": false},
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got  %v\nwant %v", got, want)
		}
	})
}

// Read from the directory, a lease whose holder's expiry has passed is
// still in the bucket (the server's expiry is a backstop the nodes' own
// judgement comes well before): it is listed, marked lease_expired and
// said on standard error, so a dead node's zones do not read as run.
// writeDirectory's leases expire a minute after it wrote them.
func TestZonesMarksExpiredLeases(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := startNATS(t)
	defer stopNATS(srv)
	url := srv.ClientURL()
	writeDirectory(t, url)
	// x0z0 renewed once more (its value unchanged), so the bucket holds
	// x1z1 first: the notes must still come in the zones' order.
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(context.Background(), node.BucketZones)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(context.Background(), "x0z0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Update(context.Background(), "x0z0", e.Value(), e.Revision()); err != nil {
		t.Fatal(err)
	}
	r := runWith(t, noEnv, time.Now().Add(90*time.Second), "zones", "--nats", url, "-o", "json")
	if r.code != 0 {
		t.Fatalf("%+v", r)
	}
	var got []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("%v in\n%s", err, r.stdout)
	}
	if len(got) != 2 {
		t.Fatalf("%d rows, want the two leases: %v", len(got), got)
	}
	for _, row := range got {
		if row["lease_expired"] != true || row["node"] == nil {
			t.Errorf("zone %v: node %v, lease_expired %v; want its node, expired", row["zone"], row["node"], row["lease_expired"])
		}
	}
	at := -1
	for _, want := range []string{"zone x0z0: node-a's lease expired 30", "zone x1z1: node-b's lease expired 30"} {
		i := strings.Index(r.stderr, want)
		if i < 0 {
			t.Errorf("stderr %q lacks %q", r.stderr, want)
		} else if i < at {
			t.Errorf("stderr %q: the notes out of the zones' order", r.stderr)
		}
		at = i
	}
}

// A NATS with JetStream that no zoned has used has an empty directory:
// an empty listing and a note, not an error.
func TestZonesEmptyDirectory(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := startNATS(t)
	defer stopNATS(srv)
	r := zones(t, "--nats", srv.ClientURL(), "-o", "json")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "[]" || !strings.Contains(r.stderr, "no bucket ghostwire_zones") {
		t.Fatalf("%+v", r)
	}
	r = zones(t, "--nats", srv.ClientURL())
	if r.code != 0 || r.stdout != "ZONE  NODE  EPOCH  PLAYERS  NPCS  TICK_P99_MS  UDP_ADDR\n" {
		t.Fatalf("%+v", r)
	}
}

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return port
}

func TestZonesNATSUnreachable(t *testing.T) {
	url := fmt.Sprintf("nats://127.0.0.1:%d", closedPort(t))
	r := zones(t, "--nats", url, "--timeout", "2s")
	if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "cannot reach NATS at "+url) {
		t.Fatalf("%+v", r)
	}
	// A password in the URL stays out of the message.
	secret := fmt.Sprintf("nats://ops:hunter2@127.0.0.1:%d", closedPort(t))
	r = zones(t, "--nats", secret, "--timeout", "2s")
	if r.code != 1 || strings.Contains(r.stderr, "hunter2") || !strings.Contains(r.stderr, "ops:xxxxx@127.0.0.1") {
		t.Fatalf("%+v", r)
	}
}

// Usage errors exit 2 before any connection is tried (the URL points at
// nothing, which would be exit 1).
func TestZonesUsageErrors(t *testing.T) {
	nowhere := fmt.Sprintf("nats://127.0.0.1:%d", closedPort(t))
	tests := []struct {
		name string
		args []string
		msg  string
	}{
		{name: "bad output format", args: []string{"-o", "xml"}, msg: `-o "xml": want table, json or yaml`},
		{name: "unknown flag", args: []string{"--bogus"}, msg: "unknown flag"},
		{name: "stray argument", args: []string{"x0z0"}, msg: `unexpected argument "x0z0"`},
		{name: "zero timeout", args: []string{"--timeout", "0s"}, msg: "--timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := zones(t, append([]string{"--nats", nowhere}, tc.args...)...)
			if r.code != 2 || !strings.Contains(r.stderr, tc.msg) {
				t.Fatalf("want exit 2 and %q, got %+v", tc.msg, r)
			}
		})
	}
	r := zones(t, "--nats", nowhere, "--world", filepath.Join(t.TempDir(), "missing.json"))
	if r.code != 1 || !strings.Contains(r.stderr, "missing.json") {
		t.Fatalf("missing --world file: %+v", r)
	}
}

func TestZonesHelp(t *testing.T) {
	r := zones(t, "--help")
	if r.code != 0 {
		t.Fatalf("%+v", r)
	}
	for _, s := range []string{"Example", "--nats", "--timeout", "--output", "-o", "--world", defaultNATS} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("zones --help does not mention %s:\n%s", s, r.stdout)
		}
	}
	if r := runWith(t, noEnv, time.Now(), "help"); !strings.Contains(r.stdout, "zones") {
		t.Errorf("zonectl help does not list zones:\n%s", r.stdout)
	}
}

// zonectl spells the bucket names out to stay small; they must be zoned's.
func TestZonesBucketNamesMatchNode(t *testing.T) {
	if bucketZones != node.BucketZones || bucketNodes != node.BucketNodes {
		t.Fatalf("zonectl reads %s/%s, zoned writes %s/%s", bucketZones, bucketNodes, node.BucketZones, node.BucketNodes)
	}
}
