package ghost

import (
	"fmt"
	"testing"
	"time"
)

// A ghost of a class with a long MinInterval, quiet for a long while and
// then moved by a view, is written at the first Write after it, and the
// client holds the move: whatever the gap (≈ 3·2^15 ms, where a 16-bit
// stamp or gap would alias; 2^17 ms; hours; 13 days, past what was the
// table's rebase at 2^30 ms: every gap is past the slots' 16-bit window,
// their times pinned at the epoch), the view time across the 32-bit stamps'
// wraparound, views given as entries or as snapshots, the scene ticking
// through the gap or silent, and (silent) the last position's fate in
// time or only after the gap.
func TestQuietGhostWrittenAtFirstAllowedWrite(t *testing.T) {
	gaps := []time.Duration{
		98304 * time.Millisecond, // 3·2^15 ms
		98 * time.Second,
		131072 * time.Millisecond, // 2^17 ms
		3 * time.Hour,
		13 * 24 * time.Hour, // past 2^30 ms (≈ 12.4 days), the 32-bit times' rebase
	}
	starts := []time.Duration{
		time.Second,
		(1<<32 - 60_000) * time.Millisecond, // the 32-bit stamps wrap in the gap
	}
	for _, gap := range gaps {
		for _, start := range starts {
			for _, snap := range []bool{false, true} {
				for _, tick := range []bool{false, true} {
					if tick && gap > time.Hour {
						continue // silent only: a view every 50 ms for hours is long for a unit test
					}
					for _, lateFate := range []bool{false, true} {
						if tick && lateFate {
							continue // its unconfirmed move is pressed again each MinInterval: not allowed at the view
						}
						name := fmt.Sprintf("gap %v start %v snapshot %v ticking %v late fate %v", gap, start, snap, tick, lateFate)
						t.Run(name, func(t *testing.T) {
							quietGhostCase(t, gap, start, snap, tick, lateFate)
						})
					}
				}
			}
		}
	}
}

func quietGhostCase(t *testing.T, gap, start time.Duration, snap, tick, lateFate bool) {
	d := newDuo(t, DefaultConfig())
	slow := &Class{ID: 9, Name: "slow", Groups: []Group{PositionGroup(), YawGroup(8)}, MinInterval: 16 * time.Second}
	reg, err := NewRegistry(DefaultBounds())
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(slow); err != nil {
		t.Fatal(err)
	}
	d.reg, d.tab = reg, tableFor(t, reg)
	if d.mir, err = NewMirror(reg, DefaultMirrorConfig()); err != nil {
		t.Fatal(err)
	}
	d.fast = tick // the invariants at the ends, not every packet of the gap
	d.now = start
	sw := writerFor(t, reg)
	e := ViewEntry{Entity: 1, Class: slow, Priority: 1}
	e.State.Pos = [3]float64{10, 0, 10}
	view := func() {
		t.Helper()
		if snap {
			d.snapView(sw, []ViewEntry{e}, 0) // 50 ms on
		} else {
			d.view(e)
		}
	}
	view()
	for range 4 {
		d.trip()
		view()
	}
	// A move, past MinInterval: it goes (its fate perhaps only after the
	// gap), then the ghost stays still.
	d.now += 20 * time.Second
	e.State.Pos[0] = 15
	view()
	seq0, pkt0, n0 := d.send(MaxPacketBytes)
	if n0 != 1 {
		t.Fatalf("the move before the gap: %d records", n0)
	}
	d.recv(pkt0)
	if !lateFate {
		d.fate(seq0, true)
	}
	if tick {
		for end := d.now + gap; d.now < end; {
			view()
			d.trip() // nothing to write, or a rest marker
		}
	} else {
		d.now += gap
	}
	if lateFate {
		d.fate(seq0, true)
	}
	// Its stop's rest markers, if a view saw it; after the silent gap
	// the move is the news.
	e.State.Pos[0] = 20
	view()
	id, ok := d.tab.idxGet(1)
	if !ok {
		t.Fatal("the ghost is gone")
	}
	s := d.tab.slotOf(id)
	nowMS := d.tab.msOf(d.now)
	if s.phase != phaseLive || d.tab.dirtyAt(id)&slow.posBit == 0 || s.posBlocked() || nowMS.ms(s.sentAt) < slow.minMS {
		t.Fatalf("after the gap: phase %d, dirty %b, flags %b, %d ms since its last record: not the case tested", s.phase, s.dirty, s.fl, nowMS.ms(s.sentAt))
	}
	seq, pkt, n := d.send(MaxPacketBytes)
	if n != 1 {
		t.Fatalf("the first Write after the move wrote %d records, want the ghost's", n)
	}
	d.recv(pkt)
	d.fate(seq, true)
	var want [3]uint32
	if err := reg.check(slow, &e.State, &want); err != nil {
		t.Fatal(err)
	}
	for g := range d.mir.All() {
		var got [3]uint32
		if err := reg.check(slow, &g.State, &got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("the client holds %v, want %v", g.State.Pos, e.State.Pos)
		}
	}
	if d.mir.Len() != 1 {
		t.Fatalf("the client holds %d ghosts", d.mir.Len())
	}
	if err := checkInvariants(d.tab); err != nil {
		t.Fatal(err)
	}
}
