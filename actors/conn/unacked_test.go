package conn

import (
	"testing"
	"time"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"

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
	c := &Conn{sh: &shard{in: &msg.Input{}}}
	seq := uint64(0)
	for range maxUnacked + 40 { // a stalled zone: more than the bound
		seq++
		c.Move(move.Move{Seq: seq})
		c.sh.in.Moves = c.sh.in.Moves[:0]
	}
	if len(c.unacked) != maxUnacked || c.unackedSeq(0) != seq-maxUnacked+1 {
		t.Fatalf("backlog: %d moves from %d, want %d from %d", len(c.unacked), c.unackedSeq(0), maxUnacked, seq-maxUnacked+1)
	}
	c.ackMoves(seq-2, time.Second)
	if len(c.unacked) != 2 || c.unackedSeq(0) != seq-1 || cap(c.unacked) > minUnackedRoom {
		t.Fatalf("after the zone caught up: %d moves from %d, room %d (want 2 from %d, room ≤ %d)",
			len(c.unacked), c.unackedSeq(0), cap(c.unacked), seq-1, minUnackedRoom)
	}
	steady := func() {
		for range 3 {
			seq++
			c.Move(move.Move{Seq: seq})
			c.sh.in.Moves = c.sh.in.Moves[:0]
		}
		c.ackMoves(seq-2, time.Second)
	}
	steady()
	if a := testing.AllocsPerRun(100, steady); a != 0 {
		t.Fatalf("%v allocations per tick with the zone keeping up", a)
	}
}

// TestKeptMovesComeBackWhole: a move kept for a resend comes back as it went
// in, every field a zone reads (not the client's CRC: the session checks
// those, and a move sent again carries none), across the 16-bit and the
// 32-bit wrap of its kept sequence number; the kept form stays 12 bytes
// (8 of them: the 96-byte class); and a jump of 2^16 moves or more drops
// what was kept (too far behind to be named), while one just short of it
// keeps them.
func TestKeptMovesComeBackWhole(t *testing.T) {
	if n := unsafe.Sizeof(keptMove{}); n != 12 {
		t.Fatalf("keptMove is %d bytes, want 12", n)
	}
	for _, base := range []uint64{1<<16 - 3, 1<<32 - 3, 5<<16 - 3} { // the low 16 bits wrap among the kept moves
		c := &Conn{sh: &shard{in: &msg.Input{}}}
		var want []move.Move
		for i := range uint64(6) {
			m := move.Move{Seq: base + i, Dt: uint8(30 + i), Forward: int8(-127 + int(i)), Strafe: int8(127 - int(i)),
				Yaw: uint16(65535 - i), Pitch: int16(-1000 + int(i)), Buttons: uint16(1 << i), CRC: 0xdeadbeef + uint32(i), HasCRC: i%2 == 1}
			c.Move(m)
			m.CRC, m.HasCRC = 0, false // the session's to check, not sent again
			want = append(want, m)
		}
		c.sh.in.Moves = c.sh.in.Moves[:0]
		for i, k := range c.unacked {
			if got := c.unkeep(k); got != want[i] {
				t.Fatalf("base %d: kept move %d came back as %+v, want %+v", base, i, got, want[i])
			}
		}
		c.ackMoves(base+1, time.Second)
		if len(c.unacked) != 4 || c.unackedSeq(0) != base+2 {
			t.Fatalf("base %d: after the ack of %d: %d kept from %d", base, base+1, len(c.unacked), c.unackedSeq(0))
		}
		c.ackMoves(base+9, time.Second) // a zone ahead of this connection (a restore)
		if len(c.unacked) != 0 {
			t.Fatalf("base %d: after an ack past the newest move: %d kept", base, len(c.unacked))
		}
		for i := uint64(2); i < 6; i++ {
			c.Move(move.Move{Seq: base + i})
		}
		// A gap just short of 2^16 behind the oldest kept: every move is
		// still named, and an ack below the gap takes only the old ones.
		far := base + 2 + 1<<16 - 1
		c.Move(move.Move{Seq: far})
		if len(c.unacked) != 5 || c.unackedSeq(0) != base+2 || c.unackedSeq(4) != far {
			t.Fatalf("base %d: after a gap of 2^16−1: %d kept from %d to %d", base, len(c.unacked), c.unackedSeq(0), c.unackedSeq(len(c.unacked)-1))
		}
		c.ackMoves(far-1, time.Second)
		if len(c.unacked) != 1 || c.unackedSeq(0) != far {
			t.Fatalf("base %d: after the ack of %d: %d kept from %d, want only %d", base, far-1, len(c.unacked), c.unackedSeq(0), far)
		}
		c.Move(move.Move{Seq: far + 1<<16})
		if len(c.unacked) != 1 || c.unackedSeq(0) != far+1<<16 {
			t.Fatalf("base %d: after a 2^16 jump: %d kept from %d, want only the new move", base, len(c.unacked), c.unackedSeq(0))
		}
	}
}

