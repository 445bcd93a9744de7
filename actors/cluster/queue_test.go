package cluster

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// unstartedPlayers is a Players whose writers never run: its queues only
// fill (no KV is touched).
func unstartedPlayers() *Players {
	p := &Players{node: "n1", stop: make(chan struct{}), revs: map[uint64]revEntry{}}
	for i := range p.jobs {
		p.jobs[i] = make(chan *playerJob, playerQueue)
	}
	return p
}

// A writer's full queue drops the next write, counted, and answers a
// Commit false at once (its source resends it): a zone is never blocked.
func TestFullQueueDropsAndAnswers(t *testing.T) {
	p := unstartedPlayers()
	gw := func(string) string { return "gw1" }
	// Players 4, 8, 12, … all go to writer 0.
	for i := range playerQueue {
		p.Acquired(uint64(4*(i+1)), "a", 1)
	}
	if p.Dropped.Load() != 0 {
		t.Fatalf("dropped %d of a queue's %d", p.Dropped.Load(), playerQueue)
	}
	answered, ok := false, true
	p.Commit(4, "a", 2, func(v bool) { answered, ok = true, v })
	if !answered || ok {
		t.Fatalf("a Commit on a full queue: answered %v, ok %v; want answered false at once", answered, ok)
	}
	p.Checkpoint("a", []handoff.Checkpoint{{Entity: 8, Epoch: 1}}, false, gw)
	p.Joined(12, "a", 1)
	if got := p.Dropped.Load(); got != 3 {
		t.Fatalf("dropped %d, want 3 (a Commit, a checkpoint, a join)", got)
	}
	// The other writers' queues are untouched.
	p.Checkpoint("a", []handoff.Checkpoint{{Entity: 5, Epoch: 1}}, false, gw)
	if got, n := p.Dropped.Load(), len(p.jobs[1]); got != 3 || n != 1 {
		t.Fatalf("writer 1: dropped %d, queued %d; want 3 and 1", got, n)
	}
}

// A queued checkpoint is a copy: the zone reuses its slice for the next
// tick's checkpoints.
func TestQueuedCheckpointIsACopy(t *testing.T) {
	p := unstartedPlayers()
	cps := []handoff.Checkpoint{{Entity: 1, Epoch: 3, Control: move.ControlState{Pos: [3]float32{1, 2, 3}}, LastApplied: 9, Name: "p1", Conn: "c1"}}
	p.Checkpoint("a", cps, true, func(c string) string { return "gw-" + c })
	cps[0] = handoff.Checkpoint{Entity: 2, Epoch: 7, LastApplied: 100}
	j := <-p.jobs[1]
	if j.player != 1 || j.epoch != 3 || j.zone != "a" || !j.leaving || j.gateway != "gw-c1" || j.place {
		t.Fatalf("queued job %+v", *j)
	}
	if j.cp.Entity != 1 || j.cp.LastApplied != 9 || j.cp.Control.Pos != [3]float32{1, 2, 3} || j.cp.Name != "p1" {
		t.Fatalf("queued checkpoint changed with the caller's slice: %+v", *j.cp)
	}
}

// The writers' queues hold pointers: a node's Players costs tens of KB at
// start, not 4 × 2,048 jobs by value (832 KB). A checkpoint's job and copy
// are one allocation in the 288-byte size class.
func TestPlayersFootprint(t *testing.T) {
	const maxPlayersBytes = 96 << 10
	if s := unsafe.Sizeof(checkpointJob{}); s > 288 {
		t.Fatalf("a checkpoint job is %d B, want ≤ 288 (its size class)", s)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	p := NewPlayers(nil, "n1", nil)
	runtime.GC()
	runtime.ReadMemStats(&after)
	got := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	p.Close()
	t.Logf("a new Players: %d B of heap", got)
	if got > maxPlayersBytes {
		t.Fatalf("a new Players keeps %d B, want ≤ %d (jobs queued by value again?)", got, maxPlayersBytes)
	}
}
