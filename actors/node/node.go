package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/ghostwire/ghostwire/actors/admin"

	"github.com/ghostwire/ghostwire/actors/cluster"
	"github.com/ghostwire/ghostwire/actors/gateway"
	"github.com/ghostwire/ghostwire/actors/tokenkey"
	"github.com/ghostwire/ghostwire/actors/worldmap"
	"github.com/ghostwire/ghostwire/actors/zone"
	"github.com/ghostwire/ghostwire/proto/pbconv"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// Node is one running zoned process. Start makes one; Stop ends it.
type Node struct {
	cfg     Config
	log     *slog.Logger
	reg     *prometheus.Registry
	nats    *natsLink
	game    *game
	dir     *directory
	node    string
	leases  *cluster.Leases
	bridge  *cluster.Bridge
	member  *membership
	players *cluster.Players
	// bridgeRef: the bridge, for zone callbacks that may run before
	// startGame returns.
	bridgeRef atomic.Pointer[cluster.Bridge]
	// gatewayPID: the gateway actor, once it runs (the bridge passes it
	// Rejoins for connections it does not know).
	gatewayPID atomic.Pointer[actor.PID]
	admin      *admin.Service
	keyWatch   *keyWatch // nil: keys from the environment

	httpSrv *http.Server
	httpLn  net.Listener
	httpErr chan error
	wmap    atomic.Pointer[worldmap.Map]

	ready   atomic.Bool
	stopped atomic.Bool
	done    chan struct{} // closed when Stop has finished
}

// Start brings up a whole node and returns once it is ready to accept
// clients, or with the first error (everything started so far is stopped).
func Start(ctx context.Context, cfg Config, log *slog.Logger) (*Node, error) {
	return StartEnv(ctx, cfg, log, os.Getenv)
}

