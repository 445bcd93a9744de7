package handoff

import "testing"

// Ids with a structure spread over every slice: sequential ones, and ones
// that are all multiples of four or of the slice count itself (5: the
// cluster's chunks; 20: its count before).
func TestCheckpointSliceSpreads(t *testing.T) {
	for _, slices := range []uint64{5, 20} {
		for _, stride := range []uint64{1, 4, slices, 1 << 20} {
			n := make([]uint64, slices)
			for i := range uint64(2000) {
				n[CheckpointSlice(1+i*stride, slices)]++
			}
			for k, c := range n {
				if c < 2000/slices/2 || c > 2000/slices*2 {
					t.Fatalf("%d slices, stride %d: slice %d has %d of 2,000 ids: %v", slices, stride, k, c, n)
				}
			}
		}
	}
}
