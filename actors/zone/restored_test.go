package zone

import (
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
// calls refused, the zone drops the player again — with two owners
// otherwise. A refusal for an epoch the player is no longer at here
// changes nothing.
func TestRestoredPlayerDroppedWhenItsRecordMovedOn(t *testing.T) {
	defer verifyNoLeaks(t)()
	type call struct {
		player, epoch, from uint64
		refused             func()
	}
	var mu sync.Mutex
	var calls []call
	var placed int
	p := Params{Spawn: at,
		Placed: func(uint64, string, uint64, bool, *handoff.Checkpoint) { mu.Lock(); placed++; mu.Unlock() },
		Restored: func(player uint64, _ string, epoch, from uint64, _ *handoff.Checkpoint, refused func()) {
			mu.Lock()
			calls = append(calls, call{player, epoch, from, refused})
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
	got[0].refused() // player 1's record moved on
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
