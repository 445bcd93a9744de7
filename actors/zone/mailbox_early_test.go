package zone

import (
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
)

// recInvoker records what a mailbox hands its actor.
type recInvoker struct {
	mu        sync.Mutex
	user, sys []any
}

func (r *recInvoker) InvokeSystemMessage(m any) { r.mu.Lock(); r.sys = append(r.sys, m); r.mu.Unlock() }
func (r *recInvoker) InvokeUserMessage(m any)   { r.mu.Lock(); r.user = append(r.user, m); r.mu.Unlock() }
func (r *recInvoker) EscalateFailure(reason, m any) {
	panic(reason)
}

// TestMailboxTakesPostsBeforeItsHandlers: protoactor's spawner puts a new
// actor in the process registry before it registers its mailbox's
// handlers, and zones are reached by name, so a post can come first. The
// zone's mailbox keeps such posts and hands them over, in order, once the
// handlers are there; without that the inner mailbox scheduled on a nil
// dispatcher (this test panics) or, racing with the spawn, read it
// unsynchronized (-race reported it between StartZones and a zone's
// replica send). Posts racing the registration: msg TestEarlyPostsRace.
func TestMailboxTakesPostsBeforeItsHandlers(t *testing.T) {
	g := &inputGauge{}
	g.max.Store(minQueuedInputs)
	mb := newInputMailbox(g, new(Metrics))()
	in := msg.NewInput()
	in.Player = 7
	mb.PostUserMessage("first")
	mb.PostSystemMessage(&actor.Started{})
	mb.PostUserMessage(in)
	if got := g.queued.Load(); got != 1 {
		t.Fatalf("an early input is counted against the bound like any: queued %d, want 1", got)
	}
	r := &recInvoker{}
	mb.RegisterHandlers(r, actor.NewSynchronizedDispatcher(300))
	mb.Start()
	mb.PostUserMessage("after")

	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.sys) != 1 {
		t.Errorf("system messages handed over: %v, want the one posted early", r.sys)
	}
	want := []any{"first", in, "after"}
	if len(r.user) != len(want) {
		t.Fatalf("user messages handed over: %v, want %v", r.user, want)
	}
	for i := range want {
		if r.user[i] != want[i] {
			t.Errorf("user message %d: %v, want %v (in the order posted)", i, r.user[i], want[i])
		}
	}
}
