package conn

import (
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// relookFixture is supersedeFixture's connection joined to its recording
// zone (the record lookup of its first datagram answered), registered
// under a PID so that the answers of its later lookups come back through
// the actor system to its shard's inbox, as on a gateway. lookups holds
// the done of every later lookup, in order, unanswered.
type relookFixture struct {
	t      *testing.T
	s      *shard
	c      *Conn
	z      *zoneRec
	zone   *actor.PID
	mu     sync.Mutex
	dones  []func(*actor.PID, *handoff.Checkpoint)
	joined time.Duration // when the first Join went
}

func newRelookFixture(t *testing.T) *relookFixture {
	t.Helper()
	f := &relookFixture{t: t}
	var first func(*actor.PID, *handoff.Checkpoint)
	_, s, c, z, zone := supersedeFixture(t, func(_ uint64, done func(*actor.PID, *handoff.Checkpoint)) {
		if first == nil {
			first = done
			return
		}
		f.mu.Lock()
		f.dones = append(f.dones, done)
		f.mu.Unlock()
	})
	if first == nil || !c.resuming {
		t.Fatalf("no lookup out after the first datagrams (resuming %v)", c.resuming)
	}
	f.s, f.c, f.z, f.zone = s, c, z, zone
	var ok bool
	if c.pid, ok = s.pool.sys.ProcessRegistry.Add(procOf(c), "conn-relook"); !ok {
		t.Fatal("conn PID taken")
	}
	f.joined = 6 * benchStep
	s.handle(c, &resumed{zone: zone}, f.joined) // the record names the zone, no checkpoint: a fresh Join
	s.pumpOne(c, f.joined)
	s.sendInputs()
	if !c.joined {
		t.Fatal("not joined after the lookup's answer")
	}
	return f
}

// lookups is how many lookups went after the first.
func (f *relookFixture) lookups() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.dones)
}

// answer answers lookup i (0: the first after the Join) with zone and cp:
// the answer is posted to the connection's PID and handled in the next
// round.
func (f *relookFixture) answer(i int, zone *actor.PID, cp *handoff.Checkpoint) {
	f.mu.Lock()
	done := f.dones[i]
	f.mu.Unlock()
	done(zone, cp)
}

// control is the zone's Control of epoch for the tick at now, handled and
// pumped; it reports whether the connection took it.
func (f *relookFixture) control(epoch uint64, now time.Duration) bool {
	if f.c.closed {
		f.t.Fatalf("the connection closed before %v (its session timed out?)", now)
	}
	m := msg.NewControl()
	m.Epoch, m.LastApplied = epoch, f.c.applied
	f.s.handle(f.c, m, now)
	f.s.pumpOne(f.c, now)
	return f.c.ctlAt == now
}

// quiet runs the shard's rounds every 50 ms over (from, to] with nothing
// posted but what the connection's lookups bring back: its client sends
// nothing (idle, or its datagrams lost). It returns the last round's time.
func (f *relookFixture) quiet(from, to time.Duration) time.Duration {
	now := from
	for now+50*time.Millisecond <= to {
		now += 50 * time.Millisecond
		f.s.round(now)
	}
	return now
}

// relookWithin is when a quiet connection's relook has gone for sure
// after its zone's last word: zoneSilentAfter, then at most a keepalive
// until the connection's deadline wakes it. (Two of them stay inside the
// token's 10 s timeout.)
func relookWithin(f *relookFixture) time.Duration {
	return zoneSilentAfter + f.s.pool.cfg.Session.KeepAlive + 100*time.Millisecond
}

// joins are the Joins the zone pid got, in order (only zone has a
// recorder: the others are named in the Joins' order by the test).
func (f *relookFixture) joins() []*msg.Join {
	f.z.mu.Lock()
	defer f.z.mu.Unlock()
	var js []*msg.Join
	for _, m := range f.z.got {
		if j, ok := m.(*msg.Join); ok {
			js = append(js, j)
		}
	}
	return js
}

