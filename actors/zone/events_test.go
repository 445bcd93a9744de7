package zone

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/zones/sim"
	"github.com/ghostwire/ghostwire/zones/world"
)

func pairWorld(t testing.TB) *world.World {
	t.Helper()
	w, err := world.Grid("pair", 2, 1, 1000, [2]float64{-1000, -500})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// at places every player at a fixed spot of its zone: x = Min+500+id, z = 0.
func at(id uint64, r world.Rect) [3]float32 {
	return [3]float32{float32(r.Min[0] + 500 + float64(id)), 0, 0}
}

// send hands the zone one Input of player's with the given events.
func (f *fixture) send(zone string, player uint64, evs ...msg.Event) {
	in := msg.NewInput()
	in.Player = player
	for _, e := range evs {
		in.Add(e.Class, e.Lane, e.Key, e.Payload)
	}
	f.sys.Root.Send(f.world.PID(zone), in)
}

// sync waits until every zone has handled what was sent to it before.
func (f *fixture) sync() {
	f.t.Helper()
	if err := f.world.Inspect(5*time.Second, func(*sim.Zone) {}); err != nil {
		f.t.Fatal(err)
	}
}

func ordered(lane uint8, p []byte) msg.Event {
	return msg.Event{Class: event.Ordered, Lane: lane, Payload: p}
}

// Ordered lane-0 events come back to their sender byte for byte, in order,
// on lane 0; other lanes and classes do not. The zone copies each payload
// before it releases the pooled Input whose arena it lives in (a kept
// alias would be overwritten by the next Input from the pool).
func TestEchoComesBackByteForByte(t *testing.T) {
	defer verifyNoLeaks(t)()
	f := startFixtureWith(t, pairWorld(t), sim.Config{TickRate: 50}, nil, Params{Spawn: at, MaxEventBytesPerTick: 1 << 20})
	defer f.stop()
	f.join(1, "x0z0")
	f.join(2, "x0z0")
	waitFor(t, 2*time.Second, "joins", func() bool { return f.world.Metrics().Joins.Load() == 2 })
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[uint64][][]byte{}
	const inputs = 300
	for i := range inputs {
		id := uint64(1 + i%2)
		var evs []msg.Event
		for k := range rng.IntN(4) {
			p := make([]byte, rng.IntN(120))
			for j := range p {
				p[j] = byte(rng.Uint32())
			}
			if len(p) >= 8 {
				binary.LittleEndian.PutUint64(p, uint64(i*10+k)) // distinct
			}
			evs = append(evs, ordered(EchoLane, p))
			want[id] = append(want[id], p)
			// Not echoed: another lane, another class.
			evs = append(evs, ordered(2, p), msg.Event{Class: event.Unordered, Payload: p})
		}
		f.send("x0z0", id, evs...)
	}
	f.sync()
	n := len(want[1]) + len(want[2])
	waitFor(t, 5*time.Second, "echoes", func() bool {
		s := f.drv.snapshot()
		return len(s[1].echoes)+len(s[2].echoes) >= n
	})
	f.sync()
	snap := f.drv.snapshot()
	for id, w := range want {
		got := snap[id].echoes
		if len(got) != len(w) {
			t.Fatalf("player %d: %d echoes, want %d", id, len(got), len(w))
		}
		for i, e := range got {
			if e.Class != event.Ordered || e.Lane != EchoLane || !bytes.Equal(e.Payload, w[i]) {
				t.Fatalf("player %d echo %d: class %v lane %d %x, want lane 0 %x", id, i, e.Class, e.Lane, e.Payload, w[i])
			}
		}
	}
	m := f.world.Metrics()
	if m.EventsOut.Load() != uint64(n) || m.EventsOutDropped.Load() != 0 || m.Events.Load() != uint64(3*n) {
		t.Fatalf("events in %d out %d dropped %d, want %d %d 0", m.Events.Load(), m.EventsOut.Load(), m.EventsOutDropped.Load(), 3*n, n)
	}
	if bad := f.drv.problems(); len(bad) > 0 {
		t.Fatal(bad)
	}
}

// The zone sends each player at most MaxEventBytesPerTick bytes of events
// per tick; the rest are dropped and counted, and the budget is back the
// next tick.
func TestEchoBudgetPerTick(t *testing.T) {
	defer verifyNoLeaks(t)()
	f := startFixtureWith(t, pairWorld(t), sim.Config{TickRate: 50}, nil, Params{Spawn: at, MaxEventBytesPerTick: 100})
	defer f.stop()
	f.join(1, "x0z0")
	waitFor(t, 2*time.Second, "join", func() bool { return f.world.Metrics().Joins.Load() == 1 })
	m := f.world.Metrics()
	f.world.Pause(true) // one tick for what follows
	p := func(i byte) []byte { return bytes.Repeat([]byte{i}, 40) }
	f.send("x0z0", 1, ordered(0, p(1)), ordered(0, p(2)), ordered(0, p(3)), ordered(0, p(4)))
	f.send("x0z0", 1, ordered(0, p(5)))
	f.sync()
	if out, drop := m.EventsOut.Load(), m.EventsOutDropped.Load(); out != 2 || drop != 3 {
		t.Fatalf("within one tick: %d echoed, %d dropped; want 2 and 3 (100 bytes of 40-byte events)", out, drop)
	}
	// Wait for a tick of x0z0 itself: the metrics are the world's, and a
	// tick of the other zone alone left x0z0 paused on the tick whose
	// budget was spent (echo 6 dropped, 1 run in 30 on a busy host).
	ticks := zoneTick(t, f, "x0z0")
	f.world.Pause(false)
	waitFor(t, 2*time.Second, "a tick of x0z0", func() bool { return zoneTick(t, f, "x0z0") > ticks })
	f.world.Pause(true)
	f.send("x0z0", 1, ordered(0, p(6)))
	f.sync()
	waitFor(t, 2*time.Second, "echoes", func() bool { return len(f.drv.snapshot()[1].echoes) == 3 })
	got := f.drv.snapshot()[1].echoes
	for i, b := range []byte{1, 2, 6} {
		if !bytes.Equal(got[i].Payload, p(b)) {
			t.Fatalf("echo %d: %x, want %x", i, got[i].Payload[0], b)
		}
	}
}

func gwtp(x, z float32) []byte {
	b := []byte("GWtp")
	b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	return binary.LittleEndian.AppendUint32(b, math.Float32bits(z))
}

// A lane-1 teleport request moves the sender at once with a forced full
// control state; clamped to the world; into another zone through the
// normal handoff, where the new owner forces the send. Malformed requests
// are counted and change nothing.
func TestTeleportEvent(t *testing.T) {
	defer verifyNoLeaks(t)()
	w := pairWorld(t)
	f := startFixtureWith(t, w, sim.Config{TickRate: 50}, nil, Params{Spawn: at})
	defer f.stop()
	f.join(1, "x0z0")
	waitFor(t, 2*time.Second, "join", func() bool { return len(f.drv.snapshot()[1].forced) == 1 }) // the spawn
	forcedTo := func(what string, pos [3]float32) {
		t.Helper()
		waitFor(t, 2*time.Second, what, func() bool {
			fs := f.drv.snapshot()[1].forced
			return len(fs) > 0 && fs[len(fs)-1] == pos
		})
	}
	f.send("x0z0", 1, ordered(TeleportLane, AppendTeleport(nil, -200, 100)))
	forcedTo("a forced control at the target", [3]float32{-200, 0, 100})

	f.send("x0z0", 1, ordered(TeleportLane, gwtp(-300, -1e9)))
	_, cz := w.Clamp(-300, -1e9)
	forcedTo("a forced control at the clamped target", [3]float32{-300, 0, float32(cz)})

	nForced := len(f.drv.snapshot()[1].forced)
	f.send("x0z0", 1,
		ordered(TeleportLane, AppendTeleport(nil, -100, 0)[:9]),                       // short
		ordered(TeleportLane, append([]byte("XX"), AppendTeleport(nil, 1, 1)[2:]...)), // bad magic
		ordered(TeleportLane, AppendTeleport(nil, float32(math.NaN()), 0)),            // not finite
		ordered(TeleportLane, gwtp(float32(math.Inf(1)), 0)),
		msg.Event{Class: event.Unordered, Payload: AppendTeleport(nil, -100, 0)}, // not ordered: ignored
		ordered(3, AppendTeleport(nil, -100, 0)),                                 // another lane: ignored
	)
	f.sync()
	if got := f.world.Metrics().EventsMalformed.Load(); got != 4 {
		t.Fatalf("%d malformed requests counted, want 4", got)
	}
	time.Sleep(60 * time.Millisecond) // three ticks: no forced control may follow
	if got := len(f.drv.snapshot()[1].forced); got != nForced {
		t.Fatalf("%d forced controls after ignored requests, want %d", got, nForced)
	}

	// Into the other zone: a Redirect, and the new owner's forced control.
	f.send("x0z0", 1, ordered(TeleportLane, AppendTeleport(nil, 300, 50)))
	select {
	case <-f.drv.events:
	case <-time.After(2 * time.Second):
		t.Fatal("no redirect after a teleport into the other zone")
	}
	forcedTo("the new owner's forced control", [3]float32{300, 0, 50})
	// Two jumps in one packet: the second finds the player mid-handoff
	// (back into x0z0) and waits for it to settle, then goes through.
	f.send("x1z0", 1, ordered(TeleportLane, AppendTeleport(nil, -300, 50)), ordered(TeleportLane, AppendTeleport(nil, 350, 60)))
	forcedTo("the second jump, after the handoff", [3]float32{350, 0, 60})
	// The new owner's forced control and the old owner's Redirect come
	// from two actors, so either may reach the connection first (-race on a
	// loaded host saw the control first): wait for the route, bounded.
	waitFor(t, 5*time.Second, "the route to x1z0 after the second jump", func() bool {
		return zoneOf(f.drv.snapshot()[1].route) == "x1z0"
	})
	// A request that reaches a zone the player left (a stale route) is
	// passed on to the owner.
	f.send("x1z0", 1, ordered(TeleportLane, AppendTeleport(nil, -400, 0)))
	forcedTo("a teleport back", [3]float32{-400, 0, 0})
	f.send("x1z0", 1, ordered(TeleportLane, AppendTeleport(nil, -450, 0)))
	forcedTo("a passed-on teleport", [3]float32{-450, 0, 0})
	if got := f.world.Metrics().Teleports.Load(); got != 7 {
		t.Fatalf("%d teleports applied, want 7", got)
	}
	if f.world.Metrics().Forwarded.Load() == 0 {
		t.Fatal("the stale request was not passed on")
	}
}

// recorder is a game's own handler: it keeps copies of what it was given
// and answers on lane 3, once to the sender and once to a stranger.
type recorder struct {
	got  [][]byte
	zone string
}

func (r *recorder) HandleEvent(c *EventContext, player uint64, e *msg.Event) {
	r.got = append(r.got, append([]byte(nil), e.Payload...))
	c.Send(player, event.Ordered, 3, 0, []byte(fmt.Sprintf("ack %s", e.Payload)))
	c.Send(999, event.Ordered, 3, 0, e.Payload) // not here: dropped, counted
	r.zone = c.Zone().ID()
}

// The dev game can be switched off, and a game plugs in its own handler.
func TestEventHandlerIsPluggable(t *testing.T) {
	defer verifyNoLeaks(t)()
	w := pairWorld(t)
	sys := quietSystem()
	defer sys.Shutdown()
	clk := newClock()
	d := newDriver(nil)
	dpid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return d }))
	defer func() { _ = sys.Root.StopFuture(dpid).Wait() }()
	for _, tc := range []struct {
		name   string
		events EventHandler
	}{{"dev game off", &DevGame{}}, {"ignore", IgnoreEvents}} {
		m := new(Metrics)
		zw, err := Start(sys, w, sim.Config{TickRate: 50}, Params{Now: clk.Now, Metrics: m, Spawn: at, Events: tc.events})
		if err != nil {
			t.Fatal(err)
		}
		p := d.add(1, zw.PID("x0z0"))
		sys.Root.Send(zw.PID("x0z0"), &msg.Join{Player: 1, Conn: dpid, Ghosts: dpid, Views: &p.views})
		in := msg.NewInput()
		in.Player = 1
		in.Add(event.Ordered, EchoLane, 0, []byte("echo?"))
		in.Add(event.Ordered, TeleportLane, 0, AppendTeleport(nil, 300, 0))
		sys.Root.Send(zw.PID("x0z0"), in)
		if err := zw.Inspect(5*time.Second, func(*sim.Zone) {}); err != nil {
			t.Fatal(err)
		}
		if m.Events.Load() != 2 || m.EventsOut.Load() != 0 || m.Teleports.Load() != 0 || m.HandoffsIn.Load() != 0 {
			t.Fatalf("%s: events %d, echoed %d, teleported %d", tc.name, m.Events.Load(), m.EventsOut.Load(), m.Teleports.Load())
		}
		zw.Stop()
	}

	rec := &recorder{}
	m := new(Metrics)
	zw, err := Start(sys, w, sim.Config{TickRate: 50}, Params{Now: clk.Now, Metrics: m, Spawn: at, Events: rec})
	if err != nil {
		t.Fatal(err)
	}
	defer zw.Stop()
	d.mu.Lock()
	d.players = map[uint64]*dplayer{}
	d.order = nil
	d.mu.Unlock()
	p := d.add(1, zw.PID("x0z0"))
	sys.Root.Send(zw.PID("x0z0"), &msg.Join{Player: 1, Conn: dpid, Ghosts: dpid, Views: &p.views})
	in := msg.NewInput()
	in.Player = 1
	in.Add(event.Unguaranteed, 0, 0, []byte("a"))
	in.Add(event.Ordered, 5, 0, []byte("b"))
	sys.Root.Send(zw.PID("x0z0"), in)
	if err := zw.Inspect(5*time.Second, func(*sim.Zone) {}); err != nil {
		t.Fatal(err)
	}
	if len(rec.got) != 2 || string(rec.got[0]) != "a" || string(rec.got[1]) != "b" || rec.zone != "x0z0" {
		t.Fatalf("handler got %q in zone %q", rec.got, rec.zone)
	}
	if m.EventsOut.Load() != 2 || m.EventsOutDropped.Load() != 2 {
		t.Fatalf("out %d dropped %d, want 2 and 2", m.EventsOut.Load(), m.EventsOutDropped.Load())
	}
	waitFor(t, 2*time.Second, "replies", func() bool { return len(d.snapshot()[1].echoes) == 2 })
	if e := d.snapshot()[1].echoes[1]; e.Lane != 3 || string(e.Payload) != "ack b" {
		t.Fatalf("reply %+v", e)
	}
}

