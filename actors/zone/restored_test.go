package zone

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// A player put back from its record (Join.Restore) is reported through
// Params.Restored with the record's epoch it came from, not Placed; when
// the cluster finds the record moved on to another owner meanwhile and
// settles the write unwritten, the zone drops the player again — with two
// owners otherwise. A refusal for an epoch the player is no longer at here
// changes nothing.
func TestRestoredPlayerDroppedWhenItsRecordMovedOn(t *testing.T) {
	defer verifyNoLeaks(t)()
	type call struct {
		player, epoch, from uint64
		settled             func(bool)
	}
	var mu sync.Mutex
	var calls []call
	var placed int
	p := Params{Spawn: at,
		Placed: func(uint64, string, uint64, bool, *handoff.Checkpoint) { mu.Lock(); placed++; mu.Unlock() },
		Restored: func(player uint64, _ string, epoch, from uint64, _ *handoff.Checkpoint, settled func(bool)) {
			mu.Lock()
			calls = append(calls, call{player, epoch, from, settled})
			mu.Unlock()
		}}
	w := pairWorld(t)
	zn, _ := w.Zone("x0z0")
	f := startFixtureWith(t, w, sim.Config{TickRate: 50}, nil, p)
	defer f.stop()
	owned := func(id uint64) bool {
		var ok bool
		if err := f.world.Inspect(5*time.Second, func(z *sim.Zone) {
			if e, here := z.Entity(id); here && e.Owned {
				ok = true
			}
		}); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	for _, id := range []uint64{1, 2} {
		cp := &handoff.Checkpoint{Entity: id, Epoch: 7, Name: "p", Control: move.ControlState{Pos: at(id, zn.Rect)}}
		v := f.drv.add(id, f.world.PID("x0z0"))
		f.sys.Root.Send(f.world.PID("x0z0"), &msg.Join{Player: id, Conn: f.dpid, Ghosts: f.dpid, Views: &v.views, Restore: cp})
	}
	f.sync()
	mu.Lock()
	got := append([]call(nil), calls...)
	mu.Unlock()
	if len(got) != 2 || placed != 0 || got[0].from != 7 || got[0].epoch <= 7 {
		t.Fatalf("restores reported %+v, placements %d; want two with from 7 and a newer epoch, no placement", got, placed)
	}
	if !owned(1) || !owned(2) {
		t.Fatal("restored players not owned")
	}
	got[0].settled(false) // player 1's record moved on
	f.sync()
	if owned(1) || !owned(2) || f.world.Metrics().Unplaced.Load() != 1 {
		t.Fatalf("after player 1's refusal: owned 1 %v, 2 %v, unplaced %d", owned(1), owned(2), f.world.Metrics().Unplaced.Load())
	}
	// A refusal of an older restore (the player is back at a newer epoch).
	stale := got[1]
	f.sys.Root.Send(f.world.PID("x0z0"), &unplace{player: 2, epoch: stale.epoch - 1})
	f.sync()
	if !owned(2) {
		t.Fatal("a refusal for another epoch dropped the player")
	}
}

// A restored player's events wait for its record write (restore_hold.go):
// two zones may restore one player from the same record, and only one
// write lands. Before the write is settled nothing is echoed (the moves
// go on); written, the kept events are applied in order, once, and those
// that come after them follow; not written, the player is dropped with
// its kept events, none echoed. A settlement for another epoch (an older
// restore's) releases nothing.
func TestRestoredPlayersEventsWaitForTheirRecord(t *testing.T) {
	defer verifyNoLeaks(t)()
	const gen = 0x7e57
	var mu sync.Mutex
	settle := map[uint64]func(bool){}
	epochs := map[uint64]uint64{}
	p := Params{Spawn: at,
		Restored: func(player uint64, _ string, epoch, _ uint64, _ *handoff.Checkpoint, settled func(bool)) {
			mu.Lock()
			settle[player], epochs[player] = settled, epoch
			mu.Unlock()
		}}
	w := pairWorld(t)
	zn, _ := w.Zone("x0z0")
	f := startFixtureWith(t, w, sim.Config{TickRate: 50}, nil, p)
	defer f.stop()
	x0 := f.world.PID("x0z0")
	for _, id := range []uint64{1, 2} {
		cp := &handoff.Checkpoint{Entity: id, Epoch: 7, Name: "p", Control: move.ControlState{Pos: at(id, zn.Rect)},
			Events: handoff.EventFence{Gen: gen, Last: [handoff.EventLanes]uint64{2}}}
		v := f.drv.add(id, x0)
		f.sys.Root.Send(x0, &msg.Join{Player: id, Conn: f.dpid, Ghosts: f.dpid, Views: &v.views, Restore: cp, EventGen: gen, LastApplied: 0})
		f.sendNumbered("x0z0", id, gen, 1, 4) // e1, e2 in the checkpoint's fence: dropped whenever applied
	}
	f.sync()
	waitFor(t, 2*time.Second, "both restores reported", func() bool { mu.Lock(); defer mu.Unlock(); return len(settle) == 2 })
	time.Sleep(100 * time.Millisecond) // five ticks: an echo applied now would be out
	if e1, e2 := echoesOf(f.drv, 1), echoesOf(f.drv, 2); len(e1)+len(e2) != 0 {
		t.Fatalf("echoes before the record write settled: %v, %v", e1, e2)
	}
	if controlsOf(f.drv, 1) == 0 {
		t.Fatal("the restored player's zone sends no Control while its write is pending")
	}
	mu.Lock()
	s1, s2, ep1 := settle[1], settle[2], epochs[1]
	mu.Unlock()
	f.sys.Root.Send(x0, &restoreSettled{player: 1, epoch: ep1 - 1, written: true}) // an older restore's
	f.sync()
	if e := echoesOf(f.drv, 1); len(e) != 0 {
		t.Fatalf("another epoch's settlement released %v", e)
	}
	s1(true)
	waitFor(t, 2*time.Second, "player 1's kept events", func() bool { return len(echoesOf(f.drv, 1)) == 2 })
	f.sendNumbered("x0z0", 1, gen, 4, 5) // e4 again (refused by the fence), e5 new
	waitFor(t, 2*time.Second, "player 1's next event", func() bool { return len(echoesOf(f.drv, 1)) == 3 })
	if got := echoesOf(f.drv, 1); !slices.Equal(got, names(3, 5)) {
		t.Fatalf("player 1 echoes %v, want %v", got, names(3, 5))
	}
	dropped := f.world.Metrics().EventsPausedDropped.Load()
	s2(false) // another zone's write landed first
	f.sync()
	time.Sleep(100 * time.Millisecond)
	if e := echoesOf(f.drv, 2); len(e) != 0 {
		t.Fatalf("player 2, its restore not written, echoed %v", e)
	}
	if d := f.world.Metrics().EventsPausedDropped.Load() - dropped; d != 4 {
		t.Fatalf("%d kept events dropped with player 2, want 4", d)
	}
	var owned bool
	if err := f.world.Inspect(5*time.Second, func(z *sim.Zone) {
		e, ok := z.Entity(2)
		owned = ok && e.Owned
	}); err != nil {
		t.Fatal(err)
	}
	if owned || f.world.Metrics().Unplaced.Load() != 1 {
		t.Fatalf("player 2 still owned (%v) after its restore went unwritten; unplaced %d", owned, f.world.Metrics().Unplaced.Load())
	}
}
