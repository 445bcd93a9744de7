package ghost

import (
	"bytes"
	"testing"
	"time"
)

// TestPrefetchChangesNothing: the table's prefetch hints are hints. Two
// tables fed the same world over the same lossy net write the same bytes
// every tick when one of them is asked for its lines before each tick
// (with packets in flight, records freed and the entries' store slid),
// and a zero or fresh Table takes the hints without a read.
func TestPrefetchChangesNothing(t *testing.T) {
	var zero Table
	zero.PrefetchHeader()
	zero.PrefetchRecords()
	reg, pc, nc := newTestRegistry(t)
	tableFor(t, reg).PrefetchRecords()

	const tick = 50 * time.Millisecond
	rigs := [2]*rig{}
	worlds := [2]*world{}
	for i := range rigs {
		rigs[i] = newRig(t, reg, DefaultConfig(), newFakeNet(7, 0.2, 40*time.Millisecond, 10*time.Millisecond), MaxPacketBytes)
		worlds[i] = newWorld(11, reg, pc, nc)
		for range 60 {
			worlds[i].ents = append(worlds[i].ents, worlds[i].spawn())
		}
	}
	for k := range 300 {
		now := time.Duration(k+1) * tick
		for i, w := range worlds {
			for j := range w.ents {
				if (j+k)%3 == 0 {
					w.mutate(j)
				}
			}
			if k%40 == 39 { // some leave: records freed, ids reused
				w.ents = w.ents[:len(w.ents)-5]
				for range 5 {
					w.ents = append(w.ents, w.spawn())
				}
			}
			if i == 1 {
				rigs[i].tab.PrefetchHeader()
				rigs[i].tab.PrefetchRecords()
			}
			rigs[i].tick(now, w.view())
		}
		if a, b := rigs[0].w.Bytes(), rigs[1].w.Bytes(); !bytes.Equal(a, b) {
			t.Fatalf("tick %d: the packets differ (%d and %d bytes)", k, len(a), len(b))
		}
		if err := checkInvariants(rigs[1].tab); err != nil {
			t.Fatalf("tick %d: %v", k, err)
		}
	}
	if rigs[1].tab.entLen == 0 {
		t.Fatal("no records in flight at the end: the hint's ring path went untried")
	}
}
