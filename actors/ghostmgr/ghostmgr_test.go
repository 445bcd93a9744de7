package ghostmgr

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/notify"
)

type fixture struct {
	m      *Manager
	views  *msg.ViewSlot
	now    time.Duration
	player *ghost.Class
	seq    uint64
	buf    [1200]byte
}

func newFixture(t *testing.T) *fixture { return newFixtureState(t, nil) }

// newFixtureState is newFixture with the Manager's State kept at st.
func newFixtureState(t *testing.T, st *State) *fixture {
	t.Helper()
	reg, err := ghost.NewRegistry(ghost.DefaultBounds())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{views: new(msg.ViewSlot), now: time.Second, player: ghost.PlayerClass(nil)}
	if err := reg.Register(f.player, ghost.NPCClass(nil)); err != nil {
		t.Fatal(err)
	}
	if f.m, err = New(reg, ghost.DefaultConfig(), f.views, st); err != nil {
		t.Fatal(err)
	}
	return f
}

// publish puts a view of n players at x into the slot and, when the slot
// asks for a nudge and nudge is set, hands it to the manager (the zone's
// ViewReady).
func (f *fixture) publish(n int, x float64, nudge bool) bool {
	v := msg.NewView()
	for i := range n {
		var s ghost.State
		s.Pos = [3]float64{x + float64(i), 0, 0}
		v.Entries = append(v.Entries, ghost.ViewEntry{Entity: uint64(100 + i), Class: f.player, Priority: 1, State: s})
	}
	ok := f.views.Publish(v)
	if nudge && ok {
		f.m.TakeView(f.now)
	}
	return ok
}

// write packs a section of at most bits into a fresh packet.
func (f *fixture) write(t *testing.T, bits int) (uint64, int) {
	t.Helper()
	var w bitstream.Writer
	w.Reset(f.buf[:(bits+7)/8])
	f.seq++
	n, err := f.m.Write(&w, f.seq, f.now)
	if err != nil {
		t.Fatal(err)
	}
	return f.seq, n
}

func TestSectionsFollowViewsAndFates(t *testing.T) {
	f := newFixture(t)
	if f.m.Pending() {
		t.Fatal("pending before any view")
	}
	f.publish(3, 10, true)
	if s := f.m.Stats(); s.Views != 1 || !f.m.Pending() {
		t.Fatalf("view: %+v pending %v, want 1 view applied and creates pending", s, f.m.Pending())
	}
	seq, n := f.write(t, 8*1000)
	if n != 3 {
		t.Fatalf("first section: %d records, want 3 creates", n)
	}
	if f.m.Pending() {
		t.Fatal("still pending with every create in flight")
	}
	f.now += 50 * time.Millisecond
	f.publish(3, 20, true)
	f.m.OnFate(notify.Fate{Seq: seq, Delivered: true, SentAt: f.now})
	if _, n := f.write(t, 8*1000); n == 0 {
		t.Fatal("no update after the creates were delivered and everyone moved")
	}
	if s := f.m.Stats(); s.Fates != 1 || s.Sections != 2 {
		t.Fatalf("stats %+v, want 1 fate and 2 sections", s)
	}
}

func TestSmallRoomWritesNothing(t *testing.T) {
	f := newFixture(t)
	f.publish(3, 10, true)
	if _, n := f.write(t, 8); n != 0 {
		t.Fatalf("1 byte: %d records", n)
	}
	if s := f.m.Stats(); s.Sections != 0 || s.Empty != 1 {
		t.Fatalf("tiny room: %+v, want no section, one empty", s)
	}
	if _, n := f.write(t, 8*1000); n != 3 {
		t.Fatalf("records %d, want 3", n)
	}
}

func TestNewestViewSupersedes(t *testing.T) {
	f := newFixture(t)
	if !f.publish(1, 10, false) {
		t.Fatal("first publish must ask for a nudge")
	}
	f.publish(2, 10, false)
	f.publish(3, 10, false)
	f.m.TakeView(f.now)
	if _, n := f.write(t, 8*1000); n != 3 || f.views.Superseded() != 2 {
		t.Fatalf("records %d superseded %d, want the newest view (3 entities) after 2 superseded", n, f.views.Superseded())
	}
	if s := f.m.Stats(); s.Views != 1 {
		t.Fatalf("views applied %d, want 1", s.Views)
	}
}

