package ghost

import (
	"testing"
	"unsafe"
)

// TestKeptAt holds keptAt to the three comparisons it stands for, on
// every phase, every viewGen around the one wanted and entries that
// differ in each byte of si, with prioB and restCopies set to anything:
// a wrong mask or borrow, or fields that are no longer one word (si,
// viewGen, phase in that order, si 8-aligned in the slot), fails it.
func TestKeptAt(t *testing.T) {
	var s slot
	if o := unsafe.Offsetof(s.si); o%8 != 0 || unsafe.Offsetof(s.viewGen) != o+4 || unsafe.Offsetof(s.phase) != o+5 {
		t.Fatalf("si, viewGen, phase at %d, %d, %d: want one word, si 8-aligned", o, unsafe.Offsetof(s.viewGen), unsafe.Offsetof(s.phase))
	}
	sis := []uint32{0, 1, 7, 0xff, 0x100, 0x1234, 0xffffff, siCarry | 3, siGone | 3, 1<<32 - 1}
	var hits, n int
	for _, gen := range []uint8{0, 1, 2, 128, 255} {
		gw := keptGen(gen)
		for _, vg := range []uint8{gen - 2, gen - 1, gen, gen + 1, 0, 255} {
			for ph := range phase(8) {
				for _, si := range sis {
					for _, ri := range sis {
						for _, rest := range []uint8{0, 1, 0xff} {
							s = slot{si: si, viewGen: vg, phase: ph, prioB: rest, restCopies: rest ^ 0xff}
							want := s.si == ri && s.viewGen == gen-1 && (s.phase == phaseCreating || s.phase == phaseLive)
							if got := s.keptAt(ri, gw); got != want {
								t.Fatalf("gen %d, slot si %#x viewGen %d phase %d, entry %#x: keptAt %v, want %v", gen, si, vg, ph, ri, got, want)
							}
							if want {
								hits++
							}
							n++
						}
					}
				}
			}
		}
	}
	if hits == 0 || hits == n {
		t.Fatalf("%d of %d cases kept: the test compares nothing", hits, n)
	}
}
