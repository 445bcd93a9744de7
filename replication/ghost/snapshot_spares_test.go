package ghost

import (
	"runtime"
	"slices"
	"testing"
	"unsafe"
)

// sparesTick fills and seals the next snapshot of w's series, n entries of
// class c, for tick k.
func sparesTick(w *SnapshotWriter, c *Class, n, k int) *Snapshot {
	s := w.Next(n)
	for i := range n {
		var st State
		st.Pos = [3]float64{float64(i%50) + float64(k%7), 1, float64(i / 50)}
		s.Set(i, uint64(1000+i), c, &st)
	}
	w.Seal(s)
	return s
}

// TestSnapshotSparesAcrossProcessors: a zone's snapshots released by
// tables on other goroutines (a node's connections, on its shards) come
// back to the zone's writer whatever processor released them. Each tick
// the zone hands its snapshot to two holders and waits until both took it
// (and let the previous one go), so two snapshots are in use when the
// next tick begins: its own, held, and the spare. The series must be those
// two and nothing more, and a collection must find two alive. Under a
// sync.Pool (main 7a0b087), a spare put on the holder's processor sat in
// that processor's private slot, out of reach of the zone's Get on the
// other: 3 or 4 distinct snapshots in 400 ticks at GOMAXPROCS 2, 2.9–3.9
// snapshots' bytes alive after a collection in three runs (the node kept
// four generations of its largest zone's); the list: 2, and 1.84.
func TestSnapshotSparesAcrossProcessors(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	reg, pc, _ := newTestRegistry(t)
	w, err := NewSnapshotWriter(reg)
	if err != nil {
		t.Fatal(err)
	}
	const n, ticks, holders = 2000, 400, 2
	ins := make([]chan *Snapshot, holders)
	took := make(chan struct{}, holders)
	done := make(chan struct{})
	for h := range ins {
		ins[h] = make(chan *Snapshot, 1)
		go func(in chan *Snapshot) {
			var held *Snapshot
			for s := range in {
				if held != nil {
					held.Release()
				}
				held = s
				took <- struct{}{}
			}
			if held != nil {
				held.Release()
			}
			done <- struct{}{}
		}(ins[h])
	}
	var ms runtime.MemStats
	var two uint64 // the heap when the zone's snapshot and one spare exist, and the writer's states
	var made []*Snapshot
	for k := 1; k <= ticks; k++ {
		if k == 3 {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			two = ms.HeapAlloc
		}
		s := sparesTick(w, pc, n, k)
		if !slices.Contains(made, s) {
			made = append(made, s)
		}
		for _, in := range ins {
			s.Retain() // the holder's, as a view's
			in <- s
		}
		for range holders {
			<-took
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	alive := 2 + (float64(ms.HeapAlloc)-float64(two))/float64(snapshotBytes(n, made[0].stride))
	t.Logf("%d distinct snapshots in %d ticks; %.2f snapshots' bytes alive after a collection", len(made), ticks, alive)
	if len(made) != 2 {
		t.Errorf("%d distinct snapshots in %d ticks, want 2 (the zone's, held, and one spare)", len(made), ticks)
	}
	if alive > 2.3 {
		t.Errorf("%.2f snapshots alive after a collection, want 2", alive)
	}
	for _, in := range ins {
		close(in)
	}
	for range holders {
		<-done
	}
	runtime.KeepAlive(w)
}

// snapshotBytes is what a new snapshot of n entries allocates (its
// entries, views and stamps; its struct and marks are noise beside them).
func snapshotBytes(n, stride int) int {
	return n*int(unsafe.Sizeof(snapEnt{})) + 8*snapWords(n, stride)
}

// TestSnapshotSparesTrimmedByUse: spares a lag left over (a holder that
// kept five ticks' snapshots, then let them go at once) go within a few
// trim periods once each tick needs one again, and a steady series keeps
// the one it takes: no tick of the steady part allocates a snapshot.
func TestSnapshotSparesTrimmedByUse(t *testing.T) {
	reg, pc, _ := newTestRegistry(t)
	w, _ := NewSnapshotWriter(reg)
	const n = 64
	var lagged []*Snapshot
	k := 0
	for range 6 { // a holder that lags: keeps every snapshot
		k++
		s := sparesTick(w, pc, n, k)
		s.Retain()
		lagged = append(lagged, s)
	}
	var held *Snapshot
	step := func() *Snapshot {
		k++
		s := sparesTick(w, pc, n, k)
		s.Retain()
		if held != nil {
			held.Release()
		}
		held = s
		return s
	}
	step()
	for _, s := range lagged {
		s.Release() // caught up: six spares at once
	}
	if got := len(w.free.spares); got < 5 {
		t.Fatalf("%d spares after the lag, want 5 or more", got)
	}
	var made []*Snapshot
	for range 5 * spareTrimPeriod {
		if s := step(); !slices.Contains(made, s) {
			made = append(made, s)
		}
	}
	if got := len(w.free.spares); got > 1 {
		t.Errorf("%d spares after five trim periods of a steady series, want at most 1", got)
	}
	// The steady part takes its snapshots from the spares: none new.
	made = made[:0]
	for range 3 * spareTrimPeriod {
		if s := step(); !slices.Contains(made, s) {
			made = append(made, s)
		}
	}
	if len(made) != 2 {
		t.Errorf("a steady series used %d distinct snapshots over three periods, want 2", len(made))
	}
}
