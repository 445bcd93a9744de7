// Command zonectl is ghostwire's admin CLI: the admin API of a running
// cluster (actors/admin, over NATS) and the token backend's commands:
//
//	zonectl nodes | zones | players [--zone Z] [--node N] | player ID
//	zonectl move ID --to ZONE [--pos X,Z] | kick ID [--reason R]
//	zonectl drain NODE | stats | watch | completion bash
//	zonectl keygen [--out FILE] [--force]
//	zonectl token --player ID [--key FILE | GHOSTWIRE_TOKEN_KEY | --data DIR]
//	              [--server ADDR]... [--ttl D] [--timeout D] [--protocol N]
//	              [--user-data S] [--out FILE] [--format base64|hex|raw]
//	zonectl zones [--nats URL] [--timeout D] [-o table|json] [--world FILE]
//
// See `zonectl help` and `zonectl COMMAND --help`.
package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/ghostwire/ghostwire/actors/tokenkey"
	"github.com/ghostwire/ghostwire/replication/handshake"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

// env is what a command needs from the process: output, environment,
// randomness and the clock. Tests fill it in.
type env struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	rand           io.Reader
	now            func() time.Time
}

type command struct {
	summary string
	run     func(e env, args []string) error
}

var commands = map[string]command{
	"keygen": {"generate a connect-token key", runKeygen},
	"token":  {"mint a connect token for a player", runToken},
	"zones":  {"list the zones, their owner nodes, epochs and load (cluster directory)", runZones},
}

// errUsage marks a command-line mistake (exit code 2, not 1).
var errUsage = errors.New("usage")

func run(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	return runEnv(args, env{stdout: stdout, stderr: stderr, getenv: getenv, rand: rand.Reader, now: time.Now})
}

func runEnv(args []string, e env) int {
	return runCobra(args, e)
}

func newFlags(e env, name, head string) *pflag.FlagSet {
	fs := pflag.NewFlagSet("zonectl "+name, pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprint(e.stdout, head)
		fs.SetOutput(e.stdout)
		fs.PrintDefaults()
		fs.SetOutput(e.stderr)
	}
	return fs
}

func parse(fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	return nil
}

const keygenHead = `zonectl keygen — generate a connect-token key.

The key is 32 random bytes written as 64 hex digits: the format zoned
(--key-file), zonectl token (--key) and GHOSTWIRE_TOKEN_KEY all read. Every
zone server and every token backend of one deployment shares it; keep it
secret (a Kubernetes secret, mode 0600 files). Standard error names the
key by its fingerprint (the first 4 bytes of its SHA-256), as zoned's
ready line (token_keys) and the ghostwire_gateway_token_key_grants_total
metric do.

To rotate keys without refusing clients, a key file lists up to 4 keys,
one a line: the first mints tokens, each opens them (docs/operations.md,
Rotating the token key). 'zonectl keygen >> FILE' appends a new one.

Usage: zonectl keygen [--out FILE] [--force]

Flags:
`

func runKeygen(e env, args []string) error {
	fs := newFlags(e, "keygen", keygenHead)
	out := fs.String("out", "", "write the key to `FILE` (mode 0600) instead of standard output")
	force := fs.Bool("force", false, "replace an existing --out file (invalidates every token minted with the old key)")
	if err := parse(fs, args); err != nil {
		return err
	}
	k, err := tokenkey.Generate(e.rand)
	if err != nil {
		return err
	}
	if *out == "" {
		if _, err := e.stdout.Write(tokenkey.Encode(k)); err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "key %s\n", tokenkey.Fingerprint(k))
		return nil
	}
	if err := tokenkey.Write(*out, k, *force); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "wrote %s: key %s\n", *out, tokenkey.Fingerprint(k))
	return nil
}

const tokenHead = `zonectl token — mint a connect token for a player.

A connect token lets one client open one session with a zone server: it holds
the player id, the servers it may connect to, its expiry and the session keys
(docs/protocol.md § Connect token). Hand it to the client over a secure
channel: whoever holds it can connect as the player until it expires.

The key comes from --key, else GHOSTWIRE_TOKEN_KEY, else the dev key that
zoned created in --data (DATA/token.key); of a rotation's several keys,
the first.

Usage: zonectl token --player ID [flags]

Flags:
`

// Output formats of the token.
const (
	formatBase64 = "base64"
	formatHex    = "hex"
	formatRaw    = "raw"
)

func runToken(e env, args []string) error {
	fs := newFlags(e, "token", tokenHead)
	player := fs.String("player", "", "player `ID` (unsigned 64-bit integer) the token is for (required)")
	keyFile := fs.String("key", "", "connect-token key `FILE` (64 hex digits); overrides GHOSTWIRE_TOKEN_KEY and --data")
	data := fs.String("data", tokenkey.DefaultDataDir, "zoned data `DIR` whose dev key (DIR/token.key) is used when neither --key nor GHOSTWIRE_TOKEN_KEY is set")
	servers := fs.StringArray("server", []string{"127.0.0.1:7777"}, "zone server `ADDR` (ip:port, as the server lists itself) the token may connect to; repeat for up to 8, in order of preference")
	ttl := fs.Duration("ttl", time.Minute, "token lifetime from now, rounded up to whole seconds, at most 1h: a client must connect before it runs out")
	timeout := fs.Duration("timeout", 10*time.Second, "connection idle timeout both ends apply once connected (1ms to 1h)")
	protocol := fs.Uint64("protocol", tokenkey.DefaultProtocolID, "protocol `ID` of the game build; servers refuse tokens for another id")
	userData := fs.String("user-data", "", "opaque `STRING` (up to 256 bytes) the server receives sealed in the token")
	out := fs.String("out", "", "write the token to `FILE` (mode 0600) instead of standard output")
	format := fs.String("format", "", "output encoding: base64, hex or raw (default base64 on standard output, raw with --out)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *player == "" {
		return fmt.Errorf("%w: --player is required", errUsage)
	}
	id, err := strconv.ParseUint(*player, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: --player %q: want an unsigned 64-bit integer", errUsage, *player)
	}
	addrs := make([]netip.AddrPort, 0, len(*servers))
	for _, s := range *servers {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return fmt.Errorf("%w: --server %q: want ip:port (%v)", errUsage, s, err)
		}
		addrs = append(addrs, ap)
	}
	f := *format
	if f == "" {
		f = formatBase64
		if *out != "" {
			f = formatRaw
		}
	}
	if f != formatBase64 && f != formatHex && f != formatRaw {
		return fmt.Errorf("%w: --format %q: want base64, hex or raw", errUsage, f)
	}
	key, src, err := tokenkey.Resolve(*keyFile, e.getenv, *data)
	if err != nil {
		return err
	}
	tok, err := handshake.IssueToken(key, handshake.TokenParams{
		PlayerID:    id,
		ProtocolID:  *protocol,
		Expiry:      *ttl,
		Timeout:     *timeout,
		ServerAddrs: addrs,
		UserData:    []byte(*userData),
	}, e.now(), e.rand)
	if err != nil {
		if errors.Is(err, handshake.ErrParams) {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		return err
	}
	var enc []byte
	switch f {
	case formatBase64:
		enc = append(base64.StdEncoding.AppendEncode(nil, tok), '\n')
	case formatHex:
		enc = append(hex.AppendEncode(nil, tok), '\n')
	default:
		enc = tok
	}
	if *out == "" {
		_, err := e.stdout.Write(enc)
		return err
	}
	if err := os.WriteFile(*out, enc, 0o600); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "wrote %s (player %d, key from %s, expires in %s)\n", *out, id, src, ttl.Round(time.Second))
	return nil
}
