package msg

import (
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// TestAwaitLateReplyIsNoRace: a reply that reaches the future's process
// after the timeout has resolved it (it looked the process up just before),
// as a zone's answer to a node's look did under load. Reading the answer
// after the timeout (f.Result) races with that reply's write, and the race
// detector fails the test; Await does not read it. The reply is sent when a
// timer set before the request fires, not on a signal from this goroutine,
// which would order it after the read and hide the race.
func TestAwaitLateReplyIsNoRace(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	f := actor.NewFuture(sys, 20*time.Millisecond)
	proc, ok := sys.ProcessRegistry.Get(f.PID())
	if !ok {
		t.Fatal("the future has no process")
	}
	gate, replied := make(chan struct{}), make(chan struct{})
	time.AfterFunc(time.Second, func() { close(gate) })
	go func() {
		<-gate
		proc.SendUserMessage(f.PID(), "late")
		close(replied)
	}()
	res, err := Await(f)
	switch {
	case errors.Is(err, actor.ErrTimeout) && res == nil:
	case err == nil && res == "late":
		// The timeout's goroutine was held back past the gate (a starved
		// host): the reply came first, which Await must return as well.
	default:
		t.Fatalf("Await = %v, %v; want nil, %v (or the late answer)", res, err, actor.ErrTimeout)
	}
	select {
	case <-replied:
	case <-time.After(30 * time.Second):
		t.Fatal("the reply was never sent")
	}
}

// TestAwaitAnswer: a reply in time is returned.
func TestAwaitAnswer(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(string); ok {
			c.Respond(42)
		}
	}))
	res, err := Await(sys.Root.RequestFuture(pid, "ask", 10*time.Second))
	if err != nil || res != 42 {
		t.Fatalf("Await = %v, %v; want 42, nil", res, err)
	}
}
