package conn

import (
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
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
	if c.pid, ok = s.pool.sys.ProcessRegistry.Add(&proc{c: c}, "conn-relook"); !ok {
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
