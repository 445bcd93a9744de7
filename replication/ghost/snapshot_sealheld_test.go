package ghost

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSealHeldIsSealCopies: a series sealed with SealHeld equals the same
// series sealed with SealCopies, given the copies a zone gave before
// SealHeld (a refresh where due or where CanCarry refuses, else a carry) —
// entries, stamps, view flags, kept States and validity, snapshot by
// snapshot — and SealHeld reports exactly the refreshed entries. The series
// mixes new entities, other classes, empty and refused entries, names,
// still and moving entities, a zone that grows and shrinks (the held half
// at another index), and the series' numbers wrapping.
func TestSealHeldIsSealCopies(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		sealHeldVsSealCopies(t, seed)
	}
}

func sealHeldVsSealCopies(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x4e1d))
	reg, pc, nc := newTestRegistry(t)
	wb, wc := writerFor(t, reg), writerFor(t, reg)
	if seed%3 == 0 {
		wb.seq, wc.seq = math.MaxUint32-40, math.MaxUint32-40
	}
	type slot struct {
		ent uint64
		cls *Class
		st  State
	}
	slots := make([]slot, 0, 90)
	nextID := uint64(1)
	grow := func(k int) {
		for range k {
			slots = append(slots, slot{ent: nextID, cls: pc, st: State{Pos: [3]float64{float64(nextID % 50), 0, 5}, Health: 100}})
			nextID++
		}
	}
	grow(70)
	var copies []EntryCopy
	var holdB, holdC *Snapshot
	carried, refreshed, empty := 0, 0, 0
	for tick := uint64(1); tick <= 120; tick++ {
		switch {
		case tick == 50: // the zone grows: the held half moves
			grow(20)
		case tick == 80:
			slots = slots[:60]
		}
		for i := range slots {
			s := &slots[i]
			switch r := rng.IntN(100); {
			case r < 2:
				s.ent, nextID = nextID, nextID+1
			case r < 3:
				if s.cls == pc {
					s.cls = nc
				} else {
					s.cls = pc
				}
			case r < 5:
				if s.cls == nil {
					s.cls = pc
				} else {
					s.cls = nil
				}
			case r < 6:
				if s.st.Pos[1] != 0 {
					s.st.Pos[1] = 0
				} else {
					s.st.Pos[1] = 1e6
				}
			case r < 7:
				s.st.Name, _ = MakeName([]string{"", "ann", "bob"}[rng.IntN(3)])
			case r < 40: // still
			case r < 48:
				s.st.Health += int32(rng.IntN(7)) - 3
			case r < 53:
				s.st.Yaw += 0.3
			case r < 55:
				s.st.Flags ^= 1 << rng.IntN(8)
			case r < 57:
				s.st.Extra[rng.IntN(4)] = uint32(rng.IntN(1 << rng.IntN(20)))
			default:
				s.st.Pos[0] += rng.Float64() - 0.5
				s.st.Pos[2] += 0.4
				s.st.Vel[0] = float64(rng.IntN(5))
			}
		}
		n := len(slots)
		sb, sc := wb.Next(2*n), wc.Next(2*n)
		refresh := make([]uint64, (n+63)/64)
		copies = copies[:0]
		for i := range slots {
			s := &slots[i]
			due := rng.IntN(3) == 0
			if due { // an empty slot's too: SealHeld clears it
				refresh[i>>6] |= 1 << (uint(i) & 63)
			}
			if s.cls == nil {
				continue // neither Set nor copied: empty, and its held entry too
			}
			sb.Set(i, s.ent, s.cls, &s.st)
			sc.Set(i, s.ent, s.cls, &s.st)
			if !due && wb.CanCarry(n+i, s.ent, s.cls, s.st.Name) {
				copies = append(copies, EntryCopy{Dst: uint32(n + i), Src: Carry})
			} else {
				copies = append(copies, EntryCopy{Dst: uint32(n + i), Src: uint32(i)})
			}
		}
		wb.SealCopies(sb, copies)
		wc.SealHeld(sc, refresh)
		sameSnapshot(t, seed, tick, sb, sc)
		for i := range slots {
			if got := refresh[i>>6]&(1<<(uint(i)&63)) != 0; slots[i].cls == nil && got {
				t.Fatalf("seed %d tick %d: empty slot %d reported refreshed", seed, tick, i)
			}
		}
		for _, c := range copies {
			i := int(c.Dst) - n
			got := refresh[i>>6]&(1<<(uint(i)&63)) != 0
			if got != (c.Src != Carry) {
				t.Fatalf("seed %d tick %d: slot %d refreshed %v, SealCopies' copy %+v", seed, tick, i, got, c)
			}
			if got {
				refreshed++
			} else {
				carried++
			}
		}
		for i := range slots {
			if slots[i].cls == nil {
				empty++
			}
		}
		// Hold the snapshots half the time, as a table's owner does: the
		// series are reused then.
		if rng.IntN(2) == 0 {
			sb.Retain()
			sc.Retain()
			if holdB != nil {
				holdB.Release()
				holdC.Release()
			}
			holdB, holdC = sb, sc
		}
	}
	if carried == 0 || refreshed == 0 || empty == 0 {
		t.Fatalf("seed %d: %d carried, %d refreshed, %d empty: the test lost a case", seed, carried, refreshed, empty)
	}
}

// TestSealHeldRefusesSetHeldHalf: an entry of the held half already Set,
// an odd snapshot, or a refresh shorter than the half panics.
func TestSealHeldRefusesSetHeldHalf(t *testing.T) {
	reg, pc, _ := newTestRegistry(t)
	st := State{Pos: [3]float64{1, 0, 1}}
	for _, tc := range []struct {
		name    string
		n       int
		set     []int
		refresh int
	}{
		{name: "a held entry Set", n: 8, set: []int{0, 5}, refresh: 1},
		{name: "odd length", n: 7, set: []int{0}, refresh: 1},
		{name: "refresh too short", n: 130, set: []int{0}, refresh: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := writerFor(t, reg)
			s := w.Next(tc.n)
			for _, i := range tc.set {
				s.Set(i, uint64(i+1), pc, &st)
			}
			defer func() {
				if recover() == nil {
					t.Fatal("SealHeld did not panic")
				}
			}()
			w.SealHeld(s, make([]uint64, tc.refresh))
		})
	}
}
