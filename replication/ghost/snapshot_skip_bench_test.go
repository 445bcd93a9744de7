package ghost

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// BenchmarkTables1000PumpSkip is BenchmarkTables1000Pump on a node that
// falls behind (informative): the zone seals a snapshot every tick, but a
// table's connection is pumped only every second tick (half the tables)
// or third (the other half), so each view it takes is two or three
// snapshots newer than its last — what ghostmgr does when the node
// cannot keep up (at 2,000 players, ≈ 19 of ≈ 21.4 datagrams a
// player-second go out). A pumped table takes the view, writes, and its
// packet's fate comes after every pumped table wrote. Under cachegrind,
// the difference of two benchtimes is one tick: 1,000 tables' 5/12 of a
// view and a packet each.
func BenchmarkTables1000PumpSkip(b *testing.B) { benchPumpSkip(b, false) }

// BenchmarkTables1000PumpSkipChurn is BenchmarkTables1000PumpSkip with
// BenchmarkTables1000PumpChurn's scopes (informative): every sixth tick a
// table's window of 48 entities moves on by one, so a view behind finds
// a ghost that left, or one that entered, about every other time.
func BenchmarkTables1000PumpSkipChurn(b *testing.B) { benchPumpSkip(b, true) }

func benchPumpSkip(b *testing.B, churn bool) {
	const tables, per, ents = 1000, 48, 1000
	sw, states, classes, vel, tabs, refs := tablesWorld(b, tables, per, ents)
	first := make([]int, tables) // each table's window (churn)
	for k := range tabs {
		first[k] = int(refs[k][0].Index())
	}
	now, tick := time.Second, uint64(0)
	pseq := make([]uint64, tables) // each table's packets
	var buf [800]byte
	var w bitstream.Writer
	order := rand.New(rand.NewPCG(5, 5)).Perm(tables)
	wrote := make([]bool, tables)
	step := func() {
		now += time.Duration(48+(tick*3)%5) * time.Millisecond
		sn := sealMoved(sw, states, classes, vel, now)
		tick++
		for k, tab := range tabs {
			if churn && (uint64(k)+tick)%6 == 0 {
				slideWindow(refs[k], &first[k], classes)
			}
			wrote[k] = (tick+uint64(k))%uint64(2+k%2) == 0
			if !wrote[k] {
				continue
			}
			if err := tab.SetSnapshotView(now, sn, refs[k]); err != nil {
				b.Fatal(err)
			}
			pseq[k]++
			w.Reset(buf[:])
			if _, err := tab.Write(&w, pseq[k], now); err != nil {
				b.Fatal(err)
			}
		}
		for _, k := range order {
			if wrote[k] {
				tabs[k].OnFate(notify.Fate{Seq: pseq[k], Delivered: pseq[k]%7 != 0, SentAt: now})
			}
		}
	}
	defer lockThread()()
	for k := range 60 { // every ghost created, the in-flight stores at their steady size
		step()
		if k == 0 && !churn {
			rng := rand.New(rand.NewPCG(3, 3))
			for _, r := range refs {
				rng.Shuffle(len(r), func(i, j int) { r[i], r[j] = r[j], r[i] })
			}
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		step()
	}
}