// Views name players by their Join (token) ids, and each player ghost's
// Extra[0..1] is the move seq its state reflects; a token id in the NPC
// range is refused with a Kick.
func TestViewsNamePlayersByTokenID(t *testing.T) {
	defer verifyNoLeaks(t)()
	a, b := uint64(0x4757_0000_0000+1<<20|1), uint64(0x4757_0000_0000+2<<20|7)
	walk := func(id uint64, tick int) (int8, uint16) { return 0, uint16(id) } // turn on the spot
	near := func(id uint64, r world.Rect) [3]float32 { return [3]float32{float32(-500 + float64(id%8)), 0, 0} }
	f := startFixtureWith(t, pairWorld(t), sim.Config{TickRate: 50}, walk, Params{Spawn: near})
	defer f.stop()
	f.join(a, "x0z0")
	f.join(b, "x0z0")
	f.join(1<<63|5, "x0z0")
	waitFor(t, 2*time.Second, "joins", func() bool { return f.world.Metrics().Joins.Load() == 2 })
	for range 7 {
		f.sys.Root.Send(f.dpid, &driverStep{dt: 19})
		time.Sleep(20 * time.Millisecond)
	}
	// a sent 7 moves, b too; after they are applied every view of a shows b
	// at seq 7 (and vice versa).
	waitFor(t, 3*time.Second, "views at the last move", func() bool {
		s := f.drv.snapshot()
		for _, pair := range [][2]uint64{{a, b}, {b, a}} {
			ok := false
			for _, e := range s[pair[0]].lastView {
				if e.Entity == pair[1] && e.State.Extra[0] == 7 && e.State.Extra[1] == 0 {
					ok = true
				}
			}
			if !ok {
				return false
			}
		}
		return true
	})
	if !f.drv.snapshot()[1<<63|5].kicked || f.world.Metrics().JoinsRejected.Load() != 1 {
		t.Fatal("a token id in the NPC range was not refused")
	}
}