// Two views within a millisecond: the table takes one per millisecond, so
// the second waits for the clock (and the next call) instead of failing.
func TestViewsWaitForTheClock(t *testing.T) {
	f := newFixture(t)
	f.publish(1, 10, true)
	f.publish(2, 10, true)
	if s := f.m.Stats(); s.Views != 1 || s.ViewErrors != 0 {
		t.Fatalf("same instant: %+v, want the second view held", s)
	}
	f.now += time.Millisecond
	if _, n := f.write(t, 8*1000); n != 2 {
		t.Fatalf("a millisecond later the held view goes first: %d records, want 2 creates", n)
	}
	if s := f.m.Stats(); s.Views != 2 || s.ViewErrors != 0 {
		t.Fatalf("after a millisecond: %+v, want both applied", s)
	}
}

// A view the table refused counts as applied for the clock too: the next
// view within the same millisecond waits, as after a view it took.
func TestRefusedViewHoldsTheClock(t *testing.T) {
	f := newFixture(t)
	bad := msg.NewView()
	bad.Entries = append(bad.Entries, ghost.ViewEntry{Entity: 100, Class: ghost.NPCClass(nil), Priority: 1}) // not in the registry
	if !f.views.Publish(bad) {
		t.Fatal("the slot refused the view")
	}
	f.m.TakeView(f.now)
	if s := f.m.Stats(); s.ViewErrors != 1 || s.Views != 0 {
		t.Fatalf("a view of an unregistered class: %+v, want it refused", s)
	}
	f.publish(2, 10, true)
	if s := f.m.Stats(); s.Views != 0 {
		t.Fatalf("same instant as the refused view: %+v, want the view held", s)
	}
	f.now += time.Millisecond
	if _, n := f.write(t, 8*1000); n != 2 {
		t.Fatalf("a millisecond later: %d records, want 2 creates", n)
	}
	if s := f.m.Stats(); s.Views != 1 || s.ViewErrors != 1 {
		t.Fatalf("after a millisecond: %+v, want the held view applied", s)
	}
}

func TestCloseClosesTheSlot(t *testing.T) {
	f := newFixture(t)
	f.publish(1, 10, false) // held in the slot
	f.m.Close()
	if f.publish(1, 10, false) {
		t.Fatal("a closed manager's slot still takes views")
	}
}

// The manager asks its slot for views as snapshot references (what keeps a
// zone from copying every entity per player) and applies them like
// entries; a snapshot view and an entry view of the same states leave the
// table with nothing new to send.
func TestSnapshotViews(t *testing.T) {
	f := newFixture(t)
	if !f.views.AcceptsRefs() {
		t.Fatal("the manager's slot does not ask for snapshot references")
	}
	f.publish(3, 10, true)
	seq, _ := f.write(t, 8*1000)
	f.m.OnFate(notify.Fate{Seq: seq, Delivered: true, SentAt: f.now})
	sw, err := ghost.NewSnapshotWriter(f.player.Registry())
	if err != nil {
		t.Fatal(err)
	}
	snap := sw.Next(4)
	v := msg.NewView()
	for i := range 3 {
		var s ghost.State
		s.Pos = [3]float64{10 + float64(i), 0, 0}
		snap.Set(i+1, uint64(100+i), f.player, &s)
		v.Refs = append(v.Refs, ghost.NewViewRef(uint32(i+1), f.player, 1))
	}
	sw.Seal(snap)
	v.SetSnap(snap)
	f.now += 50 * time.Millisecond
	if !f.views.Publish(v) {
		t.Fatal("slot not empty")
	}
	f.m.TakeView(f.now)
	if s := f.m.Stats(); s.Views != 2 || s.ViewErrors != 0 {
		t.Fatalf("stats %+v, want 2 views applied", s)
	}
	if f.m.Table().Len() != 3 || f.m.Pending() {
		t.Fatalf("after the same states as a snapshot: %d ghosts, pending %v", f.m.Table().Len(), f.m.Pending())
	}
}

