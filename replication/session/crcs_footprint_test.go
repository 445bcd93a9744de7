package session

import "testing"

// maxCRCSpillBytes bounds the CRC FIFO's spill slice on average over
// steady lags of 1 to 63 moves (a zone at 20 Hz reporting its applied
// moves that far behind a client's 30 Hz moves, each with a CRC): what a
// connection holds while its node is behind. Measured 280 B with
// crcSpillSizes (the allocator's size classes, grown a size at a time, cut
// to a quarter above the peak); 354 B with the lengths powers of two,
// doubled on use and halved at most (thirty-sixth pass). A size check, not
// a timing one.
const maxCRCSpillBytes = 290

func TestCRCSpillFootprint(t *testing.T) {
	total, samples := 0, 0
	for lag := uint64(1); lag < crcWindow; lag++ {
		var q crcFIFO
		var seq, applied uint64
		for tick := range 3000 {
			for range 1 + tick%2 { // 1.5 moves a tick
				seq++
				q.push(seq, uint32(seq))
			}
			if seq > lag && seq-lag > applied {
				applied = seq - lag
				if _, ok := q.find(applied); !ok {
					t.Fatalf("lag %d: move %d not found", lag, applied)
				}
			}
			if tick >= 1000 {
				if q.spill != nil {
					total += 8 * int(q.spillN)
				}
				samples++
			}
		}
	}
	per := total / samples
	t.Logf("the CRC spill over steady lags of 1–63 moves: %d B a connection on average", per)
	if per > maxCRCSpillBytes {
		t.Fatalf("the CRC spill holds %d B on average, want ≤ %d", per, maxCRCSpillBytes)
	}
}
