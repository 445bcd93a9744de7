package zone

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// mailboxLike schedules runs on d as protoactor's mailbox does: a post
// schedules a run unless one is scheduled or running; a run takes every
// post made before it and, ending, schedules another if posts came in
// meanwhile.
type mailboxLike struct {
	d       *runner
	posted  atomic.Int64
	taken   atomic.Int64
	running atomic.Int32 // 0 idle, 1 scheduled or running
	inRun   atomic.Int32 // runs executing now (must stay ≤ 1)
	overlap atomic.Bool
	slow    time.Duration // each run takes this long at least
}

func (m *mailboxLike) post() {
	m.posted.Add(1)
	if m.running.CompareAndSwap(0, 1) {
		m.d.Schedule(m.run)
	}
}

func (m *mailboxLike) run() {
	for {
		if m.inRun.Add(1) > 1 {
			m.overlap.Store(true)
		}
		m.taken.Store(m.posted.Load())
		if m.slow > 0 {
			time.Sleep(m.slow)
		}
		m.inRun.Add(-1)
		m.running.Store(0)
		if m.taken.Load() == m.posted.Load() || !m.running.CompareAndSwap(0, 1) {
			return
		}
	}
}

// TestRunnerKeepsOneGoroutine: runs scheduled one after another while the
// runner's goroutine lingers go to that one goroutine (which keeps its
// grown stack), not one goroutine each; once stopped, the goroutine ends.
func TestRunnerKeepsOneGoroutine(t *testing.T) {
	defer verifyNoLeaks(t)()
	r := newRunner(zoneThroughput)
	m := &mailboxLike{d: r}
	for i := range 1000 {
		m.post()
		for m.taken.Load() < int64(i+1) {
			time.Sleep(10 * time.Microsecond)
		}
	}
	r.mu.Lock()
	starts := r.starts
	r.mu.Unlock()
	if starts != 1 {
		t.Fatalf("%d goroutines for 1,000 runs, want 1", starts)
	}
	r.Stop()
}

// TestRunnerEndsWhenIdle: a runner nobody stops (its actor system shut
// down under it) ends its goroutine runnerLinger after its last run, and
// starts one again for the next.
func TestRunnerEndsWhenIdle(t *testing.T) {
	defer verifyNoLeaks(t)()
	r := newRunner(zoneThroughput)
	m := &mailboxLike{d: r}
	m.post()
	time.Sleep(runnerLinger + 100*time.Millisecond)
	r.mu.Lock()
	alive := r.alive
	r.mu.Unlock()
	if alive {
		t.Fatal("the runner's goroutine outlived its linger")
	}
	m.post()
	waitFor(t, time.Second, "the run after the linger", func() bool { return m.taken.Load() == 2 })
	r.Stop()
}

// TestRunnerLosesNoRun: posts from many goroutines at once, through the
// mailbox's scheduling, are all taken, by runs that never overlap, while
// the goroutine comes and goes (a short linger's worth of pauses).
func TestRunnerLosesNoRun(t *testing.T) {
	defer verifyNoLeaks(t)()
	r := newRunner(zoneThroughput)
	defer r.Stop()
	m := &mailboxLike{d: r}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				m.post()
				if i%500 == 0 && g == 0 {
					time.Sleep(runnerLinger + 20*time.Millisecond) // the goroutine ends meanwhile
				}
			}
		})
	}
	wg.Wait()
	waitFor(t, 5*time.Second, "every post taken", func() bool { return m.taken.Load() == 16000 })
	if m.overlap.Load() {
		t.Fatal("two runs at once")
	}
}

// TestRunnerSharedByMailboxes: one runner dispatching several mailboxes
// (Props spawned more than once) runs every run of each, one at a time.
func TestRunnerSharedByMailboxes(t *testing.T) {
	defer verifyNoLeaks(t)()
	r := newRunner(zoneThroughput)
	defer r.Stop()
	ms := make([]*mailboxLike, 4)
	var wg sync.WaitGroup
	for i := range ms {
		ms[i] = &mailboxLike{d: r, slow: 20 * time.Microsecond} // the others schedule meanwhile
		wg.Go(func() {
			for range 3000 {
				ms[i].post()
			}
		})
	}
	wg.Wait()
	for i, m := range ms {
		waitFor(t, 5*time.Second, "every post taken", func() bool { return m.taken.Load() == 3000 })
		if m.overlap.Load() {
			t.Fatalf("mailbox %d: two runs at once", i)
		}
	}
}

// TestRunnerLingersWhileBusyEndsWhenIdle: runs that keep coming, for
// longer than a linger, keep the one goroutine (the linger timer fires and
// finds runs since its last firing); once they stop, the goroutine ends
// within two lingers — which it would not if a firing that found a run
// had left the timer unset.
func TestRunnerLingersWhileBusyEndsWhenIdle(t *testing.T) {
	defer verifyNoLeaks(t)()
	r := newRunner(zoneThroughput)
	defer r.Stop()
	m := &mailboxLike{d: r}
	busy := time.Now().Add(3 * runnerLinger)
	for i := 1; time.Now().Before(busy); i++ {
		m.post()
		waitFor(t, time.Second, "the run", func() bool { return m.taken.Load() >= int64(i) })
		time.Sleep(runnerLinger / 8) // the goroutine waits between runs
	}
	r.mu.Lock()
	starts, alive := r.starts, r.alive
	r.mu.Unlock()
	if starts != 1 || !alive {
		t.Fatalf("after %v of runs %v apart: %d goroutines started, alive %v; want 1, alive", 3*runnerLinger, runnerLinger/8, starts, alive)
	}
	waitFor(t, 2*runnerLinger+time.Second, "the goroutine to end once idle", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return !r.alive
	})
}

// BenchmarkRunnerWakes (informative: real goroutines and real time): a
// zone's runner woken for one run a millisecond, waiting between them, as
// a zone's is by shard rounds' inputs. Run it under cachegrind for the
// instructions of a wake-up and its wait (the runtime's timers included).
func BenchmarkRunnerWakes(b *testing.B) {
	r := newRunner(zoneThroughput)
	defer r.Stop()
	m := &mailboxLike{d: r}
	i := int64(0)
	for b.Loop() {
		i++
		m.post()
		for m.taken.Load() < i {
			time.Sleep(50 * time.Microsecond)
		}
		time.Sleep(time.Millisecond)
	}
}
