package session

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/notify"
)

// TestGhostFatesRoomGivenBack: after a backlog grew the ghost fate queue,
// its room goes back once ghostFatesIdle pops in a row used at most an
// eighth of it, not before, and not while pops keep using it; small queues
// are never given back (the steady state allocates nothing).
func TestGhostFatesRoomGivenBack(t *testing.T) {
	var s Server
	fill := func(n int) {
		for i := range n {
			s.ghostFates = append(s.ghostFates, ghostFateOf(notify.Fate{Seq: uint64(i), Delivered: true}))
		}
	}
	fill(200) // a backlog
	var dst []notify.Fate
	if dst = s.PopGhostFates(dst[:0]); len(dst) != 200 {
		t.Fatalf("popped %d of 200", len(dst))
	}
	big := cap(s.ghostFates)
	for i := 1; i < ghostFatesIdle; i++ {
		fill(2)
		if dst = s.PopGhostFates(dst[:0]); len(dst) != 2 {
			t.Fatalf("pop %d: %d fates, want 2", i, len(dst))
		}
		if i == ghostFatesIdle/2 {
			fill(big / 2) // busy again: the count starts over
			s.PopGhostFates(dst[:0])
		}
	}
	if cap(s.ghostFates) != big {
		t.Fatalf("room %d given back too early (was %d)", cap(s.ghostFates), big)
	}
	for range ghostFatesIdle/2 + 1 { // 31 small pops came after the busy one: 64 in a row now
		fill(2)
		s.PopGhostFates(dst[:0])
	}
	if cap(s.ghostFates) > ghostFatesKeep {
		t.Fatalf("room %d kept after %d small pops", cap(s.ghostFates), ghostFatesIdle)
	}
	fill(3) // the steady state: a small queue stays
	s.PopGhostFates(dst[:0])
	small := cap(s.ghostFates)
	for range 3 * ghostFatesIdle {
		fill(1)
		s.PopGhostFates(dst[:0])
	}
	if cap(s.ghostFates) != small || small == 0 {
		t.Fatalf("a small queue's room changed: %d -> %d", small, cap(s.ghostFates))
	}
}

// TestGhostFatePacksTheFate: a waiting fate gives back the notify.Fate it
// was made of (sequence, verdict, send time), at the sequences' extremes.
func TestGhostFatePacksTheFate(t *testing.T) {
	for _, f := range []notify.Fate{
		{Seq: 0, Delivered: true, SentAt: 0},
		{Seq: 1, Delivered: false, SentAt: 37 * time.Millisecond},
		{Seq: 1<<62 - 1, Delivered: true, SentAt: 1<<62 + 5},
		{Seq: 1<<62 - 1, Delivered: false, SentAt: -1},
	} {
		if got := ghostFateOf(f).fate(); got != f {
			t.Fatalf("%+v came back as %+v", f, got)
		}
	}
}
