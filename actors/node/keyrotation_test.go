package node

import (
	"context"
	crand "crypto/rand"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ghostwire/ghostwire/actors/tokenkey"
	"github.com/ghostwire/ghostwire/client"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
)

// A token-key rotation rolls through a cluster without refusing anyone
// (docs/operations.md, Rotating the token key). Midway through its
// second step, n1 holds "old, new" (it opens both, mints with old) and n2
// holds "new, old" (it mints with new). Clients holding tokens under
// either key join n2; a token under a key neither holds is refused. Then
// n2 drains: it seals its clients' Redirect tokens with new, and n1 —
// which only holds new as its second key — opens them, so every client
// plays on. Each gateway counts its sessions by the key that opened them.
// Before key files held more than one key, n1 refused the redirects and
// the drain disconnected every client.
func TestKeyRotationRollsThroughADrain(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreThrottle)
	oldKey, newKey, strange := mustKey(t), mustKey(t), mustKey(t)
	keyFile := func(ks ...tokenkey.Key) string {
		var b []byte
		b = append(b, "# a rotation's key file: the first mints, every one opens\n"...)
		for _, k := range ks {
			b = append(b, tokenkey.Encode(k)...)
		}
		path := filepath.Join(t.TempDir(), "token.key")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	files := []string{keyFile(oldKey, newKey), keyFile(newKey, oldKey)}
	var nodes []*Node
	defer func() { stopAll(nodes) }()
	for i, zones := range []string{"x0z0,x1z0", "x0z1,x1z1"} {
		cfg := testConfig(t)
		cfg.NodeID, cfg.Zones, cfg.KeyFile = "n"+string(rune('1'+i)), zones, files[i]
		cfg.ShutdownTimeout = Duration(20 * time.Second) // see TestDrainRedirectsClientsWithoutDisconnects
		if i > 0 {
			cfg.NATSURL = nodes[0].NATSURL()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		n, err := Start(ctx, cfg, nil)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	n1, n2 := nodes[0], nodes[1]
	if n1.TokenKey() != oldKey || n2.TokenKey() != newKey {
		t.Fatal("a node mints with another key than its file's first")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	token := func(k tokenkey.Key, player uint64) []byte {
		tok, err := handshake.IssueToken(k, handshake.TokenParams{
			PlayerID: player, ProtocolID: tokenkey.DefaultProtocolID, Expiry: time.Minute,
			Timeout: 10 * time.Second, ServerAddrs: []netip.AddrPort{n2.PublicAddr()},
		}, time.Now(), crand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	if _, err := client.Dial(ctx, n2.PublicAddr().String(), token(strange, 9)); !errors.Is(err, handshake.ErrBadToken) {
		t.Fatalf("a token under a key n2 does not hold: %v, want bad token", err)
	}
	var redirects atomic.Int64
	var ss []*client.Session
	defer func() {
		for _, s := range ss {
			_ = s.Close(context.Background())
		}
	}()
	for i, k := range []tokenkey.Key{newKey, oldKey} {
		s, err := client.Dial(ctx, n2.PublicAddr().String(), token(k, uint64(101+i)),
			client.OnRedirect(func(client.Redirected) { redirects.Add(1) }))
		if err != nil {
			t.Fatalf("token %d: %v", i, err)
		}
		ss = append(ss, s)
		if err := s.SetInput(move.Move{Forward: 10}); err != nil {
			t.Fatal(err)
		}
	}
	acked := func(s *client.Session, n uint64) bool { return s.Err() == nil && s.Stats().Moves.LastAck >= n }
	waitFor(t, 15*time.Second, "both clients playing on n2", func() bool {
		return !slices.ContainsFunc(ss, func(s *client.Session) bool { return !acked(s, 30) })
	})
	fpOld, fpNew := tokenkey.Fingerprint(oldKey), tokenkey.Fingerprint(newKey)
	if got := n2.Gateway().Stats().TokenKeys; got[fpNew] != 1 || got[fpOld] != 1 || len(got) != 2 {
		t.Fatalf("n2's sessions by key %v, want one under each of new %s and old %s", got, fpNew, fpOld)
	}

	before := []uint64{ss[0].Stats().Moves.LastAck, ss[1].Stats().Moves.LastAck}
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 20*time.Second)
	err := n2.Stop(stopCtx)
	stopCancel()
	if err != nil {
		t.Fatalf("n2 stop: %v", err)
	}
	for i, s := range ss {
		if s.Server() != n1.PublicAddr() || s.Stats().Redirects != 1 {
			t.Fatalf("client %d: on %v after %d redirects (err %v), want n1 %v", i, s.Server(), s.Stats().Redirects, s.Err(), n1.PublicAddr())
		}
	}
	waitFor(t, 20*time.Second, "both clients playing on n1", func() bool {
		return acked(ss[0], before[0]+30) && acked(ss[1], before[1]+30)
	})
	if got := n1.Gateway().Stats().TokenKeys; got[fpNew] != 2 || got[fpOld] != 0 {
		t.Fatalf("n1's sessions by key %v, want both redirects under new %s", got, fpNew)
	}
	if redirects.Load() != 2 {
		t.Fatalf("%d redirects, want 2", redirects.Load())
	}
}

func mustKey(t *testing.T) tokenkey.Key {
	t.Helper()
	k, err := tokenkey.Generate(crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// A running node reads its key file again when it changes (a mounted
// Kubernetes Secret updated in place): a rotation's three steps then need
// no restart. A file that does not parse leaves the keys in use; the
// clients already connected are not touched.
func TestKeyFileReloadedWhileRunning(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreThrottle)
	oldKey, newKey := mustKey(t), mustKey(t)
	path := filepath.Join(t.TempDir(), "token.key")
	write := func(content []byte) {
		// As the kubelet does: the new content appears at once (a rename).
		tmp := path + ".new"
		if err := os.WriteFile(tmp, content, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	keys := func(ks ...tokenkey.Key) []byte {
		var b []byte
		for _, k := range ks {
			b = append(b, tokenkey.Encode(k)...)
		}
		return b
	}
	write(keys(oldKey))
	cfg := testConfig(t)
	cfg.KeyFile, cfg.keyReload = path, 50*time.Millisecond
	n, err := Start(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	player := uint64(100)
	dial := func(k tokenkey.Key) (*client.Session, error) {
		player++
		tok, err := handshake.IssueToken(k, handshake.TokenParams{
			PlayerID: player, ProtocolID: tokenkey.DefaultProtocolID, Expiry: time.Minute,
			Timeout: 10 * time.Second, ServerAddrs: []netip.AddrPort{n.PublicAddr()},
		}, time.Now(), crand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return client.Dial(ctx, n.PublicAddr().String(), tok)
	}
	var ss []*client.Session
	defer func() {
		for _, s := range ss {
			_ = s.Close(context.Background())
		}
	}()
	connects := func(k tokenkey.Key, what string) {
		t.Helper()
		s, err := dial(k)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		ss = append(ss, s)
	}
	refused := func(k tokenkey.Key, what string) {
		t.Helper()
		if _, err := dial(k); !errors.Is(err, handshake.ErrBadToken) {
			t.Fatalf("%s: %v, want bad token", what, err)
		}
	}
	holds := func(want ...tokenkey.Key) {
		t.Helper()
		fps := tokenkey.Keys(want).Fingerprints()
		waitFor(t, 10*time.Second, "the node to hold "+strings.Join(fps, ","), func() bool {
			return slices.Equal(n.Gateway().Stats().KeysHeld, fps) && n.TokenKey() == want[0]
		})
	}

	connects(oldKey, "old key before the rotation")
	refused(newKey, "new key before the rotation")
	write(append([]byte("# step 1\n"), keys(oldKey, newKey)...))
	holds(oldKey, newKey)
	connects(newKey, "new key in step 1")
	write(keys(newKey, oldKey))
	holds(newKey, oldKey)
	connects(oldKey, "old key in step 2")

	write([]byte("not a key\n"))
	write(keys(newKey, newKey))        // refused too: a key twice
	time.Sleep(300 * time.Millisecond) // six reads of the file
	holds(newKey, oldKey)
	connects(oldKey, "old key after a refused file")

	write(keys(newKey))
	holds(newKey)
	refused(oldKey, "old key after the rotation")
	connects(newKey, "new key after the rotation")
	for i, s := range ss {
		if s.Err() != nil {
			t.Fatalf("session %d ended: %v", i, s.Err())
		}
	}
	if got := n.Gateway().Stats().TokenKeys; got[tokenkey.Fingerprint(newKey)] != 2 || len(got) != 1 {
		t.Fatalf("sessions by key %v, want 2 under the new key", got)
	}
}
