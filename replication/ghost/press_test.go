package ghost

import (
	"testing"
	"time"
)

// TestPressingShareBounded: ghosts ConfirmDeadline presses (every change
// sent, none confirmed, past the deadline) take at most 1/pressShare of a
// packet's budget, one record over at most; the rest of the packet stays
// for updates. Here every ghost is pressed and nothing else wants to go.
func TestPressingShareBounded(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	d.fast = true
	view := d.npcs(200)
	d.view(view...)
	d.settle(view...)
	for i := range view {
		view[i].State.Health++ // every ghost changes
	}
	d.view(view...)
	for d.tab.Pending() { // sent, fates never known
		d.send(MaxPacketBytes)
	}
	d.now += time.Second // past ConfirmDeadline: every one pressed
	_, pkt, n := d.send(MaxPacketBytes)
	const slack = 64 // one record past the share: the record that crossed it
	if bits := 8 * len(pkt); n == 0 || bits > MaxPacketBytes*8/pressShare+slack {
		t.Fatalf("%d pressed records in %d bits, want some and at most %d bits", n, bits, MaxPacketBytes*8/pressShare+slack)
	}
}
