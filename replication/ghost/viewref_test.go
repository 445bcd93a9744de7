package ghost

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestViewRef: a reference is 4 bytes; it keeps its index and the bucket
// a table packs the entity by (bucketOf of the priority × the class
// weight, as SetView takes a ViewEntry's), and its Priority is one of
// that bucket.
func TestViewRef(t *testing.T) {
	if n := unsafe.Sizeof(ViewRef(0)); n != 4 {
		t.Fatalf("a ViewRef is %d bytes, want 4", n)
	}
	reg, err := NewRegistry(DefaultBounds())
	if err != nil {
		t.Fatal(err)
	}
	var classes []*Class
	for i, w := range []float32{0, 1, 2, 0.3, 7.5, 1e-3} {
		c := NPCClass(nil)
		c.ID, c.Weight = uint16(10+i), w
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
		classes = append(classes, c)
	}
	rng := rand.New(rand.NewPCG(3, 9))
	special := []float32{0, -1, float32(math.NaN()), float32(math.Inf(1)), 1e-9, 1e-6, 1, 1e12, 1e13, 3e38}
	for k := range 20000 {
		c := classes[k%len(classes)]
		var p float32
		if k < len(special)*len(classes) {
			p = special[k/len(classes)]
		} else {
			p = float32(math.Exp(rng.Float64()*60 - 30))
		}
		idx := uint32(rng.IntN(refIndexMax + 1))
		r := NewViewRef(idx, c, p)
		if r.Index() != idx {
			t.Fatalf("NewViewRef(%d, w %v, %v).Index() = %d", idx, c.Weight, p, r.Index())
		}
		want := uint8(bucketOf(basePriority(p) * c.weight))
		if r.bucket() != want {
			t.Fatalf("NewViewRef(w %v, %v): bucket %d, want %d", c.Weight, p, r.bucket(), want)
		}
		if q := r.Priority(c); NewViewRef(idx, c, q) != r {
			t.Fatalf("w %v priority %v: bucket %d, its Priority %v goes to bucket %d", c.Weight, p, want, q, NewViewRef(idx, c, q).bucket())
		}
	}
	// An index past what a reference holds names no entry.
	if r := NewViewRef(1<<24+5, classes[1], 1); r.Index() != refIndexMax {
		t.Fatalf("index 1<<24+5: %d, want the clamp %d", r.Index(), refIndexMax)
	}
	d := newDuo(t, DefaultConfig())
	sw, _ := NewSnapshotWriter(d.reg)
	ents := []ViewEntry{d.npc(1, 0)}
	s := d.snapView(sw, ents, 0)
	d.now += 50_000_000
	if err := d.tab.SetSnapshotView(d.now, s, []ViewRef{NewViewRef(1<<24+0, d.nc, 1)}); !errors.Is(err, ErrBadState) {
		t.Fatalf("a reference past 1<<24: %v, want %v", err, ErrBadState)
	}
}

// TestRefsBelow: refsBelow, branch-free two a word and sixteen at a time,
// answers as the plain loop over the indices does, for every length below
// a step, and every overlap of the last step with the ones before it
// (lengths up to four steps and more), buckets in the top byte, and
// indices at and around n, 0 and refIndexMax, in either lane of a word.
func TestRefsBelow(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for k := range 50000 {
		n := uint32(rng.IntN(refIndexMax)) // SetSnapshotView's snapshots: < refIndexMax entries
		if k%5 == 0 {
			n = uint32(rng.IntN(3))
		}
		view := make([]ViewRef, rng.IntN(70))
		for i := range view {
			var idx uint32
			switch rng.IntN(6) {
			case 0:
				idx = n
			case 1:
				idx = n - 1 // wraps to refIndexMax's byte when n is 0: masked below
			case 2:
				idx = refIndexMax
			case 3:
				idx = 0
			default:
				idx = uint32(rng.IntN(int(n) + 1))
			}
			view[i] = ViewRef(idx&refIndexMax | uint32(rng.IntN(256))<<refIndexBits)
		}
		want := true
		for _, r := range view {
			if r.Index() >= n {
				want = false
			}
		}
		if got := refsBelow(view, n); got != want {
			t.Fatalf("refsBelow(%x, %d) = %v, want %v", view, n, got, want)
		}
		if got := refsBelowEach(view, uint64(1<<31-n)*(1|1<<32)); got != want {
			t.Fatalf("refsBelowEach(%x, %d) = %v, want %v", view, n, got, want)
		}
		// A view that starts 4 bytes into a word, as a player's view within
		// a snapshot's array may: the words are read unaligned.
		if len(view) > 0 {
			sub, subWant := view[1:], true
			for _, r := range sub {
				subWant = subWant && r.Index() < n
			}
			if got := refsBelow(sub, n); got != subWant {
				t.Fatalf("refsBelow(%x, %d) (4 bytes off a word) = %v, want %v", sub, n, got, subWant)
			}
		}
	}
	// One reference out of range among many in range (the draws above
	// mostly hold several): each position of every length, so a word no
	// step reads would be found.
	for _, n := range []uint32{1, 2, 1000, refIndexMax - 1} {
		for l := range 70 {
			view := make([]ViewRef, l)
			for i := range view {
				view[i] = ViewRef(uint32(rng.IntN(int(n))) | uint32(rng.IntN(256))<<refIndexBits)
			}
			if !refsBelow(view, n) {
				t.Fatalf("refsBelow(%x, %d) = false, want true", view, n)
			}
			for i := range view {
				r := view[i]
				view[i] = ViewRef(n+uint32(rng.IntN(int(refIndexMax-n+1)))) | r&^refIndexMax
				if refsBelow(view, n) {
					t.Fatalf("refsBelow(%x, %d) = true, want false (reference %d of %d)", view, n, i, l)
				}
				view[i] = r
			}
		}
	}
}
