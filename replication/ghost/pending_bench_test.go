package ghost

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// BenchmarkPendingQuiet1000 asks Pending of 1,000 tables of 48 ghosts
// each, every create delivered and nothing changed since: the answer is
// false, the case in which a walk of the slots reads every one (the
// connection asks before it builds each packet). The tables are cold in
// turn, as on the server.
func BenchmarkPendingQuiet1000(b *testing.B) {
	reg, _, nc := newTestRegistry(b)
	const tables, per = 1000, 48
	tabs := make([]*Table, tables)
	view := make([]ViewEntry, per)
	for i := range view {
		view[i] = ViewEntry{Entity: uint64(i + 1), Class: nc, Priority: 1}
		view[i].State.Pos = [3]float64{float64(i), 0, 0}
		view[i].State.Health = 100
	}
	var buf [MaxPacketBytes]byte
	var w bitstream.Writer
	for k := range tabs {
		tab, err := NewTable(reg, DefaultConfig())
		if err != nil {
			b.Fatal(err)
		}
		now, seq := time.Second, uint64(0)
		if err := tab.SetView(now, view); err != nil {
			b.Fatal(err)
		}
		for tab.Pending() {
			now += 50 * time.Millisecond
			seq++
			w.Reset(buf[:])
			if _, err := tab.Write(&w, seq, now); err != nil {
				b.Fatal(err)
			}
			tab.OnFate(notify.Fate{Seq: seq, Delivered: true, SentAt: now})
		}
		tabs[k] = tab
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		for _, tab := range tabs {
			if tab.Pending() {
				n++
			}
		}
	}
	if n != 0 {
		b.Fatalf("%d tables pending", n)
	}
}

// BenchmarkSeal1000 fills and seals one zone snapshot of 1,000 entries a
// tick (a quarter players), every other entry walking and the rest still
// (idle players, NPCs between steps): Set and Seal as Zone.Snapshot calls
// them (nobody retains them: the writer may reuse each).
func BenchmarkSeal1000(b *testing.B) {
	reg, pc, nc := newTestRegistry(b)
	sw, err := NewSnapshotWriter(reg)
	if err != nil {
		b.Fatal(err)
	}
	const ents = 1000
	states := make([]State, ents)
	classes := make([]*Class, ents)
	for i := range states {
		classes[i] = nc
		if i%4 == 0 {
			classes[i] = pc
		}
		states[i].Pos = [3]float64{float64(i%100) - 50, 0, float64(i/100) - 5}
		states[i].Yaw = float64(i) / 100
		states[i].Health = 100
		states[i].Name = MustName("wolf")
	}
	tick := func() {
		for i := 0; i < ents; i += 2 {
			states[i].Pos[0] += 0.05
			states[i].Yaw += 0.01
		}
		sn := sw.Next(ents)
		for i := range states {
			sn.Set(i, uint64(i+1), classes[i], &states[i])
		}
		sw.Seal(sn)
	}
	for range 4 {
		tick()
	}
	b.ReportAllocs()
	for b.Loop() {
		tick()
	}
}
