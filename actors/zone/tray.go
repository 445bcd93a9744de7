package zone

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
)

// tray is a zone actor's msg.Tray: the connection shards of its process
// put their rounds' Joins, Leaves and Inputs here in order, and the zone
// takes them all before its tick and before any other message but a
// neighbour's (handoffs and replicas overtake them, as they overtake the
// mailbox's inputs). A shard round's inputs were an actor message each,
// and each woke the zone's goroutine (≈ 1,800 wake-ups a second at 1,000
// players); now only what must not wait for the tick — a Join, a Leave,
// an input with events, anything while the zone is paused — sends a
// message (trayNudge), at most one on its way.
//
// Order: one list for every shard, so each connection's messages keep the
// order it made them. A shard that sent messages through the mailbox
// before it found the tray (the zone had just started, or restarted) may
// have some still queued there when it first puts here: its first put
// sends a trayGate behind them, and the zone takes nothing from the tray
// until every gate is handled.
//
// Bounded as the mailbox is (inputMailbox): inputs beyond the gauge's max
// that carry no event are dropped and counted (Metrics.InputsShed).
// Safe for concurrent use; back is the zone goroutine's.
type tray struct {
	mu     sync.Mutex
	list   []any // under mu
	seen   []any // the shards that have put here; under mu
	gates  int   // trayGates sent and not yet handled; under mu
	nudged bool  // a trayNudge is on its way; under mu
	eager  bool  // every put nudges (the zone is paused: no ticks); under mu
	closed bool  // under mu

	waiting atomic.Bool // list is not empty: a look without the lock

	g    *inputGauge
	m    *Metrics
	root *actor.RootContext
	self *actor.PID

	back []any        // the list's other half, the zone goroutine's
	ins  []*msg.Input // takeTray's scratch
}

// trayNudge asks the zone to take its tray now.
type trayNudge struct{}

var theTrayNudge = &trayNudge{}

// trayGate follows a shard's messages sent through the mailbox before
// its first put (tray). It names its tray: a restarted zone's new tray
// must not count the old one's gates (one a shard and tray: rare).
type trayGate struct{ t *tray }

// Put implements msg.Tray.
func (t *tray) Put(from any, ms []any, urgent bool) bool {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return false
	}
	gate := false
	if !slices.Contains(t.seen, from) {
		t.seen = append(t.seen, from)
		t.gates++
		gate = true
	}
	for _, m := range ms {
		if in, ok := m.(*msg.Input); ok {
			if len(in.Events) == 0 && t.g.queued.Load() >= t.g.max.Load() {
				t.m.InputsShed.Add(1)
				t.m.MovesShed.Add(uint64(len(in.Moves)))
				in.Release()
				continue
			}
			t.g.queued.Add(1)
		}
		t.list = append(t.list, m)
	}
	nudge := !gate && t.gates == 0 && (urgent || t.eager) && !t.nudged && len(t.list) > 0
	if nudge {
		t.nudged = true
	}
	t.waiting.Store(len(t.list) > 0)
	t.mu.Unlock()
	switch {
	case gate:
		t.root.Send(t.self, &trayGate{t: t})
	case nudge:
		t.root.Send(t.self, theTrayNudge)
	}
	return true
}

// Close implements msg.Tray: what it holds is dropped, as a stopped
// actor's mailbox drops it.
func (t *tray) Close() {
	t.mu.Lock()
	t.closed = true
	list := t.list
	t.list = nil
	t.waiting.Store(false)
	t.mu.Unlock()
	for _, m := range list {
		if in, ok := m.(*msg.Input); ok {
			t.g.queued.Add(-1)
			in.Release()
		}
	}
}

// take returns what the tray holds (nil: nothing, or a gate is still on
// its way); give it back with done.
func (t *tray) take() []any {
	if !t.waiting.Load() {
		return nil
	}
	t.mu.Lock()
	if t.gates > 0 || len(t.list) == 0 {
		t.mu.Unlock()
		return nil
	}
	l := t.list
	t.list, t.back = t.back, nil
	t.nudged = false
	t.waiting.Store(false)
	t.mu.Unlock()
	return l
}

func (t *tray) done(l []any) {
	clear(l)
	if cap(l) > fifoKept {
		l = nil // a backlog's room goes, as the mailbox's queues' does
	}
	t.back = l[:0]
}

func (t *tray) ungate() {
	t.mu.Lock()
	t.gates--
	t.mu.Unlock()
}

// setEager makes every put nudge the zone (paused: it does not tick).
func (t *tray) setEager(on bool) {
	t.mu.Lock()
	t.eager = on
	t.mu.Unlock()
}

// openTray makes the zone's tray and registers it for the shards.
func (a *zoneActor) openTray(ctx actor.Context) {
	if a.inputs == nil {
		return // driven without a mailbox (benchmarks): messages only
	}
	a.tray = &tray{g: a.inputs, m: a.m, root: a.root, self: a.self}
	msg.RegisterTray(ctx.ActorSystem(), a.self.Id, a.tray)
}

// closeTray takes the tray out of use (the zone stops or restarts).
func (a *zoneActor) closeTray(ctx actor.Context) {
	if a.tray == nil {
		return
	}
	msg.UnregisterTray(ctx.ActorSystem(), a.self.Id, a.tray)
	a.tray.Close()
	a.tray = nil
}

// takesTray reports whether the zone takes its tray before handling m:
// before anything but a neighbour's messages, which overtake the inputs
// (zonePriority), and a gate, which opens the tray itself.
func takesTray(m any) bool {
	switch m.(type) {
	case *HandoffEnvelope, *ReplicaEnvelope, *trayGate:
		return false
	}
	return true
}

// takeTray handles what the tray holds in the order it was put: each run
// of inputs as one shard round's batch (onInputs), each Join and Leave as
// its message.
func (a *zoneActor) takeTray() {
	t := a.tray
	l := t.take()
	if l == nil {
		return
	}
	run := 0
	for i, m := range l {
		switch m := m.(type) {
		case *msg.Input:
			continue
		case *msg.Join:
			a.trayInputs(l[run:i])
			a.onJoin(m)
		case *msg.Leave:
			a.trayInputs(l[run:i])
			a.onLeave(m)
		}
		run = i + 1
	}
	a.trayInputs(l[run:])
	t.done(l)
}

// trayInputs takes a run of the tray's inputs as onInputs takes a batch.
func (a *zoneActor) trayInputs(l []any) {
	if len(l) == 0 {
		return
	}
	t := a.tray
	for _, m := range l {
		t.ins = append(t.ins, m.(*msg.Input))
	}
	a.takeInputs(t.ins)
	clear(t.ins)
	t.ins = t.ins[:0]
	if cap(t.ins) > fifoKept {
		t.ins = nil
	}
	a.flushOutputs()
	a.flushPending()
}
