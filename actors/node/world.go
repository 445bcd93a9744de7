package node

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ghostwire/ghostwire/actors/cluster"
	"github.com/ghostwire/ghostwire/actors/gateway"
	"github.com/ghostwire/ghostwire/actors/tokenkey"
	"github.com/ghostwire/ghostwire/actors/zone"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/sim"
	"github.com/ghostwire/ghostwire/zones/world"
)

// game is the in-process world: the actor system, the zone actors of the
// world map and the gateway in front of them.
type game struct {
	sys     *actor.ActorSystem
	zones   *zone.World
	gw      *gateway.Gateway
	keys    atomic.Pointer[tokenkey.Keys] // the first mints redirect tokens; a token sealed under any is accepted (keyWatch replaces them)
	src     tokenkey.Source
	classes *ghost.Registry
	now     func() time.Duration
	origin  time.Time // the wall time at which now read zero
}

// loadWorld reads the world map (--world, or the built-in default).
func loadWorld(cfg Config) (*world.World, error) {
	if cfg.WorldFile == "" {
		return world.Default(), nil
	}
	wm, err := world.Load(cfg.WorldFile)
	if err != nil {
		return nil, fmt.Errorf("world map: %w", err)
	}
	return wm, nil
}

// startGame starts the zone actors of the zones in owned, then runs
// beforeGateway (the cluster bridge puts its proxies under the other
// zones' names there), then opens the gateway.
func startGame(ctx context.Context, cfg Config, wm *world.World, owned []string, reg prometheus.Registerer, getenv func(string) string, log *slog.Logger, placed func(uint64, string, uint64, bool, *handoff.Checkpoint), restored func(uint64, string, uint64, uint64, *handoff.Checkpoint, func(bool)), checkpoint func(string, []handoff.Checkpoint, bool), chunk func(string, int, []handoff.Checkpoint), resume func(uint64, func(*actor.PID, *handoff.Checkpoint)), beforeGateway func(*game) error) (*game, error) {
	keys, src, err := resolveKeys(cfg, getenv, log)
	if err != nil {
		return nil, err
	}
	// One registry for both ends of the ghost pipeline: the zones' view
	// entries name *Class values that every connection's ghost table must
	// hold. Clients assume the default bounds, so the world must fit them.
	bounds := ghost.DefaultBounds()
	if r := wm.Bounds(); r.Min[0] < bounds.Min[0] || r.Min[1] < bounds.Min[2] || r.Max[0] > bounds.Max[0] || r.Max[1] > bounds.Max[2] {
		return nil, fmt.Errorf("world map %q spans x [%g, %g], z [%g, %g]: outside the ghost bounds clients use (x, z in [%g, %g])",
			wm.Name(), r.Min[0], r.Max[0], r.Min[1], r.Max[1], bounds.Min[0], bounds.Max[0])
	}
	classes, err := ghost.NewRegistry(bounds)
	if err != nil {
		return nil, err
	}
	player, npc := ghost.PlayerClass(nil), ghost.NPCClass(nil)
	if err := classes.Register(player, npc); err != nil {
		return nil, err
	}
	g := &game{sys: actor.NewActorSystem(actor.WithLoggerFactory(quietActorLog(log))), src: src, classes: classes}
	g.keys.Store(&keys)
	mono := time.Now().Add(-cfg.clockOffset)
	now := func() time.Duration { return time.Since(mono) }
	g.now, g.origin = now, mono
	// A neighbour may run in another process: its replicas and handoff
	// answers come over NATS, milliseconds behind in-process ones and far
	// more on a loaded host. So a handed-on replica is held for up to a
	// second, a silent neighbour's replicas live 2 s, and an offer waits
	// a second for its answer (in-process defaults: 3 ticks, 1 s, 500 ms).
	base := sim.Config{TickRate: tickRate(cfg.Tick.D()), NPCs: cfg.NPCs, FarEvery: cfg.FarEvery, Seed: 1, HandoffGrace: 20, ReplicaTTL: 2 * time.Second}
	base.Handoff.OfferTimeout = time.Second
	base.Classes[sim.KindPlayer], base.Classes[sim.KindNPC] = player, npc
	zp := zone.Params{Now: now, Origin: mono, Log: log.With("component", "zone"), Spawn: cfg.spawn, Placed: placed, Restored: restored, Checkpoint: checkpoint,
		CheckpointChunk: chunk, ChunkSlices: cluster.ChunkSlices, NPCGeneration: cfg.npcGeneration,
		Acting: cfg.acting}
	if !cfg.DevGame {
		zp.Events = zone.IgnoreEvents
	}
	g.zones, err = zone.StartZones(g.sys, wm, base, zp, owned)
	if err != nil {
		g.stop(ctx)
		return nil, fmt.Errorf("zones: %w", err)
	}
	if beforeGateway != nil {
		if err := beforeGateway(g); err != nil {
			g.stop(ctx)
			return nil, err
		}
	}
	gc := gateway.DefaultConfig()
	gc.Listen = cfg.UDPAddr
	gc.Key, gc.OtherKeys = keys.Mint(), keys[1:]
	gc.MaxConns = cfg.MaxConns
	gc.Conn.Registry = classes
	gc.Conn.Resume = resume
	if gc.ChallengeAt > gc.MaxConns/2 {
		gc.ChallengeAt = gc.MaxConns / 2
	}
	if cfg.PublicAddr != "" {
		if gc.PublicAddr, err = ParsePublicAddr(cfg.PublicAddr); err != nil {
			g.stop(ctx)
			return nil, fmt.Errorf("public address %q: %w", cfg.PublicAddr, err)
		}
	} else if ap, err := parseListenAddr(cfg.UDPAddr); err == nil && ap.Addr().IsUnspecified() {
		// A wildcard bind: tokens minted on this machine name the loopback
		// address. Production sets --public-addr to what clients dial.
		gc.PublicAddr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), ap.Port())
	}
	gc.Zone = func(player uint64, _ []byte) *actor.PID { return g.zones.ZoneFor(player) }
	gc.Logger = log.With("component", "gateway")
	gc.Registerer = reg
	if g.gw, err = gateway.New(ctx, g.sys, gc); err != nil {
		g.stop(ctx)
		return nil, err
	}
	return g, nil
}

