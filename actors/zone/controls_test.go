package zone

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/sim"
	"github.com/ghostwire/ghostwire/zones/world"
)

// portQueue is a connection shard as the zone sees it (msg.ControlQueue):
// it hands each Control to its port's log and counts its batches.
type portQueue struct {
	mu      sync.Mutex
	batches int
	largest int
	foreign int // Controls of a port of another queue
}

func (q *portQueue) PostControls(cs []msg.PortControl) {
	q.mu.Lock()
	q.batches++
	q.largest = max(q.largest, len(cs))
	q.mu.Unlock()
	for _, pc := range cs {
		c := pc.Conn.(*portConn)
		if c.q != q {
			q.mu.Lock()
			q.foreign++
			q.mu.Unlock()
		}
		c.log(pc.Control)
	}
}

// portConn is a connection that takes its Controls through its queue (its
// Join's msg.ControlPort) and anything else through its PID, all in one log.
type portConn struct {
	q     *portQueue
	cq    *msg.ControlQueue
	views msg.ViewSlot
	mu    sync.Mutex
	// events: "c<tick>" for a Control taken through the queue, "s<tick>"
	// for one sent to the PID, "r" for a ViewReady.
	events []string
	// fences: the event fence of each Control taken through the queue,
	// and outputMark for each Output (the zone took its Input's events).
	fences []handoff.EventFence
}

func (c *portConn) log(m any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch m := m.(type) {
	case *msg.Control:
		c.events = append(c.events, "c"+strconv.FormatUint(m.Tick, 10))
		c.fences = append(c.fences, m.Events)
		if m.View {
			c.take()
		}
		m.Release()
	case *msg.ViewReady:
		c.events = append(c.events, "r")
		c.take()
	case *msg.Output:
		c.fences = append(c.fences, outputMark)
		m.Release()
	}
}

// outputMark stands for an Output in portConn.fences.
var outputMark = handoff.EventFence{Gen: ^uint64(0)}

func (c *portConn) take() {
	if v := c.views.Take(); v != nil {
		v.Release()
	}
}

func (c *portConn) SendUserMessage(_ *actor.PID, m any) {
	if ctl, ok := m.(*msg.Control); ok { // not through the queue
		c.mu.Lock()
		c.events = append(c.events, "s"+strconv.FormatUint(ctl.Tick, 10))
		c.mu.Unlock()
		ctl.Release()
		return
	}
	c.log(m)
}
func (c *portConn) SendSystemMessage(*actor.PID, any) {}
func (c *portConn) Stop(*actor.PID)                   {}

func (c *portConn) snapshot() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.events...)
}

// TestTickPostsControlsByShard: a tick's Controls for connections that
// joined with a Port go through their queues, one PostControls a queue a
// tick holding every player of that queue, each player's Control once a
// tick and in tick order; a connection without a Port still gets its
// Control sent; and a connection that takes its nudge as a ViewReady
// gets the tick's Control before it (the batch is posted before the
// tick's other sends).
func TestTickPostsControlsByShard(t *testing.T) {
	sys, zw, m := startTickWorld(t)
	zpid := zw.PID("x0z0")
	qs := []*portQueue{{}, {}}
	cqs := []*msg.ControlQueue{{Taker: qs[0]}, {Taker: qs[1]}}
	const players = 8
	conns := make([]*portConn, players)
	for i := range conns {
		c := &portConn{q: qs[i%2], cq: cqs[i%2]}
		c.views.AcceptRefs()
		pid, _ := sys.ProcessRegistry.Add(c, "pconn$"+strconv.Itoa(i))
		conns[i] = c
		j := &msg.Join{Player: uint64(i + 1), Conn: pid, Ghosts: pid, Views: &c.views, ViewWithControl: i != 5}
		if i < 6 { // 6 and 7 without a Port
			j.Port = msg.ControlPort{Queue: c.cq, Conn: c}
		}
		sys.Root.Send(zpid, j)
	}
	waitFor(t, 5*time.Second, "joins", func() bool { return m.Joins.Load() == players })
	waitFor(t, 5*time.Second, "20 controls each", func() bool {
		for _, c := range conns {
			if len(c.snapshot()) < 20 {
				return false
			}
		}
		return true
	})
	_ = sys.Root.RequestFuture(zpid, &Pause{Paused: true}, time.Second).Wait()
	time.Sleep(50 * time.Millisecond) // what the last tick sent arrives

	ticks := map[string]int{} // a tick's Control: how many players got it
	for i, c := range conns {
		ev := c.snapshot()
		want := byte('c')
		if i >= 6 {
			want = 's'
		}
		last := uint64(0)
		for k, e := range ev {
			if e == "r" {
				if i != 5 {
					t.Fatalf("player %d: a ViewReady, though it takes the nudge with its Control: %v", i+1, ev)
				}
				if k == 0 || ev[k-1][0] != 'c' {
					t.Fatalf("player %d: a ViewReady not right after its tick's Control: %v", i+1, ev)
				}
				continue
			}
			if e[0] != want {
				t.Fatalf("player %d: Control %q, want it by %q: %v", i+1, e, want, ev)
			}
			tick, _ := strconv.ParseUint(e[1:], 10, 64)
			if tick <= last {
				t.Fatalf("player %d: Control of tick %d after tick %d (twice, or out of order): %v", i+1, tick, last, ev)
			}
			last = tick
			if i < 6 {
				ticks[e]++
			}
		}
	}
	for _, q := range qs {
		if q.foreign != 0 {
			t.Errorf("a queue took %d Controls of another queue's ports", q.foreign)
		}
		if q.largest != 3 {
			t.Errorf("a queue's largest batch: %d Controls, want its 3 players'", q.largest)
		}
	}
	batches := qs[0].batches + qs[1].batches
	if n := len(ticks); batches > 2*n+2 {
		t.Errorf("%d batches for %d ticks of 2 queues: not one a queue a tick", batches, n)
	}
}

