package conn

import (
	"testing"
	"time"
)

// TestWorkRoomGivenBackAfterBacklog: a stall leaves a shard's event list
// with the room of its largest round; once rounds are small again for a
// second it shrinks, a busy second keeps it, and a shard that keeps up
// does not allocate.
func TestWorkRoomGivenBackAfterBacklog(t *testing.T) {
	s := &shard{work: make([]envelope, 0, 40_000)} // a stall's backlog
	now := time.Duration(0)
	round := func(n int) {
		now += 300 * time.Millisecond
		s.trimWork(n, now)
	}
	for range 3 {
		round(100)
	}
	if c := cap(s.work); c != 40_000 {
		t.Fatalf("room %d before a second passed, want 40000 kept", c)
	}
	round(100)
	if c := cap(s.work); c != minWork {
		t.Fatalf("room %d after a second of rounds of 100, want %d", c, minWork)
	}

	s.work = make([]envelope, 0, 1000)
	for range 4 {
		round(300) // over a quarter of the room: still in use
	}
	if c := cap(s.work); c != 1000 {
		t.Fatalf("room %d after a busy second, want 1000 kept", c)
	}
	for range 4 {
		round(200)
	}
	if c := cap(s.work); c != 400 {
		t.Fatalf("room %d after a second of rounds of 200, want 400", c)
	}

	if a := testing.AllocsPerRun(100, func() { round(150) }); a != 0 {
		t.Fatalf("%v allocations per round with the shard keeping up", a)
	}
}
