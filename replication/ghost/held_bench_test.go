package ghost

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// BenchmarkTables1000Held is BenchmarkTables1000Fate1 with every other
// entity far from its viewers and served at half rate, as a zone serves far
// view members: its snapshot entry changes only every second tick (a held
// state), so each tick half the entries in every view are unchanged since
// the view before. Besides the CPU per ghost in view it reports the records
// written per ghost and tick (recs/ghost): a held ghost that costs nothing
// on its held ticks halves the far half's records.
func BenchmarkTables1000Held(b *testing.B) { benchHeld(b, true) }

// BenchmarkTables1000Still is BenchmarkTables1000Held with the far half
// not moving at all (idle NPCs): their entries never change after the
// first tick, the case a view and a packet must pass over for next to
// nothing.
func BenchmarkTables1000Still(b *testing.B) { benchHeld(b, false) }

// benchHeld runs 1,000 tables of 48 ghosts over one zone of 1,000
// entities; entities i%2 == 1 are far: they move only on even ticks
// (moving) or never (!moving).
func benchHeld(b *testing.B, moving bool) {
	const tables, per, ents = 1000, 48, 1000
	sw, states, classes, vel, tabs, refs := tablesWorld(b, tables, per, ents)
	now, seq := time.Second, uint64(0)
	var buf [800]byte
	var w bitstream.Writer
	var ticks, recs int
	var viewCPU, writeCPU time.Duration
	tick := func(measure bool) {
		now += 50 * time.Millisecond
		for i := range states {
			if i%2 == 1 && (!moving || seq%2 == 1) {
				continue // held: the far half changes every second tick
			}
			// Held entries move two ticks' worth at once: the same speed.
			f := 1.0
			if i%2 == 1 {
				f = 2
			}
			states[i].Pos[0] += f * vel[i][0] / 20
			states[i].Pos[2] += f * vel[i][1] / 20
			states[i].Yaw = float64(i) + now.Seconds()
		}
		sn := sw.Next(ents)
		for i := range states {
			if moving && i%2 == 1 && seq%2 == 1 {
				sn.SetHeld(i, uint64(i+1), classes[i], &states[i]) // served again, not a new sample
				continue
			}
			sn.Set(i, uint64(i+1), classes[i], &states[i])
		}
		sw.Seal(sn)
		seq++
		t0, _ := threadCPU()
		for k, tab := range tabs {
			if err := tab.SetSnapshotView(now, sn, refs[k]); err != nil {
				b.Fatal(err)
			}
		}
		t1, _ := threadCPU()
		n := 0
		for _, tab := range tabs {
			w.Reset(buf[:])
			r, err := tab.Write(&w, seq, now)
			if err != nil {
				b.Fatal(err)
			}
			n += r
			if seq > 1 {
				tab.OnFate(notify.Fate{Seq: seq - 1, Delivered: seq%7 != 0, SentAt: now - 50*time.Millisecond})
			}
		}
		t2, _ := threadCPU()
		if measure {
			ticks++
			recs += n
			viewCPU += t1 - t0
			writeCPU += t2 - t1
		}
	}
	defer lockThread()()
	for range 40 { // every ghost created, the in-flight stores at their steady size
		tick(false)
	}
	b.ReportAllocs()
	for b.Loop() {
		tick(true)
	}
	g := float64(ticks * tables * per)
	b.ReportMetric(float64(viewCPU)/g, "view-cpu-ns/ghost")
	b.ReportMetric(float64(writeCPU)/g, "write-cpu-ns/ghost")
	b.ReportMetric(float64(recs)/g, "recs/ghost")
}
