package zone

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/sim"
	"github.com/ghostwire/ghostwire/zones/world"
)

// skewClock is the node clock plus a skew a test adds to: a tick that adds
// to it has cost that much zone time (it has no need to spend it).
type skewClock struct {
	start time.Time
	skew  atomic.Int64
}

func (c *skewClock) Now() time.Duration {
	return time.Since(c.start) + time.Duration(c.skew.Load())
}

// lateTickRun is one tick of TestLateTickWaitsForQueuedInputs: the inputs
// the zone had taken when it ran, and those it had been sent by then.
type lateTickRun struct {
	tick        uint64
	taken, sent uint64
}

// TestLateTickWaitsForQueuedInputs: a zone whose ticks cost more than
// their period (each of eight slow ticks queues 100 inputs and costs 1.5
// periods) takes the inputs queued during a tick before its next tick,
// which comes late and waits behind them (lateTickMsg), instead of running
// its ticks back to back while the inputs get only the gaps. Skipped
// periods are counted as missed ticks, and the zone ticks on time again
// after.
func TestLateTickWaitsForQueuedInputs(t *testing.T) {
	defer verifyNoLeaks(t)()
	sys := quietSystem()
	defer sys.Shutdown()
	m := new(Metrics)
	clk := &skewClock{start: time.Now()}
	const slowTicks, perTick = 8, 100
	var (
		zpid  atomic.Pointer[actor.PID]
		slow  atomic.Int32 // slow ticks still to run
		seq   uint64       // the zone's goroutine's
		mu    sync.Mutex
		runs  []lateTickRun
		slows = map[uint64]bool{} // the ticks that were slow
	)
	period := time.Second / sim.DefaultTickRate
	hook := func(z *sim.Zone) {
		r := lateTickRun{tick: z.Tick(), taken: m.Inputs.Load(), sent: seq}
		isSlow := slow.Load() > 0
		if isSlow {
			slow.Add(-1)
			for range perTick {
				seq++
				in := msg.NewInput()
				in.Player = 1
				in.Moves = append(in.Moves, move.Move{Seq: seq, Dt: 1, Forward: 1})
				sys.Root.Send(zpid.Load(), in)
			}
			clk.skew.Add(int64(period * 3 / 2))
		}
		mu.Lock()
		runs = append(runs, r)
		if isSlow {
			slows[r.tick] = true
		}
		mu.Unlock()
	}
	zw, err := StartZones(sys, world.Default(), sim.Config{Classes: ghostClasses(t)},
		Params{Now: clk.Now, Metrics: m, afterStep: hook}, []string{"x0z0"})
	if err != nil {
		t.Fatal(err)
	}
	defer zw.Stop()
	zpid.Store(zw.PID("x0z0"))
	c := &benchConn{}
	cpid, _ := sys.ProcessRegistry.Add(c, "ltconn")
	sys.Root.Send(zw.PID("x0z0"), benchJoin(1, cpid, &c.views))
	waitFor(t, 5*time.Second, "join", func() bool { return m.Joins.Load() == 1 })
	missedBefore, lateBefore := m.MissedTicks.Load(), m.LateTicks.Load()
	slow.Store(slowTicks)
	done := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slow.Load() == 0 && len(runs) > 0 && runs[len(runs)-1].taken == slowTicks*perTick &&
			runs[len(runs)-1].tick > runs[0].tick+slowTicks+3
	}
	waitFor(t, 20*time.Second, "the slow ticks' inputs taken and three ticks after", done)

	mu.Lock()
	defer mu.Unlock()
	// An input sent during tick k is taken before tick k+d: d ticks late.
	var worst, sum, n uint64
	for i, r := range runs[:len(runs)-1] {
		if r.sent == runs[i+1].sent {
			continue
		}
		for _, later := range runs[i+1:] {
			if later.taken >= runs[i+1].sent {
				d := later.tick - r.tick
				worst = max(worst, d)
				sum += d * (runs[i+1].sent - r.sent)
				n += runs[i+1].sent - r.sent
				break
			}
		}
	}
	missed, late := m.MissedTicks.Load()-missedBefore, m.LateTicks.Load()-lateBefore
	t.Logf("%d ticks, %d missed, %d late, input latency %.2f ticks (worst %d) over %d inputs",
		len(runs), missed, late, float64(sum)/float64(max(n, 1)), worst, n)
	for i, r := range runs[1:] {
		if prev := runs[i]; slows[prev.tick] && r.taken < r.sent {
			t.Errorf("tick %d ran with %d inputs queued before it not taken (%d sent during the slow tick %d): a late tick must wait behind them",
				r.tick, r.sent-r.taken, r.sent-prev.sent, prev.tick)
		}
	}
	if missed == 0 {
		t.Error("no missed ticks counted: the slow ticks cost 1.5 periods each")
	}
	if late == 0 {
		t.Error("no late ticks counted (LateTicks): each slow tick makes the next one late")
	}
	if worst > 1 {
		t.Errorf("inputs taken up to %d ticks after the tick they were sent in, want the next", worst)
	}
}