func (c *portConn) fenceLog() []handoff.EventFence {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]handoff.EventFence(nil), c.fences...)
}

// TestTickControlCarriesAChangedFence: a player's ordered events the zone
// took reach its connection as the fence of the next Control (the first
// after the Output echoing them: the zone sends both on its goroutine, in
// the order it made them), each time the fence changes; the Controls
// between changes leave the unchanged fence out (Gen 0, which a
// connection ignores), but for the refresh every fenceEvery ticks.
func TestTickControlCarriesAChangedFence(t *testing.T) {
	sys, zw, m := startTickWorld(t)
	zpid := zw.PID("x0z0")
	q := &portQueue{}
	c := &portConn{q: q, cq: &msg.ControlQueue{Taker: q}}
	c.views.AcceptRefs()
	pid, _ := sys.ProcessRegistry.Add(c, "fconn$1")
	sys.Root.Send(zpid, &msg.Join{Player: 1, Conn: pid, Ghosts: pid, Views: &c.views, ViewWithControl: true,
		Port: msg.ControlPort{Queue: c.cq, Conn: c}})
	waitFor(t, 5*time.Second, "join", func() bool { return m.Joins.Load() == 1 })
	const gen = 0xfe
	// next is the fence of the first Control after the k-th Output.
	next := func(k int) (handoff.EventFence, bool) {
		outs := 0
		for _, f := range c.fenceLog() {
			if f == outputMark {
				outs++
			} else if outs == k {
				return f, true
			}
		}
		return handoff.EventFence{}, false
	}
	send := func(from, to uint64) {
		in := msg.NewInput()
		in.Player, in.EventGen = 1, gen
		for s := from; s <= to; s++ {
			in.AddSeq(event.Ordered, 0, 0, []byte("e"), s)
		}
		sys.Root.Send(zpid, in)
	}
	for k, ev := range [][2]uint64{{1, 3}, {4, 4}, {5, 6}} {
		n := len(c.fenceLog())
		waitFor(t, 5*time.Second, "5 Controls more", func() bool { return len(c.fenceLog()) >= n+5 })
		send(ev[0], ev[1])
		waitFor(t, 5*time.Second, "a Control after the echo", func() bool { _, ok := next(k + 1); return ok })
		if f, _ := next(k + 1); f.Gen != gen || f.Last[0] != ev[1] {
			t.Fatalf("events %d-%d taken: the next Control's fence %v, want gen %#x lane 0 at %d", ev[0], ev[1], f, gen, ev[1])
		}
	}
	left := 0
	for _, f := range c.fenceLog() {
		if f.Gen == 0 {
			left++
		}
	}
	if left == 0 {
		t.Fatal("every Control carried the fence: the unchanged ones are left out")
	}
}

// startTickWorld starts the default world with 10 NPCs on a clock of its
// own in a quiet actor system, both stopped when t ends.
func startTickWorld(t *testing.T) (*actor.ActorSystem, *World, *Metrics) {
	t.Helper()
	sys := quietSystem()
	t.Cleanup(sys.Shutdown)
	m := new(Metrics)
	clk := newClock()
	zw, err := Start(sys, world.Default(), sim.Config{NPCs: 10, Classes: ghostClasses(t)}, Params{Now: clk.Now, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(zw.Stop)
	return sys, zw, m
}
