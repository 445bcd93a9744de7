package tokenkey

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"unicode"

	"github.com/ghostwire/ghostwire/replication/handshake"
)

// Key is a connect-token key.
type Key = [handshake.KeySize]byte

const (
	// EnvVar holds the key as 64 hex digits; it overrides the dev key.
	EnvVar = "GHOSTWIRE_TOKEN_KEY"
	// DevFileName is the dev key's name inside a data directory.
	DevFileName = "token.key"
	// DefaultDataDir is zoned's default data directory (actors/node).
	DefaultDataDir = "ghostwire-data"
	// DefaultProtocolID is the protocol id of the stock build: the ASCII bytes
	// "GWdev001" read little-endian. A game sets its own per build; tokens and
	// servers must agree on it.
	DefaultProtocolID uint64 = 0x3130307665645747
)

// ErrFormat is wrapped by every error for a key that does not decode.
var ErrFormat = errors.New("tokenkey: key is not 64 hex digits")

// ErrNoKey is returned by Resolve when no source holds a key.
var ErrNoKey = errors.New("tokenkey: no token key (pass a key file, set " + EnvVar + ", or start zoned once to create the dev key)")

// DevPath is the dev key file of a data directory.
func DevPath(dataDir string) string { return filepath.Join(dataDir, DevFileName) }

// Generate draws a new key from rand (crypto/rand.Reader in production).
func Generate(rand io.Reader) (Key, error) {
	var k Key
	if _, err := io.ReadFull(rand, k[:]); err != nil {
		return Key{}, fmt.Errorf("tokenkey: generate: %w", err)
	}
	return k, nil
}

// Encode returns the file form of k: 64 lowercase hex digits and a newline.
func Encode(k Key) []byte {
	out := make([]byte, 0, 2*len(k)+1)
	out = hex.AppendEncode(out, k[:])
	return append(out, '\n')
}

// MaxKeys bounds the keys one file or variable holds: a server opens a
// token under each in turn (handshake.MaxTokenKeys).
const MaxKeys = handshake.MaxTokenKeys

// Keys are the keys of one file or variable, in order: the first mints
// tokens (a backend's, and a zone server's redirect tokens), and a server
// opens tokens sealed under any of them. More than one is a key rotation in
// progress (docs/operations.md, Rotating the token key). Never empty.
type Keys []Key

// Mint is the key tokens are sealed with: the first.
func (ks Keys) Mint() Key { return ks[0] }

// Fingerprint names a key without revealing it: the first 4 bytes of its
// SHA-256, in hex. Logs and metrics name keys by it, so an operator can
// tell which key a server mints with and which ones clients still use.
func Fingerprint(k Key) string {
	h := sha256.Sum256(k[:])
	return hex.EncodeToString(h[:4])
}

// Fingerprints lists the keys' fingerprints in order.
func (ks Keys) Fingerprints() []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = Fingerprint(k)
	}
	return out
}

// ParseKeys decodes the file (or environment) form of one or more keys:
// each 64 hex digits, separated by newlines, commas or spaces; blank lines
// and lines starting with '#' are ignored. At most MaxKeys, none twice.
func ParseKeys(b []byte) (Keys, error) {
	var ks Keys
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		for _, digits := range bytes.FieldsFunc(line, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
			if len(ks) == MaxKeys {
				return nil, fmt.Errorf("%w: more than %d keys", ErrFormat, MaxKeys)
			}
			var k Key
			if len(digits) != 2*len(k) {
				return nil, fmt.Errorf("%w: key %d has %d characters", ErrFormat, len(ks)+1, len(digits))
			}
			if _, err := hex.Decode(k[:], digits); err != nil {
				return nil, fmt.Errorf("%w: key %d: %v", ErrFormat, len(ks)+1, err)
			}
			if i := slices.Index(ks, k); i >= 0 {
				return nil, fmt.Errorf("%w: key %d is key %d again", ErrFormat, len(ks)+1, i+1)
			}
			ks = append(ks, k)
		}
	}
	if len(ks) == 0 {
		return nil, fmt.Errorf("%w: no key", ErrFormat)
	}
	return ks, nil
}