// The event path allocates nothing in the steady state: payloads are
// copied into pooled Outputs' arenas.
func TestEventPathAllocatesNothing(t *testing.T) {
	a, in := eventBench(t)
	allocs := testing.AllocsPerRun(200, func() { a.echoOnce(in) })
	if allocs != 0 && !raceEnabled { // the race detector makes sync.Pool drop items
		t.Fatalf("%.1f allocations per Input with 4 echoes", allocs)
	}
	if a.m.EventsOut.Load() == 0 {
		t.Fatal("nothing echoed")
	}
}

// BenchmarkZoneEcho: one Input with four 40-byte lane-0 events through the
// dev game into a pooled Output (no actor system: the send is the
// mailbox's cost, not the zone's).
func BenchmarkZoneEcho(b *testing.B) {
	a, in := eventBench(b)
	b.ReportAllocs()
	for b.Loop() {
		a.echoOnce(in)
	}
}

func eventBench(t testing.TB) (*zoneActor, *msg.Input) {
	t.Helper()
	p := Params{Now: newClock().Now, Sim: sim.Config{Zone: "x0z0", World: pairWorld(t)}, MaxEventBytesPerTick: math.MaxInt}
	z, err := sim.New(p.Sim, 0)
	if err != nil {
		t.Fatal(err)
	}
	a := &zoneActor{p: p, m: new(Metrics)}
	a.init(z)
	// The zone owns player 1: it applies no event of a player it does
	// not (handleEvents).
	if err := z.Join(p.Now(), 1, "", "p1", [3]float32{-300, 0, 0}, 0); err != nil {
		t.Fatal(err)
	}
	a.joins[1] = &msg.Join{Player: 1, Conn: actor.NewPID("nonhost", "conn")}
	in := msg.NewInput()
	in.Player = 1
	for i := range 4 {
		in.Add(event.Ordered, EchoLane, 0, bytes.Repeat([]byte{byte(i)}, 40))
	}
	a.echoOnce(in) // warm the pools
	return a, in
}

