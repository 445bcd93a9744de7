package zone

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// actingSwitch is a Params.Acting for one zone that a test turns off and
// on, as a node's lease goes overdue and is renewed.
type actingSwitch struct {
	zone string
	off  atomic.Bool
}

func (s *actingSwitch) acting(zone string) bool { return zone != s.zone || !s.off.Load() }

// A node woken from a pause past its lease (SIGSTOP) runs whatever its
// zones had queued before its renewal loop notices the lease overdue and
// holds them: a zone ticked and applied events as the owner of a zone
// another node may have taken meanwhile. So the zone asks Params.Acting
// itself, before the hold comes: no tick, events kept until the lease is
// good again (applied then, in order), or dropped with the zone when it is
// lost; a hold that comes on top keeps them until its own let-go.
func TestZoneFencesItselfBeforeTheHold(t *testing.T) {
	defer verifyNoLeaks(t)()
	const gen = 0xfe7c
	sw := &actingSwitch{zone: "x0z0"}
	logA := &laneLog{}
	a := startFixtureWith(t, pairWorld(t), sim.Config{TickRate: 50}, nil, Params{Spawn: at, Events: logA, Acting: sw.acting})
	a.join(1, "x0z0")
	a.sendNumbered("x0z0", 1, gen, 1, 2)
	a.sync()
	if got := logA.take(); !slices.Equal(got, names(1, 2)) {
		t.Fatalf("an acting zone applied %q, want e1, e2", got)
	}
	m := a.world.Metrics()
	pid := a.world.PID("x0z0")

	// Overdue, and the tick finds it out: no tick from then on.
	sw.off.Store(true)
	waitFor(t, 5*time.Second, "the tick finds the zone fenced", func() bool { return m.Fenced.Load() == 1 })
	ticks := a.ticksOf("x0z0")
	time.Sleep(200 * time.Millisecond) // ten periods at 50 Hz
	if after := a.ticksOf("x0z0"); after != ticks {
		t.Fatalf("a fenced zone ticked: %d ticks, then %d", ticks, after)
	}
	sw.off.Store(false)
	waitFor(t, 5*time.Second, "the zone let go by its fence ticks again", func() bool { return a.ticksOf("x0z0") != ticks })

	// Overdue between ticks (under a census's pause, no tick to find it
	// out), and events are the first thing the zone does: kept, not
	// applied as a census's pause alone would have them.
	a.sys.Root.Send(pid, &Pause{Paused: true, By: PauseManual})
	sw.off.Store(true)
	a.sendNumbered("x0z0", 1, gen, 3, 4)
	a.sync()
	if got := logA.take(); len(got) != 0 {
		t.Fatalf("a zone whose node may no longer run it applied %q", got)
	}
	if got := m.Fenced.Load(); got != 2 {
		t.Fatalf("Fenced %d, want 2", got)
	}
	a.sys.Root.Send(pid, &Pause{Paused: false, By: PauseManual})
	ticks = a.ticksOf("x0z0")
	// Renewed: the zone lets itself go at its next period, the events
	// kept applied in order before anything newer.
	sw.off.Store(false)
	a.waitEvents(logA, names(3, 4))
	a.sendNumbered("x0z0", 1, gen, 5, 5)
	a.sync()
	if got := logA.take(); !slices.Equal(got, names(5, 5)) {
		t.Fatalf("after the fence the zone applied %q, want e5", got)
	}
	waitFor(t, 5*time.Second, "the zone let go by its fence ticks again", func() bool { return a.ticksOf("x0z0") != ticks })

	// Fenced, then the node's hold comes: the lease renewed late, the
	// fence goes, but the hold keeps the events until its own let-go.
	sw.off.Store(true)
	a.sendNumbered("x0z0", 1, gen, 6, 6)
	a.sys.Root.Send(pid, &Pause{Paused: true, By: PauseLease})
	sw.off.Store(false)
	time.Sleep(100 * time.Millisecond) // five periods: the fence's let-go runs
	a.sync()
	if got := logA.take(); len(got) != 0 {
		t.Fatalf("fenced then held, the fence gone, the hold on: the zone applied %q", got)
	}
	a.sys.Root.Send(pid, &Pause{Paused: false, By: PauseLease})
	a.sync()
	if got := logA.take(); !slices.Equal(got, names(6, 6)) {
		t.Fatalf("after the hold's let-go the zone applied %q, want e6", got)
	}

	// Fenced, then lost: the zone stops with what it kept, and the next
	// owner applies it once from the client's resend.
	cp := a.checkpointOf(1)
	sw.off.Store(true)
	a.sendNumbered("x0z0", 1, gen, 7, 8)
	a.sync()
	if got := logA.take(); len(got) != 0 {
		t.Fatalf("a fenced zone applied %q", got)
	}
	a.lostThenResent(cp, gen, 7, 8)
}

// ticksOf is the number of ticks zone's simulation has run.
func (f *fixture) ticksOf(zone string) uint64 {
	f.t.Helper()
	var n uint64
	fut := f.sys.Root.RequestFuture(f.world.PID(zone), &Inspect{Fn: func(z *sim.Zone) { n = z.Tick() }}, 5*time.Second)
	if _, err := fut.Result(); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// waitEvents waits (bounded) until l has recorded want, and takes it.
func (f *fixture) waitEvents(l *laneLog, want []string) {
	f.t.Helper()
	var got []string
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		l.mu.Lock()
		got = slices.Clone(l.got)
		l.mu.Unlock()
		if len(got) >= len(want) {
			break
		}
	}
	if got := l.take(); !slices.Equal(got, want) {
		f.t.Fatalf("the zone applied %q, want %q", got, want)
	}
}

// A fenced zone answers no neighbour's Offer (an Accept would reserve the
// player here), as a held one does; found out by the Offer itself, under
// a census's pause where no tick finds it out first.
func TestFencedZoneAnswersNoOffer(t *testing.T) {
	defer verifyNoLeaks(t)()
	sw := &actingSwitch{zone: "x0z0"}
	f, peer, stop := startWithStandIn(t, slowOffers, Params{Spawn: at, Acting: sw.acting})
	defer stop()
	f.sys.Root.Send(f.world.PID("x0z0"), &Pause{Paused: true, By: PauseManual})
	sw.off.Store(true)
	f.standInHands(handoff.KindOffer, 8, 2)
	f.flushPeer(peer)
	var reserved bool
	f.inspectZone("x0z0", func(z *sim.Zone) { _, reserved = z.Handoffs().Reserved(8) })
	if n := count(peer, 0, handoff.KindAccept) + count(peer, 0, handoff.KindReject); n != 0 || reserved {
		t.Fatalf("fenced: %d answers, reserved %v; want the Offer unanswered", n, reserved)
	}
	sw.off.Store(false)
	f.sys.Root.Send(f.world.PID("x0z0"), &Pause{Paused: false, By: PauseManual})
	f.standInHands(handoff.KindOffer, 8, 2) // the sender's resend
	waitFor(t, 2*time.Second, "the resent Offer accepted", func() bool { return count(peer, 0, handoff.KindAccept) == 1 })
}
