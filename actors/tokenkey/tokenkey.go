package tokenkey

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

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

// Parse decodes the file (or environment) form of a key.
func Parse(b []byte) (Key, error) {
	var digits []byte
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		if digits != nil {
			return Key{}, fmt.Errorf("%w: more than one key line", ErrFormat)
		}
		digits = line
	}
	var k Key
	if len(digits) != 2*len(k) {
		return Key{}, fmt.Errorf("%w: got %d characters", ErrFormat, len(digits))
	}
	if _, err := hex.Decode(k[:], digits); err != nil {
		return Key{}, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	return k, nil
}

// Load reads the key file at path.
func Load(path string) (Key, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Key{}, fmt.Errorf("tokenkey: %w", err)
	}
	k, err := Parse(b)
	if err != nil {
		return Key{}, fmt.Errorf("tokenkey: %s: %w", path, err)
	}
	return k, nil
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

// EnsureDev returns the dev key of dataDir, generating and storing it first
// if the directory has none (zoned does this on start). created reports that
// a new key was written.
func EnsureDev(dataDir string, rand io.Reader) (k Key, created bool, err error) {
	path := DevPath(dataDir)
	k, err = Load(path)
	if err == nil {
		return k, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return Key{}, false, err
	}
	if k, err = Generate(rand); err != nil {
		return Key{}, false, err
	}
	if err := Write(path, k, false); err != nil {
		if errors.Is(err, fs.ErrExist) { // another process won the race: use its key
			k, err = Load(path)
			return k, false, err
		}
		return Key{}, false, err
	}
	return k, true, nil
}

// Source says where Resolve found the key.
type Source string

const (
	SourceFile Source = "file"
	SourceEnv  Source = "env " + EnvVar
	SourceDev  Source = "dev key"
)

// Resolve finds the key: the file at path if path is set, else the
// environment variable (read through getenv, os.Getenv in production), else
// the dev key in dataDir if dataDir is set and holds one. It never creates a
// key.
func Resolve(path string, getenv func(string) string, dataDir string) (Key, Source, error) {
	if path != "" {
		k, err := Load(path)
		return k, SourceFile, err
	}
	if v := getenv(EnvVar); v != "" {
		k, err := Parse([]byte(v))
		if err != nil {
			return Key{}, SourceEnv, fmt.Errorf("tokenkey: %s: %w", EnvVar, err)
		}
		return k, SourceEnv, nil
	}
	if dataDir != "" {
		k, err := Load(DevPath(dataDir))
		if errors.Is(err, fs.ErrNotExist) {
			return Key{}, "", fmt.Errorf("%w (looked in %s)", ErrNoKey, DevPath(dataDir))
		}
		return k, SourceDev, err
	}
	return Key{}, "", ErrNoKey
}
