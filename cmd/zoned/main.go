// Command zoned runs a ghostwire zone server: with no flags, a whole world on
// this machine (embedded NATS with JetStream, the UDP gateway on :7777, HTTP
// health, metrics and the world map on 127.0.0.1:8080, the built-in 2×2
// world, a dev token key in the data dir). See `zoned --help`.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/ghostwire/ghostwire/actors/node"
	"github.com/ghostwire/ghostwire/cmd/internal/procs"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

// run is main without the process: it returns the exit code, so tests can
// drive flag parsing and startup.
//
// SIGHUP stops it the same way: its default would end the process at once,
// with no drain and no line in the log, and it comes unasked — a closed
// terminal, or the kernel's SIGHUP and SIGCONT to a stopped process whose
// process group was orphaned (a node paused from a script that then ended).
func run(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	return serve(ctx, stop, args, stdout, stderr, getenv)
}

// serve is run once the signals are caught: ctx ends at the first SIGINT,
// SIGTERM or SIGHUP, and stop restores their default (a second one kills).
func serve(ctx context.Context, stop context.CancelFunc, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	cfg, opts, err := parseConfig(args, stdout, stderr, getenv)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "zoned:", err)
		return 2
	}
	ho := &slog.HandlerOptions{Level: opts.logLevel}
	var h slog.Handler = slog.NewTextHandler(stderr, ho)
	if opts.logJSON {
		h = slog.NewJSONHandler(stderr, ho)
	}
	log := slog.New(h)

	// A fixed count applies before the node starts (its connection shards
	// are as many as its Ps); the sizer starts after it, so the shards are
	// as many as the runtime's default, however long the start takes.
	sizing := procs.Apply(opts.procs, getenv, log)
	// The sizer's metrics go in before the node reports ready: registered
	// after, a scrape right after "zoned ready" could miss them.
	stats := &procs.Stats{}
	cfg.Collectors = append(cfg.Collectors, procs.Collectors(stats)...)
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	n, err := node.Start(startCtx, cfg, log)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			// Asked to stop before serving anyone: what started has
			// been torn down, so this is a clean stop, not a failure
			// (an operator's ^C, a pod deleted while starting).
			log.Info("stopped while starting (signal received)", "err", err)
			return 0
		}
		log.Error("start failed", "err", err)
		return 1
	}
	if sizing {
		sizeCtx, endSizing := context.WithCancel(ctx)
		defer endSizing()
		go func() {
			if err := procs.Run(sizeCtx, procs.Config{Log: log, Stats: stats}); err != nil {
				log.Warn("GOMAXPROCS not sized", "err", err)
			}
		}()
	}
	select {
	case <-ctx.Done():
	case <-n.Done():
		log.Info("stopped (drained through the admin API)")
		return 0
	}
	log.Info("shutting down (signal received; a second signal exits immediately)")
	stop() // restore default signal behaviour: a second ^C kills
	if err := n.Stop(context.Background()); err != nil {
		log.Error("shutdown", "err", err)
		return 1
	}
	log.Info("stopped")
	return 0
}

const usageHead = `zoned — the ghostwire zone server.

With no flags it runs a whole world on this machine: an embedded NATS server
with JetStream (its client URL is logged), the UDP gateway on :7777, HTTP on
127.0.0.1:8080 (/healthz, /readyz, /metrics, and the live world map at /),
the built-in 2x2 world of 1 km zones and a dev connect-token key in the data
dir, so botswarm and the client examples started from the same directory find
it. HTTP listens on loopback only unless --http names another address (the
map shows where every player is: put a reverse proxy with authentication in
front of it rather than exposing it).

Settings come from, highest first: flags, environment variables
(GHOSTWIRE_<FLAG>, e.g. GHOSTWIRE_UDP=:9000, GHOSTWIRE_TICK=33ms), the JSON
config file given with --config, built-in defaults.

Usage: zoned [flags]

Flags:
`

// options are zoned's settings that are the process's, not the node's.
type options struct {
	logJSON  bool
	logLevel slog.Level
	procs    procs.Setting
}

