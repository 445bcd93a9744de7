package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/tokenkey"
	"github.com/ghostwire/ghostwire/replication/handshake"
)

type result struct {
	code           int
	stdout, stderr string
}

func runWith(t *testing.T, environ map[string]string, now time.Time, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := runEnv(args, env{
		stdout: &out, stderr: &errb,
		getenv: func(k string) string { return environ[k] },
		rand:   rand.Reader,
		now:    func() time.Time { return now },
	})
	return result{code, out.String(), errb.String()}
}

var noEnv = map[string]string{}

func TestKeygenWritesLoadableKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token.key")
	if r := runWith(t, noEnv, time.Now(), "keygen", "--out", path); r.code != 0 {
		t.Fatalf("keygen: %+v", r)
	}
	k, err := tokenkey.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	r := runWith(t, noEnv, time.Now(), "keygen", "--out", path, "--force")
	k2, err := tokenkey.Load(path)
	if r.code != 0 || err != nil || k2 == k || r.stderr != "wrote "+path+": key "+tokenkey.Fingerprint(k2)+"\n" {
		t.Fatalf("keygen --force: %+v, %v", r, err)
	}
	if r := runWith(t, noEnv, time.Now(), "keygen", "--out", path); r.code != 1 || !strings.Contains(r.stderr, "exists") {
		t.Fatalf("keygen over an existing file must fail: %+v", r)
	}
	if r := runWith(t, noEnv, time.Now(), "keygen", "--out", path, "--force"); r.code != 0 {
		t.Fatalf("keygen --force: %+v", r)
	}
	r = runWith(t, noEnv, time.Now(), "keygen")
	k3, err := tokenkey.Parse([]byte(r.stdout))
	if r.code != 0 || err != nil || r.stderr != "key "+tokenkey.Fingerprint(k3)+"\n" {
		t.Fatalf("keygen to stdout: %+v, %v", r, err)
	}
}

// A minted token opens under the key at the listed server with the claims
// the flags asked for.
func TestTokenOpensWithClaims(t *testing.T) {
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "k")
	if r := runWith(t, noEnv, time.Now(), "keygen", "--out", keyPath); r.code != 0 {
		t.Fatal(r)
	}
	key, _ := tokenkey.Load(keyPath)
	now := time.Now()
	server := netip.MustParseAddrPort("10.0.0.7:7000")

	r := runWith(t, noEnv, now, "token", "--player", "42", "--key", keyPath,
		"--server", "10.0.0.7:7000", "--server", "10.0.0.8:7000", "--ttl", "90s", "--timeout", "5s",
		"--protocol", "77", "--user-data", "guild=red")
	if r.code != 0 {
		t.Fatalf("token: %+v", r)
	}
	tok, err := base64.StdEncoding.DecodeString(strings.TrimSpace(r.stdout))
	if err != nil {
		t.Fatal(err)
	}
	c, err := handshake.OpenToken(key, tok, now, server)
	if err != nil {
		t.Fatal(err)
	}
	if c.PlayerID != 42 || c.ProtocolID != 77 || c.Timeout != 5*time.Second ||
		string(c.UserData[:c.UserDataLen]) != "guild=red" || c.NumServers != 2 {
		t.Fatalf("claims = %+v", c)
	}
	if got := c.ExpiresAt().Sub(now); got < 89*time.Second || got > 91*time.Second {
		t.Fatalf("expires in %v, want 90s", got)
	}
	if _, err := handshake.OpenToken(key, tok, now.Add(2*time.Minute), server); err == nil {
		t.Fatal("token must expire")
	}
}

func TestTokenKeySources(t *testing.T) {
	dataDir := t.TempDir()
	devKeys, _, err := tokenkey.EnsureDev(dataDir, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	devKey := devKeys.Mint()
	envKey := tokenkey.Key{5}
	server := netip.MustParseAddrPort("127.0.0.1:7777")
	now := time.Now()
	open := func(t *testing.T, r result, k tokenkey.Key, format string) {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("token: %+v", r)
		}
		var tok []byte
		switch format {
		case "hex":
			tok, _ = hex.DecodeString(strings.TrimSpace(r.stdout))
		case "raw":
			tok = []byte(r.stdout)
		}
		if _, err := handshake.OpenToken(k, tok, now, server); err != nil {
			t.Fatalf("token does not open under the expected key: %v", err)
		}
	}
	t.Run("dev key from --data", func(t *testing.T) {
		open(t, runWith(t, noEnv, now, "token", "--player", "1", "--data", dataDir, "--format", "hex"), devKey, "hex")
	})
	t.Run("env beats dev key", func(t *testing.T) {
		environ := map[string]string{tokenkey.EnvVar: string(tokenkey.Encode(envKey))}
		open(t, runWith(t, environ, now, "token", "--player", "1", "--data", dataDir, "--format", "raw"), envKey, "raw")
	})
	t.Run("--out writes raw", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "tok")
		r := runWith(t, noEnv, now, "token", "--player", "1", "--data", dataDir, "--out", out)
		if r.code != 0 {
			t.Fatal(r)
		}
		tok, _ := os.ReadFile(out)
		if _, err := handshake.OpenToken(devKey, tok, now, server); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("no key anywhere", func(t *testing.T) {
		r := runWith(t, noEnv, now, "token", "--player", "1", "--data", t.TempDir())
		if r.code != 1 || !strings.Contains(r.stderr, "no token key") {
			t.Fatalf("%+v", r)
		}
	})
}

