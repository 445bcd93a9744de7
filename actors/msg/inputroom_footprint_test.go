package msg

import (
	"testing"
	"unsafe"

	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/move"
)

// maxInputRoomBytes bounds the event room a player's Inputs hold at the
// node's shape (TestInputEventRoomFootprint): 3.8 B a player, where the
// room of every Input that once carried events circulated with it, 108.5
// B a player (≈ 90 B a player in the node's profile at 2,000, a little
// behind). A size check, not a timing one.
const maxInputRoomBytes = 12

// TestInputEventRoomFootprint: a shard's Inputs at the node's shape —
// 2,000 players, a datagram with a move each 30 Hz round, an event a
// player-second, each round's Inputs released by the zone the round after
// — hold event room for the Inputs that carry events, not for all of them:
// the room of the Inputs in flight, the shard's cache and the returns
// stacks, and the Inputs kept aside for their room, after 30 s.
func TestInputEventRoomFootprint(t *testing.T) {
	const inputBytes = 128 // an Input's size class (120 bytes)
	drainReturns()
	defer drainReturns()
	const players, rounds = 2000, 900
	var shard InputCache
	flight := make([]*Input, 0, players)
	prev := make([]*Input, 0, players)
	payload := make([]byte, 16)
	for r := range rounds {
		for _, in := range prev {
			in.Release()
		}
		prev, flight = flight, prev[:0]
		for p := range players {
			in := shard.Get()
			in.Moves = append(in.Moves, move.Move{Seq: uint64(r + 1)})
			if (r+7*p)%30 == 0 {
				shard.Room(in)
				in.AddSeq(event.Ordered, 0, 0, payload, uint64(r/30+1))
			}
			flight = append(flight, in)
		}
	}
	room := func(in *Input) int {
		return cap(in.Events)*int(unsafe.Sizeof(Event{})) + cap(in.arena)
	}
	held := 0
	for _, in := range prev {
		held += room(in)
	}
	for _, in := range flight {
		held += room(in)
	}
	for _, top := range []*Input{shard.free, inputReturns.Load()} {
		for in := top; in != nil; in = in.next {
			held += room(in)
		}
	}
	// The Inputs that keep room for the next events wait out of
	// circulation: their own bytes count too (an Input's size class).
	for _, top := range []*Input{shard.rooms, roomReturns.Load()} {
		for in := top; in != nil; in = in.next {
			held += room(in) + inputBytes
		}
	}
	per := float64(held) / players
	t.Logf("event room: %.1f B a player", per)
	if per > maxInputRoomBytes {
		t.Fatalf("Inputs hold %.1f B of event room a player, want ≤ %d", per, maxInputRoomBytes)
	}
}

// maxInputMovesBytes bounds the move room a player's Inputs hold at the
// node's shape (TestInputMovesRoomFootprint). Measured 49.1 B a player
// with a released Input keeping room for 4 moves (pooledMoves); 439.1 B
// with room for 16: every Input that once carried a resend of a
// connection's unacknowledged moves (actors/conn resendStalled: a zone's
// Controls that stop reporting progress for 250 ms, as in a handoff)
// circulated with its room for good. A size check, not a timing one.
const maxInputMovesBytes = 60

// TestInputMovesRoomFootprint: a shard's Inputs at the node's shape —
// 2,000 players, a datagram with a move each 30 Hz round, each round's
// Inputs released by the zone the round after, and every player's moves
// resent once in 20 s (nine moves: a handoff's stall of 300 ms) — hold
// room for a datagram's moves, not for the resends': the room of the
// Inputs in flight, the shard's cache and the returns stack, after 30 s.
func TestInputMovesRoomFootprint(t *testing.T) {
	drainReturns()
	defer drainReturns()
	const players, rounds, resend = 2000, 900, 9
	var shard InputCache
	flight := make([]*Input, 0, players)
	prev := make([]*Input, 0, players)
	for r := range rounds {
		for _, in := range prev {
			in.Release()
		}
		prev, flight = flight, prev[:0]
		for p := range players {
			in := shard.Get()
			n := 1
			if (r+13*p)%600 == 0 {
				n = resend
			}
			for k := range n {
				in.Moves = append(in.Moves, move.Move{Seq: uint64(r + k + 1)})
			}
			flight = append(flight, in)
		}
	}
	moveBytes := int(unsafe.Sizeof(move.Move{}))
	held := 0
	for _, in := range prev {
		held += cap(in.Moves) * moveBytes
	}
	for _, in := range flight {
		held += cap(in.Moves) * moveBytes
	}
	for _, top := range []*Input{shard.free, inputReturns.Load()} {
		for in := top; in != nil; in = in.next {
			held += cap(in.Moves) * moveBytes
		}
	}
	per := float64(held) / players
	t.Logf("move room: %.1f B a player", per)
	if per > maxInputMovesBytes {
		t.Fatalf("Inputs hold %.1f B of move room a player, want ≤ %d", per, maxInputMovesBytes)
	}
}
