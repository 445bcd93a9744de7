package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.yaml.in/yaml/v3"

	"github.com/ghostwire/ghostwire/actors/node"
	"github.com/ghostwire/ghostwire/actors/tokenkey"
	"github.com/ghostwire/ghostwire/client"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/session"
)

var ignoreThrottle = goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1")

func nodeConfig(t *testing.T, id, zones string) node.Config {
	t.Helper()
	cfg := node.DefaultConfig()
	cfg.UDPAddr, cfg.HTTPAddr, cfg.NATSListen = "127.0.0.1:0", "", "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	cfg.NPCs = 8
	cfg.NodeID, cfg.Zones = id, zones
	return cfg
}

func startNode(t *testing.T, cfg node.Config) *node.Node {
	t.Helper()
	return startNodeLog(t, cfg, nil)
}

func startNodeLog(t *testing.T, cfg node.Config, log *slog.Logger) *node.Node {
	t.Helper()
	// As zoned does: the start context ends once the node is up, and
	// nothing the node keeps running may depend on it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	n, err := node.Start(ctx, cfg, log)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func mintFor(t *testing.T, n *node.Node, player uint64) []byte {
	t.Helper()
	tok, err := handshake.IssueToken(n.TokenKey(), handshake.TokenParams{
		PlayerID: player, ProtocolID: tokenkey.DefaultProtocolID, Expiry: time.Minute,
		Timeout: 10 * time.Second, ServerAddrs: []netip.AddrPort{n.PublicAddr()},
	}, time.Now(), crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func dial(t *testing.T, n *node.Node, player uint64) *client.Session {
	t.Helper()
	tok := mintFor(t, n, player)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := client.Dial(ctx, n.PublicAddr().String(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetInput(move.Move{Forward: 20, Dt: 32}); err != nil {
		t.Fatal(err)
	}
	return s
}

// syncBuffer is a bytes.Buffer safe for the node's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// bareURL is the node's NATS URL without the node credentials it carries.
func bareURL(t *testing.T, n *node.Node) string {
	t.Helper()
	u, err := neturl.Parse(n.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	u.User = nil
	return u.String()
}

// ctl runs zonectl against n's NATS with the dev credentials of dataDir.
func ctl(t *testing.T, url, dataDir string, args ...string) result {
	t.Helper()
	return runWith(t, noEnv, time.Now(), append([]string{"--nats", url, "--data", dataDir, "--timeout", "8s"}, args...)...)
}

func ctlJSON(t *testing.T, v any, url, dataDir string, args ...string) {
	t.Helper()
	r := ctl(t, url, dataDir, append(args, "-o", "json")...)
	if r.code != 0 {
		t.Fatalf("zonectl %v: %+v", args, r)
	}
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("zonectl %v: %v in\n%s", args, err, r.stdout)
	}
}

func waitUntil(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Every admin command against a one-node world, output parsed: the node
// runs the whole world, two clients play; move teleports one into another
// zone while it stays connected; kick ends the other's session with the
// reason; drain stops the node.
func TestAdminOneNode(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreThrottle)
	cfg := nodeConfig(t, "solo", "auto")
	var logs syncBuffer
	n := startNodeLog(t, cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	defer n.Stop(context.Background())
	url, dir := bareURL(t, n), cfg.DataDir
	// Players 4 and 9 join different zones (ZoneFor: x0z0 and x1z1), so
	// players --zone lists one of them.
	a, b := dial(t, n, 4), dial(t, n, 9)
	defer a.Close(context.Background())
	defer b.Close(context.Background())

	var players []playerRow
	waitUntil(t, 5*time.Second, "both players listed with their connections", func() bool {
		players = nil
		ctlJSON(t, &players, url, dir, "players")
		return len(players) == 2 && players[0].Zone != "" && players[1].Zone != "" && players[0].GatewayNode == "solo"
	})
	if players[0].Player != 4 || players[1].Player != 9 || players[0].Node != "solo" || players[0].SessionAgeS < 0 {
		t.Fatalf("players: %+v", players)
	}
	// Each player's address is its client's (the connection's own, not
	// "invalid AddrPort" where the gateway's address table has none).
	for i, s := range []*client.Session{a, b} {
		ap, err := netip.ParseAddrPort(players[i].Addr)
		if err != nil || int(ap.Port()) != s.LocalAddr().(*net.UDPAddr).Port {
			t.Fatalf("player %d: addr %q (%v), want its client's %v", players[i].Player, players[i].Addr, err, s.LocalAddr())
		}
	}

	var nodes []nodeRow
	ctlJSON(t, &nodes, url, dir, "nodes")
	if len(nodes) != 1 || nodes[0].Node != "solo" || len(nodes[0].Zones) != 4 || nodes[0].Connections != 2 || nodes[0].Players != 2 || nodes[0].UDPAddr == "" || !nodes[0].Auto || nodes[0].Listed == nil {
		t.Fatalf("nodes: %+v", nodes)
	}
	if r := ctl(t, url, dir, "nodes"); r.code != 0 || len(strings.Fields(r.stdout)) < 15 || strings.Fields(r.stdout)[3] != "CLAIMS" || strings.Fields(r.stdout)[14] != "auto" {
		t.Fatalf("nodes table: %+v, want an auto node's CLAIMS column", r)
	}
	var zones []map[string]any
	ctlJSON(t, &zones, url, dir, "zones")
	if len(zones) != 4 {
		t.Fatalf("zones: %v", zones)
	}
	for _, z := range zones {
		if z["node"] != "solo" || z["epoch"] == nil || z["tick_p99_ms"] == nil || z["node_udp_addr"] == nil {
			t.Fatalf("zone: %v", z)
		}
	}
	var one []playerRow
	ctlJSON(t, &one, url, dir, "players", "--zone", players[0].Zone)
	if len(one) != 1 || one[0].Player != 4 {
		t.Fatalf("players --zone %s: %+v", players[0].Zone, one)
	}
	r := ctl(t, url, dir, "player", "4", "-o", "yaml")
	var p playerRow
	if err := yaml.Unmarshal([]byte(r.stdout), &p); r.code != 0 || err != nil || p.Player != 4 || p.Zone != players[0].Zone {
		t.Fatalf("player 4 -o yaml: %+v, %v", r, err)
	}
	if r := ctl(t, url, dir, "player", "4"); r.code != 0 || !strings.Contains(r.stdout, "PLAYER") {
		t.Fatalf("player 4: %+v", r)
	}

	// move: into another zone, at a given position.
	target := "x1z1"
	if players[0].Zone == target {
		target = "x0z0"
	}
	var moved playerRow
	ctlJSON(t, &moved, url, dir, "move", "4", "--to", target)
	if moved.Zone != target || moved.Player != 4 {
		t.Fatalf("move 4 --to %s: %+v", target, moved)
	}
	if a.Err() != nil {
		t.Fatalf("the moved client lost its session: %v", a.Err())
	}
	acked := a.Stats().Moves.Acked
	waitUntil(t, 3*time.Second, "the moved client's moves acknowledged again", func() bool { return a.Stats().Moves.Acked > acked+5 })

	var st statsRow
	ctlJSON(t, &st, url, dir, "stats")
	if st.Nodes != 1 || st.Zones != 4 || st.ZonesUnowned != 0 || st.Players != 2 || st.Teleports == 0 {
		t.Fatalf("stats: %+v", st)
	}
	if r := ctl(t, url, dir, "watch", "--count", "1"); r.code != 0 || !strings.Contains(r.stdout, "solo") {
		t.Fatalf("watch: %+v", r)
	}

	// kick: the client hears the reason.
	if r := ctl(t, url, dir, "kick", "9", "--reason", "server shutdown"); r.code != 0 || !strings.Contains(r.stdout, "server shutdown") {
		t.Fatalf("kick: %+v", r)
	}
	select {
	case <-b.Done():
	case <-time.After(3 * time.Second):
		t.Fatal("the kicked client's session did not end")
	}
	var de *session.DisconnectError
	if !errors.As(b.Err(), &de) || de.Reason != handshake.ReasonServerShutdown {
		t.Fatalf("kicked client ended with %v, want a Disconnect with reason server shutdown", b.Err())
	}

	// Every mutating call is in the node's log with who asked.
	for _, want := range []string{
		`msg="admin: player teleported" component=admin player=4`,
		`msg="admin: player kicked" component=admin player=9 reason="server shutdown"`,
	} {
		if got := logs.String(); !strings.Contains(got, want) || !strings.Contains(got, "caller=") || !strings.Contains(got, "nats_user=admin") {
			t.Fatalf("node log lacks %s with caller and nats_user:\n%s", want, got)
		}
	}

	// Clear errors for what does not exist.
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown player", []string{"player", "999"}, 1, "player 999 is not connected"},
		{"move unknown player", []string{"move", "999", "--to", "x0z0"}, 1, "player 999"},
		{"zone not in world", []string{"move", "4", "--to", "nowhere"}, 1, `zone "nowhere" is not in world`},
		{"position outside world", []string{"move", "4", "--pos", "99999,0"}, 1, "outside world"},
		{"kick unknown player", []string{"kick", "999"}, 1, "player 999"},
		{"drain unknown node", []string{"drain", "ghost"}, 1, `node "ghost" is not in the directory`},
		{"players of a zone not in world", []string{"players", "--zone", "x9z9"}, 1, `zone "x9z9" is not in world`},
		{"players of an unknown node", []string{"players", "--node", "ghost"}, 1, `node "ghost" is not in the directory`},
		{"player id not a number", []string{"player", "x"}, 2, "want a player id"},
		{"move without target", []string{"move", "4"}, 2, "--to ZONE"},
		{"bad output", []string{"nodes", "-o", "xml"}, 2, "want table, json or yaml"},
		{"bad pos", []string{"move", "4", "--pos", "1"}, 2, "want X,Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ctl(t, url, dir, tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("zonectl %v: want exit %d and %q on stderr, got %+v", tc.args, tc.code, tc.want, r)
			}
		})
	}

	// Without credentials, with a wrong password, with node credentials:
	// refused, with a message that says what to do.
	empty := t.TempDir()
	wrong := filepath.Join(empty, "wrong.creds")
	if err := os.WriteFile(wrong, []byte("user: admin\npassword: guessed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no credentials", []string{"--nats", url, "--data", empty, "nodes"}, "wants credentials"},
		{"wrong password", []string{"--nats", url, "--creds", wrong, "kick", "4"}, "refused the credentials"},
		{"node credentials", []string{"--nats", url, "--creds", filepath.Join(dir, node.NodeCredsFile), "--timeout", "1s", "move", "4", "--to", "x0z0"}, "may not call the admin API"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runWith(t, noEnv, time.Now(), tc.args...)
			if r.code != 1 || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("zonectl %v: want exit 1 and %q, got %+v", tc.args, tc.want, r)
			}
		})
	}
	if r := runWith(t, map[string]string{"GHOSTWIRE_CREDS": filepath.Join(dir, node.AdminCredsFile)}, time.Now(),
		"--nats", url, "--data", empty, "stats"); r.code != 0 {
		t.Fatalf("credentials from GHOSTWIRE_CREDS: %+v", r)
	}

	// kick with free text: the client hears "kicked", the node logs the
	// note, and zonectl says both (the note is not dropped).
	if r := ctl(t, url, dir, "kick", "4", "--reason", "spamming, ticket 1234"); r.code != 0 ||
		!strings.Contains(r.stdout, `(reason "kicked"; note "spamming, ticket 1234" logged)`) {
		t.Fatalf("kick with a note: %+v", r)
	}
	select {
	case <-a.Done():
	case <-time.After(3 * time.Second):
		t.Fatal("the client kicked with a note: its session did not end")
	}
	if !errors.As(a.Err(), &de) || de.Reason != handshake.ReasonKicked {
		t.Fatalf("client kicked with a note ended with %v, want a Disconnect with reason kicked", a.Err())
	}
	if got := logs.String(); !strings.Contains(got, `note="spamming, ticket 1234"`) {
		t.Fatalf("node log lacks the kick's note:\n%s", got)
	}

	// The world's only node: no other would take its zones, so a plain
	// drain is refused and the node plays on; --last drains it.
	if r := ctl(t, url, dir, "drain", "solo"); r.code != 1 || !strings.Contains(r.stderr, "node solo is the last live node") || !strings.Contains(r.stderr, "--last") {
		t.Fatalf("drain of the last node: want exit 1 and the reason, got %+v", r)
	}
	select {
	case <-n.Done():
		t.Fatal("a refused drain stopped the node")
	case <-time.After(200 * time.Millisecond):
	}
	if r := ctl(t, url, dir, "stats"); r.code != 0 {
		t.Fatalf("stats after a refused drain: %+v", r)
	}
	if r := ctl(t, url, dir, "drain", "solo", "--last"); r.code != 0 || !strings.Contains(r.stdout, "draining") {
		t.Fatalf("drain --last: %+v", r)
	}
	select {
	case <-n.Done():
	case <-time.After(8 * time.Second):
		t.Fatal("the drained node did not stop")
	}
}
