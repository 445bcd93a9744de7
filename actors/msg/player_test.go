package msg

import (
	"testing"
	"unsafe"

	"github.com/ghostwire/ghostwire/replication/move"
)

// TestReleasedInputKeepsLittleRoom: a released Input keeps the room of a
// datagram's few moves for its next use, not a resend's hundreds: a pooled
// Input circulates for good, and so would the room it grew once.
func TestReleasedInputKeepsLittleRoom(t *testing.T) {
	for _, tc := range []struct {
		name  string
		moves int
		keep  bool
	}{
		{"a datagram's moves", 3, true},
		{"the most kept", pooledMoves, true},
		{"a resend", 256, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := new(Input) // not from the pool: its fields are read after Release
			in.Moves = make([]move.Move, tc.moves)
			in.Release()
			if kept := cap(in.Moves) > 0; kept != tc.keep || len(in.Moves) != 0 {
				t.Fatalf("after Release: len %d, room %d; want room kept %v", len(in.Moves), cap(in.Moves), tc.keep)
			}
		})
	}
}

// TestControlSize: a Control is 176 bytes, the size class below 192 (a
// player's ViewSlot keeps one for its next tick, and one is in flight):
// Force beside View, not between two words.
func TestControlSize(t *testing.T) {
	if n := unsafe.Sizeof(Control{}); n > 176 {
		t.Fatalf("Control is %d bytes, over the 176-byte size class", n)
	}
}
