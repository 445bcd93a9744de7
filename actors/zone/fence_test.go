package zone

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/proto/pbconv"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// laneLog records the lane-0 events a zone applied and passes the rest
// to the dev game (teleports).
type laneLog struct {
	eventLog
	dev DevGame
}

func (l *laneLog) HandleEvent(c *EventContext, player uint64, e *msg.Event) {
	if e.Class == event.Ordered && e.Lane == 0 {
		l.add(string(e.Payload))
		return
	}
	l.dev.HandleEvent(c, player, e)
}

// eventLog is what a test game's handler recorded, taken by the test.
type eventLog struct {
	mu  sync.Mutex
	got []string
}

func (l *eventLog) add(s string) {
	l.mu.Lock()
	l.got = append(l.got, s)
	l.mu.Unlock()
}

func (l *eventLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	got := l.got
	l.got = nil
	return got
}

// sendNumbered hands zone one Input of player's with lane-0 events
// numbered from..to of numbering gen, as a connection does.
func (f *fixture) sendNumbered(zone string, player, gen, from, to uint64) {
	in := msg.NewInput()
	in.Player, in.EventGen = player, gen
	for s := from; s <= to; s++ {
		in.AddSeq(event.Ordered, 0, 0, fmt.Appendf(nil, "e%d", s), s)
	}
	f.sys.Root.Send(f.world.PID(zone), in)
}

func names(from, to uint64) []string {
	var s []string
	for i := from; i <= to; i++ {
		s = append(s, fmt.Sprintf("e%d", i))
	}
	return s
}

// A zone's node dies after its last checkpoint of a player; another zone
// restores the player from the record (through the record's protobuf, as
// from the KV store), and the player's connection sends again the events
// the dead zone had not reported applied. The restored fence drops the
// ones the checkpoint covers; the rest are applied once, in order; a
// second resend changes nothing; a new session (another numbering) starts
// the fence again. docs/protocol.md §7.20.
func TestEventFenceSurvivesARestore(t *testing.T) {
	defer verifyNoLeaks(t)()
	const gen = 0xfeed
	logA := &laneLog{}
	a := startFixtureWith(t, pairWorld(t), sim.Config{TickRate: 50}, nil, Params{Spawn: at, Events: logA})
	a.join(1, "x0z0")
	a.sendNumbered("x0z0", 1, gen, 1, 6)
	a.sync()
	cp := a.checkpointOf(1)
	if cp.Events.Gen != gen || cp.Events.Last[0] != 6 {
		t.Fatalf("checkpoint's event fence %+v, want generation %#x lane 0 at 6", cp.Events, gen)
	}
	a.sendNumbered("x0z0", 1, gen, 7, 9) // applied after the checkpoint, never reported
	a.sync()
	if got := logA.take(); !slices.Equal(got, names(1, 9)) {
		t.Fatalf("first owner applied %q", got)
	}
	a.stop() // the crash

	logB := &laneLog{}
	b := restoredFixture(t, cp, logB)
	defer b.stop()
	// The connection's unreported events (it heard of 1..3), then new ones.
	b.sendNumbered("x0z0", 1, gen, 4, 12)
	b.sync()
	if got := logB.take(); !slices.Equal(got, names(7, 12)) {
		t.Fatalf("restored zone applied %q, want e7..e12 (e4..e6 are behind the checkpoint's fence)", got)
	}
	b.sendNumbered("x0z0", 1, gen, 10, 12)
	b.sync()
	if got := logB.take(); len(got) != 0 {
		t.Fatalf("a second resend applied %q", got)
	}
	if got := b.world.Metrics().EventsDuplicate.Load(); got != 6 {
		t.Fatalf("%d duplicates counted, want 6", got)
	}
	b.sendNumbered("x0z0", 1, gen+1, 1, 2) // a new session numbers from 1
	b.sync()
	if got := logB.take(); !slices.Equal(got, names(1, 2)) {
		t.Fatalf("a new numbering: applied %q", got)
	}
}

// A handoff carries the fence: events the old owner applied, sent again
// to the new owner, are dropped there.
func TestEventFenceTravelsWithAHandoff(t *testing.T) {
	defer verifyNoLeaks(t)()
	const gen = 77
	log := &laneLog{dev: DevGame{Teleport: true}}
	f := startFixtureWith(t, pairWorld(t), sim.Config{TickRate: 50}, nil, Params{Spawn: at, Events: log})
	defer f.stop()
	f.join(1, "x0z0")
	f.sendNumbered("x0z0", 1, gen, 1, 5)
	f.send("x0z0", 1, ordered(TeleportLane, AppendTeleport(nil, 300, 50)))
	select {
	case <-f.drv.events:
	case <-time.After(2 * time.Second):
		t.Fatal("no redirect after a teleport into the other zone")
	}
	f.sendNumbered("x1z0", 1, gen, 3, 8)
	f.sync()
	if got := log.take(); !slices.Equal(got, names(1, 8)) {
		t.Fatalf("applied %q, want e1..e8 once each", got)
	}
	var fence handoff.EventFence
	if err := f.world.Inspect(5*time.Second, func(z *sim.Zone) {
		if fc, ok := z.EventFence(1); ok {
			fence = fc
		}
	}); err != nil {
		t.Fatal(err)
	}
	if fence.Gen != gen || fence.Last[0] != 8 {
		t.Fatalf("new owner's fence %+v", fence)
	}
}