// StartEnv is Start with the environment lookup injected (GHOSTWIRE_TOKEN_KEY),
// for tests.
func StartEnv(ctx context.Context, cfg Config, log *slog.Logger, getenv func(string) string) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	n := &Node{cfg: cfg, log: log, reg: prometheus.NewRegistry(), done: make(chan struct{})}
	n.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := registerBuildInfo(n.reg); err != nil {
		return nil, err
	}
	for _, c := range cfg.Collectors {
		if err := n.reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}

	ok := false
	defer func() {
		if !ok {
			n.shutdown(context.Background())
		}
	}()
	if cfg.HTTPAddr != "" {
		if err := n.startHTTP(); err != nil {
			return nil, err
		}
	}
	wm, err := loadWorld(cfg)
	if err != nil {
		return nil, err
	}
	nl, err := startNATS(ctx, cfg, len(wm.Zones()), log)
	if err != nil {
		return nil, err
	}
	n.nats = nl
	// The node record goes first, so nodes starting together count each
	// other for their fair shares; then the zones are claimed, before any
	// actor runs, so this node never acts for a zone it does not own.
	n.node = resolveNodeID(cfg)
	listed, err := cfg.zoneList()
	if err != nil {
		return nil, err
	}
	if n.dir, err = startDirectory(ctx, nl, n.node, cfg.expiryLook, listed, log.With("component", "directory")); err != nil {
		return nil, err
	}
	var mem *membership
	n.leases, err = cluster.NewLeases(ctx, nl.kv[BucketZones], n.node, cfg.LeaseTTL.D(), log.With("component", "leases"),
		func(z string) {
			if mem != nil {
				mem.lost(z)
			}
		})
	if err != nil {
		return nil, err
	}
	// A zone whose lease's renewal is overdue (a starved host) is held
	// until the renewal's answer instead of lost at once.
	n.leases.SetHold(func(z string, on bool) {
		if mem != nil {
			mem.hold(z, on)
		}
	})
	renew := n.leases.RenewNow
	nl.onReconnect.Store(&renew)
	owned, err := claimInitial(ctx, cfg, wm, n.leases, nl.kv[BucketNodes], n.node, log)
	if err != nil {
		return nil, err
	}
	world := worldToken(wm.Name())
	n.players = cluster.NewPlayers(nl.kv[BucketPlayers], n.node, log.With("component", "players"))
	n.players.SetFence(n.leases.Valid)
	n.players.SetFenceWait(n.leases.WaitValid)
	if err := n.players.Pipeline(ctx, nl.nc); err != nil {
		log.Warn("player checkpoints written one request at a time", "err", err)
	}
	placed := func(player uint64, zone string, epoch uint64, join bool, cp *handoff.Checkpoint) {
		// The checkpoint goes in the placement's write (one write per
		// join or handoff); like the periodic ones, only once the bridge
		// can name the player's gateway.
		gw := ""
		if b := n.bridgeRef.Load(); b != nil && cp != nil {
			gw = b.GatewayOfConn(cp.Conn)
		} else {
			cp = nil
		}
		n.players.Placed(player, zone, epoch, join, cp, gw)
	}
	// A player put back from its record is recorded only over that record
	// (cluster.Players.Restored): never a second owner.
	restored := func(player uint64, zone string, epoch, from uint64, cp *handoff.Checkpoint, settled func(written bool)) {
		gw := ""
		if b := n.bridgeRef.Load(); b != nil && cp != nil {
			gw = b.GatewayOfConn(cp.Conn)
		} else {
			cp = nil
		}
		n.players.Restored(player, zone, epoch, from, cp, gw, settled)
	}
	checkpoint := func(zone string, cps []handoff.Checkpoint, leaving bool) {
		if b := n.bridgeRef.Load(); b != nil {
			n.players.Checkpoint(zone, cps, leaving, b.GatewayOfConn)
		}
	}
	// The periodic checkpoints go in chunks: a slice of a zone's players to
	// one write (cluster.Players.CheckpointChunk).
	chunk := func(zone string, slice int, cps []handoff.Checkpoint) {
		if b := n.bridgeRef.Load(); b != nil {
			n.players.CheckpointChunk(zone, slice, cps, b.GatewayOfConn)
		}
	}
	// A player who connects resumes from its record: in the zone it was
	// in, where it was (a reconnect after a crash, a drain, a break).
	var sys atomic.Pointer[actor.ActorSystem]
	resume := func(player uint64, done func(*actor.PID, *handoff.Checkpoint)) {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			rec, err := n.players.Record(ctx, player)
			s := sys.Load()
			if err != nil || rec == nil || rec.GetCheckpoint() == nil || s == nil {
				done(nil, nil)
				return
			}
			if _, ok := wm.Zone(rec.GetZone()); !ok {
				done(nil, nil) // the world map changed
				return
			}
			cp, err := pbconv.CheckpointFromProto(rec.GetCheckpoint(), rec.GetEpoch())
			if err != nil || cp.Entity != player {
				log.Warn("player record not restorable", "player", player, "err", err)
				done(nil, nil)
				return
			}
			done(actor.NewPID(s.Address(), zone.ActorName(rec.GetZone())), cp)
		}()
	}
	// Each run of a zone spawns NPC ids of its own (sim.NPCGenerationOf its
	// lease epoch): the NPCs of a run that ended with a crash may still
	// walk in the neighbour zones.
	cfg.npcGeneration = func(z string) uint64 {
		if ep, ok := n.leases.Held(z); ok {
			return sim.NPCGenerationOf(ep)
		}
		return 0
	}
	// A zone checks its lease itself before it applies anything: the
	// hold (SetHold above) can reach it behind what it has queued when
	// the node wakes from a pause past its leases.
	cfg.acting = n.leases.Acting
	gm, err := startGame(ctx, cfg, wm, owned, n.reg, getenv, log, placed, restored, checkpoint, chunk, resume, func(g *game) error {
		sys.Store(g.sys)
		b, err := cluster.NewBridge(cluster.Config{World: world, Node: n.node, NC: nl.nc, Sys: g.sys, Leases: n.leases,
			Registry: g.classes, Now: g.now, Origin: g.origin, Log: log.With("component", "cluster"), Players: n.players,
			Zones:   func(id string) bool { _, ok := wm.Zone(id); return ok },
			Gateway: n.gatewayPID.Load})
		if err != nil {
			return err
		}
		n.bridge = b
		n.bridgeRef.Store(b)
		n.leases.SetLoad(func(z string) (int, int) {
			p, npcs, _ := g.zones.Load(z)
			return p, npcs
		})
		want, _ := cfg.zoneList()
		mem = &membership{node: n.node, auto: want == nil, want: want, wm: wm, sys: g.sys, zones: g.zones,
			bridge: b, leases: n.leases, kvNodes: nl.kv[BucketNodes], log: log.With("component", "cluster"), players: n.players, nc: nl.nc, world: world,
			now: g.now, origin: g.origin, askedBack: map[string]string{}}
		n.member = mem
		return mem.start(owned)
	})
	if err != nil {
		return nil, err
	}
	n.game = gm
	n.gatewayPID.Store(gm.gw.PID())
	if err := registerZoneMetrics(n.reg, gm.zones); err != nil {
		return nil, err
	}
	if err := registerClusterMetrics(n.reg, n.bridge.Metrics(), gm.zones.Metrics(), nl, n.players, n.leases); err != nil {
		return nil, err
	}
	if err := n.startMap(); err != nil {
		return nil, err
	}
	if err := n.dir.running(ctx, gm, n.HTTPAddr()); err != nil {
		return nil, err
	}
	if n.admin, err = n.startAdmin(ctx, wm); err != nil {
		return nil, err
	}
	n.keyWatch = watchKeys(gm, cmp.Or(cfg.KeyFile, tokenkey.DevPath(cfg.DataDir)), cmp.Or(cfg.keyReload, keyReloadEvery), log.With("component", "keys"))
	n.ready.Store(true)
	ok = true
	log.Info("zoned ready", "node", n.node, "udp", gm.gw.Addr(), "public", gm.gw.PublicAddr(), "zones", len(gm.zones.IDs()),
		"owned", strings.Join(gm.zones.IDs(), ","), "world_zones", wm.Len(),
		"http", n.HTTPAddr(), "nats", nl.safeURL(), "token_key", string(gm.src), "token_keys", strings.Join(gm.tokenKeys().Fingerprints(), ","), "data", cfg.DataDir)
	return n, nil
}

