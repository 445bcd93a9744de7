package ghost

import (
	"testing"
	"unsafe"
)

// heapBlock is the runtime's own rounding of an object without pointers
// (append's capacity of a byte slice): at every size class's edges and
// past them, whole pages above 32 KB. A table that disagreed would size
// the per-id arrays to room their blocks do not hold (recordsFit).
func TestHeapBlock(t *testing.T) {
	prev := 0
	for _, c := range sizeClasses {
		for _, n := range []int{prev + 1, (prev + int(c)) / 2, int(c)} {
			if n < 1 || n > int(c) {
				continue
			}
			if got, want := heapBlock(n), int(allocSize(n)); got != want {
				t.Fatalf("heapBlock(%d) = %d, the runtime allocates %d", n, got, want)
			}
		}
		prev = int(c)
	}
	for _, n := range []int{maxSmallBlock + 1, 40000, 49152, 49153, 100000, 1 << 20} {
		if got, want := heapBlock(n), int(allocSize(n)); got != want {
			t.Fatalf("heapBlock(%d) = %d, the runtime allocates %d", n, got, want)
		}
	}
}

// recordsFit gives at least the ids asked, in the size classes they take (no
// block of the slots, tracks, states or view codes larger than for the
// ids asked), for every count a table
// takes, in both view modes; and the per-id arrays resizeRecords makes of it
// take exactly those blocks.
func TestRecordsFit(t *testing.T) {
	reg, _, _ := newTestRegistry(t)
	tab, err := NewTable(reg, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, snap := range []bool{false, true} {
		tab.snapMode = snap
		// The arrays recordsFit follows: not the small ones (fq1,
		// lastField), whose finer classes moved the arrays back and forth.
		sizes := []int{int(unsafe.Sizeof(slot{})), int(unsafe.Sizeof(posTrack{}))}
		if !snap {
			sizes = append(sizes, int(unsafe.Sizeof(State{})), int(unsafe.Sizeof(viewQ{})))
		}
		for n := 1; n <= 4096; n++ {
			m := tab.recordsFit(n)
			if m < n {
				t.Fatalf("snapshot views %v: recordsFit(%d) = %d, fewer than asked", snap, n, m)
			}
			for _, sz := range sizes {
				if got, want := heapBlock(m*sz), heapBlock(n*sz); got != want {
					t.Fatalf("snapshot views %v: recordsFit(%d) = %d: a %d-byte array takes %d bytes, %d for %d ids", snap, n, m, sz, got, want, n)
				}
			}
			// The most: one more id takes a larger block for some array.
			larger := false
			for _, sz := range sizes {
				larger = larger || heapBlock((m+1)*sz) > heapBlock(n*sz)
			}
			if !larger {
				t.Fatalf("snapshot views %v: recordsFit(%d) = %d, but %d fit the same blocks", snap, n, m, m+1)
			}
		}
		for _, n := range []int{9, 45, 97, 100, 130} {
			tab.resizeRecords(tab.recordsFit(n))
			if got, want := allocSize(len(tab.slots)*32), uint64(heapBlock(n*32)); got != want {
				t.Fatalf("%d ids: the slots take %d bytes, want %d", n, got, want)
			}
		}
		// Every length recordsFit gives keeps each 32-byte slot and track in
		// one line: the arrays start on a multiple of 32 bytes.
		for n := 8; n <= 300; n++ {
			tab.resizeRecords(tab.recordsFit(n))
			for _, p := range []uintptr{uintptr(unsafe.Pointer(unsafe.SliceData(tab.slots))), uintptr(unsafe.Pointer(unsafe.SliceData(tab.pos)))} {
				if p%32 != 0 {
					t.Fatalf("%d ids (%d): an array starts %d bytes into a line: its records would straddle two", n, len(tab.slots), p%64)
				}
			}
		}
	}
}
