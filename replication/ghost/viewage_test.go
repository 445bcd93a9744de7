package ghost

import (
	"testing"
	"time"
)

// TestWriteHoldsRecordsOfAViewTooOldToStamp: a section is stamped with its
// view's time, which the client places only within 32.7 s of its clock. A
// lost move resent after the zone's views stopped for 40 s was read 25 s in
// the future, and the client then ignored the next moves until its clock got
// there while the table counted them delivered (FuzzMixedViewsWriteWhatEntryViewsWrite,
// 4aa6d37b6575d270). Up to maxViewAgeMS the resend goes out; past it Write
// holds every record for the next view.
func TestWriteHoldsRecordsOfAViewTooOldToStamp(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	e := d.npc(1, 10)
	d.view(e)
	d.settle(e)
	e.State.Pos[0] = 20
	d.view(e)
	seq, _, n := d.send(MaxPacketBytes)
	if n == 0 {
		t.Fatal("the move was not written")
	}
	d.fate(seq, false)

	d.now += maxViewAgeMS * time.Millisecond
	seq, _, n = d.send(MaxPacketBytes)
	if n == 0 {
		t.Fatalf("a view %d ms old: the lost move was not resent", maxViewAgeMS)
	}
	d.fate(seq, false)

	d.now += 40*time.Second - maxViewAgeMS*time.Millisecond
	stalls := d.tab.Stats().Stalls
	seq, pkt, n := d.send(MaxPacketBytes)
	if n != 0 || d.tab.Stats().Stalls != stalls+1 {
		t.Fatalf("a view 40 s old: %d records written (stalls %d → %d), want none", n, stalls, d.tab.Stats().Stalls)
	}
	d.recv(pkt)
	d.fate(seq, true)

	e.State.Pos[0] = 30 // the views resume
	d.view(e)
	d.settle(e)
	d.exact([]ViewEntry{e})
}