// heldDispatcher keeps the mailbox's runs until the test runs them, so
// everything posted before is queued together.
type heldDispatcher struct{ runs []func() }

func (d *heldDispatcher) Schedule(fn func()) { d.runs = append(d.runs, fn) }
func (d *heldDispatcher) Throughput() int    { return 1000 }

// orderInvoker records the user messages in the order the mailbox gives
// them.
type orderInvoker struct{ got []string }

func (o *orderInvoker) InvokeSystemMessage(any) {}
func (o *orderInvoker) InvokeUserMessage(m any) {
	switch m := m.(type) {
	case *tickMsg:
		o.got = append(o.got, "tick")
	case *lateTickMsg:
		o.got = append(o.got, "late tick")
	case *msg.Input:
		o.got = append(o.got, "input "+strconv.FormatUint(m.Player, 10))
	}
}
func (o *orderInvoker) EscalateFailure(any, any) {}

// tickRec is a zone's own PID as its timer sees it: it keeps what fire
// posts.
type tickRec struct{ got []any }

func (r *tickRec) SendUserMessage(_ *actor.PID, m any) { r.got = append(r.got, m) }
func (r *tickRec) SendSystemMessage(*actor.PID, any)   {}
func (r *tickRec) Stop(*actor.PID)                     {}

// TestTickOnTimeAheadOfInputsLateBehind: the timer posts a tick armed
// before its slot as tickMsg and one armed when its slot had passed as
// lateTickMsg; in the zone's mailbox the first overtakes the inputs queued
// before it, the second waits behind them (and ahead of those after it).
func TestTickOnTimeAheadOfInputsLateBehind(t *testing.T) {
	sys := quietSystem()
	defer sys.Shutdown()
	now := time.Second
	a, _ := syncZoneActor(t, sys, &now)
	rec := &tickRec{}
	a.self, _ = sys.ProcessRegistry.Add(rec, "tickrec")
	a.root = sys.Root
	a.timer = time.AfterFunc(time.Hour, func() {})
	defer a.timer.Stop()
	for _, tc := range []struct {
		name   string
		nextAt time.Duration
		want   string
	}{
		{name: "armed before its slot", nextAt: now + time.Millisecond, want: "*zone.tickMsg"},
		{name: "armed at its slot", nextAt: now, want: "*zone.lateTickMsg"},
		{name: "armed after its slot", nextAt: now - time.Millisecond, want: "*zone.lateTickMsg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec.got = nil
			a.nextAt = tc.nextAt
			a.arm()
			a.fire()
			if len(rec.got) != 1 || fmt.Sprintf("%T", rec.got[0]) != tc.want {
				t.Fatalf("fire posted %T, want one %s", rec.got, tc.want)
			}
		})
	}

	mb := newInputMailbox(new(inputGauge), new(Metrics))()
	mb.(*inputMailbox).g.max.Store(minQueuedInputs)
	inv, d := &orderInvoker{}, &heldDispatcher{}
	mb.RegisterHandlers(inv, d)
	input := func(id uint64) *msg.Input {
		in := msg.NewInput()
		in.Player = id
		return in
	}
	mb.PostUserMessage(input(1))
	mb.PostUserMessage(input(2))
	mb.PostUserMessage(theLateTick)
	mb.PostUserMessage(input(3))
	mb.PostUserMessage(theTick)
	for len(d.runs) > 0 {
		run := d.runs[0]
		d.runs = d.runs[1:]
		run()
	}
	want := []string{"tick", "input 1", "input 2", "late tick", "input 3"}
	if !slices.Equal(inv.got, want) {
		t.Fatalf("the mailbox gave %q, want %q", inv.got, want)
	}
}

// TestEarlyTickMessageDropped: a tick message that comes before the slot
// the zone waits for (one posted before a pause and the resume that
// re-armed the timer for a later slot, which overtook it) runs no tick:
// the timer ticks that slot when due. At its slot it runs.
func TestEarlyTickMessageDropped(t *testing.T) {
	sys := quietSystem()
	defer sys.Shutdown()
	var now time.Duration
	a, z := timedZoneActor(t, sys, &now)
	now = z.Period() - time.Millisecond
	a.tickDue()
	if got := z.Tick(); got != 0 {
		t.Fatalf("a tick message %v before its slot ran tick %d, want none", time.Millisecond, got)
	}
	now = z.Period()
	a.tickDue()
	if got := z.Tick(); got != 1 {
		t.Fatalf("the tick message at its slot left the zone at tick %d, want 1", got)
	}
	now += z.Period() / 2
	a.tickDue()
	if got := z.Tick(); got != 1 {
		t.Fatalf("a second tick message within the period ran tick %d: two ticks in one period", got)
	}
}
