package ghost

import (
	"math/bits"
	"testing"
)

// Stats.RecordGrowths counts every doubling of the record ring, past the
// Table's byte: trim halves the ring after a burst, so a long-lived
// connection's ring may double more than 255 times. A table whose byte
// is one short of wrapping counts a burst's doublings on from 255.
func TestRecordGrowthsCountedPastAByte(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	view := d.npcs(60)
	d.view(view...)
	d.settle(view...)
	base := d.tab.Stats().RecordGrowths
	d.tab.recordGrowths += 255 - uint8(base) // 255 in all
	before := len(d.tab.ents)
	for range 24 { // ≈ 1.2 s without a fate: records pile up in flight
		for i := range view {
			view[i].State.Pos[2] += 0.5
			view[i].State.Health = 1 + view[i].State.Health%90
		}
		d.view(view...)
		d.send(MaxPacketBytes)
	}
	after := len(d.tab.ents)
	if after <= before {
		t.Fatalf("the record ring did not grow (%d → %d records)", before, after)
	}
	doublings := uint64(bits.Len(uint(after)) - bits.Len(uint(before)))
	if got, want := d.tab.Stats().RecordGrowths, 255+doublings; got != want {
		t.Fatalf("RecordGrowths = %d after %d doublings from 255, want %d", got, doublings, want)
	}
}
