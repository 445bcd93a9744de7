package zone

import (
	"testing"
	"time"
)

// runnerAlive reports whether r has a goroutine.
func runnerAlive(r *runner) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.alive
}

// TestRunnerStopEndsAWaitingGoroutine: Stop reaches a goroutine waiting
// for its next run through the one wake channel. The linger is an hour,
// so nothing but Stop can end it.
func TestRunnerStopEndsAWaitingGoroutine(t *testing.T) {
	defer verifyNoLeaks(t)()
	r := newRunner(zoneThroughput)
	r.every = time.Hour
	m := &mailboxLike{d: r}
	m.post()
	waitFor(t, time.Second, "the run", func() bool { return m.taken.Load() == 1 })
	r.Stop()
	waitFor(t, 5*time.Second, "Stop to end the waiting goroutine", func() bool { return !runnerAlive(r) })
}

// TestRunnerStopRunsWhatWasScheduled: runs scheduled before Stop, while
// the goroutine is busy (their wake-ups and Stop's find the channel
// full), all run, and then the goroutine ends without waiting out its
// linger (an hour).
func TestRunnerStopRunsWhatWasScheduled(t *testing.T) {
	defer verifyNoLeaks(t)()
	r := newRunner(zoneThroughput)
	r.every = time.Hour
	hold := make(chan struct{})
	var order []int
	r.Schedule(func() { <-hold; order = append(order, 0) })
	r.Schedule(func() { order = append(order, 1) })
	r.Schedule(func() { order = append(order, 2) })
	r.Stop()
	close(hold)
	waitFor(t, 5*time.Second, "the goroutine to end after the runs", func() bool { return !runnerAlive(r) })
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(order) != 3 || order[0] != 0 || order[1] != 1 || order[2] != 2 {
		t.Fatalf("runs %v, want [0 1 2]", order)
	}
}

// TestRunnerRestartedGoroutineLingers: a goroutine started after the
// last one ended idle has its own linger firings and ends idle in turn,
// time after time (an old goroutine's ending must not stop the timer the
// new one set, nor a new one wait without it).
func TestRunnerRestartedGoroutineLingers(t *testing.T) {
	defer verifyNoLeaks(t)()
	r := newRunner(zoneThroughput)
	defer r.Stop()
	r.every = 5 * time.Millisecond
	m := &mailboxLike{d: r}
	for i := 1; i <= 40; i++ {
		m.post()
		waitFor(t, 5*time.Second, "the run", func() bool { return m.taken.Load() == int64(i) })
		waitFor(t, 5*time.Second, "the idle goroutine to end", func() bool { return !runnerAlive(r) })
	}
	r.mu.Lock()
	starts := r.starts
	r.mu.Unlock()
	if starts != 40 {
		t.Fatalf("%d goroutines for 40 runs a linger apart and more, want 40", starts)
	}
}
