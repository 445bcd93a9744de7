package tokenkey

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
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
		{"the same key twice", good + "\n" + good},
		{"the same key twice, comma", good + "," + good},
		{"one of two short", good + "\n" + good[:62]},
		{"only comments", "# a key file\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse([]byte(tc.in)); !errors.Is(err, ErrFormat) {
				t.Fatalf("Parse(%q) err = %v, want ErrFormat", tc.in, err)
			}
		})
	}
}

// A key file or variable may list a rotation's keys: one per line, or
// separated by commas or spaces (a Kubernetes secret's variable). The
// first is the one tokens are minted with; the order is kept.
func TestParseKeysKeepsARotationsOrder(t *testing.T) {
	a, b, c := Key{1}, Key{2}, Key{3}
	hexOf := func(k Key) string { return strings.TrimSpace(string(Encode(k))) }
	for _, in := range []string{
		"# rotation: b mints, a and c still open\n" + hexOf(b) + "\n\n" + hexOf(a) + "\n  " + hexOf(c) + "\n",
		hexOf(b) + "," + hexOf(a) + ", " + hexOf(c),
		hexOf(b) + " " + hexOf(a) + "\t" + hexOf(c),
	} {
		ks, err := ParseKeys([]byte(in))
		if err != nil || !slices.Equal(ks, Keys{b, a, c}) {
			t.Fatalf("ParseKeys(%q) = %x, %v; want b, a, c", in, ks, err)
		}
		if k, err := Parse([]byte(in)); err != nil || k != b {
			t.Fatalf("Parse(%q) = %x, %v; want the mint key b", in, k[:1], err)
		}
	}
	four := hexOf(a) + " " + hexOf(b) + " " + hexOf(c) + " " + hexOf(Key{4})
	if ks, err := ParseKeys([]byte(four)); err != nil || len(ks) != MaxKeys {
		t.Fatalf("%d keys: %d, %v", MaxKeys, len(ks), err)
	}
	if _, err := ParseKeys([]byte(four + " " + hexOf(Key{5}))); !errors.Is(err, ErrFormat) {
		t.Fatalf("%d keys: err %v, want ErrFormat", MaxKeys+1, err)
	}
	// A fingerprint names a key without revealing it, the same every time.
	fa, fb := Fingerprint(a), Fingerprint(b)
	if len(fa) != 8 || fa == fb || fa != Fingerprint(Key{1}) || strings.Contains(hexOf(a), fa) {
		t.Fatalf("fingerprints %q %q", fa, fb)
	}
	if got := (Keys{b, a}).Fingerprints(); !slices.Equal(got, []string{fb, fa}) {
		t.Fatalf("Fingerprints = %v", got)
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
	if err != nil || created || !slices.Equal(k2, k1) || len(k1) != 1 {
		t.Fatalf("second EnsureDev: created=%v err=%v keys %d, same=%v", created, err, len(k1), slices.Equal(k2, k1))
	}
	if _, _, err := EnsureDev(dir, bytes.NewReader(nil)); err != nil {
		t.Fatalf("existing key must load without randomness: %v", err)
	}
}

func TestResolveOrder(t *testing.T) {
	dir := t.TempDir()
	devKeys, _, err := EnsureDev(dir, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	dev := devKeys.Mint()
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