func parseConfig(args []string, stdout, stderr io.Writer, getenv func(string) string) (node.Config, options, error) {
	def := node.DefaultConfig()
	fs := pflag.NewFlagSet("zoned", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	configFile := fs.String("config", "", "JSON config file (keys: udp, public_addr, http, data, world, tick, npcs, nats, nats_creds, nats_listen, node_id, zones, lease_ttl, kv_replicas, key_file, max_conns, shutdown_timeout, dev_game, pprof, far_every)")
	udp := fs.String("udp", def.UDPAddr, "UDP `ADDR` the client gateway listens on")
	public := fs.String("public-addr", "", "`HOST:PORT` clients dial, written into connect tokens; default the --udp address, a wildcard host becoming 127.0.0.1 (set this behind NAT or in Kubernetes)")
	httpAddr := fs.String("http", def.HTTPAddr, "HTTP `ADDR` for /healthz, /readyz, /metrics and the world map /map; the default is loopback only, use :8080 to listen on every interface (pods, containers); empty disables")
	data := fs.String("data", def.DataDir, "data `DIR`: embedded NATS store and the dev token key")
	world := fs.String("world", "", "world map `FILE` (JSON, see docs/zones.md); empty uses the built-in 2x2 world of 1 km zones")
	tick := fs.Duration("tick", def.Tick.D(), "zone simulation tick period (20 Hz = 50ms)")
	npcs := fs.Int("npcs", def.NPCs, "number of wandering NPCs spread over the world")
	farEvery := fs.Int("far-every", def.FarEvery, "`TICKS` between fresh states of a player's far view members (beyond half the interest radius): 1 = every tick, 2 = half the tick rate; between, their ghosts cost no update (overload lowers it further)")
	natsURL := fs.String("nats", "", "external NATS `URL` (cluster mode); empty embeds a NATS server")
	natsCreds := fs.String("nats-creds", "", "credentials `FILE` for the external --nats: user/password (a dev zoned's DATA/node.creds) or a NATS .creds file; empty connects without credentials (the embedded NATS always uses DATA/node.creds)")
	natsListen := fs.String("nats-listen", def.NATSListen, "client `ADDR` of the embedded NATS server (port 0 picks a free port)")
	nodeID := fs.String("node-id", "", "`NAME` of this node in the cluster directory and NATS subjects ([A-Za-z0-9_-]); default hostname-udpport")
	zones := fs.String("zones", def.Zones, "zones this node owns: comma-separated zone `IDS`, or auto = claim unowned zones up to a fair share of the live nodes (and take over zones whose owner died)")
	leaseTTL := fs.Duration("lease-ttl", def.LeaseTTL.D(), "zone lease lifetime without renewal (renewed every sixth of it): how soon other nodes take over a dead node's zones")
	kvReplicas := fs.Int("kv-replicas", def.KVReplicas, "`N` servers of the NATS cluster keep each KV bucket (zone leases, player and node records): 1 for the embedded server, 3 for a three-server NATS cluster (losing one server then loses nothing)")
	keyFile := fs.String("key-file", "", "connect-token key `FILE`: 64 hex digits, or up to 4 keys (one a line) during a key rotation, the first minting redirect tokens and each opening clients' tokens; read again every 10 s, a changed set taken while running; when empty, GHOSTWIRE_TOKEN_KEY (the same, keys separated by commas) is used if set, else the dev key DATA/token.key, generated on first start")
	maxConns := fs.Int("max-conns", def.MaxConns, "maximum connected clients; more are refused with reason \"server full\"")
	shutdown := fs.Duration("shutdown-timeout", def.ShutdownTimeout.D(), "how long graceful shutdown may take")
	devGame := fs.Bool("dev-game", def.DevGame, "dev world events: echo lane-0 events to their sender (botswarm needs it) and teleport on lane-1 events; turn off in production (--dev-game=false)")
	pprofOn := fs.Bool("pprof", false, "serve Go profiles under /debug/pprof/ on the HTTP address (diagnostics; keep off in production)")
	logJSON := fs.Bool("log-json", false, "log as JSON lines instead of text")
	logLevel := fs.String("log-level", "info", "least `LEVEL` logged: debug, info, warn or error (debug adds the cluster's routine decisions: rebalances refused, and the like); also GHOSTWIRE_LOG_LEVEL")
	gomaxprocs := fs.String("gomaxprocs", "auto", "`PS` the Go scheduler runs on: auto sizes them to the load, between 1 and the runtime's default (the cores, or a container's CPU limit), because Ps beyond what the load needs cost CPU in idle threads' wake-ups (the rule: docs/operations.md#cpu-how-many-ps); a number fixes them; the GOMAXPROCS environment variable, when set, wins and turns sizing off (also GHOSTWIRE_GOMAXPROCS)")
	fs.Usage = func() {
		fmt.Fprint(stdout, usageHead)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fs.SetOutput(stderr)
	}
	if err := fs.Parse(args); err != nil {
		return node.Config{}, options{}, err
	}
	if fs.NArg() > 0 {
		return node.Config{}, options{}, fmt.Errorf("unexpected argument %q (zoned takes only flags; see --help)", fs.Arg(0))
	}
	cfg := def
	if *configFile != "" {
		if err := cfg.LoadFile(*configFile); err != nil {
			return node.Config{}, options{}, err
		}
	}
	// Environment over file, flags over environment.
	type setting struct {
		flag  string
		apply func(string) error
	}
	str := func(dst *string) func(string) error { return func(v string) error { *dst = v; return nil } }
	dur := func(dst *node.Duration) func(string) error {
		return func(v string) error {
			d, err := time.ParseDuration(v)
			*dst = node.Duration(d)
			return err
		}
	}
	num := func(dst *int) func(string) error {
		return func(v string) error {
			n, err := strconv.Atoi(v)
			*dst = n
			return err
		}
	}
	boolean := func(dst *bool) func(string) error {
		return func(v string) error {
			b, err := strconv.ParseBool(v)
			*dst = b
			return err
		}
	}
	settings := []setting{
		{"udp", str(&cfg.UDPAddr)}, {"public-addr", str(&cfg.PublicAddr)}, {"http", str(&cfg.HTTPAddr)}, {"data", str(&cfg.DataDir)},
		{"world", str(&cfg.WorldFile)}, {"tick", dur(&cfg.Tick)}, {"npcs", num(&cfg.NPCs)}, {"far-every", num(&cfg.FarEvery)},
		{"nats", str(&cfg.NATSURL)}, {"nats-creds", str(&cfg.NATSCreds)}, {"nats-listen", str(&cfg.NATSListen)}, {"key-file", str(&cfg.KeyFile)},
		{"node-id", str(&cfg.NodeID)}, {"zones", str(&cfg.Zones)}, {"lease-ttl", dur(&cfg.LeaseTTL)}, {"kv-replicas", num(&cfg.KVReplicas)},
		{"max-conns", num(&cfg.MaxConns)}, {"shutdown-timeout", dur(&cfg.ShutdownTimeout)},
		{"dev-game", boolean(&cfg.DevGame)}, {"pprof", boolean(&cfg.Pprof)},
	}
	for _, s := range settings {
		env := "GHOSTWIRE_" + envName(s.flag)
		if v := getenv(env); v != "" {
			if err := s.apply(v); err != nil {
				return node.Config{}, options{}, fmt.Errorf("%s=%q: %w", env, v, err)
			}
		}
	}
	flagVals := map[string]func(){
		"udp": func() { cfg.UDPAddr = *udp }, "public-addr": func() { cfg.PublicAddr = *public }, "http": func() { cfg.HTTPAddr = *httpAddr },
		"data": func() { cfg.DataDir = *data }, "world": func() { cfg.WorldFile = *world },
		"tick": func() { cfg.Tick = node.Duration(*tick) }, "npcs": func() { cfg.NPCs = *npcs }, "far-every": func() { cfg.FarEvery = *farEvery },
		"nats": func() { cfg.NATSURL = *natsURL }, "nats-listen": func() { cfg.NATSListen = *natsListen },
		"nats-creds": func() { cfg.NATSCreds = *natsCreds },
		"node-id":    func() { cfg.NodeID = *nodeID }, "zones": func() { cfg.Zones = *zones },
		"lease-ttl": func() { cfg.LeaseTTL = node.Duration(*leaseTTL) }, "kv-replicas": func() { cfg.KVReplicas = *kvReplicas },
		"key-file": func() { cfg.KeyFile = *keyFile }, "max-conns": func() { cfg.MaxConns = *maxConns },
		"shutdown-timeout": func() { cfg.ShutdownTimeout = node.Duration(*shutdown) },
		"dev-game":         func() { cfg.DevGame = *devGame },
		"pprof":            func() { cfg.Pprof = *pprofOn },
	}
	fs.Visit(func(f *pflag.Flag) {
		if set, ok := flagVals[f.Name]; ok {
			set()
		}
	})
	if err := cfg.Validate(); err != nil {
		return node.Config{}, options{}, err
	}
	opts := options{logJSON: *logJSON}
	lv, from := *logLevel, "--log-level"
	if v := getenv("GHOSTWIRE_LOG_LEVEL"); v != "" && !fs.Changed("log-level") {
		lv, from = v, "GHOSTWIRE_LOG_LEVEL"
	}
	if err := opts.logLevel.UnmarshalText([]byte(lv)); err != nil {
		return node.Config{}, options{}, fmt.Errorf("%s %q: want debug, info, warn or error", from, lv)
	}
	ps, from := *gomaxprocs, "--gomaxprocs"
	if v := getenv("GHOSTWIRE_GOMAXPROCS"); v != "" && !fs.Changed("gomaxprocs") {
		ps, from = v, "GHOSTWIRE_GOMAXPROCS"
	}
	var err error
	if opts.procs, err = procs.ParseSetting(ps); err != nil {
		return node.Config{}, options{}, fmt.Errorf("%s: %w", from, err)
	}
	return cfg, opts, nil
}

func envName(flag string) string {
	b := []byte(flag)
	for i, c := range b {
		switch {
		case c == '-':
			b[i] = '_'
		case c >= 'a' && c <= 'z':
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}
