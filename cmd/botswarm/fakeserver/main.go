// Command fakeserver is a minimal stand-in zone server for measuring
// botswarm by itself: handshake, sessions, a 20 Hz tick that applies moves,
// echoes lane-0 events and shows each player a few others — no zones, no
// interest management, no actors (cmd/botswarm/internal/fakezone). Run it
// in its own process so botswarm's CPU can be measured apart from the
// server's:
//
//	go run ./cmd/botswarm/fakeserver --listen 127.0.0.1:7799 --key-file /tmp/k &
//	go run ./cmd/botswarm --server 127.0.0.1:7799 --key-file /tmp/k --bots 5000
//
// It is a measuring tool, not a server to play on.
package main

import (
	crand "crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/ghostwire/ghostwire/actors/tokenkey"
	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/fakezone"
	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/impair"
	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/swarm"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fset := pflag.NewFlagSet("fakeserver", pflag.ContinueOnError)
	listen := fset.String("listen", "127.0.0.1:7799", "UDP `ADDR` to serve on")
	keyFile := fset.String("key-file", "ghostwire-data/token.key", "connect-token key `FILE` (64 hex digits); created if missing")
	protocol := fset.String("protocol-id", "0x"+strconv.FormatUint(tokenkey.DefaultProtocolID, 16), "protocol `ID` tokens must carry")
	peers := fset.Int("peers", 8, "other players each player sees, `N` (0: none)")
	tick := fset.Duration("tick", 50*time.Millisecond, "simulation period `D`")
	noEcho := fset.Bool("no-echo", false, "do not echo lane-0 events")
	playerBase := fset.String("player-base", "0x"+strconv.FormatUint(swarm.DefaultPlayerBase, 16), "the botswarm --player-base `ID` whose observers --ghosts-to-observers picks")
	ghostsTo := fset.String("ghosts-to-observers", "100%", "show others only to the bots that botswarm --observers `FRACTION` makes observers (10% or 0.1; the others skip the ghost section, so this spares the server their ghosts, not the bots any work); default 100%: every player")
	noGRO := fset.Bool("no-gro", false, "read without UDP_GRO, as zoned's gateway does (the kernel then cuts the bots' UDP_SEGMENT groups up in their sends, on loopback charged to botswarm); default false: super-datagrams read whole")
	cpuProfile := fset.String("cpuprofile", "", "write a Go CPU profile of the whole run to `FILE` (go tool pprof); default: none")
	if err := fset.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(os.Stderr, "fakeserver:", err)
		return 2
	}
	key, err := tokenkey.Load(*keyFile)
	if errors.Is(err, fs.ErrNotExist) {
		if key, err = tokenkey.Generate(crand.Reader); err == nil {
			err = tokenkey.Write(*keyFile, key, false)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeserver:", err)
		return 2
	}
	pid, err := strconv.ParseUint(*protocol, 0, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeserver: --protocol-id:", err)
		return 2
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fakeserver:", err)
			return 2
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "fakeserver:", err)
			return 2
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	frac, err := impair.ParseRatio(*ghostsTo)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeserver: --ghosts-to-observers:", err)
		return 2
	}
	base, err := strconv.ParseUint(*playerBase, 0, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeserver: --player-base:", err)
		return 2
	}
	var watch func(uint64) bool
	if frac < 1 {
		watch = func(pid uint64) bool { return swarm.ObserverPlayer(pid, base, frac) }
	}
	z, err := fakezone.Start(fakezone.Options{Listen: *listen, Key: &key, ProtocolID: pid, Peers: peersOpt(*peers), Tick: *tick, NoEcho: *noEcho, Watch: watch, NoGRO: *noGRO})
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeserver:", err)
		return 2
	}
	fmt.Fprintf(os.Stderr, "fakeserver: serving on %v (key %s)\n", z.Addr, *keyFile)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	z.Close()
	maxc, echoes := z.Stats()
	fmt.Fprintf(os.Stderr, "fakeserver: stopped; %d connections at most, %d echoes\n", maxc, echoes)
	return 0
}

// peersOpt maps the flag (0: none) onto fakezone's option (0: all).
func peersOpt(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}