// Ready reports whether the node accepts clients and can reach the world
// (what /readyz serves): started, not stopping, and connected to NATS (cut
// off, its players' zones on other nodes are unreachable and its own zones
// fence themselves). A node holding no zone is ready: it is a gateway.
func (n *Node) Ready() bool {
	return n.ready.Load() && !n.stopped.Load() && (n.nats == nil || n.nats.nc == nil || n.nats.nc.IsConnected())
}

// NATSURL is the NATS client URL this node uses (the embedded server's when
// embedded, carrying the node user's credentials: whoever connects with it
// acts as a node; zonectl wants DATA/admin.creds instead).
func (n *Node) NATSURL() string {
	if n.nats == nil {
		return ""
	}
	return n.nats.url
}

// NodeID is this node's id in the cluster.
func (n *Node) NodeID() string { return n.node }

// NATSWrites is what a node has written to NATS so far: its connection's
// messages and bytes out (headers and payloads; nats.go counts no
// subjects) and, per KV bucket, the messages stored (the stream's last
// sequence) and the bytes a stored message takes on average (subject,
// headers, record and the file store's framing, over the live messages).
type NATSWrites struct {
	Msgs, Bytes uint64
	Buckets     map[string]BucketWrites
}

// BucketWrites is one KV bucket's part of NATSWrites.
type BucketWrites struct {
	Stored     uint64  // messages ever stored (last sequence)
	BytesEach  float64 // live bytes ÷ live messages
	LiveMsgs   uint64
	LiveBytesB uint64
}

