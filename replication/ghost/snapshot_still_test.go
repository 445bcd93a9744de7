package ghost

import (
	"math"
	"testing"
)

// TestSealStillEntriesAsChecked: Seal takes an entry whose entity, class
// and state are the previous snapshot's, byte for byte, from that entry
// (quantized position, yaw code, stamps) instead of checking it again. Every
// entry must still read as if checked and quantized afresh, and a still one
// carries no change (now 0, the previous stamps): entries still for a tick
// between moves (so a reused snapshot's entry holds an older position), a
// yaw that changes alone, an entry that was refused and then is still (it
// is checked again), a new entity in an unchanged state, and −0 after +0.
func TestSealStillEntriesAsChecked(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	w, err := NewSnapshotWriter(d.reg)
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	var prev *Snapshot
	var cur, was [n]State // the states Set, this tick and the previous
	stills := 0
	for k := 1; k <= 40; k++ {
		s := w.Next(n)
		for i := range n {
			var st State
			st.Pos = [3]float64{float64(i), 1, 2}
			st.Yaw = 0.5
			st.Health = 100
			switch i {
			case 1, 2: // moves on odd ticks, still on even ones
				st.Pos[0] += float64((k + 1) / 2)
			case 3: // only the yaw changes, every third tick
				st.Yaw += float64(k/3) * 0.25
			case 4: // refused on ticks 5, 6, then still
				if k == 5 || k == 6 {
					st.Pos[0] = math.NaN()
				}
			case 5: // −0 after +0, every other tick
				if k%2 == 0 {
					st.Pos[2] = math.Copysign(0, -1)
				} else {
					st.Pos[2] = 0
				}
			}
			id := uint64(100 + i)
			if i == 6 {
				id += uint64(k / 4) // a new entity, same state
			}
			s.Set(i, id, d.nc, &st)
			cur[i] = st
		}
		w.Seal(s)
		for i := range n {
			e := &s.ents[i]
			var q [3]uint32
			st := cur[i]
			bad := snapOK
			if d.reg.check(d.nc, &st, &q) != nil {
				bad = snapBadState
			}
			if s.vw[i].bad != bad {
				t.Fatalf("tick %d entry %d: bad %d, checked afresh %d", k, i, s.vw[i].bad, bad)
			}
			if bad != snapOK {
				continue
			}
			if v := &s.vw[i]; v.qpos != q || v.yawQ != yawCode(d.nc, &st) {
				t.Fatalf("tick %d entry %d: qpos %v yaw %d, quantized afresh %v %d", k, i, v.qpos, v.yawQ, q, yawCode(d.nc, &st))
			}
			if prev == nil {
				continue
			}
			p, pbad := &prev.ents[i], prev.vw[i].bad
			// Kept: a ghost taken at the previous entry is this entry's.
			if kept := p.entity == e.entity && p.class == e.class && pbad == snapOK; kept != (s.vw[i].fl&vwKept != 0) {
				t.Fatalf("tick %d entry %d: kept flag %v, want %v", k, i, !kept, kept)
			}
			if p.entity != e.entity || pbad != snapOK || !samePos(&was[i], &cur[i]) || !sameBeyondPos(&was[i], &cur[i]) {
				if i == 6 && p.entity != e.entity && s.vw[i].now != d.nc.all {
					t.Fatalf("tick %d: a new entity in an unchanged state stamped %b, want every group", k, s.vw[i].now)
				}
				continue
			}
			stills++
			if s.vw[i].now != 0 {
				t.Fatalf("tick %d entry %d: still, but changes %b", k, i, s.vw[i].now)
			}
			st0 := s.stride
			for g := range st0 {
				if s.chg[i*st0+g] != prev.chg[i*st0+g] {
					t.Fatalf("tick %d entry %d: still, but group %d stamped %d (was %d)", k, i, g, s.chg[i*st0+g], prev.chg[i*st0+g])
				}
			}
		}
		if prev != nil {
			prev.Release() // the test's: the writer may reuse it
		}
		s.Retain()
		prev, was = s, cur
	}
	if stills < 100 {
		t.Fatalf("%d still entries seen, want the most of 8 × 40", stills)
	}
}