// TestResendWaitsForTheZonesWord: unacknowledged moves go again only when
// the zone's Controls have reported no progress on them for
// moveResendAfter — not when the shard's clock says so: a shard running
// behind takes a backlog's datagrams before the Controls queued with
// them, and a zone that says nothing is failing over (the Rejoin resends).
//
// Both ways: resendStalled alone, and a datagram's Input handed on
// (flushInput, which asks resendStalled only past its least wait).
func TestResendWaitsForTheZonesWord(t *testing.T) {
	for _, viaInput := range []bool{false, true} {
		resendWaitsForTheZonesWord(t, viaInput)
	}
}

func resendWaitsForTheZonesWord(t *testing.T, viaInput bool) {
	x := record(t, 1)
	s, cs := benchShard(t, x, 1)
	c := cs[0]
	c.sh.in = msg.NewInput()
	ms := time.Millisecond
	control := func(at time.Duration, applied uint64) {
		m := msg.NewControl()
		m.LastApplied = applied
		s.handle(c, m, at)
	}
	resent := func(at time.Duration) bool {
		before := s.pool.counters.MovesResent.Load()
		if !viaInput {
			in := msg.NewInput()
			defer in.Release()
			c.resendStalled(in, at)
			return s.pool.counters.MovesResent.Load() != before && len(in.Moves) == len(c.unacked)
		}
		// A datagram whose Input carries the newest move again (not the
		// oldest unacknowledged: a resend puts every one in), handed on
		// to the zone (waiting in the shard's round, zin).
		c.zone = actor.NewPID("nonhost", "zone")
		c.joined = true
		c.sh.in = msg.NewInput()
		c.sh.in.Moves = append(c.sh.in.Moves, move.Move{Seq: c.lastMove})
		c.flushInput(at)
		if len(s.zin) != 1 || s.zin[0].first == nil {
			t.Fatalf("the Input did not go to the zone (%d zones waiting)", len(s.zin))
		}
		in := s.zin[0].first
		s.zin = s.zin[:0]
		defer in.Release()
		return s.pool.counters.MovesResent.Load() != before && len(in.Moves) == len(c.unacked)
	}
	control(0, 0)
	c.sh.rxAt = 10 * ms
	for seq := range uint64(3) {
		c.Move(move.Move{Seq: seq + 1})
	}
	c.sh.in.Moves = c.sh.in.Moves[:0]

	// The shard's round comes 400 ms late: no Control since the moves went.
	if resent(410 * ms) {
		t.Fatal("resent with no word from the zone since the moves went (a late round)")
	}
	// Its Controls queued meanwhile report progress: nothing to resend.
	control(410*ms, 1)
	if resent(420 * ms) {
		t.Fatal("resent after the zone reported progress")
	}
	// The zone keeps ticking without applying move 2 (its Input was lost).
	for at := 460 * ms; at < 660*ms; at += 50 * ms {
		control(at, 1)
		if resent(at) {
			t.Fatalf("resent at %v, %v after the last progress", at, at-410*ms)
		}
	}
	control(660*ms, 1)
	if !resent(665 * ms) {
		t.Fatal("not resent after 250 ms of the zone's Controls without progress")
	}
	// Backing off: the next resend waits twice as long, by the zone's word.
	control(900*ms, 1)
	if resent(1500 * ms) {
		t.Fatal("resent again before the backoff, by the shard's clock")
	}
	control(1170*ms, 1)
	if !resent(1170 * ms) {
		t.Fatal("not resent after the backoff")
	}
}