// TestPendingFollowsFates: Pending is what the connection asks before it
// builds a packet; a lost record must make it true again (else the ghost's
// state would wait for the next view, or forever for a still one), and a
// delivered one with nothing changed must leave it false.
func TestPendingFollowsFates(t *testing.T) {
	f := newFixture(t)
	f.publish(3, 10, true)
	seq, _ := f.write(t, 8*1000)
	f.m.OnFate(notify.Fate{Seq: seq, Delivered: true, SentAt: f.now})
	if f.m.Pending() {
		t.Fatal("pending with every create delivered and nothing changed")
	}
	f.now += 50 * time.Millisecond
	f.publish(3, 20, true) // everyone moved
	if !f.m.Pending() {
		t.Fatal("not pending after everyone moved")
	}
	seq, n := f.write(t, 8*1000)
	if n != 3 || f.m.Pending() {
		t.Fatalf("%d updates written, pending %v: want 3 and nothing left", n, f.m.Pending())
	}
	f.m.OnFate(notify.Fate{Seq: seq, Delivered: false, SentAt: f.now})
	if !f.m.Pending() {
		t.Fatal("not pending after the updates were lost")
	}
	seq, n = f.write(t, 8*1000)
	if n != 3 {
		t.Fatalf("%d records resent, want 3", n)
	}
	f.m.OnFate(notify.Fate{Seq: seq, Delivered: true, SentAt: f.now})
	if f.m.Pending() {
		t.Fatal("pending with the resent updates delivered")
	}
	f.now += 50 * time.Millisecond
	f.publish(2, 20, true) // one left scope: its kill is pending
	if !f.m.Pending() {
		t.Fatal("not pending with a kill to send")
	}
	seq, _ = f.write(t, 8*1000)
	f.m.OnFate(notify.Fate{Seq: seq, Delivered: true, SentAt: f.now})
	if f.m.Table().Len() != 2 {
		t.Fatalf("after the kill was delivered: %d ghosts, want 2", f.m.Table().Len())
	}
	// The two that stopped owe rest markers (one with each of two views).
	for i := 0; f.m.Pending(); i++ {
		if i == 4 {
			t.Fatal("still pending after 4 delivered sections of a still scene")
		}
		f.now += 50 * time.Millisecond
		f.publish(2, 20, true)
		seq, n := f.write(t, 8*1000)
		if n == 0 {
			t.Fatal("pending with a fresh view, but nothing written")
		}
		f.m.OnFate(notify.Fate{Seq: seq, Delivered: true, SentAt: f.now})
	}
}

// TestTakeThenApply: Take notes the nudge without touching the table or
// taking the view out of the slot (ViewTick tells the waiting view's tick
// at once); a view published before Apply supersedes it in the slot (no
// second nudge, and ViewTick tells the newer tick); Apply applies the
// newest and empties the slot, so the zone's next view nudges again.
func TestTakeThenApply(t *testing.T) {
	f := newFixture(t)
	v := msg.NewView()
	v.Tick = 7
	v.Entries = append(v.Entries, ghost.ViewEntry{Entity: 100, Class: f.player, Priority: 1})
	if !f.views.Publish(v) {
		t.Fatal("slot not empty")
	}
	f.m.Take()
	if f.m.ViewTick() != 7 || !f.m.ViewWaiting() || f.m.Table().Len() != 0 || f.m.Stats().Views != 0 {
		t.Fatalf("after Take: tick %d, waiting %v, %d ghosts, %d views applied; want 7, true, 0, 0",
			f.m.ViewTick(), f.m.ViewWaiting(), f.m.Table().Len(), f.m.Stats().Views)
	}
	w := msg.NewView()
	w.Tick = 8
	w.Entries = append(w.Entries, ghost.ViewEntry{Entity: 100, Class: f.player, Priority: 1}, ghost.ViewEntry{Entity: 101, Class: f.player, Priority: 1})
	if f.views.Publish(w) {
		t.Fatal("the view waiting in the slot was not superseded there: the zone would nudge twice")
	}
	if f.m.ViewTick() != 8 || f.views.Superseded() != 1 {
		t.Fatalf("a second view before Apply: tick %d, %d superseded; want 8 and the first superseded", f.m.ViewTick(), f.views.Superseded())
	}
	f.m.Apply(f.now)
	if f.m.ViewWaiting() || f.m.Table().Len() != 2 || f.m.Stats().Views != 1 || f.m.ViewTick() != 8 {
		t.Fatalf("after Apply: waiting %v, %d ghosts, %d views, tick %d; want false, 2, 1, 8", f.m.ViewWaiting(), f.m.Table().Len(), f.m.Stats().Views, f.m.ViewTick())
	}
	if !f.publish(2, 10, false) {
		t.Fatal("the slot is not empty after Apply: the zone would not nudge again")
	}
	// A nudge whose view the zone took back before the pump (its next
	// tick's view comes, and nudges again): Apply finds none and waits no
	// more.
	f.m.Take()
	f.views.Take().Release()
	f.m.Apply(f.now + time.Second)
	if f.m.ViewWaiting() || f.m.Stats().Views != 1 {
		t.Fatalf("a nudge whose view was taken back: waiting %v, %d views; want false, 1", f.m.ViewWaiting(), f.m.Stats().Views)
	}
}