func TestUsageErrors(t *testing.T) {
	dataDir := t.TempDir()
	if _, _, err := tokenkey.EnsureDev(dataDir, rand.Reader); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no command", nil, 2, "Commands:"},
		{"unknown command", []string{"frobnicate"}, 2, "unknown command"},
		{"missing player", []string{"token", "--data", dataDir}, 2, "--player is required"},
		{"bad player", []string{"token", "--player", "-3", "--data", dataDir}, 2, "unsigned"},
		{"bad server", []string{"token", "--player", "1", "--server", "localhost", "--data", dataDir}, 2, "ip:port"},
		{"ttl too long", []string{"token", "--player", "1", "--ttl", "2h", "--data", dataDir}, 2, "invalid token params"},
		{"bad format", []string{"token", "--player", "1", "--format", "pem", "--data", dataDir}, 2, "--format"},
		{"unknown flag", []string{"token", "--nope"}, 2, "unknown flag"},
		{"stray argument", []string{"keygen", "extra"}, 2, "unexpected argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runWith(t, noEnv, time.Now(), tc.args...)
			if r.code != tc.code || !strings.Contains(r.stdout+r.stderr, tc.want) {
				t.Fatalf("code %d (want %d), output %q (want %q)", r.code, tc.code, r.stdout+r.stderr, tc.want)
			}
		})
	}
}

// --help explains every flag, in the double-dash form.
func TestHelpListsEveryFlag(t *testing.T) {
	for cmd, flags := range map[string][]string{
		"token":  {"--player", "--key", "--data", "--server", "--ttl", "--timeout", "--protocol", "--user-data", "--out", "--format"},
		"keygen": {"--out", "--force"},
	} {
		r := runWith(t, noEnv, time.Now(), cmd, "--help")
		if r.code != 0 {
			t.Fatalf("%s --help: code %d", cmd, r.code)
		}
		for _, f := range flags {
			if !strings.Contains(r.stdout, f) {
				t.Errorf("%s --help does not mention %s:\n%s", cmd, f, r.stdout)
			}
		}
		// The command's own help, once: not cobra's short one after it.
		if n := strings.Count(r.stdout+r.stderr, "Usage:"); n != 1 {
			t.Errorf("%s --help prints %d usages, want 1:\n%s", cmd, n, r.stdout+r.stderr)
		}
	}
	if r := runWith(t, noEnv, time.Now(), "help"); r.code != 0 || !strings.Contains(r.stdout, "token") {
		t.Fatalf("help: %+v", r)
	}
}

// The global flags before an offline command (a shell alias of zonectl
// with its cluster) are taken: --data finds token's key, a global
// --timeout is not the token's idle timeout, --nats and --creds are
// ignored, and the command's own flags still win.
func TestOfflineCommandsTakeTheGlobalFlags(t *testing.T) {
	dir := t.TempDir()
	if r := runWith(t, noEnv, time.Now(), "--nats", "nats://10.0.0.9:4222", "--creds=x.creds", "keygen", "--out", filepath.Join(dir, "token.key")); r.code != 0 {
		t.Fatalf("keygen after global flags: %+v", r)
	}
	key, err := tokenkey.Load(filepath.Join(dir, "token.key"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	server := netip.MustParseAddrPort("127.0.0.1:7777")
	for _, tc := range []struct {
		args    []string
		timeout time.Duration
	}{
		{[]string{"--nats", "nats://10.0.0.9:4222", "--timeout", "30s", "--data", dir, "token", "--player", "7"}, 10 * time.Second},
		{[]string{"--data=" + dir, "--timeout=30s", "token", "--player", "7", "--timeout", "3s"}, 3 * time.Second},
		{[]string{"--data", "/nonexistent", "token", "--player", "7", "--data", dir}, 10 * time.Second},
	} {
		r := runWith(t, noEnv, now, tc.args...)
		if r.code != 0 {
			t.Fatalf("%q: %+v", tc.args, r)
		}
		tok, err := base64.StdEncoding.DecodeString(strings.TrimSpace(r.stdout))
		if err != nil {
			t.Fatal(err)
		}
		c, err := handshake.OpenToken(key, tok, now, server)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if c.PlayerID != 7 || c.Timeout != tc.timeout {
			t.Fatalf("%q: player %d, idle timeout %v; want 7, %v", tc.args, c.PlayerID, c.Timeout, tc.timeout)
		}
	}
	// What is not a global flag is still cobra's to refuse.
	if r := runWith(t, noEnv, now, "--bogus", "token", "--player", "7"); r.code != 2 {
		t.Fatalf("--bogus token: %+v, want exit 2", r)
	}
}