// TestQuietClientsZoneLookedUpAgain: a player whose zone was lost is
// placed again while its client sends nothing. The lookups for a zone
// that does not answer — a Join that brought no Control
// (lookupAgainAfter), a zone silent after it answered (zoneSilentAfter) —
// ran only at the end of a datagram, so an idle client (or one whose
// datagrams are lost) left its player owned by nobody until it sent
// again. They run on the connection's own deadline too (the session's
// keepalive wakes it at least once a second): the lookup goes within a
// keepalive of its time, and its answer joins the zone the record names.
func TestQuietClientsZoneLookedUpAgain(t *testing.T) {
	t.Run("zone silent", func(t *testing.T) {
		f := newRelookFixture(t)
		at := f.joined + benchStep
		if !f.control(1, at) {
			t.Fatal("the zone's first Control was not taken")
		}
		// The zone's node dies; the client goes quiet. No lookup before
		// zoneSilentAfter.
		now := f.quiet(at, at+zoneSilentAfter-100*time.Millisecond)
		if n := f.lookups(); n != 0 {
			t.Fatalf("%d lookups %v after the zone's last Control, want none before %v", n, now-at, zoneSilentAfter)
		}
		keepAlive := f.s.pool.cfg.Session.KeepAlive
		now = f.quiet(now, at+zoneSilentAfter+keepAlive+100*time.Millisecond)
		if n := f.lookups(); n != 1 {
			t.Fatalf("%d lookups within %v of the zone's last Control with a quiet client, want 1", n, now-at)
		}
		if got := f.s.pool.counters.Relooks.Load(); got != 1 {
			t.Fatalf("relooks %d, want 1", got)
		}
		// The record names the zone's new owner (here the same recorder,
		// as another node's zone would be reached through its proxy).
		f.answer(0, f.zone, &handoff.Checkpoint{Entity: f.c.player, Epoch: 4})
		f.quiet(now, now+50*time.Millisecond)
		js := f.joins()
		if len(js) != 2 || js[1].Restore == nil || js[1].Restore.Epoch != 4 {
			t.Fatalf("the zone got %d Joins (the last restoring %v), want the first and one restoring the record's checkpoint", len(js), js[len(js)-1].Restore)
		}
	})
	t.Run("a lookup that panics", func(t *testing.T) {
		// Config.Resume panics on the timer's lookup: it ends that
		// connection only, as a panic in its event or pump does
		// (handleFrom, pumpFrom), not the shard's goroutine.
		f := newRelookFixture(t)
		at := f.joined + benchStep
		f.control(1, at)
		f.s.pool.cfg.Resume = func(uint64, func(*actor.PID, *handoff.Checkpoint)) { panic("resume") }
		f.quiet(at, at+relookWithin(f))
		if !f.c.stopped || !f.c.closed {
			t.Fatalf("after its lookup panicked: stopped %v, closed %v; want the connection failed", f.c.stopped, f.c.closed)
		}
	})
	t.Run("join unanswered", func(t *testing.T) {
		f := newRelookFixture(t)
		// The Join went to a zone whose node was stopping: no Control,
		// and the client is quiet.
		now := f.quiet(f.joined, f.joined+lookupAgainAfter-100*time.Millisecond)
		if n := f.lookups(); n != 0 {
			t.Fatalf("%d lookups %v after the Join, want none before %v", n, now-f.joined, lookupAgainAfter)
		}
		keepAlive := f.s.pool.cfg.Session.KeepAlive
		now = f.quiet(now, f.joined+lookupAgainAfter+keepAlive+100*time.Millisecond)
		if n := f.lookups(); n != 1 || !f.c.resuming {
			t.Fatalf("%d lookups within %v of an unanswered Join with a quiet client (resuming %v), want 1", n, now-f.joined, f.c.resuming)
		}
		f.answer(0, f.zone, nil)
		f.quiet(now, now+50*time.Millisecond)
		if js := f.joins(); len(js) != 2 || f.c.resuming {
			t.Fatalf("the zone got %d Joins (resuming %v), want a second after the lookup", len(js), f.c.resuming)
		}
	})
}

