package node

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/ghostwire/ghostwire/actors/admin/adminclient"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
)

func plainURL(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.User = nil
	return u.String()
}

// The embedded NATS wants credentials: none or a wrong password is
// refused; admin credentials call the admin API but cannot publish on the
// cluster subjects (no impersonating a node) nor reach the directory; node
// credentials cannot make cluster-wide admin calls. The dev credentials
// are written 0600 and survive a restart.
func TestEmbeddedNATSAuth(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreThrottle)
	cfg := testConfig(t)
	cfg.NodeID = "authn"
	n, err := Start(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop(context.Background())
	bare := plainURL(t, n.NATSURL())
	adminPath := filepath.Join(cfg.DataDir, AdminCredsFile)
	for _, f := range []string{AdminCredsFile, NodeCredsFile} {
		st, err := os.Stat(filepath.Join(cfg.DataDir, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, mode %v; want a 0600 file", f, err, st.Mode())
		}
	}

	if nc, err := nats.Connect(bare, nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("a connection without credentials was accepted")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("no credentials: %v, want an authorization violation", err)
	}
	if nc, err := nats.Connect(bare, nats.NoReconnect(), nats.UserInfo(adminclient.UserAdmin, "wrong")); err == nil {
		nc.Close()
		t.Fatal("a wrong password was accepted")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("wrong password: %v, want an authorization violation", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ac, err := adminclient.Connect(ctx, bare, adminPath, "test@here")
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close()
	var nodes pb.ListNodesResponse
	if err := ac.Call(ctx, adminclient.Subject(adminclient.OpNodes), &pb.ListNodesRequest{}, &nodes); err != nil || len(nodes.Nodes) != 1 {
		t.Fatalf("admin call: %v, %v", err, &nodes)
	}

	// An admin publishing as if it were a node: refused by the server, and
	// nothing reaches a node's subscriber.
	node, err := nats.Connect(n.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	var heard atomic.Int32
	sub, err := node.Subscribe("gw.>", func(*nats.Msg) { heard.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	_ = node.Flush()
	var denied atomic.Value
	spy, err := nats.Connect(bare, nats.NoReconnect(), nats.UserInfo(adminCreds(t, adminPath)),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { denied.Store(err.Error()) }))
	if err != nil {
		t.Fatal(err)
	}
	defer spy.Close()
	for _, subj := range []string{"gw.default.zone.x0z0.in", "gw.default.node.authn.conn", "$KV.ghostwire_zones.x0z0", "$JS.API.STREAM.NAMES"} {
		denied.Store("")
		_ = spy.Publish(subj, []byte("forged"))
		_ = spy.Flush()
		deadline := time.Now().Add(2 * time.Second)
		for denied.Load().(string) == "" && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if got := denied.Load().(string); !strings.Contains(strings.ToLower(got), "permissions violation") {
			t.Fatalf("admin publish on %s: error %q, want a permissions violation", subj, got)
		}
	}
	_ = node.Flush()
	if heard.Load() != 0 {
		t.Fatalf("a node heard %d forged cluster messages", heard.Load())
	}

	// Node credentials cannot make the cluster-wide admin calls.
	nc, err := adminclient.Connect(ctx, bare, filepath.Join(cfg.DataDir, NodeCredsFile), "node")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	short, cancel2 := context.WithTimeout(ctx, time.Second)
	defer cancel2()
	if err := nc.Call(short, adminclient.Subject(adminclient.OpNodes), &pb.ListNodesRequest{}, &nodes); !errors.Is(err, adminclient.ErrPermission) {
		t.Fatalf("node credentials on an admin call: %v, want ErrPermission", err)
	}

	// A restart keeps the credentials.
	before, _ := os.ReadFile(adminPath)
	if err := n.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	ac.Close()
	nc.Close()
	spy.Close()
	node.Close()
	n2, err := Start(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Stop(context.Background())
	if after, _ := os.ReadFile(adminPath); string(after) != string(before) {
		t.Fatal("a restart replaced admin.creds: zonectl's credentials went stale")
	}
}

func adminCreds(t *testing.T, path string) (string, string) {
	t.Helper()
	c, err := adminclient.ReadCreds(path)
	if err != nil {
		t.Fatal(err)
	}
	return c.User, c.Password
}

// deploy/nats/auth.conf gives an external NATS the embedded server's users
// and permissions.
func TestDeployNATSAuthMatchesEmbedded(t *testing.T) {
	t.Setenv("GHOSTWIRE_NATS_NODE_PASSWORD", "n-secret")
	t.Setenv("GHOSTWIRE_NATS_ADMIN_PASSWORD", "a-secret")
	opts, err := natsserver.ProcessConfigFile(filepath.Join("..", "..", "deploy", "nats", "auth.conf"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*natsserver.Permissions{adminclient.UserNode: NodePermissions(), adminclient.UserAdmin: AdminPermissions()}
	pw := map[string]string{adminclient.UserNode: "n-secret", adminclient.UserAdmin: "a-secret"}
	if len(opts.Users) != len(want) {
		t.Fatalf("%d users, want %d", len(opts.Users), len(want))
	}
	for _, u := range opts.Users {
		if !reflect.DeepEqual(u.Permissions, want[u.Username]) {
			t.Errorf("user %s: permissions %+v %+v, want %+v %+v", u.Username, u.Permissions.Publish, u.Permissions.Subscribe,
				want[u.Username].Publish, want[u.Username].Subscribe)
		}
		if u.Password != pw[u.Username] {
			t.Errorf("user %s: password %q not taken from the environment", u.Username, u.Password)
		}
	}
}