// echoOnce handles in's events and releases the Outputs instead of sending.
func (a *zoneActor) echoOnce(in *msg.Input) {
	a.handleEvents(in)
	for _, po := range a.outs {
		po.o.Release()
	}
	a.outs = a.outs[:0]
}

func TestParseTeleport(t *testing.T) {
	x, z, err := ParseTeleport(AppendTeleport(nil, 12.5, -7))
	if err != nil || x != 12.5 || z != -7 || len(AppendTeleport(nil, 0, 0)) != TeleportLen {
		t.Fatalf("canonical: %g %g %v", x, z, err)
	}
	if x, z, err = ParseTeleport(gwtp(-1, 2)); err != nil || x != -1 || z != 2 {
		t.Fatalf("GWtp: %g %g %v", x, z, err)
	}
	for _, p := range [][]byte{nil, []byte("TP"), AppendTeleport(nil, 1, 2)[:9], append(AppendTeleport(nil, 1, 2), 0),
		[]byte("tp\x00\x00\x00\x00\x00\x00\x00\x00"), gwtp(1, 2)[:11], AppendTeleport(nil, float32(math.Inf(-1)), 0)} {
		if _, _, err := ParseTeleport(p); !errors.Is(err, ErrMalformed) {
			t.Fatalf("%q: %v, want ErrMalformed", p, err)
		}
	}
}