// TestRelookTakesTheRecordsEpoch: a connection that took the epoch of a
// restore whose record write was later refused (a newer owner exists)
// takes the record's epoch on its next relook, lower as it is, and the
// real owner's Controls again: it dropped them for good before ("sent 70,
// acked 62"). A late answer to an older lookup lowers nothing, whatever
// came since: a newer owner's Control, or a newer lookup.
func TestRelookTakesTheRecordsEpoch(t *testing.T) {
	sys := func(f *relookFixture) *actor.ActorSystem { return f.s.pool.sys }
	other := func(t *testing.T, f *relookFixture, name string) *actor.PID {
		pid, ok := sys(f).ProcessRegistry.Add(&zoneRec{}, name)
		if !ok {
			t.Fatalf("PID %s taken", name)
		}
		return pid
	}
	t.Run("the record after a dropped restore", func(t *testing.T) {
		f := newRelookFixture(t)
		at := f.joined + benchStep
		if !f.control(5, at) { // zone A owns the player at epoch 5
			t.Fatal("zone A's Control was not taken")
		}
		// A's cross-process Commit to B is slow: silent for 3 s, the
		// connection looks the record up, which still names A at 5.
		now := f.quiet(at, at+relookWithin(f))
		if f.lookups() != 1 {
			t.Fatalf("%d lookups, want 1", f.lookups())
		}
		a2 := other(t, f, "zone-a-restore")
		f.answer(0, a2, &handoff.Checkpoint{Entity: f.c.player, Epoch: 5})
		now = f.quiet(now, now+50*time.Millisecond)
		// A puts the player back above 5 (9), its record write refused:
		// B wrote 7. The connection took 9 from the restore's Control.
		now += benchStep
		if !f.control(9, now) {
			t.Fatal("the restore's Control was not taken")
		}
		view := func(epoch uint64) (stale bool) {
			v := msg.NewView()
			v.Epoch = epoch
			before := f.c.views.Stale()
			f.c.views.Publish(v)
			return f.c.views.Stale() != before
		}
		if view(9) { // the restore's zone's view
			t.Fatal("the restore's view at 9 dropped")
		}
		// B, the real owner at 7: its Controls are the previous owner's
		// to a connection at 9.
		now += benchStep
		if f.control(7, now) {
			t.Fatal("the real owner's Control at 7 taken over the connection's 9: the fixture is wrong")
		}
		// Silent (to it) for 3 s: the relook names B at 7.
		now = f.quiet(now, now+relookWithin(f))
		if f.lookups() != 2 {
			t.Fatalf("%d lookups, want 2 (the restore's zone silent too)", f.lookups())
		}
		b := other(t, f, "zone-b")
		f.answer(1, b, &handoff.Checkpoint{Entity: f.c.player, Epoch: 7})
		now = f.quiet(now, now+50*time.Millisecond)
		if f.c.ctlEpoch != 7 || f.c.zone != b {
			t.Fatalf("after the relook naming B at 7: epoch %d, zone %v", f.c.ctlEpoch, f.c.zone)
		}
		now += benchStep
		if !f.control(7, now) {
			t.Fatal("the real owner's Control at 7 dropped after the record named it: the player is unplaced for good")
		}
		if view(7) {
			t.Fatal("the real owner's view at 7 dropped as stale after the record named it: the player moves, its ghosts do not")
		}
	})
	t.Run("a stale record below the Redirect taken", func(t *testing.T) {
		f := newRelookFixture(t)
		at := f.joined + benchStep
		if !f.control(2, at) { // zone A owns the player at epoch 2
			t.Fatal("zone A's Control was not taken")
		}
		// A hands the player to B at 3: B's Redirect is taken.
		b := other(t, f, "zone-b")
		now := at + benchStep
		f.s.handle(f.c, &msg.Redirect{Player: f.c.player, Zone: b, Epoch: 3}, now)
		if f.c.zone != b {
			t.Fatal("B's Redirect at 3 not taken")
		}
		// B is held (its lease's renewal overdue: no Control) past
		// zoneSilentAfter; the record, read while the Commit's write is
		// still pending, names A at 2.
		now = f.quiet(now, now+relookWithin(f))
		if f.lookups() != 1 {
			t.Fatalf("%d lookups, want 1", f.lookups())
		}
		f.answer(0, f.zone, &handoff.Checkpoint{Entity: f.c.player, Epoch: 2})
		now = f.quiet(now, now+50*time.Millisecond)
		if f.c.zone != f.zone || f.c.ctlEpoch != 2 {
			t.Fatalf("after the relook naming A at 2: zone %v, epoch %d", f.c.zone, f.c.ctlEpoch)
		}
		// B, let go, owns the player at 3 and resends its Redirect: the
		// connection must follow it, or its inputs go to A for good
		// while B's Controls keep it from looking again.
		now += benchStep
		if !f.control(3, now) {
			t.Fatal("B's Control at 3 not taken")
		}
		f.s.handle(f.c, &msg.Redirect{Player: f.c.player, Zone: b, Epoch: 3}, now)
		if f.c.zone != b {
			t.Fatalf("B's Redirect at 3 dropped after the relook took A's record at 2: the connection's inputs go to %v", f.c.zone)
		}
	})
	t.Run("a late answer after a newer owner's Control", func(t *testing.T) {
		f := newRelookFixture(t)
		at := f.joined + benchStep
		f.control(5, at)
		now := f.quiet(at, at+relookWithin(f))
		if f.lookups() != 1 {
			t.Fatalf("%d lookups, want 1", f.lookups())
		}
		// A failover restored the player at 9 (its Rejoin missed this
		// connection) and its Controls come before the lookup's answer.
		now += benchStep
		if !f.control(9, now) {
			t.Fatal("the new owner's Control at 9 was not taken")
		}
		f.answer(0, other(t, f, "zone-old"), &handoff.Checkpoint{Entity: f.c.player, Epoch: 5})
		now = f.quiet(now, now+50*time.Millisecond)
		if f.c.ctlEpoch != 9 || f.c.zone != f.zone || len(f.joins()) != 1 {
			t.Fatalf("a late answer naming 5 after a Control at 9: epoch %d, zone %v, %d Joins; want 9, the zone, no Join", f.c.ctlEpoch, f.c.zone, len(f.joins()))
		}
		if f.control(5, now+benchStep) {
			t.Fatal("the previous owner's Control at 5 taken after the new owner's at 9")
		}
	})
	t.Run("a late answer after a newer lookup", func(t *testing.T) {
		f := newRelookFixture(t)
		at := f.joined + benchStep
		f.control(5, at)
		now := f.quiet(at, at+relookWithin(f))
		if f.lookups() != 1 {
			t.Fatalf("%d lookups, want 1", f.lookups())
		}
		// The first lookup's answer is slow: a second goes 3 s after it,
		// and only then does the first's answer (the record as it was
		// read first, naming the old zone) come.
		now = f.quiet(now, now+relookWithin(f))
		if f.lookups() != 2 {
			t.Fatalf("%d lookups, want 2", f.lookups())
		}
		f.answer(0, other(t, f, "zone-old"), &handoff.Checkpoint{Entity: f.c.player, Epoch: 3})
		now = f.quiet(now, now+50*time.Millisecond)
		if f.c.ctlEpoch != 5 || f.c.zone != f.zone {
			t.Fatalf("the older lookup's answer after a newer lookup went: epoch %d, zone %v; want 5, the zone", f.c.ctlEpoch, f.c.zone)
		}
		// The newer lookup's answer is taken: B at 7.
		b := other(t, f, "zone-b")
		f.answer(1, b, &handoff.Checkpoint{Entity: f.c.player, Epoch: 7})
		f.quiet(now, now+50*time.Millisecond)
		if f.c.ctlEpoch != 7 || f.c.zone != b {
			t.Fatalf("the newer lookup's answer naming B at 7: epoch %d, zone %v", f.c.ctlEpoch, f.c.zone)
		}
	})
	t.Run("a late answer after a Rejoin", func(t *testing.T) {
		f := newRelookFixture(t)
		at := f.joined + benchStep
		f.control(5, at)
		now := f.quiet(at, at+relookWithin(f))
		if f.lookups() != 1 {
			t.Fatalf("%d lookups, want 1", f.lookups())
		}
		// The zone that restored the player asks it back (Rejoin, from
		// the record it read) before the lookup's answer comes.
		now += benchStep
		f.s.handle(f.c, &msg.Rejoin{Player: f.c.player, Restore: &handoff.Checkpoint{Entity: f.c.player, Epoch: 5}}, now)
		f.s.sendInputs()
		if len(f.joins()) != 2 {
			t.Fatalf("%d Joins after the Rejoin, want 2", len(f.joins()))
		}
		f.answer(0, other(t, f, "zone-old"), &handoff.Checkpoint{Entity: f.c.player, Epoch: 3})
		f.quiet(now, now+50*time.Millisecond)
		if f.c.ctlEpoch != 5 || f.c.zone != f.zone || len(f.joins()) != 2 {
			t.Fatalf("a lookup's answer after a Rejoin: epoch %d, zone %v, %d Joins; want 5, the Rejoin's zone, no third Join", f.c.ctlEpoch, f.c.zone, len(f.joins()))
		}
	})
}

