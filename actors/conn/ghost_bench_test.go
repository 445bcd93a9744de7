package conn

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/move"
)

// ghostWorld is a zone's world for the shard benchmarks with ghosts: ents
// entities (a player every fourth, the rest NPCs) moving over 200 m ×
// 200 m, a snapshot of them per tick, and each connection's view: per
// consecutive entities from a random start, as references into the tick's
// snapshot.
type ghostWorld struct {
	sw      *ghost.SnapshotWriter
	states  []ghost.State
	classes []*ghost.Class
	vel     [][2]float64
	refs    [][]ghost.ViewRef // by connection
	snap    *ghost.Snapshot   // the newest tick's (the writer holds it until the next)
}

func newGhostWorld(tb testing.TB, reg *ghost.Registry, conns, per, ents int) *ghostWorld {
	tb.Helper()
	pc, ok1 := reg.Lookup(ghost.PlayerClassID)
	nc, ok2 := reg.Lookup(ghost.NPCClassID)
	if !ok1 || !ok2 {
		tb.Fatal("the registry lacks the player or NPC class")
	}
	sw, err := ghost.NewSnapshotWriter(reg)
	if err != nil {
		tb.Fatal(err)
	}
	g := &ghostWorld{sw: sw, states: make([]ghost.State, ents), classes: make([]*ghost.Class, ents),
		vel: make([][2]float64, ents), refs: make([][]ghost.ViewRef, conns)}
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range g.states {
		g.classes[i] = nc
		if i%4 == 0 {
			g.classes[i] = pc
		}
		g.states[i].Pos = [3]float64{rng.Float64()*200 - 100, 0, rng.Float64()*200 - 100}
		g.states[i].Health = 100
		g.states[i].Name = ghost.MustName("wolf")
		g.vel[i] = [2]float64{rng.Float64()*6 - 3, rng.Float64()*6 - 3}
	}
	for k := range g.refs {
		base := rng.IntN(ents - per)
		for j := range per {
			g.refs[k] = append(g.refs[k], ghost.NewViewRef(uint32(base+j), g.classes[base+j], rng.Float32()+0.01))
		}
	}
	return g
}

// tick moves every entity by a step of dt and seals the tick's snapshot.
func (g *ghostWorld) tick(now, dt time.Duration) {
	for i := range g.states {
		g.states[i].Pos[0] += g.vel[i][0] * dt.Seconds()
		g.states[i].Pos[2] += g.vel[i][1] * dt.Seconds()
		g.states[i].Yaw = float64(i) + now.Seconds()
	}
	g.snap = g.sw.Next(len(g.states))
	for i := range g.states {
		g.snap.Set(i, uint64(i+1), g.classes[i], &g.states[i])
	}
	g.sw.Seal(g.snap)
}

// publish puts connection k's view of the newest tick into c's slot, as
// its zone does, and reports whether the slot asks for a nudge.
func (g *ghostWorld) publish(c *Conn, k int, tick uint64) bool {
	v := c.views.NewViewRefs(len(g.refs[k]), 0)
	v.SetSnap(g.snap)
	v.Refs = append(v.Refs[:0], g.refs[k]...)
	v.Player, v.Tick = c.player, tick
	return c.views.Publish(v)
}

// BenchmarkShardGhostRounds (informative; run under callgrind or
// cachegrind to compare builds): 512 connections on one shard, each with
// 40 ghosts in view out of a 1,000-entity zone, as a node's shard meets
// them — one op is one 30 Hz step for all of them: a round with every
// client's datagrams (acks of the ghost packets: the ghost fates; most
// pumps send nothing), then the zone's tick in a round of its own, every
// connection's view and Control (the view's nudge in it) handled before
// any connection is pumped and sends the tick's packet. Each
// connection's ghost table is cold when its turn comes, as on a server
// with a thousand tables. ns/conn is per connection-step.
func BenchmarkShardGhostRounds(b *testing.B) { benchGhostRounds(b, 512, 40, 1000, 256) }

// BenchmarkShardGhostRoundsCold is BenchmarkShardGhostRounds at a
// loaded node's shape: 4,096 connections with 25 ghosts each in a zone
// of 2,000 entities (cmd/capacity's default world at 2,000 players has
// ≈ 25 a player), so that what one connection's step touches has left
// every cache by its next turn, and the step's time is mostly the
// memory's: wall time judges what it measures (the shard's prefetches,
// prefetchPumps), which instruction counts do not see. ns/conn is per
// connection-step.
func BenchmarkShardGhostRoundsCold(b *testing.B) { benchGhostRounds(b, 4096, 25, 2000, 64) }

func benchGhostRounds(b *testing.B, conns, per, ents, steps int) {
	const warm = 8
	x := record(b, steps)
	var (
		s   *shard
		cs  []*Conn
		g   *ghostWorld
		ctl move.ControlState
		i   int
	)
	run := func() {
		now := time.Duration(i+1) * benchStep
		for _, c := range cs {
			for _, p := range x.steps[i] {
				postClient(s, c, p)
			}
		}
		s.round(now)
		now += benchStep / 3
		g.tick(now, benchStep)
		ctl.Pos[0] += 0.2
		for k, c := range cs {
			nudge := g.publish(c, k, uint64(i+1))
			m := c.views.NewControl()
			m.Player, m.Tick, m.View = c.player, uint64(i+1), nudge
			m.LastApplied, m.State = c.srv.LastApplied(), ctl
			s.post(c, m)
		}
		s.round(now)
		i++
	}
	setup := func() {
		s, cs = benchShard(b, x, conns)
		g = newGhostWorld(b, s.pool.cfg.Registry, conns, per, ents)
		for _, c := range cs {
			c.viewsFlow = true
		}
		i = 0
		for range warm { // every ghost created, fates flowing
			run()
		}
	}
	setup()
	b.ReportAllocs()
	b.ResetTimer()
	ops := 0
	for b.Loop() {
		if i == steps {
			b.StopTimer()
			setup()
			b.StartTimer()
		}
		run()
		ops++
	}
	b.StopTimer()
	var fates, sections uint64
	ghosts := 0
	for _, c := range cs {
		st := c.gm.Stats()
		fates += st.Fates
		sections += st.Sections
		ghosts += c.gm.Table().Len()
		if st := c.srv.Stats(); st.Rejected() != 0 {
			b.Fatalf("replay diverged: %d rejected", st.Rejected())
		}
	}
	if fates == 0 || sections == 0 {
		b.Fatalf("%d ghost sections, %d fates: the ghosts did not flow", sections, fates)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(ops*conns), "ns/conn")
	b.ReportMetric(float64(fates)/float64(sections), "fates/section")
	b.ReportMetric(float64(sections)/float64(i*conns), "sections/step")
	b.ReportMetric(float64(ghosts)/float64(conns), "ghosts/conn")
}
