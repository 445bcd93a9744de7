package ghostmgr

import (
	"sync"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// TestSnapshotReuseUnderTables: a zone's writer on one goroutine publishes
// a snapshot view a tick to four managers, each taken, applied and packed
// on a goroutine of its own (connection shards), some slower than the
// zone. The writer reuses the snapshots (the views and managers hold
// references), and no table ever reads a reused one: the snapshot a
// table holds is always the one of the view it took (its entries carry
// their tick), before and after it packs, and under -race a rewrite
// concurrent with a table's read is a reported race.
func TestSnapshotReuseUnderTables(t *testing.T) {
	reg, _, npc, sw := snapWorld(t)
	const conns, n, ticks = 4, 24, 400
	mark := func(tick uint64) float64 { return float64(tick % 64) } // entry i's Pos[1] at tick
	var wg sync.WaitGroup
	slots := make([]*msg.ViewSlot, conns)
	nudges := make([]chan struct{}, conns)
	bad := make(chan string, conns)
	for c := range conns {
		slots[c], nudges[c] = new(msg.ViewSlot), make(chan struct{}, 1)
		m, err := New(reg, ghost.DefaultConfig(), slots[c], nil)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { // connection c's shard
			defer wg.Done()
			defer m.Close()
			now, seq := time.Second, uint64(0)
			var buf [1200]byte
			check := func(when string) bool {
				s := m.Table().HeldSnapshot()
				if s == nil {
					return true
				}
				if !s.Held() {
					bad <- when + ": the table reads a snapshot nobody holds"
					return false
				}
				for i := range s.Len() {
					if _, _, st := s.Entry(i); st.Pos[1] != mark(m.ViewTick()) {
						bad <- when + ": the table's snapshot holds another tick's entries"
						return false
					}
				}
				return true
			}
			for range nudges[c] {
				now += 2 * time.Millisecond // every view applies at once
				m.TakeView(now)
				if !check("after the view") {
					return
				}
				if c%2 == 1 {
					time.Sleep(time.Duration(c) * 100 * time.Microsecond) // a slow shard: views superseded
				}
				var w bitstream.Writer
				w.Reset(buf[:])
				seq++
				if _, err := m.Write(&w, seq, now); err != nil {
					bad <- err.Error()
					return
				}
				m.OnFate(notify.Fate{Seq: seq, Delivered: seq%3 != 0, SentAt: now})
				if !check("after packing") {
					return
				}
			}
		}()
	}
	seen := map[*ghost.Snapshot]bool{}
	for tick := uint64(1); tick <= ticks; tick++ {
		s := sw.Next(n)
		seen[s] = true
		for i := range n {
			var st ghost.State
			st.Pos = [3]float64{float64(i) + float64(tick%7), mark(tick), float64(i % 5)}
			s.Set(i, uint64(1<<40+i), npc, &st)
		}
		sw.Seal(s)
		for c := range conns {
			v := msg.NewViewRefs(n)
			v.SetSnap(s)
			for i := range n {
				v.Refs = append(v.Refs, ghost.NewViewRef(uint32(i), npc, 1))
			}
			v.Player, v.Tick = uint64(c+1), tick
			if slots[c].Publish(v) {
				nudges[c] <- struct{}{} // at most one in flight: never blocks
			}
		}
		time.Sleep(300 * time.Microsecond) // the shards take the views (a zone ticks every 50 ms)
	}
	for c := range conns {
		close(nudges[c])
	}
	wg.Wait()
	close(bad)
	for b := range bad {
		t.Error(b)
	}
	if len(seen) > ticks/3 {
		t.Errorf("%d snapshots for %d ticks: not reused", len(seen), ticks)
	}
}
