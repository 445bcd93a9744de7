package zone

import (
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/zones/sim"
	"github.com/ghostwire/ghostwire/zones/world"
)

// TestTickSendsToEachPlayersNewestJoin holds the per-slot Join cache
// (joinAt, joinHot) to the joins map: ticks driven on one goroutine, a player who
// joins again through another connection gets its views there from the
// next tick on (its Controls once the connection tells how it numbers its
// moves), and a player who leaves and another who joins into its slot
// each get theirs on their own connection, never the other's.
func TestTickSendsToEachPlayersNewestJoin(t *testing.T) {
	sys := quietSystem()
	defer sys.Shutdown()
	var now time.Duration
	a, z := syncActor(t, sys, &now)
	conns := map[string]*benchConn{}
	join := func(player uint64, name string) {
		c := &benchConn{}
		c.views.AcceptRefs()
		pid, _ := sys.ProcessRegistry.Add(c, "jconn$"+name)
		conns[name] = c
		a.onJoin(benchJoin(player, pid, &c.views))
	}
	tick := func() {
		now += z.Period()
		a.onTick()
	}
	counts := func() map[string]uint64 {
		m := map[string]uint64{}
		for name, c := range conns {
			m[name] = c.taken.Load()
		}
		return m
	}
	expect := func(step string, before map[string]uint64, got ...string) {
		t.Helper()
		after := counts()
		for name := range conns {
			want := uint64(0)
			for _, g := range got {
				if g == name {
					want = 1
				}
			}
			if d := after[name] - before[name]; d != want {
				t.Fatalf("%s: %s took %d views in a tick, want %d", step, name, d, want)
			}
		}
	}
	for i := range 4 {
		join(uint64(i+1), "p"+strconv.Itoa(i+1))
	}
	tick()
	c0 := counts()
	tick()
	expect("steady", c0, "p1", "p2", "p3", "p4")
	// Player 2 joins again through a new connection.
	join(2, "p2again")
	c1 := counts()
	tick()
	expect("rejoined", c1, "p1", "p2again", "p3", "p4")
	// Player 3 leaves; player 9 joins, into its slot.
	slot3 := -1
	for s, h := range a.joinAt {
		if h.gen == a.joinGen && h.player == 3 {
			slot3 = s
		}
	}
	a.leave(3, nil)
	join(9, "p9")
	c2 := counts()
	tick()
	expect("slot reused", c2, "p1", "p2again", "p4", "p9")
	if slot3 < 0 || slot3 >= len(a.joinAt) || a.joinAt[slot3].gen != a.joinGen || a.joinAt[slot3].player != 9 {
		t.Fatalf("player 9 did not take player 3's slot %d: the scene no longer tests a reused slot", slot3)
	}
}

// syncActor is zone x0z0 of the default world as an actor whose ticks the
// test runs on its own goroutine (no timer), sending through sys at once,
// at the time *now.
func syncActor(tb testing.TB, sys *actor.ActorSystem, now *time.Duration) (*zoneActor, *sim.Zone) {
	tb.Helper()
	return syncActorWith(tb, sys, now, sim.Config{Zone: "x0z0", World: world.Default(), Classes: ghostClasses(tb)})
}

// syncActorWith is syncActor with the zone's config cfg.
func syncActorWith(tb testing.TB, sys *actor.ActorSystem, now *time.Duration, cfg sim.Config) (*zoneActor, *sim.Zone) {
	tb.Helper()
	p := Params{Now: func() time.Duration { return *now }, Metrics: new(Metrics), Sim: cfg}
	z, err := sim.New(p.Sim, 0)
	if err != nil {
		tb.Fatal(err)
	}
	a := &zoneActor{p: p, m: p.Metrics}
	a.init(z)
	a.log = slog.New(slog.DiscardHandler)
	a.stopped.Store(true) // no timer: the caller runs the ticks
	a.ctx = syncCtx{sys: sys}
	a.nextAt = z.Period()
	return a, z
}
