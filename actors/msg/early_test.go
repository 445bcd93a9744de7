package msg

import (
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

type recInvoker struct {
	mu        sync.Mutex
	user, sys []any
}

func (r *recInvoker) InvokeSystemMessage(m any) { r.mu.Lock(); r.sys = append(r.sys, m); r.mu.Unlock() }
func (r *recInvoker) InvokeUserMessage(m any)   { r.mu.Lock(); r.user = append(r.user, m); r.mu.Unlock() }
func (r *recInvoker) EscalateFailure(reason, _ any) {
	panic(reason)
}

// TestEarlyPostsBeforeHandlers: a mailbox made by EarlyPosts keeps what is
// posted before its handlers are registered and hands it over in order
// once they are (protoactor's plain mailbox schedules on a nil dispatcher:
// without the wrapper this test panics).
func TestEarlyPostsBeforeHandlers(t *testing.T) {
	mb := EarlyPosts(actor.Unbounded())()
	mb.PostUserMessage("first")
	mb.PostSystemMessage(&actor.Started{})
	mb.PostUserMessage("second")
	r := &recInvoker{}
	mb.RegisterHandlers(r, actor.NewSynchronizedDispatcher(300))
	mb.Start()
	mb.PostUserMessage("after")

	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.sys) != 1 {
		t.Errorf("system messages handed over: %v, want the one posted early", r.sys)
	}
	want := []any{"first", "second", "after"}
	if len(r.user) != len(want) {
		t.Fatalf("user messages handed over: %v, want %v", r.user, want)
	}
	for i := range want {
		if r.user[i] != want[i] {
			t.Errorf("user message %d: %v, want %v (in the order posted)", i, r.user[i], want[i])
		}
	}
}

// TestEarlyPostsRace posts from several goroutines while the handlers are
// registered, as senders that find an actor by name during its spawn do:
// every message arrives exactly once, and -race sees the registration
// ordered before each handed-over post.
func TestEarlyPostsRace(t *testing.T) {
	for round := 0; round < 50; round++ {
		mb := EarlyPosts(actor.Unbounded())()
		r := &recInvoker{}
		const senders, each = 4, 25
		var wg sync.WaitGroup
		start := make(chan struct{})
		for s := range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := range each {
					mb.PostUserMessage(s*each + i)
				}
			}()
		}
		close(start)
		mb.RegisterHandlers(r, actor.NewSynchronizedDispatcher(300))
		mb.Start()
		wg.Wait()
		r.mu.Lock()
		seen := map[any]int{}
		for _, m := range r.user {
			seen[m]++
		}
		r.mu.Unlock()
		if len(seen) != senders*each {
			t.Fatalf("round %d: %d distinct messages arrived, want %d", round, len(seen), senders*each)
		}
		for m, n := range seen {
			if n != 1 {
				t.Fatalf("round %d: message %v arrived %d times", round, m, n)
			}
		}
	}
}
