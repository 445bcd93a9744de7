package ghost

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// checkFq1 checks the second positions in flight's store against the
// tracks (checkInvariants): not made, none held; dense, an entry for
// every id that holds one; sparse, a slot for exactly those ids, no slot
// named twice, the free bitmap the slots not named, the count right.
func checkFq1(t *Table) error {
	x := &t.pp
	seconds := 0
	for i := range t.pos {
		if t.pos[i].n() >= ownFlight {
			seconds++
			if x.fq1 == nil {
				return fmt.Errorf("id %d holds a second position in flight, fq1 not made", i)
			}
			if x.fq1Log == 0 && i >= len(x.fq1) {
				return fmt.Errorf("id %d holds a second position in flight past dense fq1's %d", i, len(x.fq1))
			}
			if x.fq1Log != 0 && x.secSlot(uint32(i)) == 0 {
				return fmt.Errorf("id %d holds a second position in flight, no slot in sparse fq1", i)
			}
		}
	}
	if x.fq1Log == 0 {
		return nil
	}
	if len(x.fq1) != 0 {
		return fmt.Errorf("sparse fq1 of length %d: want 0 (pushOwn and usualRun test it)", len(x.fq1))
	}
	w, free, meta, _ := x.secs()
	slots := 1 << x.fq1Log
	named := map[int]uint32{}
	var err error
	x.secEach(func(id uint32, _ uint64) {
		b := x.secSlot(id)
		if o, dup := named[b-1]; dup && err == nil {
			err = fmt.Errorf("sparse fq1: slot %d named by ids %d and %d", b-1, o, id)
		}
		named[b-1] = id
		if err == nil && (b > slots || int(id) >= len(t.pos) || t.pos[id].n() < ownFlight) {
			err = fmt.Errorf("sparse fq1: id %d names slot %d of %d, its track holds %d in flight", id, b-1, slots, t.pos[min(int(id), len(t.pos)-1)].n())
		}
	})
	if err != nil {
		return err
	}
	for i := range slots {
		if _, used := named[i]; used == (w[free+i/64]>>(i%64)&1 != 0) {
			return fmt.Errorf("sparse fq1: slot %d named %v, free bit the same", i, used)
		}
	}
	m := w[meta]
	if len(named) != seconds || secField(m, secN) != seconds || secField(m, secHW) < seconds {
		return fmt.Errorf("sparse fq1 holds %d (count %d, most %d); %d tracks hold a second", len(named), secField(m, secN), secField(m, secHW), seconds)
	}
	return nil
}

// The sparse store answers as a map would through any sequence of sets,
// drops and trims, growing into the dense form once that takes less
// room, and a trim brings a map a burst grew back to its use.
func TestFq1SparseMatchesMap(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ids   int // ids drawn from [0, ids)
		most  int // entries held at most
		drops int // of 10 draws, 5 − drops are sets or promotions and drops are drops
		dense bool
	}{
		{"few of many ids: stays sparse", 2000, 90, 4, false},
		{"past a byte's slots: goes dense", 2000, 200, 4, true},
		{"most of 48 ids: goes dense", 48, 48, 1, true},
		{"ids past 2^16", 1 << 20, 40, 4, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(5, uint64(tc.ids)))
			var x posPool
			want := map[uint32]uint64{}
			check := func(step int) {
				t.Helper()
				for id, v := range want {
					if got := x.fq1At(id); got != v {
						t.Fatalf("step %d: id %d holds %#x, want %#x", step, id, got, v)
					}
				}
				if x.fq1Log != 0 {
					w, _, meta, _ := x.secs()
					if n := secField(w[meta], secN); n != len(want) {
						t.Fatalf("step %d: count %d, %d held", step, n, len(want))
					}
					held := 0
					x.secEach(func(uint32, uint64) { held++ })
					if held != len(want) {
						t.Fatalf("step %d: %d ids name a slot, %d held", step, held, len(want))
					}
				}
			}
			wentDense := false
			for step := range 20000 {
				keys := make([]uint32, 0, len(want))
				for id := range want {
					keys = append(keys, id)
				}
				slices.Sort(keys) // the map's order is random: the run would not be the seed's alone
				switch op := r.IntN(10); {
				case op < 4 && len(want) < tc.most:
					id := uint32(r.IntN(tc.ids))
					v := r.Uint64()
					x.setFq1(id, v)
					want[id] = v
				case op < 5 && len(keys) > 0: // a promotion: the value changes
					id := keys[r.IntN(len(keys))]
					v := r.Uint64()
					x.storeFq1(id, v)
					want[id] = v
				case op < 5+tc.drops && len(keys) > 0:
					id := keys[r.IntN(len(keys))]
					x.dropFq1(id)
					delete(want, id)
				case op == 9 && x.fq1Log != 0:
					x.trimSecs()
				}
				wentDense = wentDense || x.fq1 != nil && x.fq1Log == 0
				if step%97 == 0 {
					check(step)
				}
			}
			check(-1)
			if wentDense != tc.dense {
				t.Fatalf("went dense %v, want %v", wentDense, tc.dense)
			}
			if tc.dense {
				return
			}
			// A burst's room given back: a few entries left, the trim that
			// ends the burst's check and two more (its use counts in two).
			for id := range want {
				if len(want) <= 3 {
					break
				}
				x.dropFq1(id)
				delete(want, id)
			}
			for range 3 {
				x.trimSecs()
			}
			check(-2)
			if x.fq1Log != secMinLog {
				t.Fatalf("%d entries held, three trims: a map of %d entries, want %d", len(want), 1<<x.fq1Log, 1<<secMinLog)
			}
		})
	}
}

// TestFq1ServerShape measures what the second positions in flight are at
// the server's shape at 2,000 players with fates a packet late (RTT 60
// ms, 21 packets a second, 76–84 ghosts): how many ids hold one at once
// after each write, and which form fq1 takes. Measured: ≈ 14 on average,
// 20–21 at most, of 88–90 ids (a quarter or less), so the sparse form (32
// slots and a byte an id: 368 bytes; dense took 704–744) and never dense.
func TestFq1ServerShape(t *testing.T) {
	reg, pc, nc := newTestRegistry(t)
	sh := serverShape{lo: 76, hi: 84, swaps: 3, back: 3, rtt: 60 * time.Millisecond, secs: 40}
	var sum, writes, most, ids int
	for seed := range uint64(4) {
		tab := serverRun(t, reg, pc, nc, sh, seed, func(tab *Table) {
			n := 0
			for i := range tab.pos {
				if tab.pos[i].n() >= ownFlight {
					n++
				}
			}
			sum += n
			most = max(most, n)
			writes++
			if tab.pp.fq1 != nil && tab.pp.fq1Log == 0 {
				t.Fatalf("fates a packet late: dense fq1 (%d ids) with %d seconds in flight", len(tab.pp.fq1), n)
			}
			if err := checkFq1(tab); err != nil {
				t.Fatal(err)
			}
		})
		ids += len(tab.slots)
		if tab.pp.fq1Log == 0 || 1<<tab.pp.fq1Log > 32 {
			t.Errorf("seed %d: fq1 form %d (slots 1<<form, 0 dense), want at most 32 slots", seed, tab.pp.fq1Log)
		}
	}
	t.Logf("seconds in flight after a write: %.1f on average, %d at most, of %d ids", float64(sum)/float64(writes), most, ids/4)
	if most == 0 || most > 24 {
		t.Errorf("at most %d seconds in flight at once: the shape changed (measured 21)", most)
	}
}
