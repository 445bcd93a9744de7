package conn

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/move"
)

// TestUnackedRoomGivenBackAfterBacklog: moves pile up while a zone does not
// report them applied (up to maxUnacked, the oldest dropped beyond); once
// it catches up the connection keeps a few moves' room, not the backlog's;
// and a zone that keeps up leaves the room alone (no allocation per tick).
func TestUnackedRoomGivenBackAfterBacklog(t *testing.T) {
	// The Input the moves are collected into stays (its pool is not
	// under test): only the moves kept for a resend are.
	c := &Conn{in: &msg.Input{}}
	seq := uint64(0)
	for range maxUnacked + 40 { // a stalled zone: more than the bound
		seq++
		c.Move(move.Move{Seq: seq})
		c.in.Moves = c.in.Moves[:0]
	}
	if len(c.unacked) != maxUnacked || c.unacked[0].Seq != seq-maxUnacked+1 {
		t.Fatalf("backlog: %d moves from %d, want %d from %d", len(c.unacked), c.unacked[0].Seq, maxUnacked, seq-maxUnacked+1)
	}
	c.ackMoves(seq-2, time.Second)
	if len(c.unacked) != 2 || c.unacked[0].Seq != seq-1 || cap(c.unacked) > minUnackedRoom {
		t.Fatalf("after the zone caught up: %d moves from %d, room %d (want 2 from %d, room ≤ %d)",
			len(c.unacked), c.unacked[0].Seq, cap(c.unacked), seq-1, minUnackedRoom)
	}
	steady := func() {
		for range 3 {
			seq++
			c.Move(move.Move{Seq: seq})
			c.in.Moves = c.in.Moves[:0]
		}
		c.ackMoves(seq-2, time.Second)
	}
	steady()
	if a := testing.AllocsPerRun(100, steady); a != 0 {
		t.Fatalf("%v allocations per tick with the zone keeping up", a)
	}
}
