package swarm

import (
	"testing"

	"github.com/ghostwire/ghostwire/replication/ghost"
)

// BenchmarkObserversRound is BenchmarkBotsRound with every bot observing:
// each bot's server end keeps a real ghost table fed, at 20 Hz, a view of
// the bots that follow it (observeGhosts of them, their server-side
// positions, each stamped with its last applied move as a zone stamps
// players, Extra[0..1]), and its packets carry that table's records; the
// fates go back to the table. So a bot decodes a real ghost section a
// datagram and its samples judge real peers against their truth rings, as
// in `make loadtest`. The tables' work is in the count too: the bots' share
// is worker.onDatagramAt and worker.runDue, inclusive (callgrind).
func BenchmarkObserversRound(b *testing.B) {
	r := newBotRig(b, observeBots, 1)
	u0, c0 := r.mirrorRecords()
	b.ReportAllocs()
	for b.Loop() {
		r.round(b)
	}
	u1, c1 := r.mirrorRecords()
	b.ReportMetric(float64(r.in)/float64(r.rounds), "dgm-in/op")
	b.ReportMetric(float64(r.out)/float64(r.rounds), "dgm-out/op")
	b.ReportMetric(float64(u1-u0)/float64(r.in), "updates/dgm")
	b.ReportMetric(float64(c1-c0)/float64(r.in), "creates/dgm")
	c := r.w.shard.C
	if c.ViewBySeq == 0 || u1 == u0 {
		// The point of the rig: every bot decodes ghosts and judges them
		// by their move stamps, as in a loadtest.
		b.Fatalf("%d ghost updates decoded, %d views judged by move stamp (%d peers, %d without truth)",
			u1-u0, c.ViewBySeq, c.ViewPeers, c.ViewNoTruth)
	}
}

const (
	observeBots   = 500
	observeGhosts = 64
)

// ghostRig is a rig conn's ghost table and view.
type ghostRig struct {
	tab  *ghost.Table
	view []ghost.ViewEntry
}

// setView gives conn i's table the view of the observeGhosts bots after it.
func (r *botRig) setView(tb testing.TB, i int, c *rigConn) {
	if c.g == nil {
		tab, err := ghost.NewTable(r.reg, ghost.DefaultConfig())
		if err != nil {
			tb.Fatal(err)
		}
		c.g = &ghostRig{tab: tab, view: make([]ghost.ViewEntry, 0, observeGhosts)}
	}
	pc, _ := r.reg.Lookup(ghost.PlayerClassID)
	v := c.g.view[:0]
	n := len(r.conns)
	for k := 1; k <= observeGhosts && k < n; k++ {
		j := (i + k) % n
		o := r.conns[j]
		if o == nil || o.last == 0 {
			continue
		}
		p := o.state.Pos
		v = append(v, ghost.ViewEntry{Entity: r.w.bots[j].pid, Class: pc, Priority: 1,
			State: ghost.State{Pos: [3]float64{float64(p[0]), float64(p[1]), float64(p[2])}, Yaw: float64(o.state.Yaw),
				Health: 100, Extra: [4]uint32{uint32(o.last), uint32(o.last >> 32)}}})
	}
	c.g.view = v
	if err := c.g.tab.SetView(r.now, v); err != nil {
		tb.Fatal(err)
	}
}

// mirrorRecords sums the bots' mirrors' updates and creates read.
func (r *botRig) mirrorRecords() (updates, creates uint64) {
	for _, b := range r.w.bots {
		if b.client != nil {
			s := b.client.Mirror().Stats()
			updates += s.Updates
			creates += s.Creates
		}
	}
	return updates, creates
}