// A restore's floor drops the Outputs of owners the player was restored
// away from, but not those of the owner that wrote the restore's
// checkpoint whose events that checkpoint covers: the restored zone never
// applies those again, so the late Output is their only echo. By hand (a
// zone handed over from the node that had just restored its players),
// the old owner's last Output came after the new owner's first Control
// and was dropped: 10 echoes of each of four players lost.
func TestLateOutputOfTheCheckpointsWriter(t *testing.T) {
	f := newRelookFixture(t)
	const gen = 0x5eed
	now := f.joined + benchStep
	f.control(4, now)
	fence := handoff.EventFence{Gen: gen}
	fence.Last[0] = 25
	now += benchStep
	f.s.handle(f.c, &msg.Rejoin{Player: f.c.player, Restore: &handoff.Checkpoint{Entity: f.c.player, Epoch: 5, Events: fence}}, now)
	f.s.sendInputs()
	now += benchStep
	f.control(6, now) // the restored zone: the floor is 5 from now on
	stale := func(epoch, last uint64) bool {
		t.Helper()
		before := f.s.pool.counters.EventsStale.Load()
		o := msg.NewOutput()
		o.Player, o.Epoch = f.c.player, epoch
		o.Applied = handoff.EventFence{Gen: gen}
		o.Applied.Last[0] = last
		o.Add(event.Ordered, 0, 0, []byte("echo"))
		f.s.handle(f.c, o, now)
		return f.s.pool.counters.EventsStale.Load() != before
	}
	if stale(5, 25) {
		t.Fatal("the checkpoint writer's Output of events the checkpoint covers dropped: its echoes lost")
	}
	if !stale(5, 26) {
		t.Fatal("the checkpoint writer's Output of an event past the checkpoint delivered: the restored zone applies it again")
	}
	if !stale(4, 20) {
		t.Fatal("an Output of an owner before the checkpoint's delivered")
	}
	if stale(6, 30) {
		t.Fatal("the restored zone's own Output dropped")
	}
}

