package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// BenchmarkZoneGhosts (informative): crowdZone's 250 players, crowded into
// 380 m × 380 m (≈ 43 in view, as cmd/capacity's 1,000 players see), each with a
// connection's ghost table fed its view by reference every tick and
// writing one 1,100-byte ghost section a tick (fates a packet later, all
// delivered), at each far-member refresh interval (Config.FarEvery).
// records/player-s is the ghost records (creates and updates) a player's
// connection writes a second at 20 Hz, ghosts/player the ghosts in view:
// the ghost work a far update rate saves, which grows with ghosts ×
// viewers. Callgrind A/B: run one sub-benchmark with two -test.benchtime=Nx.
func BenchmarkZoneGhosts(b *testing.B) {
	for _, every := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("FarEvery=%d", every), func(b *testing.B) {
			benchZoneGhosts(b, every)
		})
	}
}

func benchZoneGhosts(b *testing.B, every int) {
	const players = 250
	z, now := crowdZoneWith(b, players, 380, func(c *Config) { c.FarEvery = every })
	reg := z.cfg.Classes[KindPlayer].Registry()
	tabs := make(map[uint64]*ghost.Table, players)
	for p := uint64(1); p <= players; p++ {
		t, err := ghost.NewTable(reg, ghost.DefaultConfig())
		if err != nil {
			b.Fatal(err)
		}
		tabs[p] = t
	}
	var mv []move.Move
	var refs []ghost.ViewRef
	buf := make([]byte, 1100)
	var w bitstream.Writer
	seq := uint64(0)
	tick := 0
	var records, ghosts uint64
	step := func() {
		now += 50 * time.Millisecond
		first := uint64(tick/2)*3 + uint64(tick%2) + 1
		for p := uint64(1); p <= players; p++ {
			mv = mv[:0]
			for k := range uint64(1 + tick%2) {
				mv = append(mv, move.Move{Seq: first + k, Dt: 32, Forward: 127, Yaw: uint16((first + k) * 700)})
			}
			z.Input(now, p, mv)
		}
		out := z.Step(now)
		seq++
		for _, v := range out.Views {
			tab := tabs[v.Entity]
			refs = z.AppendViewRefs(refs[:0], v)
			if err := tab.SetSnapshotView(now, z.Snapshot(), refs); err != nil {
				b.Fatal(err)
			}
			before := tab.Stats()
			w.Reset(buf)
			if _, err := tab.Write(&w, seq, now); err != nil {
				b.Fatal(err)
			}
			if seq > 1 {
				tab.OnFate(notify.Fate{Seq: seq - 1, Delivered: true, SentAt: now - 50*time.Millisecond})
			}
			after := tab.Stats()
			records += after.Creates + after.Updates - before.Creates - before.Updates
			ghosts += uint64(tab.Len())
		}
		tick++
	}
	for range 40 { // every ghost created, interest sets at their steady size
		step()
	}
	records, ghosts = 0, 0
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		step()
	}
	pt := float64(players) * float64(b.N)
	b.ReportMetric(float64(records)/pt*20, "records/player-s")
	b.ReportMetric(float64(ghosts)/pt, "ghosts/player")
}