// FuzzParseTeleport: any bytes give a finite position or ErrMalformed,
// never a panic; a valid request re-encodes to itself.
func FuzzParseTeleport(f *testing.F) {
	f.Add(AppendTeleport(nil, 1, 2))
	f.Add(gwtp(-3, 4))
	f.Fuzz(func(t *testing.T, p []byte) {
		x, z, err := ParseTeleport(p)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatal(err)
			}
			return
		}
		if !finite(x) || !finite(z) {
			t.Fatalf("non-finite %g %g accepted", x, z)
		}
		if len(p) == TeleportLen && !bytes.Equal(AppendTeleport(nil, x, z), p) {
			t.Fatalf("%x does not round-trip", p)
		}
	})
}

// zoneTick is the named zone's tick counter, read inside its actor.
func zoneTick(t *testing.T, f *fixture, zone string) uint64 {
	t.Helper()
	var tick uint64
	found := false
	if err := f.world.Inspect(5*time.Second, func(z *sim.Zone) {
		if z.Config().Zone == zone {
			tick, found = z.Tick(), true
		}
	}); err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Fatalf("no zone %s", zone)
	}
	return tick
}

// TestOutBudgetSize keeps a player's per-tick event budget (an entry in the
// zone actor's budget map for every player sent an event while here) at 8
// bytes: 16, a map slot of 24, while it kept a uint64 tick and an int
// count.
func TestOutBudgetSize(t *testing.T) {
	if n := unsafe.Sizeof(outBudget{}); n > 8 {
		t.Errorf("outBudget is %d bytes, want ≤ 8", n)
	}
}