// Parse decodes the file (or environment) form of a key: the mint key
// (the first) when it lists several (ParseKeys).
func Parse(b []byte) (Key, error) {
	ks, err := ParseKeys(b)
	if err != nil {
		return Key{}, err
	}
	return ks.Mint(), nil
}

// LoadKeys reads the key file at path: every key in it.
func LoadKeys(path string) (Keys, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenkey: %w", err)
	}
	ks, err := ParseKeys(b)
	if err != nil {
		return nil, fmt.Errorf("tokenkey: %s: %w", path, err)
	}
	return ks, nil
}

// Load reads the key file at path: its mint key.
func Load(path string) (Key, error) {
	ks, err := LoadKeys(path)
	if err != nil {
		return Key{}, err
	}
	return ks.Mint(), nil
}

// Write stores k at path with mode 0600, creating the parent directory
// (0700) if needed. It refuses to replace an existing file unless overwrite
// is set: replacing a key silently invalidates every token in circulation.
// The file appears atomically (written aside, then renamed).
func Write(path string, k Key, overwrite bool) error {
	if !overwrite {
		if _, err := os.Stat(path); err == nil {
			return fmt.Errorf("tokenkey: %s: %w", path, fs.ErrExist)
		}
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("tokenkey: %w", err)
	}
	f, err := os.CreateTemp(dir, ".token.key-*")
	if err != nil {
		return fmt.Errorf("tokenkey: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after the rename
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("tokenkey: %w", err)
	}
	if _, err := f.Write(Encode(k)); err != nil {
		f.Close()
		return fmt.Errorf("tokenkey: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("tokenkey: %w", err)
	}
	if !overwrite {
		// Link fails if path appeared meanwhile; rename would replace it.
		if err := os.Link(tmp, path); err != nil {
			return fmt.Errorf("tokenkey: %w", err)
		}
		return nil
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("tokenkey: %w", err)
	}
	return nil
}

// EnsureDev returns the dev keys of dataDir, generating and storing a key
// first if the directory has none (zoned does this on start). created
// reports that a new key was written.
func EnsureDev(dataDir string, rand io.Reader) (ks Keys, created bool, err error) {
	path := DevPath(dataDir)
	ks, err = LoadKeys(path)
	if err == nil {
		return ks, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	k, err := Generate(rand)
	if err != nil {
		return nil, false, err
	}
	if err := Write(path, k, false); err != nil {
		if errors.Is(err, fs.ErrExist) { // another process won the race: use its key
			ks, err = LoadKeys(path)
			return ks, false, err
		}
		return nil, false, err
	}
	return Keys{k}, true, nil
}

// Source says where Resolve found the key.
type Source string

const (
	SourceFile Source = "file"
	SourceEnv  Source = "env " + EnvVar
	SourceDev  Source = "dev key"
)

// ResolveKeys finds the keys: the file at path if path is set, else the
// environment variable (read through getenv, os.Getenv in production), else
// the dev key file in dataDir if dataDir is set and holds one. It never
// creates a key.
func ResolveKeys(path string, getenv func(string) string, dataDir string) (Keys, Source, error) {
	if path != "" {
		ks, err := LoadKeys(path)
		return ks, SourceFile, err
	}
	if v := getenv(EnvVar); v != "" {
		ks, err := ParseKeys([]byte(v))
		if err != nil {
			return nil, SourceEnv, fmt.Errorf("tokenkey: %s: %w", EnvVar, err)
		}
		return ks, SourceEnv, nil
	}
	if dataDir != "" {
		ks, err := LoadKeys(DevPath(dataDir))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, "", fmt.Errorf("%w (looked in %s)", ErrNoKey, DevPath(dataDir))
		}
		return ks, SourceDev, err
	}
	return nil, "", ErrNoKey
}

// Resolve is ResolveKeys for a token backend: the mint key.
func Resolve(path string, getenv func(string) string, dataDir string) (Key, Source, error) {
	ks, src, err := ResolveKeys(path, getenv, dataDir)
	if err != nil {
		return Key{}, src, err
	}
	return ks.Mint(), src, nil
}