// A drain freezes a zone and then takes its players' checkpoints, which
// the next owner restores: an event that comes while the zone is frozen
// must not be applied there, or the client — never told it was applied —
// sends it again to the next owner, whose fence (the checkpoint's) takes
// it: applied twice (an echo came back twice in
// TestZonedDrainedMidRunRedirectsTheBots). Kept instead, it is applied
// when the zone runs again, or, the zone handed over, applied once by the
// next owner from the client's resend.
func TestEventsWaitOutAFreeze(t *testing.T) {
	defer verifyNoLeaks(t)()
	const gen = 0xf00d
	logA := &laneLog{}
	a := startFixtureWith(t, pairWorld(t), sim.Config{TickRate: 50}, nil, Params{Spawn: at, Events: logA})
	a.join(1, "x0z0")
	a.sendNumbered("x0z0", 1, gen, 1, 3)
	a.sync()
	// Frozen and let go without a handover (the checkpoints could not be
	// taken): kept, then applied in order before anything newer. Under
	// another pause (a census) an event is applied as it comes.
	pid := a.world.PID("x0z0")
	a.sys.Root.Send(pid, &Pause{Paused: true, By: PauseHandover})
	a.sendNumbered("x0z0", 1, gen, 4, 5)
	a.sync()
	if got := logA.take(); !slices.Equal(got, names(1, 3)) {
		t.Fatalf("before and during a freeze the zone applied %q, want e1..e3 (e4, e5 wait)", got)
	}
	a.sys.Root.Send(pid, &Pause{Paused: true, By: PauseManual})
	a.sys.Root.Send(pid, &Pause{Paused: false, By: PauseHandover})
	a.sendNumbered("x0z0", 1, gen, 6, 6)
	a.sync()
	if got := logA.take(); !slices.Equal(got, names(4, 6)) {
		t.Fatalf("after the freeze, under a census's pause, the zone applied %q, want e4..e6 in order", got)
	}
	a.sys.Root.Send(pid, &Pause{Paused: false, By: PauseManual})

	// Frozen for a handover: the checkpoint taken then covers every event
	// applied, and what came after it is not applied here.
	a.sys.Root.Send(pid, &Pause{Paused: true, By: PauseHandover})
	a.sendNumbered("x0z0", 1, gen, 7, 8)
	a.sync()
	cp := a.checkpointOf(1)
	a.sendNumbered("x0z0", 1, gen, 9, 9)
	a.sync()
	if got := logA.take(); len(got) != 0 {
		t.Fatalf("a zone frozen for a handover applied %q", got)
	}
	if cp.Events.Gen != gen || cp.Events.Last[0] != 6 {
		t.Fatalf("the frozen zone's checkpoint fence %+v, want generation %#x lane 0 at 6", cp.Events, gen)
	}
	a.stop() // handed over: the zone stops, its kept inputs dropped
	if got := a.world.Metrics().EventsPausedDropped.Load(); got != 3 {
		t.Fatalf("%d events counted dropped at the stop, want 3 (e7..e9)", got)
	}

	// The next owner restores the checkpoint; the connection resends what
	// was never reported applied (it heard of e1..e3): each applied once.
	logB := &laneLog{}
	b := restoredFixture(t, cp, logB)
	defer b.stop()
	b.sendNumbered("x0z0", 1, gen, 4, 10)
	b.sync()
	if got := logB.take(); !slices.Equal(got, names(7, 10)) {
		t.Fatalf("the next owner applied %q, want e7..e10 (e4..e6 are behind the checkpoint's fence)", got)
	}
}

// checkpointOf is the checkpoint x0z0 would write of player now.
func (f *fixture) checkpointOf(player uint64) handoff.Checkpoint {
	f.t.Helper()
	var cp handoff.Checkpoint
	if err := f.world.Inspect(5*time.Second, func(z *sim.Zone) {
		if c, ok := z.CheckpointOf(player); ok {
			cp = c
		}
	}); err != nil {
		f.t.Fatal(err)
	}
	return cp
}