// A Join that brought no Control (its zone never answered: its node was
// losing it) is sent again after a fresh lookup, and the events the
// connection keeps go with it: they went with the first Join, to the same
// zone. Without them the player's first event was never applied anywhere
// (`make chaos`: 8 first echoes lost of 17,868).
func TestJoinAgainResendsTheKeptEvents(t *testing.T) {
	f := newRelookFixture(t)
	now := f.joined + benchStep
	f.c.Event(event.Event{Class: event.Ordered, Lane: 0, Seq: 1, Payload: []byte("e1")})
	f.c.flushInput(now)
	f.s.sendInputs()
	now = f.quiet(now, now+lookupAgainAfter+f.s.pool.cfg.Session.KeepAlive+100*time.Millisecond)
	if f.lookups() != 1 {
		t.Fatalf("%d lookups after a Join with no Control, want 1", f.lookups())
	}
	f.answer(0, f.zone, nil)
	f.quiet(now, now+50*time.Millisecond)
	f.z.mu.Lock()
	defer f.z.mu.Unlock()
	joins, resent := 0, false
	for _, m := range f.z.got {
		ins := []*msg.Input{}
		switch m := m.(type) {
		case *msg.Join:
			joins++
		case *msg.Input:
			ins = append(ins, m)
		case *msg.Inputs:
			ins = append(ins, m.List...)
		}
		for _, in := range ins {
			for _, e := range in.Events {
				if joins == 2 && e.Seq == 1 && string(e.Payload) == "e1" {
					resent = true
				}
			}
		}
	}
	if joins != 2 || !resent {
		t.Fatalf("%d Joins, event 1 sent after the second: %v; want 2, true", joins, resent)
	}
}

// A Rejoin's Join carries the connection's event generation, as every
// other Join does: the zone knows the connection's inputs by it. Without
// it (generation 0), a zone that took the player in a handoff meanwhile
// held the connection's inputs as another login's, waiting for that
// login's Join, and dropped them at their grace's end: by hand (a NATS
// server of three killed, the zones held 5 s for their leases), players
// crossing a border then lost 2–10 events each.
func TestRejoinCarriesTheEventGeneration(t *testing.T) {
	f := newRelookFixture(t)
	now := f.joined + benchStep
	f.control(4, now)
	now += benchStep
	f.s.handle(f.c, &msg.Rejoin{Player: f.c.player, Restore: &handoff.Checkpoint{Entity: f.c.player, Epoch: 5}}, now)
	f.s.sendInputs()
	js := f.joins()
	if len(js) != 2 {
		t.Fatalf("%d Joins after the Rejoin, want 2", len(js))
	}
	gen := f.c.srv.EventGen()
	if gen == 0 || js[0].EventGen != gen || js[1].EventGen != gen {
		t.Fatalf("Joins' event generations %d (join) and %d (rejoin), want the connection's %d", js[0].EventGen, js[1].EventGen, gen)
	}
}
