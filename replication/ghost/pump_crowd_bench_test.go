package ghost

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// BenchmarkTables1000PumpScattered is BenchmarkTables1000Pump with each
// table's 48 ghosts a random set of the zone's 1,000 entries, not a run
// of them (informative): a node's zone puts its entities in the snapshot
// in slot order, so a view's entries lie anywhere in it, and the view's
// walk and the packet take a line or more of the snapshot a ghost, not a
// line for the few ghosts of a run that share it. Under cachegrind its
// misses a ghost are what the snapshot's layout costs a node's tables
// (TestSnapEntLayout).
func BenchmarkTables1000PumpScattered(b *testing.B) {
	benchTablesColdOf(b, 1000, 0, nil, true, true, true, false, true, true)
}

// BenchmarkTables1000PumpCrowdScattered is BenchmarkTables1000PumpScattered
// with the groups besides the position and yaw changing as a node's crowd
// changes them (informative; crowdStep). Pump's states change their
// position and yaw only, so its records all take writeUsual's own masks;
// these take every other mask, coded by writeUsualRuns from the entry's
// group codes, as at 2,000 players, where the load of those codes was
// 5.7 % of the node (BenchmarkTables1000PumpCrowd is the node's mix of
// record lengths with a view a run of entries).
func BenchmarkTables1000PumpCrowdScattered(b *testing.B) {
	tick := 0
	benchTablesColdOf(b, 1000, 0, func(i int, s *State) {
		if i == 0 {
			tick++
		}
		crowdStep(tick, i, s)
	}, true, true, true, false, true, true)
}

// crowdStep changes a tablesWorld entity's groups besides the position
// and yaw at tick as a node's crowd changes them: a player's move
// sequence (Extra[0]) goes on by one and its velocity changes, as a
// zone's players' do (zones/sim's seqExtra and their moves), and an NPC's
// health changes.
func crowdStep(tick int, i int, s *State) {
	if i%4 == 0 { // a player (tablesWorld's)
		s.Extra[0]++
		s.Vel = [3]float64{float64((i+tick)%7) - 3, 0, float64((i+tick)%5) - 2}
		return
	}
	s.Health = 100 + int32((i+tick)%50)
}

// BenchmarkTables1000PumpZones is BenchmarkTables1000PumpCrowdScattered with the
// 1,000 tables in four zones, each its own snapshot of 1,000 entries, and
// a table of each zone in turn (informative): a node's shard pumps the
// connections of every zone, so one zone's snapshot is not left in D1 by
// the table before, as one snapshot shared by every table (48 ghosts of
// 1,000, its 24 KB of views in a 48 KB D1) is. Under cachegrind its misses
// a ghost are what the snapshot's layout costs a node's tables; as a
// node's, its snapshots are held by the tables' owners and reused.
func BenchmarkTables1000PumpZones(b *testing.B) { benchPumpZones(b, true) }

// BenchmarkTables1000PumpZonesPos is BenchmarkTables1000PumpZones with
// only the positions and yaws changing, as BenchmarkTables1000Pump's
// (informative): every record is writeUsual's own (no group codes read).
func BenchmarkTables1000PumpZonesPos(b *testing.B) { benchPumpZones(b, false) }

// benchPumpZones runs BenchmarkTables1000PumpZones, the crowd's groups
// changing if crowd is set.
func benchPumpZones(b *testing.B, crowd bool) {
	const tables, per, ents, zones = 1000, 48, 1000, 4
	sw, states, classes, vel, tabs, refs := tablesWorld(b, tables, per, ents)
	sws := []*SnapshotWriter{sw}
	for range zones - 1 {
		w, err := NewSnapshotWriter(sw.reg)
		if err != nil {
			b.Fatal(err)
		}
		sws = append(sws, w)
	}
	scatterViews(refs, classes, ents)
	now, seq := time.Second, uint64(0)
	var buf [800]byte
	var w bitstream.Writer
	order := rand.New(rand.NewPCG(5, 5)).Perm(tables)
	sns, held := make([]*Snapshot, zones), make([]*Snapshot, tables)
	tick := func() {
		now += time.Duration(48+(seq*3)%5) * time.Millisecond // as Pump's jitter
		seq++
		// Every zone the same states (each in its own snapshot).
		for i := range states {
			states[i].Pos[0] += vel[i][0] / 20
			states[i].Pos[2] += vel[i][1] / 20
			states[i].Yaw = float64(i) + now.Seconds()
			if crowd {
				crowdStep(int(seq), i, &states[i])
			}
		}
		for z, zw := range sws {
			sns[z] = zw.Next(ents)
			for i := range states {
				sns[z].Set(i, uint64(i+1), classes[i], &states[i])
			}
			zw.Seal(sns[z])
		}
		for k, tab := range tabs {
			sn := sns[k%zones]
			if err := tab.SetSnapshotView(now, sn, refs[k]); err != nil {
				b.Fatal(err)
			}
			// The table's owner holds the snapshot it reads, as
			// ghostmgr does: the writers reuse their snapshots, as a
			// node's zones do, not fresh memory every tick.
			sn.Retain()
			if held[k] != nil {
				held[k].Release()
			}
			held[k] = sn
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
