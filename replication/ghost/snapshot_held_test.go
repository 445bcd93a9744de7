package ghost

import (
	"testing"
	"time"
)

// TestSetHeldIsNoStop: a ghost a zone serves at half rate (its entry
// refreshed every second tick, given with SetHeld in between) costs no
// record on its held ticks, and the client still follows it; a refresh
// that finds it where it was is a stop (rest markers), as with Set. The
// same walk given with Set on every tick reads each held tick as a stop
// and sends a rest marker on it: a record every tick.
func TestSetHeldIsNoStop(t *testing.T) {
	for _, tc := range []struct {
		name string
		held bool
		// alt: the held state is another entry (as a zone gives far
		// members theirs), so the ghost changes entry every tick.
		alt  bool
		want []int // records per tick from tick 2 on: walking ticks 2..9, then still
	}{
		// Refresh ticks (even) carry the move; held ones nothing; the stop
		// (tick 10, the first refresh with no move) its two rest markers.
		{name: "SetHeld on held ticks", held: true, want: []int{1, 0, 1, 0, 1, 0, 1, 0, 1, 1, 0, 0}},
		{name: "SetHeld entry on held ticks", held: true, alt: true, want: []int{1, 0, 1, 0, 1, 0, 1, 0, 1, 1, 0, 0}},
		// Every held tick looks like a stop: a rest marker, and the next
		// refresh a move again.
		{name: "Set on every tick", held: false, want: []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDuo(t, DefaultConfig())
			w := writerFor(t, d.reg)
			var st State
			st.Pos = [3]float64{10, 0, 10}
			st.Health = 100
			var got []int
			var held *Snapshot // the table's: held as a connection holds it, so the writer reuses snapshots
			for k := 1; k <= 13; k++ {
				refresh := k%2 == 0
				if refresh && k < 10 {
					st.Pos[0] += 0.5 // walking: moves between refreshes
				}
				s := w.Next(2)
				s.Set(0, 7, d.nc, &st)
				if refresh || !tc.held {
					s.Set(1, 7, d.nc, &st)
				} else {
					s.SetHeld(1, 7, d.nc, &st)
				}
				w.Seal(s)
				d.now += 50 * time.Millisecond
				idx := uint32(1)
				if tc.alt && refresh {
					idx = 0
				}
				if err := d.tab.SetSnapshotView(d.now, s, []ViewRef{NewViewRef(idx, d.nc, 1)}); err != nil {
					t.Fatal(err)
				}
				s.Retain()
				if held != nil {
					held.Release()
				}
				held = s
				if err := checkViewRefs(d.tab); err != nil {
					t.Fatal(err)
				}
				n := d.trip()
				if k >= 2 {
					got = append(got, n)
				}
				if msg := mismatch(d.reg, d.mir, []ViewEntry{{Entity: 7, Class: d.nc, State: st}}); msg != "" {
					t.Fatalf("tick %d: %s", k, msg)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("records per tick %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("records per tick %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// TestSetOverridesSetHeld: an entry is what its last Set or SetHeld made
// it, as for the state: Set after SetHeld is a new sample.
func TestSetOverridesSetHeld(t *testing.T) {
	_, _, nc := newTestRegistry(t)
	w := writerFor(t, nc.Registry())
	var st State
	st.Health = 100
	s := w.Next(2)
	s.SetHeld(0, 1, nc, &st)
	s.Set(0, 1, nc, &st)
	s.Set(1, 2, nc, &st)
	s.SetHeld(1, 2, nc, &st)
	w.Seal(s)
	if s.vw[0].fl&vwHeld != 0 || s.vw[1].fl&vwHeld == 0 {
		t.Fatalf("held flags %b %b, want the last call's: Set, SetHeld", s.vw[0].fl, s.vw[1].fl)
	}
}