// TestPendingIsTheTables: Pending answers from the manager (pend), not
// the table, so every change to the table must refresh it — views applied
// (creates, moves, kills), sections written whole or cut short by their
// room, fates delivered and lost (a lost record is pending again). A
// stale false would leave ghosts unsent until something else woke the
// connection.
func TestPendingIsTheTables(t *testing.T) {
	f := newFixture(t)
	check := func(step int, what string) {
		t.Helper()
		if got, want := f.m.Pending(), f.m.Table().Pending(); got != want {
			t.Fatalf("step %d, after %s: Pending %v, the table's %v", step, what, got, want)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	var inflight []uint64
	pendingSeen, idleSeen, fates := false, false, 0
	for step := range 2000 {
		switch op := r.IntN(10); {
		case op < 3:
			f.now += time.Duration(1+r.IntN(60)) * time.Millisecond
			f.publish(r.IntN(12), float64(r.IntN(50)), true)
			check(step, "a view")
		case op < 6:
			f.now += time.Duration(r.IntN(40)) * time.Millisecond
			pend := f.m.Pending()
			seq, n := f.write(t, 8*(1+r.IntN(120)))
			if n > 0 {
				inflight = append(inflight, seq)
			}
			if pend {
				pendingSeen = true
			} else {
				idleSeen = true
			}
			check(step, "a write")
		case len(inflight) > 0:
			f.now += time.Duration(r.IntN(30)) * time.Millisecond
			f.m.OnFate(notify.Fate{Seq: inflight[0], Delivered: r.IntN(3) != 0, SentAt: f.now})
			inflight, fates = inflight[1:], fates+1
			check(step, "a fate")
		}
	}
	if s := f.m.Stats(); s.Fates != uint64(fates) || s.Table.UnknownFates != 0 {
		t.Fatalf("%d fates counted (%d unknown to the table), %d given", s.Fates, s.Table.UnknownFates, fates)
	}
	if !pendingSeen || !idleSeen {
		t.Fatalf("writes with the table pending: %v, idle: %v; want both", pendingSeen, idleSeen)
	}
}

// State.Take, the owner's path (the Conn's, without the Manager): an
// empty slot notes nothing; a published view is noted waiting, and the
// Manager sharing the State sees it.
func TestStateTakeFromTheOwner(t *testing.T) {
	f := newFixture(t)
	var st State
	st.Take(f.views)
	if st.ViewWaiting() {
		t.Fatal("an empty slot noted a view")
	}
	if !f.publish(1, 0, false) {
		t.Fatal("slot not empty")
	}
	st.Take(f.views)
	if !st.ViewWaiting() {
		t.Fatal("a published view not noted")
	}
	f.m.st.Take(f.views)
	if !f.m.ViewWaiting() {
		t.Fatal("the Manager's State did not note the view")
	}
}
