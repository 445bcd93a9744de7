package msg

import (
	"sync"
	"testing"

	"github.com/ghostwire/ghostwire/replication/ghost"
)

func view(tick uint64) *View {
	v := NewView()
	v.Tick = tick
	v.Entries = append(v.Entries, ghost.ViewEntry{Entity: tick})
	return v
}

func TestViewSlotNewestSupersedes(t *testing.T) {
	var s ViewSlot
	if !s.Publish(view(1)) {
		t.Fatal("first publish into an empty slot must nudge")
	}
	if s.Publish(view(2)) || s.Publish(view(3)) {
		t.Fatal("publish into a full slot must not nudge again")
	}
	v := s.Take()
	if v == nil || v.Tick != 3 {
		t.Fatalf("Take = %+v, want tick 3", v)
	}
	v.Release()
	if s.Take() != nil {
		t.Fatal("slot must be empty after Take")
	}
	if got := s.Superseded(); got != 2 {
		t.Fatalf("Superseded = %d, want 2", got)
	}
	if !s.Publish(view(4)) {
		t.Fatal("publish after Take must nudge")
	}
	s.Close()
	if s.Take() != nil {
		t.Fatal("Close must drop the held view")
	}
	if s.Publish(view(5)) {
		t.Fatal("publish into a closed slot must not nudge")
	}
	if s.Take() != nil {
		t.Fatal("closed slot must stay empty")
	}
}

// Every nudge finds a view or a view taken by an earlier nudge's Take; the
// taker sees ticks in increasing order and always ends with the last one.
func TestViewSlotConcurrentPublishTake(t *testing.T) {
	var s ViewSlot
	nudges := make(chan struct{}, 1) // ≤ 1 nudge in flight: a full channel is a bug
	const n = 20000
	var wg sync.WaitGroup
	var last uint64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range nudges {
			for v := s.Take(); v != nil; v = s.Take() {
				if v.Tick <= last {
					t.Errorf("tick %d after %d", v.Tick, last)
				}
				last = v.Tick
				v.Release()
			}
		}
	}()
	for i := uint64(1); i <= n; i++ {
		if s.Publish(view(i)) {
			select {
			case nudges <- struct{}{}:
			default:
				// A previous nudge is still queued; it will Take this view.
			}
		}
	}
	nudges <- struct{}{}
	close(nudges)
	wg.Wait()
	if last != n {
		t.Fatalf("last tick seen = %d, want %d", last, n)
	}
}
