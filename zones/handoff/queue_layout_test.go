package handoff

import (
	"testing"
	"unsafe"
)

// TestMoveQueuePushFieldsFirst keeps what PushBatch's usual case reads
// (last, q, Shared, peak) in a queue's first 42 bytes: a player's input
// finds its queue out of the cache, and sim.playerSlot puts those bytes
// on as few lines as it can (sim's TestPlayerSlotInputLines).
func TestMoveQueuePushFieldsFirst(t *testing.T) {
	var q MoveQueue
	for name, end := range map[string]uintptr{
		"last":   unsafe.Offsetof(q.last) + unsafe.Sizeof(q.last),
		"q":      unsafe.Offsetof(q.q) + unsafe.Sizeof(q.q),
		"Shared": unsafe.Offsetof(q.Shared) + unsafe.Sizeof(q.Shared),
		"peak":   unsafe.Offsetof(q.peak) + unsafe.Sizeof(q.peak),
	} {
		if end > 42 {
			t.Errorf("MoveQueue.%s ends at byte %d, want ≤ 42 (a push's fields first)", name, end)
		}
	}
	if n := unsafe.Sizeof(q); n != 64 {
		t.Errorf("MoveQueue is %d bytes, want 64", n)
	}
}
