package node

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
)

// ignoreThrottle: a message to an actor a stopping node already stopped is
// a dead letter, and protoactor's dead-letter throttle starts a goroutine
// that ends by itself after its period (a second): not a leak.
var ignoreThrottle = goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1")

func testConfig(t *testing.T) Config {
	t.Helper()
	cfg := DefaultConfig()
	cfg.UDPAddr = "127.0.0.1:0"
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.NATSListen = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	cfg.NPCs = 20
	return cfg
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The proof: ready within 2 s, clean shutdown, nothing left running.
func TestStartStop(t *testing.T) {
	// protoactor's dead-letter throttle runs a one-second timer goroutine
	// after a dead letter (a message that reached an actor as it stopped);
	// it ends by itself, after goleak's retries give up on a slow host.
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreThrottle)
	cfg := testConfig(t)
	t0 := time.Now()
	n, err := Start(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("ready after %v, want within 2s", d)
	}
	base := "http://" + n.HTTPAddr()
	if code, body := get(t, base+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	if code, body := get(t, base+"/readyz"); code != 200 || body != "ready\n" {
		t.Errorf("/readyz = %d %q", code, body)
	}
	if code, body := get(t, base+"/metrics"); code != 200 || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics = %d, want go collector output", code)
	}
	if !strings.HasPrefix(n.NATSURL(), "nats://node:") || !strings.Contains(n.NATSURL(), "@127.0.0.1:") {
		t.Errorf("NATSURL = %q, want the embedded server's loopback URL with the node credentials", n.NATSURL())
	}
	for _, b := range []string{BucketZones, BucketPlayers, BucketNodes} {
		if _, ok := n.nats.kv[b]; !ok {
			t.Errorf("bucket %s not created", b)
		}
	}
	if code, body := get(t, base+"/metrics"); code != 200 || !strings.Contains(body, "ghostwire_zone_ticks_total") {
		t.Errorf("/metrics = %d, want the zone counters", code)
	}
	// The directory names this node and every zone it runs.
	ctx := context.Background()
	if keys, err := n.nats.kv[BucketZones].Keys(ctx); err != nil || len(keys) != 4 {
		t.Errorf("zone directory keys = %v (%v), want the 4 default zones", keys, err)
	}
	if e, err := n.nats.kv[BucketNodes].Get(ctx, n.dir.node); err != nil {
		t.Errorf("node record %s: %v", n.dir.node, err)
	} else {
		var rec pb.NodeRecord
		if err := proto.Unmarshal(e.Value(), &rec); err != nil || rec.UdpAddr != n.PublicAddr().String() || rec.Zones != 4 {
			t.Errorf("node record = %v (%v), want udp %s and 4 zones", &rec, err, n.PublicAddr())
		}
	}
	if err := n.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n.Ready() {
		t.Error("Ready after Stop")
	}
	if err := n.Stop(context.Background()); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	// The HTTP port is released.
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("HTTP still answering after Stop")
	}
}

func TestConfigValidate(t *testing.T) {
	cases := map[string]func(*Config){
		"udp address":      func(c *Config) { c.UDPAddr = "nope" },
		"http address":     func(c *Config) { c.HTTPAddr = ":99999" },
		"data dir":         func(c *Config) { c.DataDir = "" },
		"tick":             func(c *Config) { c.Tick = 0 },
		"npcs":             func(c *Config) { c.NPCs = -1 },
		"max conns":        func(c *Config) { c.MaxConns = 0 },
		"shutdown timeout": func(c *Config) { c.ShutdownTimeout = 0 },
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	for want, mutate := range cases {
		c := DefaultConfig()
		mutate(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: Validate() = %v, want an error naming it", want, err)
		}
	}
}

func TestStartFailsCleanlyOnBusyPort(t *testing.T) {
	// CI caught the dead-letter throttle's goroutine here (ignoreThrottle).
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreThrottle)
	cfg := testConfig(t)
	a, err := Start(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop(context.Background())
	cfg2 := testConfig(t)
	cfg2.HTTPAddr = a.HTTPAddr()
	refusedStart(t, cfg2, "a second node on a busy HTTP port", "http listen")
}

// refusedStart starts a node with cfg, which must fail with an error that
// says every one of want (what names the case).
func refusedStart(t *testing.T, cfg Config, what string, want ...string) {
	t.Helper()
	b, err := Start(context.Background(), cfg, nil)
	if err == nil {
		b.Stop(context.Background())
		t.Fatalf("%s started", what)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not say %q", what, err, w)
		}
	}
}

// Two zoneds on one data dir would run two embedded nats-servers on one
// JetStream store: the second is refused, saying why, and starts once the
// first has stopped (the lock goes with it). A busy --nats-listen port is
// named at once, not after the server's 10 s readiness wait.
func TestDataDirIsOneNodes(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreThrottle)
	cfg := testConfig(t)
	a, err := Start(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop(context.Background()) // idempotent: stopped below too
	cfg2 := testConfig(t)
	cfg2.DataDir = cfg.DataDir
	refusedStart(t, cfg2, "a second node on the first's data dir", "is in use by another zoned", fmt.Sprintf("pid %d", os.Getpid()))

	u, err := url.Parse(a.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	cfg3 := testConfig(t)
	cfg3.NATSListen = u.Host
	// "cannot listen there" is the check's; the readiness wait's error is
	// "not ready within 10s".
	refusedStart(t, cfg3, "a second embedded NATS on a busy --nats-listen port", "--nats-listen", "cannot listen there")

	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := Start(context.Background(), cfg2, nil)
	if err != nil {
		t.Fatalf("the data dir stayed locked after its node stopped: %v", err)
	}
	b.Stop(context.Background())
}

// --public-addr takes what a Kubernetes manifest builds from the pod IP,
// "$(POD_IP):7777", for IPv4 and IPv6 pods alike.
func TestParsePublicAddr(t *testing.T) {
	for in, want := range map[string]string{
		"10.1.2.3:7777":      "10.1.2.3:7777",
		"[fd00::1]:7777":     "[fd00::1]:7777",
		"fd00::1:7777":       "[fd00::1]:7777",
		"2001:db8::a:b:7777": "[2001:db8::a:b]:7777",
	} {
		got, err := ParsePublicAddr(in)
		if err != nil || got.String() != want {
			t.Errorf("ParsePublicAddr(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "host:7777", "10.1.2.3", "fd00::1", "[fd00::1]", "10.1.2.3:99999", "fd00::1:x"} {
		if got, err := ParsePublicAddr(bad); err == nil {
			t.Errorf("ParsePublicAddr(%q) = %v, want an error", bad, got)
		}
	}
	cfg := DefaultConfig()
	cfg.PublicAddr = "fd00::1:7777"
	if err := cfg.Validate(); err != nil {
		t.Fatalf("an IPv6 pod address without brackets refused: %v", err)
	}
}
