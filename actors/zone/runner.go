package zone

import (
	"sync"
	"time"
)

// runnerLinger is how long a zone's runner goroutine waits for the
// mailbox's next run before it ends — at least this long and less than
// twice it, since the linger timer is not reset at every wait (below):
// longer than a tick period (zones tick at 20 Hz by default), so a ticking
// zone keeps one goroutine, and short enough that a zone stopped without
// its Stopped (an actor system shut down under it) leaves none behind for
// long.
const runnerLinger = 200 * time.Millisecond

// runner is a zone actor's dispatcher (actor.Dispatcher): its mailbox's
// runs go to one long-lived goroutine, where protoactor's default
// dispatcher starts a goroutine for each. A zone's mailbox runs thousands
// of times a second (every shard round's inputs, every tick), and each
// new goroutine, started with the runtime's small initial stack, grew it
// on the zone's first deep call (a tick, an input's move queue) and freed
// it on exit: runtime.newstack was 1.3 % of the server's CPU at 1,000
// players, all of it under zone actors (14 % of BenchmarkZoneInputMailbox's
// instructions). The runner's goroutine keeps its grown stack between
// runs.
//
// A mailbox schedules one run at a time (the next only after the last has
// ended or is ending), so its run is either pending here or running; a
// runner shared by the mailboxes of several actors (Props spawned more
// than once) runs their runs one after another on its goroutine. Safe for
// concurrent use.
type runner struct {
	through int
	mu      sync.Mutex
	pending []func() // the next runs, pending[head:], for the goroutine to take
	head    int
	alive   bool // a goroutine runs runs or waits for one
	wake    chan struct{}
	stop    chan struct{} // closed when the actor has stopped
	stopped bool
	starts  int // goroutines started (tests)
}

func newRunner(throughput int) *runner {
	return &runner{through: throughput, wake: make(chan struct{}, 1), stop: make(chan struct{})}
}

// Throughput implements actor.Dispatcher.
func (r *runner) Throughput() int { return r.through }

// Schedule implements actor.Dispatcher: fn runs on the runner's goroutine,
// started if there is none.
func (r *runner) Schedule(fn func()) {
	r.mu.Lock()
	if r.alive {
		r.pending = append(r.pending, fn)
		r.mu.Unlock()
		select {
		case r.wake <- struct{}{}:
		default: // a wake is pending already
		}
		return
	}
	r.alive = true
	r.starts++
	r.mu.Unlock()
	go r.work(fn)
}

// Stop ends the goroutine once it has nothing to run (the actor stopped:
// its mailbox has nothing more to run but what was posted before).
func (r *runner) Stop() {
	r.mu.Lock()
	if !r.stopped {
		r.stopped = true
		close(r.stop)
	}
	r.mu.Unlock()
}

// work runs runs until none has come for a linger. The linger timer is
// set once, when the goroutine first waits, and then fires every
// runnerLinger: the goroutine ends at a firing with no run since the one
// before. Resetting it at every wait instead — a zone's goroutine waits
// after most of its ≈ 400 runs a second at 1,000 players — moved the
// runtime's timer on each (BenchmarkRunnerWakes).
func (r *runner) work(fn func()) {
	var linger *time.Timer
	ran := false // a run since the linger timer last fired
	for {
		fn()
		r.mu.Lock()
		fn = r.take()
		r.mu.Unlock()
		if fn != nil {
			continue
		}
		if linger == nil {
			linger = time.NewTimer(runnerLinger)
		}
		for fn == nil {
			expired, fired := false, false
			select {
			case <-r.wake:
			case <-linger.C:
				expired, fired = !ran, true
			case <-r.stop:
				expired = true
			}
			r.mu.Lock()
			fn = r.take()
			if fn == nil && expired {
				r.alive = false
				r.mu.Unlock()
				linger.Stop()
				return
			}
			r.mu.Unlock()
			if fired { // and the goroutine goes on: the next linger
				ran = false
				linger.Reset(runnerLinger)
			}
		}
		ran = true
	}
}

// take returns the next pending run, or nil; r.mu is held.
func (r *runner) take() func() {
	if r.head == len(r.pending) {
		return nil
	}
	fn := r.pending[r.head]
	r.pending[r.head] = nil
	r.head++
	if r.head == len(r.pending) {
		r.pending, r.head = r.pending[:0], 0
	}
	return fn
}
