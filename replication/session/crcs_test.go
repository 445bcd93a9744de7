package session

import (
	"math/rand/v2"
	"testing"
)

// TestCRCFIFOMatchesRing drives the CRC FIFO and the 64-slot array it
// replaced (slot seq % 64, kept until a later CRC move takes the slot)
// with the same moves — a random share carrying a CRC — and the same zone
// reports, lagging 0–80 moves behind: within the window (newest − applied
// < 64) both find exactly the same CRCs; beyond it the FIFO finds none and
// the array only what a later move did not overwrite.
func TestCRCFIFOMatchesRing(t *testing.T) {
	for _, share := range []float64{1, 0.5, 0.1} {
		rng := rand.New(rand.NewPCG(7, uint64(share*100)))
		var q crcFIFO
		var ring [crcWindow]moveCRC
		var seq, applied uint64
		within, found := 0, 0
		for range 20000 {
			for range rng.IntN(4) {
				seq++
				if rng.Float64() < share {
					crc := rng.Uint32()
					q.push(seq, crc)
					ring[seq%crcWindow] = moveCRC{seq: uint32(seq), crc: crc}
				}
			}
			lag := uint64(rng.IntN(81))
			if seq < lag || seq-lag <= applied {
				continue
			}
			applied = seq - lag // the zone's reports only go forward
			got, ok := q.find(applied)
			m := ring[applied%crcWindow]
			want, wok := m.crc, m.seq == uint32(applied)
			switch {
			case lag < crcWindow:
				within++
				if ok != wok || ok && got != want {
					t.Fatalf("share %v: move %d, %d behind: FIFO %v %x, array %v %x", share, applied, lag, ok, got, wok, want)
				}
				if ok {
					found++
				}
			case ok:
				t.Fatalf("share %v: move %d, %d behind the newest, found beyond the window", share, applied, lag)
			}
			if len(q.entries()) > crcWindow || q.n > crcWindow {
				t.Fatalf("room for %d holding %d: beyond %d", len(q.entries()), q.n, crcWindow)
			}
		}
		if within < 1000 || found == 0 {
			t.Fatalf("share %v: %d checks within the window, %d found: the test checked nothing", share, within, found)
		}
	}
}

// TestCRCFIFOBounded: a client that puts a CRC on every move of a zone
// that never reports makes the FIFO hold crcWindow moves, no more, and
// gives the slice back once the zone keeps up again; a connection whose
// zone keeps up (at half the move rate: three held before each find)
// keeps its entries in the Server.
func TestCRCFIFOBounded(t *testing.T) {
	var q crcFIFO
	for s := uint64(1); s <= 100000; s++ {
		q.push(s, uint32(s))
	}
	if len(q.entries()) != crcWindow || q.n != crcWindow {
		t.Fatalf("room for %d holding %d after 100,000 CRCs, want %d holding %d", len(q.entries()), q.n, crcWindow, crcWindow)
	}
	if crc, ok := q.find(100000 - crcWindow + 1); !ok || crc != 100000-crcWindow+1 {
		t.Fatalf("the oldest CRC in the window: %v %d", ok, crc)
	}
	// The zone catches up and keeps up: two sizing periods later the
	// ring is back at its first size, with the CRCs still found.
	s := uint64(100000)
	for i := 0; i < 3*crcTrimEvery; i++ {
		s++
		q.push(s, uint32(s))
		if crc, ok := q.find(s); !ok || crc != uint32(s) {
			t.Fatalf("move %d after the lag: %v %d", s, ok, crc)
		}
	}
	if q.spill != nil {
		t.Fatalf("a slice of %d kept after the lag ended, want the entries back in the Server", q.spillN)
	}
	var k crcFIFO
	for s := uint64(1); s <= 100000; s++ {
		k.push(s, uint32(s))
		if s%2 == 0 { // a zone at 15 Hz against moves at 30 Hz
			if _, ok := k.find(s - 1); !ok {
				t.Fatalf("move %d not found", s-1)
			}
		}
	}
	if k.spill != nil {
		t.Fatalf("a zone keeping up moved the entries to a slice of %d", k.spillN)
	}
}

// TestCRCFIFOSpillIsOneAllocation: a lagging zone's entries go to the
// heap in one allocation a resize, the array alone (with a slice header
// of its own, two).
func TestCRCFIFOSpillIsOneAllocation(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		var q crcFIFO
		for s := uint64(1); s <= crcSpillMin; s++ { // inline, then one spill of crcSpillMin
			q.push(s, uint32(s))
		}
		if q.spill == nil || q.spillN != crcSpillMin {
			t.Fatalf("spill %v of %d after %d CRCs, want %d", q.spill != nil, q.spillN, crcSpillMin, crcSpillMin)
		}
	})
	if allocs != 1 {
		t.Fatalf("%v allocations to spill, want 1", allocs)
	}
}

// TestCRCFIFODropsBehindWindowInline: a CRC crcWindow moves behind the
// newest goes on the next push even while the entries have room in the
// Server (push's path for a zone that keeps up), so none is found beyond
// the window.
func TestCRCFIFODropsBehindWindowInline(t *testing.T) {
	var q crcFIFO
	q.push(1, 11)
	q.push(crcWindow, 12) // 63 behind: kept
	q.push(crcWindow+1, 13)
	if q.n != 2 || q.spill != nil {
		t.Fatalf("holding %d (slice %v), want the 2 within the window, in the Server", q.n, q.spill != nil)
	}
	if _, ok := q.find(1); ok {
		t.Fatal("move 1 found, crcWindow behind the newest")
	}
	if crc, ok := q.find(crcWindow + 1); !ok || crc != 13 {
		t.Fatalf("the newest: %v %d", ok, crc)
	}
}

// TestCRCFIFOFindNewestEmpties: the zone's report of the newest move held
// (find's path for a zone that keeps up) takes it and every older one.
func TestCRCFIFOFindNewestEmpties(t *testing.T) {
	var q crcFIFO
	for s := uint64(5); s <= 7; s++ {
		q.push(s, uint32(10*s))
	}
	if crc, ok := q.find(7); !ok || crc != 70 {
		t.Fatalf("the newest: %v %d", ok, crc)
	}
	if q.n != 0 {
		t.Fatalf("holding %d after the newest was found, want none", q.n)
	}
	for s := uint64(5); s <= 7; s++ {
		if _, ok := q.find(s); ok {
			t.Fatalf("move %d found after the report of a newer one", s)
		}
	}
}
