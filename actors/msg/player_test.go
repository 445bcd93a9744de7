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

// TestReleasedInputKeepsBoundedEventRoom: a released Input keeps the
// room of a datagram's few events, not that of a burst (a client's events
// sent again after late acks), which pooled Inputs carried for good.
func TestReleasedInputKeepsBoundedEventRoom(t *testing.T) {
	payload := make([]byte, 24) // an echo event's
	for _, tc := range []struct {
		name   string
		events int
		keep   bool
	}{
		{"a datagram's event", 1, true},
		{"the most kept", pooledEvents, true},
		{"a burst", 12, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := new(Input) // not from the pool: its fields are read after Release
			for range tc.events {
				in.Add(0, 0, 0, payload)
			}
			in.Release()
			kept := cap(in.EventList.Events) > 0 && cap(in.arena) > 0
			if kept != tc.keep || in.Len() != 0 || in.Bytes() != 0 {
				t.Fatalf("after Release: %d events, %d bytes, room %d events and %d bytes; want room kept %v",
					in.Len(), in.Bytes(), cap(in.EventList.Events), cap(in.arena), tc.keep)
			}
			if cap(in.EventList.Events) > pooledEvents || cap(in.arena) > pooledArena {
				t.Fatalf("room %d events and %d bytes kept, want ≤ %d and %d", cap(in.EventList.Events), cap(in.arena), pooledEvents, pooledArena)
			}
		})
	}
}

// TestControlSize keeps a Control (one a player, at its ViewSlot or on
// its way to the connection) in the 176-byte size class: 184 bytes, the
// 192-byte class, while View sat after Events in a word of its own.
func TestControlSize(t *testing.T) {
	if n := unsafe.Sizeof(Control{}); n > 176 {
		t.Errorf("Control is %d bytes, want ≤ 176 (the 176-byte size class)", n)
	}
}

// TestInputsReleaseTaken: Release releases the Inputs left in List,
// ReleaseTaken none of them (the zone released each as it took it: a
// second release would put one Input in the pool twice), and both leave
// the batch empty, holding no Input.
func TestInputsReleaseTaken(t *testing.T) {
	for _, tc := range []struct {
		name     string
		release  func(*Inputs)
		released bool
	}{
		{"Release", (*Inputs).Release, true},
		{"ReleaseTaken", (*Inputs).ReleaseTaken, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := new(Inputs) // not from the pool: its fields are read after release
			in := new(Input)
			in.Player = 7
			b.List = append(b.List, in)
			list := b.List[:1]
			tc.release(b)
			if got := in.Player == 0; got != tc.released {
				t.Fatalf("Input released %v, want %v", got, tc.released)
			}
			if len(b.List) != 0 || list[0] != nil {
				t.Fatalf("batch keeps %d Inputs, its array %v; want none", len(b.List), list[0])
			}
		})
	}
}
