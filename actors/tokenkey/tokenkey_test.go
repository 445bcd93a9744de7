package tokenkey

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEncodeParseRoundTrip(t *testing.T) {
	k, err := Generate(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(Encode(k))
	if err != nil || got != k {
		t.Fatalf("Parse(Encode(k)) = %x, %v; want %x", got, err, k)
	}
	withComment := append([]byte("# ghostwire token key\n\n  "), Encode(k)...)
	if got, err := Parse(withComment); err != nil || got != k {
		t.Fatalf("with comment: %x, %v", got, err)
	}
}

func TestParseRejects(t *testing.T) {
	good := strings.TrimSpace(string(Encode(Key{1, 2, 3})))
	for _, tc := range []struct{ name, in string }{
		{"empty", ""},
		{"short", good[:62]},
		{"long", good + "00"},
		{"not hex", "zz" + good[2:]},
		{"two keys", good + "\n" + good},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse([]byte(tc.in)); !errors.Is(err, ErrFormat) {
				t.Fatalf("Parse(%q) err = %v, want ErrFormat", tc.in, err)
			}
		})
	}
}

func TestWriteIsPrivateAndRefusesToOverwrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "token.key")
	k := Key{9}
	if err := Write(path, k, false); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode = %v, want 0600", st.Mode().Perm())
	}
	if err := Write(path, Key{8}, false); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second Write err = %v, want ErrExist", err)
	}
	if got, _ := Load(path); got != k {
		t.Fatal("refused Write changed the key")
	}
	if err := Write(path, Key{8}, true); err != nil {
		t.Fatal(err)
	}
	if got, _ := Load(path); got != (Key{8}) {
		t.Fatal("overwrite did not replace the key")
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 {
		t.Fatalf("temporary files left behind: %v", ents)
	}
}

func TestEnsureDevCreatesOnceThenLoads(t *testing.T) {
	dir := t.TempDir()
	k1, created, err := EnsureDev(dir, rand.Reader)
	if err != nil || !created {
		t.Fatalf("first EnsureDev: created=%v err=%v", created, err)
	}
	k2, created, err := EnsureDev(dir, rand.Reader)
	if err != nil || created || k2 != k1 {
		t.Fatalf("second EnsureDev: created=%v err=%v same=%v", created, err, k2 == k1)
	}
	if _, _, err := EnsureDev(dir, bytes.NewReader(nil)); err != nil {
		t.Fatalf("existing key must load without randomness: %v", err)
	}
}

func TestResolveOrder(t *testing.T) {
	dir := t.TempDir()
	dev, _, err := EnsureDev(dir, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	fileKey := Key{1}
	file := filepath.Join(t.TempDir(), "k")
	if err := Write(file, fileKey, false); err != nil {
		t.Fatal(err)
	}
	envKey := Key{2}
	env := func(v string) func(string) string {
		return func(name string) string {
			if name == EnvVar {
				return v
			}
			return ""
		}
	}
	envHex := string(Encode(envKey))

	for _, tc := range []struct {
		name    string
		path    string
		getenv  func(string) string
		dataDir string
		want    Key
		src     Source
		err     error
	}{
		{"file beats env", file, env(envHex), dir, fileKey, SourceFile, nil},
		{"env beats dev", "", env(envHex), dir, envKey, SourceEnv, nil},
		{"dev last", "", env(""), dir, dev, SourceDev, nil},
		{"bad env", "", env("nope"), dir, Key{}, SourceEnv, ErrFormat},
		{"nothing", "", env(""), "", Key{}, "", ErrNoKey},
		{"empty data dir", "", env(""), t.TempDir(), Key{}, "", ErrNoKey},
		{"missing file", filepath.Join(dir, "absent"), env(envHex), dir, Key{}, SourceFile, fs.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, src, err := Resolve(tc.path, tc.getenv, tc.dataDir)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || k != tc.want || src != tc.src {
				t.Fatalf("got %x %q %v, want %x %q", k[:2], src, err, tc.want[:2], tc.src)
			}
		})
	}
}
