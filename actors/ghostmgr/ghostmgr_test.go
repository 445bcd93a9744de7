package ghostmgr

import (
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// sink is a stand-in connection actor: it forwards every section it gets.
type sink struct{ out chan *msg.GhostSection }

func (s *sink) Receive(ctx actor.Context) {
	if sec, ok := ctx.Message().(*msg.GhostSection); ok {
		s.out <- sec
	}
}

type fixture struct {
	sys      *actor.ActorSystem
	mgr      *actor.PID
	views    *msg.ViewSlot
	sections chan *msg.GhostSection
	now      atomic.Int64
	player   *ghost.Class
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{
		sys: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
			return slog.New(slog.DiscardHandler)
		})),
		views:    new(msg.ViewSlot),
		sections: make(chan *msg.GhostSection, 16),
	}
	reg, err := ghost.NewRegistry(ghost.DefaultBounds())
	if err != nil {
		t.Fatal(err)
	}
	f.player = ghost.PlayerClass(nil)
	if err := reg.Register(f.player, ghost.NPCClass(nil)); err != nil {
		t.Fatal(err)
	}
	conn := f.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &sink{out: f.sections} }))
	f.now.Store(int64(time.Second))
	f.mgr = f.sys.Root.Spawn(Props(Params{
		Registry: reg, Table: ghost.DefaultConfig(), Conn: conn, Views: f.views,
		Now: func() time.Duration { return time.Duration(f.now.Load()) }, Player: 1,
	}))
	return f
}

func (f *fixture) close() {
	_ = f.sys.Root.StopFuture(f.mgr).Wait()
	f.sys.Shutdown()
}

func (f *fixture) advance(d time.Duration) { f.now.Add(int64(d)) }

// publish puts a view of n players at x into the slot and nudges when told.
func (f *fixture) publish(tick uint64, n int, x float64, nudge bool) bool {
	v := msg.NewView()
	v.Tick = tick
	for i := range n {
		var s ghost.State
		s.Pos = [3]float64{x + float64(i), 0, 0}
		v.Entries = append(v.Entries, ghost.ViewEntry{Entity: uint64(100 + i), Class: f.player, Priority: 1, State: s})
	}
	ok := f.views.Publish(v)
	if nudge && ok {
		f.sys.Root.Send(f.mgr, msg.ViewReadyMsg)
	}
	return ok
}

func (f *fixture) fates(want bool, budget int, fs ...notify.Fate) {
	m := msg.NewGhostFates()
	m.Fates = append(m.Fates, fs...)
	m.Want, m.Budget = want, budget
	f.sys.Root.Send(f.mgr, m)
}

// stats asks the manager for its counters; the answer also proves every
// message sent before it was handled (one mailbox, in order).
func (f *fixture) stats(t *testing.T) Stats {
	t.Helper()
	res, err := f.sys.Root.RequestFuture(f.mgr, &StatsRequest{}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	return *res.(*Stats)
}

func (f *fixture) section(t *testing.T) *msg.GhostSection {
	t.Helper()
	select {
	case s := <-f.sections:
		return s
	case <-time.After(5 * time.Second):
		t.Fatal("no ghost section")
		return nil
	}
}

func TestSectionsOnlyWithCredit(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
	f := newFixture(t)
	defer f.close()

	f.publish(1, 3, 10, true)
	if s := f.stats(t); s.Views != 1 || s.Sections != 0 {
		t.Fatalf("view without credit: %+v, want 1 view applied, no section", s)
	}
	f.fates(true, 8*1000)
	sec := f.section(t)
	if sec.Seq != 1 || sec.Records != 3 || sec.Bits == 0 {
		t.Fatalf("first section: seq %d records %d bits %d, want seq 1 with 3 creates", sec.Seq, sec.Records, sec.Bits)
	}
	sec.Release()

	// A new view without a new credit sends nothing.
	f.advance(50 * time.Millisecond)
	f.publish(2, 3, 20, true)
	if s := f.stats(t); s.Sections != 1 || s.Views != 2 {
		t.Fatalf("second view, no credit: %+v", s)
	}
	// The fate of section 1 and a credit: the update goes out as section 2.
	f.fates(true, 8*1000, notify.Fate{Seq: 1, Delivered: true})
	sec = f.section(t)
	if sec.Seq != 2 || sec.Records == 0 {
		t.Fatalf("second section: seq %d records %d", sec.Seq, sec.Records)
	}
	sec.Release()
	if s := f.stats(t); s.Fates != 1 {
		t.Fatalf("fates applied %d, want 1", s.Fates)
	}
}

func TestSmallBudgetKeepsTheCredit(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	f.publish(1, 3, 10, true)
	f.fates(true, 4) // 4 bits: not even one record
	if s := f.stats(t); s.Sections != 0 || s.Empty != 1 {
		t.Fatalf("tiny budget: %+v, want no section, one empty attempt", s)
	}
	f.fates(false, 8*1000) // a later message brings the real budget; the credit still stands
	sec := f.section(t)
	if sec.Records != 3 {
		t.Fatalf("records %d, want 3", sec.Records)
	}
	sec.Release()
}

func TestNewestViewSupersedes(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	if !f.publish(1, 1, 10, false) {
		t.Fatal("first publish must ask for a nudge")
	}
	f.publish(2, 2, 10, false)
	f.publish(3, 3, 10, false)
	f.sys.Root.Send(f.mgr, msg.ViewReadyMsg)
	f.fates(true, 8*1000)
	sec := f.section(t)
	if sec.Records != 3 || f.views.Superseded() != 2 {
		t.Fatalf("records %d superseded %d, want the newest view (3 entities) after 2 superseded", sec.Records, f.views.Superseded())
	}
	sec.Release()
	if s := f.stats(t); s.Views != 1 {
		t.Fatalf("views applied %d, want 1", s.Views)
	}
}

// Two views within a millisecond: the table takes one per millisecond, so
// the second waits for the clock (and the next message) instead of failing.
func TestViewsWaitForTheClock(t *testing.T) {
	f := newFixture(t)
	defer f.close()
	f.publish(1, 1, 10, true)
	if s := f.stats(t); s.Views != 1 {
		t.Fatalf("first view not applied: %+v", s)
	}
	f.publish(2, 2, 10, true)
	if s := f.stats(t); s.Views != 1 || s.ViewErrors != 0 {
		t.Fatalf("same instant: %+v, want the second view held", s)
	}
	f.advance(time.Millisecond)
	f.fates(false, 0)
	if s := f.stats(t); s.Views != 2 || s.ViewErrors != 0 {
		t.Fatalf("after a millisecond: %+v, want both applied", s)
	}
}

func TestStoppingClosesTheSlot(t *testing.T) {
	f := newFixture(t)
	f.close()
	if f.publish(1, 1, 10, false) {
		t.Fatal("a stopped ghost manager's slot still takes views")
	}
}
