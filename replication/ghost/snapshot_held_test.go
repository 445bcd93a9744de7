package ghost

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// heldRecords walks one entity along x for ticks ticks (stopping at stop,
// if > 0), serves its connection a state refreshed only every 2nd tick —
// by SetHeld on the other ticks if held, else by Set — and returns the
// records the table wrote each tick (one packet a tick, all delivered).
func heldRecords(t *testing.T, ticks, stop int, held bool) []int {
	t.Helper()
	reg, pc, _ := newTestRegistry(t)
	sw, tab := writerFor(t, reg), tableFor(t, reg)
	buf := make([]byte, 1200)
	var last State
	var recs []int
	for i := range ticks {
		now := time.Duration(i+1) * 50 * time.Millisecond
		x := float64(min(i, stop)) * 0.25
		if stop <= 0 {
			x = float64(i) * 0.25
		}
		cur := State{Pos: [3]float64{x, 0, 10}, Vel: [3]float64{5, 0, 0}}
		snap := sw.Next(1)
		if i%2 == 0 {
			last = cur
			snap.Set(0, 7, pc, &last)
		} else if held {
			snap.SetHeld(0, 7, pc, &last)
		} else {
			snap.Set(0, 7, pc, &last)
		}
		sw.Seal(snap)
		if err := tab.SetSnapshotView(now, snap, []ViewRef{{Index: 0, Priority: 1}}); err != nil {
			t.Fatal(err)
		}
		before := tab.Stats()
		seq := uint64(100 + i)
		if _, err := tab.Write(bitstream.NewWriter(buf), seq, now); err != nil {
			t.Fatal(err)
		}
		tab.OnFate(notify.Fate{Seq: seq, Delivered: true, SentAt: now})
		after := tab.Stats()
		recs = append(recs, int(after.Creates+after.Updates-before.Creates-before.Updates))
	}
	return recs
}

// A held entry (SetHeld) that did not change costs its ghost no record: an
// unchanged position there is not a stop. The same entry Set is a stop
// (a rest marker) and the restart after it: a record every tick.
func TestSnapshotHeldEntryIsNotAStop(t *testing.T) {
	const ticks = 30
	got := heldRecords(t, ticks, 0, true)
	for i, n := range got {
		if want := 1 - i%2; n != want {
			t.Fatalf("held every 2nd tick: records by tick %v, want 1 on refreshes and 0 between", got)
		}
	}
	plain := heldRecords(t, ticks, 0, false)
	if s := sumInts(plain); s < ticks-1 {
		t.Fatalf("the unchanged entry Set (a stop each time): %d records in %d ticks, want one a tick: %v", s, ticks, plain)
	}
}

// An entity that really stops while held still gets its rest marker: on
// the first refresh that finds it where it was.
func TestSnapshotHeldEntryStopSendsRestMarker(t *testing.T) {
	got := heldRecords(t, 30, 11, true)
	// Refreshes on even ticks: moving through tick 12 (x 2.5 → 2.75), still
	// at tick 14's: the rest marker, its second copy at tick 15, then
	// nothing.
	after := got[16:]
	if s := sumInts(after); s != 0 {
		t.Fatalf("records after the stop settled: %v (all %v)", after, got)
	}
	if got[14] != 1 || got[15] != 1 {
		t.Fatalf("the stop's rest markers: ticks 14, 15 wrote %d, %d records, want 1, 1 (all %v)", got[14], got[15], got)
	}
}

func sumInts(v []int) int {
	n := 0
	for _, x := range v {
		n += x
	}
	return n
}