// tokenKeys are the token keys the gateway holds.
func (g *game) tokenKeys() tokenkey.Keys { return *g.keys.Load() }

// resolveKeys finds the connect-token keys: --key-file, then
// GHOSTWIRE_TOKEN_KEY, then the dev key in the data dir, generated on first
// start so local clients and bots can mint tokens with it.
func resolveKeys(cfg Config, getenv func(string) string, log *slog.Logger) (tokenkey.Keys, tokenkey.Source, error) {
	if cfg.KeyFile == "" && getenv(tokenkey.EnvVar) == "" {
		k, created, err := tokenkey.EnsureDev(cfg.DataDir, rand.Reader)
		if err != nil {
			return k, "", fmt.Errorf("dev token key: %w", err)
		}
		if created {
			log.Info("generated a dev connect-token key (production: --key-file or GHOSTWIRE_TOKEN_KEY)", "path", tokenkey.DevPath(cfg.DataDir))
		}
		return k, tokenkey.SourceDev, nil
	}
	k, src, err := tokenkey.ResolveKeys(cfg.KeyFile, getenv, cfg.DataDir)
	if err != nil {
		return k, src, fmt.Errorf("token key: %w", err)
	}
	return k, src, nil
}

func tickRate(d time.Duration) int {
	r := int((time.Second + d/2) / d)
	return max(r, 1)
}

// stop ends the game in dependency order: clients are told first (gateway),
// then the zones stop, then the actor system.
func (g *game) stop(ctx context.Context) error {
	var err error
	if g.gw != nil {
		err = g.gw.Close(ctx)
	}
	if g.zones != nil {
		g.zones.Stop()
	}
	g.sys.Shutdown()
	return err
}

// quietActorLog gives protoactor the node's logger at warning level: its
// info lines (dead letters of a connection that just closed, actor starts)
// are routine at game-server rates and would drown the node's own log. The
// one info line that is never routine is a supervisor recovering a
// panicked actor: it is passed on as an error, so a crash that the
// supervisor papers over (a zone restarted empty) cannot go unseen.
func quietActorLog(log *slog.Logger) func(*actor.ActorSystem) *slog.Logger {
	h := log.Handler()
	return func(*actor.ActorSystem) *slog.Logger {
		return slog.New(minLevel{h, slog.LevelWarn}).With("component", "actor")
	}
}

// actorRecovering is how protoactor words a supervisor restarting an actor
// after a panic (logged at info level).
const actorRecovering = "[ACTOR] Recovering"

type minLevel struct {
	slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return (l >= m.min || l >= slog.LevelInfo) && m.Handler.Enabled(ctx, max(l, m.min))
}

func (m minLevel) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < m.min {
		if !strings.HasPrefix(r.Message, actorRecovering) {
			return nil
		}
		r.Level = slog.LevelError
	}
	return m.Handler.Handle(ctx, r)
}

func (m minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{m.Handler.WithAttrs(as), m.min}
}
func (m minLevel) WithGroup(n string) slog.Handler { return minLevel{m.Handler.WithGroup(n), m.min} }
