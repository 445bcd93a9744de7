package zone

import (
	"sync"
	"sync/atomic"
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
	stopped bool // the actor has stopped: the goroutine ends once idle
	starts  int  // goroutines started (tests)
	// wake is the one channel the goroutine waits on: a run scheduled,
	// the linger timer's firing (rang) and Stop (stopped) each signal it.
	// A wait that selected on three channels (the wake, a timer's, a
	// closed stop) cost ≈ 1,700 instructions more a wake-up than a
	// receive from one (BenchmarkRunnerWakes, the runtime's select and
	// its timer channel), and a node's zone goroutines are woken ≈ 1,860
	// times a second at 1,000 players (a shard round's inputs each).
	wake chan struct{}
	// rang: the linger timer fired since the goroutine last looked.
	rang atomic.Bool
	// linger fires every runnerLinger while the goroutine waits between
	// runs (work); a function timer, so that it needs no channel of its
	// own in the wait.
	linger *time.Timer
	every  time.Duration // the linger: runnerLinger (tests set it)
}

func newRunner(throughput int) *runner {
	r := &runner{through: throughput, wake: make(chan struct{}, 1), every: runnerLinger}
	r.linger = time.AfterFunc(time.Hour, r.ring)
	r.linger.Stop()
	return r
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
		r.signal()
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
	r.stopped = true
	r.mu.Unlock()
	r.signal()
}

func (r *runner) signal() {
	select {
	case r.wake <- struct{}{}:
	default: // a wake is pending already
	}
}

// ring is the linger timer's firing (on a goroutine of the runtime's).
func (r *runner) ring() {
	r.rang.Store(true)
	r.signal()
}

// work runs runs until none has come for a linger. The linger timer is
// set when the goroutine first waits and then fires every runnerLinger:
// the goroutine ends at a firing with no run since the one before.
// Resetting it at every wait instead — a zone's goroutine waits after
// most of its ≈ 400 runs a second at 1,000 players — moved the runtime's
// timer on each (BenchmarkRunnerWakes).
//
// A firing that was on its way when the last goroutine ended (Stop found
// it running) may end the next one at its first wait with nothing
// pending: a goroutine started again, no run lost (alive is cleared
// under mu, so a Schedule after it starts one).
func (r *runner) work(fn func()) {
	armed := false
	ran := false // a run since the linger timer last fired
	for {
		fn()
		r.mu.Lock()
		fn = r.take()
		if fn == nil && r.stopped { // Stop's signal may have been taken by an earlier wait
			r.end(armed)
			return
		}
		r.mu.Unlock()
		if fn != nil {
			continue
		}
		if !armed {
			armed = true
			r.rang.Store(false)
			r.linger.Reset(r.every)
		}
		for fn == nil {
			<-r.wake
			fired := r.rang.Swap(false)
			r.mu.Lock()
			fn = r.take()
			if fn == nil && (r.stopped || fired && !ran) {
				r.end(armed)
				return
			}
			r.mu.Unlock()
			if fired { // and the goroutine goes on: the next linger
				ran = false
				r.linger.Reset(r.every)
			}
		}
		ran = true
	}
}

// end marks the goroutine gone and unlocks r.mu, which the caller holds.
// The timer stops before alive clears: a goroutine started after that
// sets it again, and a Stop after that would leave the new one without
// its firings.
func (r *runner) end(armed bool) {
	if armed {
		r.linger.Stop()
	}
	r.alive = false
	r.mu.Unlock()
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
