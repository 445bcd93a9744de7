package ghost

import (
	"math/rand/v2"
	"testing"
)

// sameName is ==: names that differ in their length or in any one byte
// (the overlapping byte 23 of sameName's third and fourth words among
// them), and equal ones, drawn at random.
func TestSameNameIsEqual(t *testing.T) {
	rng := rand.New(rand.NewPCG(38, 1))
	for k := range 20000 {
		var a Name
		a.n = uint8(rng.IntN(MaxNameLen + 1))
		for i := range int(a.n) {
			a.b[i] = byte(rng.IntN(256))
		}
		b := a
		switch k % 3 {
		case 0: // one byte of the array differs
			b.b[rng.IntN(MaxNameLen)] ^= byte(1 + rng.IntN(255))
		case 1: // the length differs
			b.n ^= byte(1 + rng.IntN(31))
		}
		if got, want := sameName(&a, &b), a == b; got != want {
			t.Fatalf("case %d: sameName(%v, %v) = %v, want %v", k, a, b, got, want)
		}
	}
}