// restoredFixture starts another world whose x0z0 restores player 1 from
// cp (through the record's protobuf, as from the KV store), as the zone's
// next owner does; its game's handler is events.
func restoredFixture(t *testing.T, cp handoff.Checkpoint, events EventHandler) *fixture {
	t.Helper()
	rec, err := pbconv.CheckpointFromProto(pbconv.CheckpointToProto(&cp), uint64(cp.Epoch))
	if err != nil {
		t.Fatal(err)
	}
	f := startFixtureWith(t, pairWorld(t), sim.Config{TickRate: 50}, nil, Params{Spawn: at, Events: events})
	p := f.drv.add(1, f.world.PID("x0z0"))
	f.sys.Root.Send(f.world.PID("x0z0"), &msg.Join{Player: 1, Conn: f.dpid, Ghosts: f.dpid, Views: &p.views,
		LastApplied: rec.LastApplied, Restore: rec})
	return f
}

// A lease's hold (the renewal overdue: the zone may be another node's by
// now) keeps events as a freeze does: no tick reports one applied and no
// checkpoint covers it, so one applied during a hold that ends with the
// zone lost is applied again by the next owner from the client's resend
// (70–76 echoes of 1,199 came back twice with the node that embeds NATS
// paused 17 s). Kept, they are applied at the let-go, or, the zone lost,
// once by the next owner; a hold and a freeze at once keep them until
// both let go.
func TestEventsWaitOutALeaseHold(t *testing.T) {
	defer verifyNoLeaks(t)()
	const gen = 0xbeef
	logA := &laneLog{}
	a := startFixtureWith(t, pairWorld(t), sim.Config{TickRate: 50}, nil, Params{Spawn: at, Events: logA})
	a.join(1, "x0z0")
	a.sendNumbered("x0z0", 1, gen, 1, 2)
	a.sync()
	pid := a.world.PID("x0z0")
	a.sys.Root.Send(pid, &Pause{Paused: true, By: PauseLease})
	a.sendNumbered("x0z0", 1, gen, 3, 4)
	a.sync()
	if got := logA.take(); !slices.Equal(got, names(1, 2)) {
		t.Fatalf("before and during a hold the zone applied %q, want e1, e2 (e3, e4 wait)", got)
	}
	// The renewal landed: applied in order, before anything newer.
	a.sys.Root.Send(pid, &Pause{Paused: false, By: PauseLease})
	a.sendNumbered("x0z0", 1, gen, 5, 5)
	a.sync()
	if got := logA.take(); !slices.Equal(got, names(3, 5)) {
		t.Fatalf("after the let-go the zone applied %q, want e3..e5 in order", got)
	}

	// A hold and a freeze at once: kept until the last of them lets go.
	a.sys.Root.Send(pid, &Pause{Paused: true, By: PauseLease | PauseHandover})
	a.sendNumbered("x0z0", 1, gen, 6, 6)
	a.sys.Root.Send(pid, &Pause{Paused: false, By: PauseLease})
	a.sync()
	if got := logA.take(); len(got) != 0 {
		t.Fatalf("still frozen for a handover after the hold's let-go, the zone applied %q", got)
	}
	a.sys.Root.Send(pid, &Pause{Paused: false, By: PauseHandover})
	a.sync()
	if got := logA.take(); !slices.Equal(got, names(6, 6)) {
		t.Fatalf("after both let go the zone applied %q, want e6", got)
	}

	// Held, then lost: the last periodic checkpoint is the next owner's
	// fence, and what came during the hold is applied there, once.
	cp := a.checkpointOf(1)
	a.sys.Root.Send(pid, &Pause{Paused: true, By: PauseLease})
	a.sendNumbered("x0z0", 1, gen, 7, 8)
	a.sync()
	if got := logA.take(); len(got) != 0 {
		t.Fatalf("a held zone applied %q", got)
	}
	a.lostThenResent(cp, gen, 7, 8)
}

// lostThenResent stops f's world — its zone lost with the events from..to
// it kept — and checks that those are counted dropped, and that the next
// owner, restoring cp, applies once each what the client sends again
// (from..to, and one newer).
func (f *fixture) lostThenResent(cp handoff.Checkpoint, gen, from, to uint64) {
	f.t.Helper()
	m := f.world.Metrics()
	dropped := m.EventsPausedDropped.Load()
	f.stop()
	if got := m.EventsPausedDropped.Load() - dropped; got != to-from+1 {
		f.t.Fatalf("%d events counted dropped at the stop, want %d (e%d..e%d)", got, to-from+1, from, to)
	}
	logB := &laneLog{}
	b := restoredFixture(f.t, cp, logB)
	defer b.stop()
	b.sendNumbered("x0z0", 1, gen, from, to+1)
	b.sync()
	if got := logB.take(); !slices.Equal(got, names(from, to+1)) {
		f.t.Fatalf("the next owner applied %q, want e%d..e%d once each", got, from, to+1)
	}
}