// NATSWrites reads the node's NATS counters (cmd/capacity's accounting).
func (n *Node) NATSWrites(ctx context.Context) (NATSWrites, error) {
	var w NATSWrites
	if n.nats == nil || n.nats.nc == nil {
		return w, errors.New("node: no NATS")
	}
	st := n.nats.nc.Stats()
	w.Msgs, w.Bytes = st.OutMsgs, st.OutBytes
	w.Buckets = make(map[string]BucketWrites, len(n.nats.kv))
	for name := range n.nats.kv {
		s, err := n.nats.js.Stream(ctx, "KV_"+name)
		if err != nil {
			return w, fmt.Errorf("bucket %s: %w", name, err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			return w, fmt.Errorf("bucket %s: %w", name, err)
		}
		b := BucketWrites{Stored: info.State.LastSeq, LiveMsgs: info.State.Msgs, LiveBytesB: info.State.Bytes}
		if b.LiveMsgs > 0 {
			b.BytesEach = float64(b.LiveBytesB) / float64(b.LiveMsgs)
		}
		w.Buckets[name] = b
	}
	return w, nil
}

// Leases is the zone directory this node sees (tests, tools).
func (n *Node) Leases() *cluster.Leases { return n.leases }

// Bridge is the cluster bridge (metrics, tests).
func (n *Node) Bridge() *cluster.Bridge { return n.bridge }

// HTTPAddr is the bound HTTP address, or "" when HTTP is off.
func (n *Node) HTTPAddr() string {
	if n.httpLn == nil {
		return ""
	}
	return n.httpLn.Addr().String()
}

// UDPAddr is the gateway's bound address.
func (n *Node) UDPAddr() netip.AddrPort { return n.game.gw.Addr() }

// PublicAddr is the address connect tokens for this node must name.
func (n *Node) PublicAddr() netip.AddrPort { return n.game.gw.PublicAddr() }

// TokenKey is the connect-token key the gateway opens tokens with.
func (n *Node) TokenKey() [32]byte { return n.game.tokenKeys().Mint() }

// Gateway exposes the gateway (stats, tests).
func (n *Node) Gateway() *gateway.Gateway { return n.game.gw }

// Zones exposes the zone actors (inspection, tests).
func (n *Node) Zones() *zone.World { return n.game.zones }

// Registry is the node's metrics registry; components register here.
func (n *Node) Registry() *prometheus.Registry { return n.reg }

func (n *Node) startHTTP() error {
	ln, err := net.Listen("tcp", n.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("http listen %s: %w", n.cfg.HTTPAddr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		if !n.Ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("not ready\n"))
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(n.reg, promhttp.HandlerOpts{}))
	n.routeMap(mux)
	if n.cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	n.httpLn = ln
	n.httpSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	n.httpErr = make(chan error, 1)
	go func() { n.httpErr <- n.httpSrv.Serve(ln) }()
	return nil
}

// Stop shuts the node down gracefully within the config's shutdown timeout
// or ctx, whichever ends first. It is safe to call more than once.
func (n *Node) Stop(ctx context.Context) error {
	if n.stopped.Swap(true) {
		<-n.done
		return nil
	}
	defer close(n.done)
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ShutdownTimeout.D())
	defer cancel()
	return n.shutdown(ctx)
}

// Done is closed once the node has stopped (Stop, or a drain through the
// admin API): zoned exits then.
func (n *Node) Done() <-chan struct{} { return n.done }

func (n *Node) shutdown(ctx context.Context) error {
	n.stopped.Store(true)
	var errs []error
	n.keyWatch.close()
	n.stopMap()
	if n.admin != nil {
		n.admin.Stop()
	}
	if n.dir != nil && n.member != nil {
		// Said first: a node draining at the same time hands its zones
		// and clients elsewhere.
		n.dir.drain(ctx)
	}
	if n.member != nil {
		// Drain: hand the zones to the other live nodes first, while this
		// node's bridge and gateway still carry their players' traffic.
		n.member.drain(ctx)
		n.member.close()
	}
	n.redirectClients(ctx) // then the clients move to other live nodes' gateways (drain)
	if n.game != nil {
		if err := n.game.stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("gateway: %w", err))
		}
	}
	if n.bridge != nil {
		n.bridge.Close()
	}
	if n.players != nil {
		n.players.Close()
	}
	if n.leases != nil {
		n.leases.Close(ctx) // releases only the zones this node still holds
	}
	if n.dir != nil {
		if n.member != nil {
			announceLeft(ctx, n.nats.nc, n.member.world, n.dir.record())
		}
		n.dir.close(ctx)
	}
	if n.nats != nil {
		n.nats.close()
	}
	if n.httpSrv != nil {
		if err := n.httpSrv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http shutdown: %w", err))
		}
		if err := <-n.httpErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, fmt.Errorf("http: %w", err))
		}
	}
	return errors.Join(errs...)
}
