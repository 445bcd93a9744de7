package ghost

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// BenchmarkTables1000PumpChurn is BenchmarkTables1000Pump with scopes that
// change (informative): every sixth view of a table, its window of 48
// consecutive entities moves on by one — the first leaves the view, the
// next after the last enters it — so a table loses and gains about three
// ghosts a second, as the server's do (TestTableChurnFootprint's rate).
// Pump's views keep every ghost, which takes only SetSnapshotView's
// usual walk (takeKept); these take its other paths too: the step past a
// ghost that left (keptSlot), the walk of every slot for the ghosts that
// leave, a new ghost's id and the hints spilled before it. Under
// cachegrind, the difference of two benchtimes is one tick of the 1,000
// tables.
func BenchmarkTables1000PumpChurn(b *testing.B) {
	const tables, per, ents = 1000, 48, 1000
	sw, states, classes, vel, tabs, refs := tablesWorld(b, tables, per, ents)
	// Each table's window: its first entity (refs[k][0]) and how far it
	// has moved; the priorities stay those tablesWorld drew.
	first := make([]int, tables)
	for k := range tabs {
		first[k] = int(refs[k][0].Index())
	}
	now, seq := time.Second, uint64(0)
	var buf [800]byte
	var w bitstream.Writer
	order := rand.New(rand.NewPCG(5, 5)).Perm(tables)
	tick := func() {
		now += 50 * time.Millisecond
		sn := sealMoved(sw, states, classes, vel, now)
		seq++
		for k, tab := range tabs {
			if (uint64(k)+seq)%6 == 0 {
				slideWindow(refs[k], &first[k], classes)
			}
			if err := tab.SetSnapshotView(now, sn, refs[k]); err != nil {
				b.Fatal(err)
			}
			w.Reset(buf[:])
			if _, err := tab.Write(&w, seq, now); err != nil {
				b.Fatal(err)
			}
		}
		for _, k := range order {
			tabs[k].OnFate(notify.Fate{Seq: seq, Delivered: seq%7 != 0, SentAt: now})
		}
	}
	warmThenLoop(b, tick)
}

// sealMoved moves every entity a 20th of its velocity, turns it with the
// clock, and seals their snapshot of now: the churn and skip benchmarks'
// zone tick.
func sealMoved(sw *SnapshotWriter, states []State, classes []*Class, vel [][2]float64, now time.Duration) *Snapshot {
	for i := range states {
		states[i].Pos[0] += vel[i][0] / 20
		states[i].Pos[2] += vel[i][1] / 20
		states[i].Yaw = float64(i) + now.Seconds()
	}
	sn := sw.Next(len(states))
	for i := range states {
		sn.Set(i, uint64(i+1), classes[i], &states[i])
	}
	sw.Seal(sn)
	return sn
}

// slideWindow moves a table's view of consecutive entities (first is its
// first entity's index) on by one: the first leaves, the next after the
// last enters with the priority of the one that left.
func slideWindow(r []ViewRef, first *int, classes []*Class) {
	ents, per := len(classes), len(r)
	*first = (*first + 1) % ents
	e := (*first + per - 1) % ents
	prio := r[0].bucket()
	copy(r, r[1:])
	r[per-1] = NewViewRef(uint32(e), classes[e], float32(prio+1)/64)
}
