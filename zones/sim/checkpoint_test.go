package sim

import (
	"errors"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// Every owned player is checkpointed exactly once per `every` ticks, spread
// over the ticks, with the state the zone holds.
func TestCheckpointsSpreadOverTicks(t *testing.T) {
	z := oneZone(t, nil)
	const players, every = 50, 20
	for i := range players {
		if err := z.Join(0, uint64(i+1), "c", "p", [3]float32{-500 + float32(i), 0, -500}, 0); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[uint64]int{}
	var buf []Checkpoint
	perTick := 0
	for tick := range every {
		z.Input(0, 1, []move.Move{fwd(uint64(tick+1), 0)})
		z.Step(time.Duration(tick+1) * 50 * time.Millisecond)
		buf = z.AppendCheckpoints(buf[:0], every)
		perTick = max(perTick, len(buf))
		for _, cp := range buf {
			seen[cp.Entity]++
			info, _ := z.Entity(cp.Entity)
			if cp.Control != info.State || cp.Epoch != 1 {
				t.Fatalf("checkpoint of %d: %+v, zone holds %+v", cp.Entity, cp.Control, info.State)
			}
			if cp.Entity == 1 && cp.LastApplied != uint64(tick+1) {
				t.Fatalf("player 1 checkpointed at move %d after %d applied", cp.LastApplied, tick+1)
			}
		}
	}
	if len(seen) != players {
		t.Fatalf("%d of %d players checkpointed in %d ticks", len(seen), players, every)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("player %d checkpointed %d times in %d ticks", id, n, every)
		}
	}
	if perTick > players/every+2 {
		t.Fatalf("%d checkpoints in one tick: not spread", perTick)
	}
}

// A player restored from its checkpoint is where and as it was, at an
// epoch above the checkpoint's, and its moves continue after the fence.
func TestRestoreFromCheckpoint(t *testing.T) {
	z := oneZone(t, nil)
	if err := z.Join(0, 7, "c", "alice", [3]float32{-400, 0, -400}, 0); err != nil {
		t.Fatal(err)
	}
	z.Input(0, 7, []move.Move{fwd(1, 0), fwd(2, 0)})
	z.Step(50 * time.Millisecond)
	cp, ok := z.CheckpointOf(7)
	if !ok || cp.LastApplied != 2 {
		t.Fatalf("checkpoint %+v %v", cp, ok)
	}
	cp.Epoch, cp.Health = 5, 321

	other := oneZone(t, nil) // the zone's new owner, after a crash
	if err := other.Restore(0, cp, "c2", 2); err != nil {
		t.Fatal(err)
	}
	info, _ := other.Entity(7)
	if info.State != cp.Control {
		t.Fatalf("restored at %+v, checkpoint %+v", info.State, cp.Control)
	}
	if _, ep, _ := other.Handoffs().Status(7); ep <= handoff.Epoch(5) {
		t.Fatalf("restored at epoch %d, not above the checkpoint's 5", ep)
	}
	// A move at or below the fence is never applied again; the next is.
	other.Input(0, 7, []move.Move{fwd(2, 0), fwd(3, 0)})
	out := other.Step(50 * time.Millisecond)
	if len(out.Controls()) != 1 || out.Controls()[0].LastApplied != 3 || other.Stats().MovesApplied != 1 {
		t.Fatalf("controls %+v, applied %d: want move 3 only", out.Controls(), other.Stats().MovesApplied)
	}
	if err := other.Restore(0, cp, "c2", 0); !errors.Is(err, ErrExists) {
		t.Fatalf("second restore: %v", err)
	}
	cp.Control.Pos[0] = 5000 // outside the world
	cp.Entity = 8
	if err := other.Restore(0, cp, "c", 0); !errors.Is(err, ErrOutside) {
		t.Fatalf("restore outside the world: %v", err)
	}
}

// A checkpoint taken mid-crossing stands in the neighbour zone: the player
// is put back where it stood (not at a spawn point), and the crossing goes
// on from there: the zone offers it to the neighbour.
func TestRestoreMidCrossing(t *testing.T) {
	z := oneZone(t, nil)
	cp := Checkpoint{Entity: 9, Epoch: 2, Control: move.ControlState{Pos: [3]float32{-400, 0, 20}}, Name: "p9"} // in x0z1
	if err := z.Restore(0, cp, "c", 0); err != nil {
		t.Fatal(err)
	}
	if info, ok := z.Entity(9); !ok || info.State.Pos != cp.Control.Pos {
		t.Fatalf("restored at %+v, checkpoint at %v", info.State.Pos, cp.Control.Pos)
	}
	offered := false
	for i := range 40 { // past the minimum dwell
		out := z.Step(time.Duration(i+1) * 50 * time.Millisecond)
		for _, m := range out.Send {
			offered = offered || m.Kind == handoff.KindOffer && m.Entity == 9 && m.To == "x0z1"
		}
	}
	if !offered {
		t.Fatal("the restored player standing in x0z1 was not offered to x0z1")
	}
}

// A restored player's first input replays the moves its dead owner never
// applied at once (they are owed the time they took); later inputs are
// held to real time again.
func TestRestoredPlayerReplaysItsBacklog(t *testing.T) {
	z := oneZone(t, nil)
	cp := Checkpoint{Entity: 9, Epoch: 1, Control: move.ControlState{Pos: [3]float32{-400, 0, -400}}, LastApplied: 10}
	if err := z.Restore(0, cp, "c", 10); err != nil {
		t.Fatal(err)
	}
	var backlog []move.Move
	for seq := uint64(11); seq <= 110; seq++ { // 100 moves: 5 s of input
		backlog = append(backlog, fwd(seq, 0))
	}
	z.Input(0, 9, backlog)
	z.Step(50 * time.Millisecond)
	if info, _ := z.Entity(9); info.LastApplied != 110 {
		t.Fatalf("applied up to %d of 110 in the first tick", info.LastApplied)
	}
	// A second burst is ordinary input: held to the time credit.
	var more []move.Move
	for seq := uint64(111); seq <= 160; seq++ {
		more = append(more, fwd(seq, 0))
	}
	z.Input(0, 9, more)
	z.Step(100 * time.Millisecond)
	if info, _ := z.Entity(9); info.LastApplied >= 130 {
		t.Fatalf("a later burst applied up to %d in one tick: faster than real time", info.LastApplied)
	}
}

// A checkpoint taken with CheckpointNow (a join's or an acquisition's,
// written with the record) is one of the player's periodic ones: the next
// comes between every/2 and every ticks after it, never later, and no
// two of a player's checkpoints are ever more than every ticks apart.
func TestCheckpointNowIsAPeriodicOne(t *testing.T) {
	z := oneZone(t, nil)
	const players, every = 40, 20
	for i := range players {
		if err := z.Join(0, uint64(i+1), "c", "p", [3]float32{-500 + float32(i), 0, -500}, 0); err != nil {
			t.Fatal(err)
		}
	}
	last := map[uint64]uint64{} // player → tick of its last checkpoint
	nows := map[uint64]uint64{} // player → tick of its CheckpointNow
	var buf []Checkpoint
	for tick := uint64(1); tick <= 6*every; tick++ {
		z.Step(time.Duration(tick) * 50 * time.Millisecond)
		buf = z.AppendCheckpoints(buf[:0], every)
		for _, cp := range buf {
			if prev, ok := last[cp.Entity]; ok && tick-prev > every {
				t.Fatalf("player %d: checkpoints at ticks %d and %d, more than %d apart", cp.Entity, prev, tick, every)
			}
			if at, ok := nows[cp.Entity]; ok {
				if tick-at < every/2 {
					t.Fatalf("player %d: a periodic checkpoint %d ticks after its CheckpointNow", cp.Entity, tick-at)
				}
				delete(nows, cp.Entity)
			}
			last[cp.Entity] = tick
		}
		// A few players a tick are "acquired" again (a handoff's checkpoint).
		if tick > every && tick < 5*every {
			for _, id := range []uint64{tick%players + 1, (tick*7)%players + 1} {
				if _, ok := z.CheckpointNow(id, every); !ok {
					t.Fatalf("no checkpoint of player %d", id)
				}
				nows[id], last[id] = tick, tick
			}
		}
	}
	for id := uint64(1); id <= players; id++ {
		if 6*every-last[id] > every {
			t.Fatalf("player %d: last checkpointed at tick %d of %d", id, last[id], 6*every)
		}
	}
	// Everyone taken at once (a restore): the next ones spread over half
	// a period, not all in one tick a period later.
	tick := uint64(6 * every)
	for id := uint64(1); id <= players; id++ {
		z.CheckpointNow(id, every)
	}
	perTick, taken := 0, 0
	for range every {
		tick++
		z.Step(time.Duration(tick) * 50 * time.Millisecond)
		buf = z.AppendCheckpoints(buf[:0], every)
		perTick, taken = max(perTick, len(buf)), taken+len(buf)
	}
	if taken != players || perTick > players/(every/2)+1 {
		t.Fatalf("after a CheckpointNow of all %d players: %d checkpoints in the next period, up to %d in one tick", players, taken, perTick)
	}
	// every ≤ 1 takes everyone at once (a drain), whatever their turns.
	if n := len(z.AppendCheckpoints(nil, 1)); n != players {
		t.Fatalf("AppendCheckpoints(every 1) = %d checkpoints, want %d", n, players)
	}
}
