//go:build amd64 && !amd64.v3

// Held to BucketRefsFolded's Go loop bit for bit where Go does not fuse
// multiply-adds (as scan4: TestScan4MatchesRun); bucketRefs4 never fuses.

package interest

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ghostwire/ghostwire/replication/ghost"
)

// TestBucketRefs4MatchesLoop holds BucketRefsFolded with bucketRefs4
// (four members at a time, in assembly) to its Go loop alone, the
// reference: the same references and the same sum over random sets of
// every length from 0 to 41 (every remainder of a last group), members on
// the viewer, exactly at the far radius, past the priority floor (f below
// far) and beyond the leave radius, weighted factors of 0 and of many
// exponents (so the buckets differ), offsets of 0 and up to 2^24, and
// buckets of random references.
func TestBucketRefs4MatchesLoop(t *testing.T) {
	if !haveScan4 {
		t.Log("this CPU has no SSSE3 or POPCNT: BucketRefsFolded runs its Go loop alone")
		return
	}
	rng := rand.New(rand.NewPCG(5, 6))
	var buckets [1 << 11]ghost.ViewRef
	for i := range buckets {
		buckets[i] = ghost.ViewRef(rng.Uint32()) &^ (1<<24 - 1)
	}
	for iter := range 3000 {
		nslots := 1 + rng.IntN(300)
		vx, vz := float32(rng.Float64()*400-200), float32(rng.Float64()*400-200)
		const far = 60
		bySlot := make([]slotPrio, nslots)
		for s := range bySlot {
			c := &bySlot[s]
			c.x, c.z = vx+float32(rng.Float64()*300-150), vz+float32(rng.Float64()*300-150)
			switch rng.IntN(6) {
			case 0: // on the viewer
				c.x, c.z = vx, vz
			case 1: // exactly at the far radius
				c.x, c.z = vx+far, vz
			case 2:
				c.x, c.z = vx, vz-far
			}
			c.factor = float32(rng.Float64() * 4)
			switch rng.IntN(4) {
			case 0:
				c.wf = 0
			case 1:
				c.wf = float32(math.Ldexp(rng.Float64(), rng.IntN(40)-20))
			default:
				c.wf = c.factor * float32(rng.IntN(4)+1) / 2
			}
		}
		v := Viewer{bySlot: bySlot, x: vx, z: vz, falloff: float32(rng.Float64() * 2e-4),
			farb: int32(math.Float32bits(float32(0.05 + rng.Float64()*0.5)))}
		set := make([]Entry, rng.IntN(42))
		for i := range set {
			set[i] = Entry{key: uint32(rng.IntN(nslots))<<8 | uint32(rng.IntN(256)) | uint32(rng.IntN(2))<<31}
		}
		var off uint32
		if rng.IntN(4) > 0 {
			off = 1 + uint32(rng.IntN(1<<24))
		}
		far2 := float32(far * far)
		got, want := make([]ghost.ViewRef, len(set)), make([]ghost.ViewRef, len(set))
		gs := v.BucketRefsFolded(got, set, &buckets, far2, off)
		haveScan4 = false
		ws := v.BucketRefsFolded(want, set, &buckets, far2, off)
		haveScan4 = true
		if !slices.Equal(got, want) || gs != ws {
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("iter %d, member %d of %d (slot %d): %#x, the loop %#x", iter, i, len(set), set[i].Slot(), got[i], want[i])
				}
			}
			t.Fatalf("iter %d: sum %d, the loop %d", iter, gs, ws)
		}
	}
}

// TestBucketRefs4StopsAtBadSlot: a member whose slot is past the table
// panics as the Go loop's index does, and bucketRefs4 writes nothing of
// its group (it leaves the group to the loop).
func TestBucketRefs4StopsAtBadSlot(t *testing.T) {
	if !haveScan4 {
		t.Log("this CPU has no SSSE3 or POPCNT")
		return
	}
	bySlot := make([]slotPrio, 10)
	set := make([]Entry, 12)
	for i := range set {
		set[i] = Entry{key: uint32(i%10) << 8}
	}
	set[6] = Entry{key: 10 << 8} // the second group's third member
	var buckets [1 << 11]ghost.ViewRef
	out := make([]ghost.ViewRef, len(set))
	for i := range out {
		out[i] = 0xdeadbeef
	}
	done, _ := bucketRefs4(&out[0], &set[0], len(set), &bySlot[0], len(bySlot), 0, 0, 0, 0.1, 1, 0, &buckets)
	if done != 4 {
		t.Fatalf("done %d, want 4 (the bad slot's group left to the loop)", done)
	}
	if out[4] != 0xdeadbeef || out[7] != 0xdeadbeef {
		t.Fatalf("the bad slot's group was written: %#x", out[4:8])
	}
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for a slot past the table")
		}
	}()
	v := Viewer{bySlot: bySlot, farb: int32(math.Float32bits(0.1))}
	v.BucketRefsFolded(out, set, &buckets, 1, 0)
}

// FuzzBucketRefs4MatchesLoop is TestBucketRefs4MatchesLoop over any bits:
// positions, factors and the viewer's fields as raw float32 bits (NaN,
// infinities and subnormals among them, which no zone gives but the two
// must still agree on), members' keys of any gen and always bit.
func FuzzBucketRefs4MatchesLoop(f *testing.F) {
	f.Add([]byte("\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x00\x00\x00\x00\x20\x41"), uint32(0x38d1b717), uint32(0x3dcccccd), uint32(0x45610000), uint32(1<<20), uint8(7))
	f.Add(make([]byte, 64), uint32(0x7fc00000), uint32(0), uint32(0xff800000), uint32(0), uint8(41))
	f.Fuzz(func(t *testing.T, recs []byte, falloff, far, far2, off uint32, members uint8) {
		if !haveScan4 {
			return
		}
		word := func(i int) uint32 {
			var w uint32
			for k := range 4 {
				if j := (4*i + k) % max(len(recs), 1); j < len(recs) {
					w |= uint32(recs[j]) << (8 * k)
				}
			}
			return w
		}
		nslots := 1 + len(recs)/16
		bySlot := make([]slotPrio, nslots)
		for s := range bySlot {
			c := &bySlot[s]
			c.x, c.z = math.Float32frombits(word(4*s)), math.Float32frombits(word(4*s+1))
			c.factor, c.wf = math.Float32frombits(word(4*s+2)), math.Float32frombits(word(4*s+3))
		}
		v := Viewer{bySlot: bySlot, x: math.Float32frombits(word(1)), z: math.Float32frombits(word(2)),
			falloff: math.Float32frombits(falloff), farb: int32(far)}
		set := make([]Entry, int(members)%48)
		for i := range set {
			k := word(i + 3)
			set[i] = Entry{key: uint32(int(k>>8&(1<<23-1))%nslots)<<8 | k&0xff | k&(1<<31)}
		}
		var buckets [1 << 11]ghost.ViewRef
		for i := range buckets {
			buckets[i] = ghost.ViewRef(i) << 21
		}
		off &= 1<<24 - 1
		got, want := make([]ghost.ViewRef, len(set)), make([]ghost.ViewRef, len(set))
		gs := v.BucketRefsFolded(got, set, &buckets, math.Float32frombits(far2), off)
		haveScan4 = false
		ws := v.BucketRefsFolded(want, set, &buckets, math.Float32frombits(far2), off)
		haveScan4 = true
		if !slices.Equal(got, want) || gs != ws {
			t.Fatalf("references %#x, the loop %#x; sums %d, %d", got, want, gs, ws)
		}
	})
}
