package sim

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/world"
)

func oneZone(t *testing.T, tweak func(*Config)) *Zone {
	t.Helper()
	cfg := Config{Zone: "x0z0"}
	if tweak != nil {
		tweak(&cfg)
	}
	z, err := New(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	return z
}

func fwd(seq uint64, yaw uint16) move.Move {
	return move.Move{Seq: seq, Dt: 48, Forward: 127, Yaw: yaw}
}

func TestConfigValidate(t *testing.T) {
	small, _ := world.Grid("small", 2, 1, 100, [2]float64{0, 0})
	cases := []struct {
		name string
		cfg  Config
	}{
		{"unknown zone", Config{Zone: "nope"}},
		{"tick rate", Config{Zone: "x0z0", TickRate: -1}},
		{"npc speed above max", Config{Zone: "x0z0", NPCSpeed: [2]float32{1, 50}}},
		{"credit below a tick", Config{Zone: "x0z0", MaxCredit: time.Millisecond}},
		{"zones narrower than the border range", Config{Zone: "x0z0", World: small}},
		{"bad interest", Config{Zone: "x0z0", Interest: interestBad()}},
		{"negative FarEvery", Config{Zone: "x0z0", FarEvery: -1}},
		{"FarEvery above MaxFarEvery", Config{Zone: "x0z0", FarEvery: MaxFarEvery + 1}},
		{"negative FarFraction", Config{Zone: "x0z0", Overload: OverloadConfig{FarFraction: -0.5}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.cfg, 0); !errors.Is(err, ErrConfig) {
				t.Fatalf("New = %v, want ErrConfig", err)
			}
		})
	}
}

func TestJoinMovesAndControl(t *testing.T) {
	z := oneZone(t, nil)
	if err := z.Join(0, 1, "c1", "alice", [3]float32{500, 0, 500}, 0); err == nil || !errors.Is(err, ErrOutside) {
		t.Fatalf("join in another zone: %v", err)
	}
	if err := z.Join(0, 1, "c1", "alice", [3]float32{-500, 0, -500}, 0); err != nil {
		t.Fatal(err)
	}
	if err := z.Join(0, 1, "c1", "alice", [3]float32{-500, 0, -500}, 0); !errors.Is(err, ErrExists) {
		t.Fatalf("second join: %v", err)
	}
	// Three moves, then the same three again (the redundant move stream).
	ms := []move.Move{fwd(1, 0), fwd(2, 0), fwd(3, 0)}
	if act := z.Input(0, 1, ms); act != handoff.InputLocal {
		t.Fatalf("input: %v", act)
	}
	z.Input(0, 1, ms)
	out := z.Step(50 * time.Millisecond)
	if len(out.Controls()) != 1 {
		t.Fatalf("controls %+v", out.Controls())
	}
	c := out.Controls()[0]
	if c.LastApplied != 3 || c.Conn != "c1" || !c.Correct {
		t.Fatalf("control %+v (the first one carries the spawn correction)", c)
	}
	// The server's state is exactly what the client predicts with Walk.
	want := move.ControlState{Pos: [3]float32{-500, 0, -500}}
	for _, m := range ms {
		want = move.Walk(want, m, m.Seconds())
	}
	if c.State != want {
		t.Fatalf("state %+v, want %+v", c.State, want)
	}
	if z.Stats().MovesApplied != 3 {
		t.Fatalf("applied %d moves, want 3 (duplicates dropped)", z.Stats().MovesApplied)
	}
	out = z.Step(100 * time.Millisecond)
	if out.Controls()[0].Correct {
		t.Fatal("correction repeated without cause")
	}
	if err := z.Leave(1); err != nil {
		t.Fatal(err)
	}
	if err := z.Leave(1); !errors.Is(err, ErrNotHere) {
		t.Fatalf("second leave: %v", err)
	}
}

// A client whose clock runs fast cannot move faster than real time: moves
// beyond the time credit wait for later ticks.
func TestSpeedLimitByTimeCredit(t *testing.T) {
	z := oneZone(t, nil)
	z.Join(0, 1, "c1", "speedy", [3]float32{-500, 0, -500}, 0)
	var ms []move.Move
	for i := range uint64(200) {
		ms = append(ms, fwd(i+1, 0))
	}
	z.Input(0, 1, ms)
	const ticks = 20
	var last Control
	for i := 1; i <= ticks; i++ {
		last = z.Step(time.Duration(i) * 50 * time.Millisecond).Controls()[0]
	}
	elapsed := ticks * 50 * time.Millisecond
	applied := time.Duration(last.LastApplied) * 50 * time.Millisecond
	if applied > elapsed+z.Config().MaxCredit {
		t.Fatalf("applied %v of input in %v of real time (credit %v)", applied, elapsed, z.Config().MaxCredit)
	}
	if applied < elapsed {
		t.Fatalf("honest pace not kept: %v in %v", applied, elapsed)
	}
	if z.Stats().MovesThrottled == 0 {
		t.Fatal("throttling not counted")
	}
	start := [3]float32{-500, 0, -500}
	if d := dist(last.State.Pos, start); d > float64(move.WalkSpeed)*(elapsed+z.Config().MaxCredit).Seconds()+0.01 {
		t.Fatalf("moved %g m in %v", d, elapsed)
	}
}

// A player whose input stalls (an outage: nothing arrives for 1.5 s, then
// all of it at once) catches up with its input instead of staying behind
// it for good, never faster than twice real time, and never gains input
// time beyond real time plus the credit.
func TestLateInputCatchesUp(t *testing.T) {
	z := oneZone(t, nil)
	z.Join(0, 1, "c1", "late", [3]float32{-500, 0, -500}, 0)
	const tick = 50 * time.Millisecond
	seq := uint64(0)
	send := func(n int) {
		var ms []move.Move
		for range n {
			seq++
			ms = append(ms, fwd(seq, 0))
		}
		z.Input(0, 1, ms)
	}
	var last Control
	step := 0
	stepTo := func(until int, input bool) {
		for ; step < until; step++ {
			if input {
				send(1)
			}
			last = z.Step(time.Duration(step+1) * tick).Controls()[0]
		}
	}
	stepTo(20, true)  // 1 s of steady input
	stepTo(50, false) // 1.5 s of nothing
	send(30)          // the stalled input arrives at once
	stepTo(51, true)  // and input goes on
	behind := seq - last.LastApplied
	if behind < 20 {
		t.Fatalf("%d moves behind right after the stall: the backlog was applied faster than twice real time", behind)
	}
	stepTo(90, true) // 1.95 s later
	if last.LastApplied != seq {
		t.Fatalf("still %d moves behind 1.95 s after a 1.5 s stall: late input is not caught up", seq-last.LastApplied)
	}
	if z.Stats().MovesCaughtUp == 0 {
		t.Fatal("catching up not counted")
	}
	elapsed := time.Duration(step) * tick
	if applied := time.Duration(last.LastApplied) * tick; applied > elapsed+z.Config().MaxCredit {
		t.Fatalf("applied %v of input in %v of real time (credit %v)", applied, elapsed, z.Config().MaxCredit)
	}
}

// A zone whose own tick stalls (a host stall: 1 s without a tick) while a
// player's input keeps arriving owes the player that time: the backlog is
// caught up, not carried for the rest of the session.
func TestStalledZoneCatchesUp(t *testing.T) {
	z := oneZone(t, nil)
	z.Join(0, 1, "c1", "stalled", [3]float32{-500, 0, -500}, 0)
	const tick = 50 * time.Millisecond
	seq := uint64(0)
	now := time.Duration(0)
	var last Control
	step := func() {
		seq++
		z.Input(now, 1, []move.Move{fwd(seq, 0)})
		now += tick
		last = z.Step(now).Controls()[0]
	}
	for range 20 {
		step()
	}
	// One second without a tick; the 50 ms moves of that second arrive.
	for range 20 {
		seq++
		z.Input(now, 1, []move.Move{fwd(seq, 0)})
		now += tick
	}
	last = z.Step(now).Controls()[0]
	for range 40 {
		step()
	}
	if last.LastApplied+1 < seq {
		t.Fatalf("%d moves still queued 2 s after a 1 s stall of the zone: the stall's time was not owed", seq-last.LastApplied)
	}
}

// A player taken over by a new connection (TakeOver: a client followed a
// Redirect, or reconnected while its entity was still here) keeps its move
// sequence when the new connection continues the numbering — the moves the
// old connection left unacknowledged come again and are applied once — and
// starts afresh when the new connection's first move is 1. Its Control is
// held back until that first input shows which: an ack in the old
// numbering would acknowledge moves a fresh session never sent.
func TestTakeOverKeepsOrRestartsTheMoveSequence(t *testing.T) {
	const tick = 50 * time.Millisecond
	setup := func(t *testing.T) (*Zone, time.Duration) {
		z := oneZone(t, nil)
		if err := z.Join(0, 1, "c1", "p", [3]float32{-500, 0, -500}, 0); err != nil {
			t.Fatal(err)
		}
		now := time.Duration(0)
		for seq := uint64(1); seq <= 10; seq++ {
			z.Input(now, 1, []move.Move{fwd(seq, 0)})
			now += tick
			z.Step(now)
		}
		cp, ok := z.CheckpointOf(1)
		if !ok || cp.LastApplied != 10 {
			t.Fatalf("checkpoint %+v", cp)
		}
		if err := z.Leave(1); err != nil {
			t.Fatal(err)
		}
		if err := z.Restore(now, cp, "c2", cp.LastApplied); err != nil {
			t.Fatal(err)
		}
		z.TakeOver(now, 1)
		now += tick
		if out := z.Step(now); len(out.Controls()) != 0 {
			t.Fatalf("a control (ack %d) before the new connection's first input", out.Controls()[0].LastApplied)
		}
		return z, now
	}
	t.Run("continued numbering", func(t *testing.T) {
		z, now := setup(t)
		applied := z.Stats().MovesApplied
		// The old connection's unacknowledged 8..10 come again with 11, 12.
		z.Input(now, 1, []move.Move{fwd(8, 0), fwd(9, 0), fwd(10, 0), fwd(11, 0), fwd(12, 0)})
		out := z.Step(now + tick)
		if len(out.Controls()) != 1 || out.Controls()[0].LastApplied != 12 {
			t.Fatalf("controls %+v, want one acknowledging 12", out.Controls())
		}
		if n := z.Stats().MovesApplied - applied; n != 2 {
			t.Fatalf("%d moves applied, want 2 (8..10 were applied before the switch)", n)
		}
	})
	t.Run("fresh numbering", func(t *testing.T) {
		z, now := setup(t)
		z.Input(now, 1, []move.Move{fwd(1, 0), fwd(2, 0)})
		out := z.Step(now + tick)
		if len(out.Controls()) != 1 || out.Controls()[0].LastApplied != 2 {
			t.Fatalf("controls %+v, want one acknowledging 2", out.Controls())
		}
	})
	t.Run("no input", func(t *testing.T) {
		z, now := setup(t)
		var out *Output
		for i := 0; i < 25; i++ {
			now += tick
			out = z.Step(now)
		}
		if len(out.Controls()) != 1 || out.Controls()[0].LastApplied != 0 {
			t.Fatalf("controls %+v after a second without input, want one acknowledging nothing (a fresh session)", out.Controls())
		}
	})
}

func TestTeleportDetected(t *testing.T) {
	cheat := func(s move.ControlState, m move.Move, dt float32) move.ControlState {
		s = move.Walk(s, m, dt)
		s.Pos[0] += 50 // no legal move does this
		return s
	}
	z := oneZone(t, func(c *Config) { c.Step = cheat })
	z.Join(0, 1, "c1", "x", [3]float32{-500, 0, -500}, 0)
	z.Step(50 * time.Millisecond)
	z.Input(0, 1, []move.Move{fwd(1, 0)})
	c := z.Step(100 * time.Millisecond).Controls()[0]
	if z.Stats().TeleportsDetected != 1 || !c.Correct {
		t.Fatalf("teleport not flagged: %+v %+v", z.Stats(), c)
	}
}

func TestWorldEdgeIsAWall(t *testing.T) {
	z := oneZone(t, nil)
	z.Join(0, 1, "c1", "x", [3]float32{-999, 0, -500}, 0)
	z.Step(50 * time.Millisecond)
	west := uint16(3 * 16384) // facing −X
	var ms []move.Move
	for i := range uint64(5) {
		ms = append(ms, fwd(i+1, west))
	}
	z.Input(0, 1, ms)
	c := z.Step(100 * time.Millisecond).Controls()[0]
	if c.State.Pos[0] != -1000 || !c.Correct || z.Stats().EdgeClamps == 0 {
		t.Fatalf("edge: %+v stats %+v", c, z.Stats())
	}
}

func TestNPCsDeterministic(t *testing.T) {
	run := func(seed uint64) uint32 {
		z := oneZone(t, func(c *Config) { c.NPCs = 50; c.Seed = seed })
		for i := 1; i <= 100; i++ {
			z.Step(time.Duration(i) * 50 * time.Millisecond)
		}
		return z.Checksum()
	}
	if a, b := run(1), run(1); a != b {
		t.Fatalf("same seed, different worlds: %x %x", a, b)
	}
	if a, b := run(1), run(2); a == b {
		t.Fatal("different seeds, same world")
	}
}

func TestNPCsStayInTheWorld(t *testing.T) {
	z := oneZone(t, func(c *Config) { c.NPCs = 100 })
	b := z.w.Bounds()
	for i := 1; i <= 600; i++ {
		z.Step(time.Duration(i) * 50 * time.Millisecond)
	}
	z.Entities(func(e EntityInfo) {
		if x, zz := float64(e.State.Pos[0]), float64(e.State.Pos[2]); x < b.Min[0] || x > b.Max[0] || zz < b.Min[1] || zz > b.Max[1] {
			t.Fatalf("NPC %d left the world: %v", e.ID, e.State.Pos)
		}
	})
}

// Players walk at random around the centre of a 2×2 world, crossing
// borders again and again, among NPCs that wander across them too. After
// every tick: exactly one owner per entity, NPC count conserved, no player
// sees itself, one view per player; at the end every move sent was applied
// exactly once.
func TestTwoByTwoCrossings(t *testing.T) {
	h := newHarness(t, world.Default(), 100, func(c *Config) { c.MinDwell = 500 * time.Millisecond })
	for i := range 40 {
		x := float32(h.rng.Float64()*60 - 30)
		zz := float32(h.rng.Float64()*60 - 30)
		h.join(uint64(i+1), x, zz, randomWalk(h.rng))
	}
	h.tick(600)
	// Drain: stop walking, let queued moves apply.
	for _, p := range h.players {
		p.walk = func(p *player, tick int) (int8, uint16) { return 0, p.yaw }
	}
	h.tick(5)
	st := h.stats()
	var sent uint64
	for _, p := range h.players {
		sent += p.sent
		if p.acked != p.sent {
			t.Fatalf("player %d: %d moves sent, %d applied", p.id, p.sent, p.acked)
		}
	}
	if st.MovesApplied != sent {
		t.Fatalf("zones applied %d moves, players sent %d", st.MovesApplied, sent)
	}
	if st.MovesDropped != 0 || st.MovesLost != 0 {
		t.Fatalf("moves dropped %d, lost %d", st.MovesDropped, st.MovesLost)
	}
	if st.HandoffsIn < 40 || st.HandoffsIn != st.HandoffsOut {
		t.Fatalf("handoffs in %d out %d: the test did not exercise crossings", st.HandoffsIn, st.HandoffsOut)
	}
	for _, z := range h.zones {
		checkPlayerStateOnlyOwned(t, z)
	}
	routes := 0
	for _, p := range h.players {
		routes += p.routes
		if own := h.owner(p.id); own == nil || own.ID() != p.route.Zone {
			t.Fatalf("player %d routes to %s but is owned by %v", p.id, p.route.Zone, own)
		}
	}
	if routes == 0 {
		t.Fatal("no route switch reached a connection")
	}
}

// A player walking back and forth across one border: the dwell rule bounds
// its handoffs, and nothing is lost.
func TestBorderOscillation(t *testing.T) {
	const dwell = 5 * time.Second
	h := newHarness(t, world.Default(), 0, func(c *Config) { c.MinDwell = dwell })
	const players = 10
	for i := range players {
		// Along x = 0 (the x0/x1 border), 10 m apart in z.
		h.join(uint64(i+1), -10.5, float32(-400+10*i), func(p *player, tick int) (int8, uint16) {
			// 3 s east, 3 s west: from x = -10.5 to +10.5 and back, past
			// the 8 m handoff margin on both sides.
			if (tick/60)%2 == 0 {
				return 127, 16384 // +X
			}
			return 127, 3 * 16384 // −X
		})
	}
	const seconds = 30
	h.tick(seconds * 20)
	st := h.stats()
	bound := uint64(players * (seconds*time.Second/dwell + 1))
	if st.HandoffsIn > bound {
		t.Fatalf("%d handoffs for %d players in %ds, dwell bound %d", st.HandoffsIn, players, seconds, bound)
	}
	if st.HandoffsIn < players {
		t.Fatalf("only %d handoffs: the players did not cross", st.HandoffsIn)
	}
	for _, p := range h.players {
		if p.sent-p.acked > 2 {
			t.Fatalf("player %d: %d sent, %d applied", p.id, p.sent, p.acked)
		}
	}
	// Without the dwell rule the same walk hands off far more often.
	h2 := newHarness(t, world.Default(), 0, func(c *Config) { c.MinDwell = time.Nanosecond })
	for i := range players {
		h2.join(uint64(i+1), -10.5, float32(-400+10*i), h.players[uint64(i+1)].walk)
	}
	h2.tick(seconds * 20)
	if h2.stats().HandoffsIn <= st.HandoffsIn {
		t.Fatalf("dwell made no difference: %d vs %d", h2.stats().HandoffsIn, st.HandoffsIn)
	}
}

// A player next to a border sees entities on the other side (replicas), and
// keeps seeing everything near it while it crosses: no entity within the
// enter radius ever drops out of its view (a drop would pop the ghost).
func TestSeeAcrossBorderAndNoPop(t *testing.T) {
	h := newHarness(t, world.Default(), 0, nil)
	// Statues on both sides of x = 0, standing still.
	still := func(p *player, tick int) (int8, uint16) { return 0, 0 }
	for i := range 10 {
		h.join(uint64(100+i), float32(-40+8*i), 20, still)
	}
	// A walker going east across the border, twice (east, then back west).
	walker := h.join(1, -60, 0, func(p *player, tick int) (int8, uint16) {
		if tick < 240 {
			return 127, 16384 // 12 s east: to x ≈ +24
		}
		return 127, 3 * 16384 // then back west
	})
	h.tick(2)                              // replicas reach the neighbour after the first tick
	if !slices.Contains(h.views[1], 109) { // statue at x = +32, walker at x ≈ -60: 92 m away, in range
		t.Fatalf("walker at x=-60 does not see the statue across the border at x=+32: %v", h.views[1])
	}
	prev := map[uint64][]uint64{}
	for id, v := range h.views {
		prev[id] = v
	}
	crossings := 0
	zoneOf := walker.route.Zone
	for range 480 {
		h.tick(1)
		// Every player's view, the walker's (crossing) and the statues'
		// (watching it cross): whatever was in view and is still well
		// inside the enter radius must still be there.
		for viewer, cur := range h.views {
			own := h.owner(viewer)
			me, _ := own.Entity(viewer)
			for _, id := range prev[viewer] {
				other := h.owner(id)
				st, _ := other.Entity(id)
				if d := dist(st.State.Pos, me.State.Pos); d < 95 && !slices.Contains(cur, id) {
					t.Fatalf("at %v entity %d (%.1f m away) dropped out of %d's view", h.now, id, d, viewer)
				}
			}
			prev[viewer] = cur
		}
		if walker.route.Zone != zoneOf {
			crossings++
			zoneOf = walker.route.Zone
		}
	}
	if crossings < 2 {
		t.Fatalf("walker crossed %d times, want 2", crossings)
	}
}

func TestOverloadDegradesInOrder(t *testing.T) {
	z := oneZone(t, func(c *Config) { c.NPCs = 200 })
	z.Join(0, 1, "c1", "p", [3]float32{-500, 0, -500}, 0)
	now := time.Duration(0)
	step := func(cost time.Duration) *Output {
		now += 50 * time.Millisecond
		out := z.Step(now)
		z.ReportTickCost(cost)
		return out
	}
	for range 3 {
		step(49 * time.Millisecond) // overruns (> 0.8 × 50 ms)
	}
	step(0)
	if z.Level() != 1 || z.Stats().LevelUps != 1 || z.Stats().Overruns != 3 {
		t.Fatalf("after 3 overruns: level %d stats %+v", z.Level(), z.Stats())
	}
	for range 6 {
		step(49 * time.Millisecond)
	}
	step(0)
	if z.Level() != 3 {
		t.Fatalf("level %d after 9 overruns", z.Level())
	}
	st := z.Stats()
	if st.InterestSkipped == 0 || st.NPCStepsSkipped == 0 {
		t.Fatalf("level 3 degrades interest and NPC rates: %+v", st)
	}
	for range 200 {
		step(time.Millisecond)
	}
	if z.Level() != 0 || z.Stats().LevelDowns != 3 {
		t.Fatalf("calm did not restore: level %d %+v", z.Level(), z.Stats())
	}
	// Level 1 touches only far view entries.
	z.SetLevel(1)
	before := z.Stats()
	out := step(0)
	for _, v := range out.Views {
		z.AppendView(nil, v)
	}
	st = z.Stats()
	if st.InterestSkipped != before.InterestSkipped || st.NPCStepsSkipped != before.NPCStepsSkipped {
		t.Fatal("level 1 must only lower far-entity update rates")
	}
}

func TestHeldStateForFarEntities(t *testing.T) {
	z := snapZone(t, func(c *Config) { c.FarEvery = 1 }) // far members every tick at level 0, as before FarEvery
	// Level 2: far members refreshed every 4th tick.
	z.SetLevel(2)
	nearStates, farStates := walkViews(t, z, 8)
	if n := distinct(nearStates); n != len(nearStates) {
		t.Fatalf("near entity must update every tick: %v", nearStates)
	}
	if n := distinct(farStates); n > 3 {
		t.Fatalf("far entity updated %d times in 8 ticks at level 2: %v", n, farStates)
	}
	if z.Stats().HeldEntries == 0 {
		t.Fatal("held entries not counted")
	}
}

func distinct(v []float64) int {
	s := slices.Clone(v)
	slices.Sort(s)
	return len(slices.Compact(s))
}

func TestReplicaEpochFenceAndSweep(t *testing.T) {
	z := oneZone(t, nil)
	mk := func(epoch handoff.Epoch, x float32, ids ...uint64) *ReplicaBatch {
		b := &ReplicaBatch{From: "x1z0", To: "x0z0"}
		for _, id := range ids {
			b.Entities = append(b.Entities, Replica{ID: id, Kind: KindNPC, Epoch: epoch, State: move.ControlState{Pos: [3]float32{x, 0, -500}}})
		}
		return b
	}
	z.Replicas(0, mk(2, 10, 7, 8))
	if e, ok := z.Entity(7); !ok || !e.Replica || e.Owner != "x1z0" {
		t.Fatalf("replica not taken: %+v", e)
	}
	old := mk(1, 99, 7) // an older owner's late batch
	old.From = "x0z1"
	z.Replicas(0, old)
	if e, _ := z.Entity(7); e.State.Pos[0] != 10 {
		t.Fatal("an older epoch overwrote a newer one")
	}
	z.Replicas(0, mk(2, 11, 7)) // 8 no longer near the border
	if _, ok := z.Entity(8); ok {
		t.Fatal("replica missing from the newest batch was kept")
	}
	// Ownership wins over a copy.
	z.Join(0, 5, "c5", "p", [3]float32{-1, 0, -500}, 0)
	z.Replicas(0, mk(9, 500, 5))
	if e, _ := z.Entity(5); !e.Owned || e.State.Pos[0] != -1 {
		t.Fatal("a replica overwrote an owned entity")
	}
	// Expiry when the neighbour goes quiet: after ReplicaTTL of the zone's
	// ticks. (This once took a single Step at ReplicaTTL + 1 s, after the
	// batch above had already swept 7 out. A zone's first tick after a
	// gap of more than a few periods is its own stall, which no longer
	// counts: TestStalledZoneKeepsNeighboursReplicas.)
	z.Replicas(0, mk(2, 11, 7))
	if _, ok := z.Entity(7); !ok {
		t.Fatal("replica not taken back")
	}
	ttl, period := z.Config().ReplicaTTL, z.Period()
	now := time.Duration(0)
	for now < ttl {
		now += period
		z.Step(now)
	}
	if _, ok := z.Entity(7); !ok {
		t.Fatalf("replica expired after %v of silence, before ReplicaTTL %v", now, ttl)
	}
	z.Step(now + period)
	if _, ok := z.Entity(7); ok || z.Stats().ReplicasExpired != 1 {
		t.Fatalf("replica outlived ReplicaTTL (%d expired)", z.Stats().ReplicasExpired)
	}
	var bad ReplicaBatch = *mk(2, 0, 1)
	bad.To = "elsewhere"
	z.Replicas(0, &bad)
	if z.Stats().ReplicasMisrouted != 1 {
		t.Fatal("misrouted batch accepted")
	}
}

func TestTeleportToAnotherZoneHandsOff(t *testing.T) {
	h := newHarness(t, world.Default(), 0, nil)
	p := h.join(1, -500, -500, func(p *player, tick int) (int8, uint16) { return 0, 0 })
	h.tick(1)
	if err := h.zones["x0z0"].Teleport(h.now, 1, [3]float32{600, 0, 600}); err != nil {
		t.Fatal(err)
	}
	h.queue = append(h.queue, h.zones["x0z0"].Pending()...)
	h.deliver()
	h.tick(1)
	if own := h.owner(1); own == nil || own.ID() != "x1z1" || p.route.Zone != "x1z1" {
		t.Fatalf("teleported player owned by %v, routed to %s", own, p.route.Zone)
	}
	if e, _ := h.zones["x1z1"].Entity(1); math.Abs(float64(e.State.Pos[0])-600) > 1 {
		t.Fatalf("position %v", e.State.Pos)
	}
}

func TestViewEntriesCarryClassAndPriority(t *testing.T) {
	z := oneZone(t, func(c *Config) { c.NPCs = 0 })
	z.Join(0, 1, "c1", "a", [3]float32{-500, 0, -500}, 0)
	z.Join(0, 2, "c2", "b", [3]float32{-480, 0, -500}, 0)
	out := z.Step(50 * time.Millisecond)
	if len(out.Views) != 2 {
		t.Fatalf("%d views for 2 players", len(out.Views))
	}
	for _, v := range out.Views {
		entries := z.AppendView(nil, v)
		if len(entries) != 1 || entries[0].Class.ID != ghost.PlayerClassID || !(entries[0].Priority > 0) || entries[0].State.Name.String() == "" {
			t.Fatalf("view of %d: %+v", v.Entity, entries)
		}
	}
}

// Hysteresis survives a handoff: an entity between the enter and leave
// radii that was in the player's view stays in it at the new owner (the
// interest set travels in the snapshot); without that it would pop out.
func TestInterestSurvivesHandoff(t *testing.T) {
	h := newHarness(t, world.Default(), 0, nil)
	still := func(p *player, tick int) (int8, uint16) { return 0, 0 }
	h.join(50, -98, 5, still) // 78 m from the walker's start
	walker := h.join(1, -20, 5, func(p *player, tick int) (int8, uint16) { return 127, 16384 })
	h.tick(2)
	if !slices.Contains(h.views[1], 50) {
		t.Fatalf("statue not in view at the start: %v", h.views[1])
	}
	start := walker.route.Zone
	for range 200 {
		h.tick(1)
		if walker.route.Zone != start {
			break
		}
	}
	if walker.route.Zone == start {
		t.Fatal("walker never crossed")
	}
	h.tick(1) // the first view the new owner computes
	own := h.owner(1)
	if own.ID() == start {
		t.Fatal("still owned by the old zone")
	}
	me, _ := own.Entity(1)
	st, _ := own.Entity(50)
	d := dist(me.State.Pos, st.State.Pos)
	if d <= 100 || d > 110 {
		t.Fatalf("test geometry: statue %.1f m away at the crossing, want it in the hysteresis band", d)
	}
	if !slices.Contains(h.views[1], 50) {
		t.Fatalf("statue %.1f m away (in the band) dropped out of view at the handoff", d)
	}
}

// Time credit follows the scheduled clock: a zone that skipped ticks (it
// fell behind) still lets players apply the input time that passed.
func TestCreditFollowsScheduledTime(t *testing.T) {
	z := oneZone(t, func(c *Config) { c.MaxCredit = time.Second })
	z.Join(0, 1, "c1", "p", [3]float32{-500, 0, -500}, 0)
	z.Step(50 * time.Millisecond)
	var ms []move.Move
	for i := range uint64(10) {
		ms = append(ms, fwd(i+1, 0)) // 10 × 50 ms
	}
	z.Input(0, 1, ms)
	// Credit after the first step: 250 ms (initial) … spent nothing yet, so
	// the next step 400 ms later may apply everything up to the 1 s cap.
	c := z.Step(450 * time.Millisecond).Controls()[0]
	if c.LastApplied != 10 {
		t.Fatalf("after a 400 ms gap only %d of 10 moves applied", c.LastApplied)
	}
	if z.Stats().MovesDropped != 0 || z.Stats().MovesLost != 0 {
		t.Fatalf("%+v", z.Stats())
	}
}

// A zone watching an entity handed between two of its neighbours keeps it
// in view throughout: the old owner's first batch without it reaches the
// watcher before the new owner's first batch with it (here the new owner's
// batches are a tick late), and the gap must not drop the replica, or every
// viewer's ghost of it is killed and re-created with a new id.
func TestBystanderKeepsEntityHandedBetweenNeighbours(t *testing.T) {
	h := newHarness(t, world.Default(), 0, nil)
	h.slow = map[string]bool{"x1z1": true}
	// The observer stands in x0z1; the walker goes north from x1z0 into x1z1
	// (the diagonal neighbour of x0z1) and stops 30 m past the border.
	obs := h.join(1, -20, 20, func(p *player, tick int) (int8, uint16) { return 0, 0 })
	walker := h.join(2, 20, -40, func(p *player, tick int) (int8, uint16) {
		if p.lastPos[2] > 30 {
			return 0, 0
		}
		return 127, 0 // yaw 0 faces +Z
	})
	h.tick(3) // replicas of the walker reach x0z1 (x1z1's a tick late)
	if !slices.Contains(h.views[obs.id], walker.id) {
		t.Fatalf("observer does not see the walker across the corner: %v", h.views[obs.id])
	}
	for range 300 {
		h.tick(1)
		if !slices.Contains(h.views[obs.id], walker.id) {
			me, _ := h.owner(obs.id).Entity(obs.id)
			w, _ := h.owner(walker.id).Entity(walker.id)
			t.Fatalf("at %v the walker (%.1f m away, owned by %s) dropped out of the observer's view",
				h.now, dist(me.State.Pos, w.State.Pos), h.owner(walker.id).ID())
		}
	}
	if got := h.owner(walker.id).ID(); got != "x1z1" || h.zones["x1z0"].Stats().HandoffsOut != 1 {
		t.Fatalf("walker owned by %s after %d handoffs out of x1z0, want one handoff to x1z1", got, h.zones["x1z0"].Stats().HandoffsOut)
	}
	if st := h.zones["x0z1"].Stats(); st.HandoffsIn+st.HandoffsOut != 0 {
		t.Fatalf("observer's zone took part in a handoff: %+v", st)
	}
}

// The batch rule behind the bystander test: a replica its owner stops
// listing while it stood in another neighbour (handed on there, its heir)
// is held until a batch the heir built HandoffGrace ticks after that or
// later either lists it (adopted in place) or leaves it out (gone); the
// old owner's batches no longer decide, nor does a heir's batch built
// before, however late it arrives. One that stood in its owner's own zone
// (walked out of range) goes at once.
func TestReplicaHandedOnAwaitsItsHeir(t *testing.T) {
	z := oneZone(t, nil) // x0z0; x1z0 and x1z1 are neighbours
	p := z.Period()
	batch := func(from string, built time.Duration, epoch handoff.Epoch, rs map[uint64][2]float32) *ReplicaBatch {
		b := &ReplicaBatch{From: from, To: "x0z0", Sent: built}
		for id, pos := range rs {
			b.Entities = append(b.Entities, Replica{ID: id, Kind: KindNPC, Epoch: epoch,
				State: move.ControlState{Pos: [3]float32{pos[0], 0, pos[1]}}})
		}
		return b
	}
	// x1z0 lists 7 and 9 frozen just past its border into x1z1, 8 inside x1z0.
	z.Replicas(0, batch("x1z0", 0, 2, map[uint64][2]float32{7: {10, 9}, 9: {20, 9}, 8: {10, -5}}))
	// Its next batch lists none of them: 7 and 9 went to x1z1, 8 walked away.
	z.Replicas(p, batch("x1z0", p, 2, nil))
	if _, ok := z.Entity(8); ok {
		t.Fatal("a replica that left range inside its owner's zone was held")
	}
	slot := z.byID.at(7)
	gen := z.ents[slot].gen
	for _, id := range []uint64{7, 9} {
		if e, ok := z.Entity(id); !ok || e.Owner != "x1z0" {
			t.Fatalf("replica %d handed on to x1z1 dropped before x1z1 listed it: %+v", id, e)
		}
	}
	if st := z.Stats(); st.ReplicasHeld != 2 {
		t.Fatalf("ReplicasHeld = %d, want 2", st.ReplicasHeld)
	}
	z.Step(2 * p) // held replicas are in the grid like any other
	// x1z1's first batch lists 7 at the next epoch: adopted in place.
	z.Replicas(2*p, batch("x1z1", 2*p, 3, map[uint64][2]float32{7: {10, 10}}))
	if e, ok := z.Entity(7); !ok || e.Owner != "x1z1" || e.Epoch != 3 || e.State.Pos[2] != 10 {
		t.Fatalf("replica 7 not adopted by its new owner's batch: %+v", e)
	}
	if z.byID.at(7) != slot || z.ents[slot].gen != gen {
		t.Fatal("replica 7 moved to a new slot or generation on adoption: interest sets see it leave and re-enter")
	}
	// Nobody adopts 9. x1z0's batches without it, past the grace, and a
	// batch x1z1 built inside the grace that arrives after it, keep it.
	mark := p + handoffGrace*p
	z.Replicas(3*p, batch("x1z0", 3*p, 2, nil))
	z.Replicas(mark+p, batch("x1z0", mark+p, 2, nil))
	z.Replicas(mark+2*p, batch("x1z1", mark-p, 3, map[uint64][2]float32{7: {10, 10}}))
	if _, ok := z.Entity(9); !ok {
		t.Fatal("replica 9 dropped before its heir sent a batch built past the grace")
	}
	// x1z1's batch built past the grace leaves it out: gone, and counted.
	z.Replicas(mark+2*p, batch("x1z1", mark+2*p, 3, map[uint64][2]float32{7: {10, 10}}))
	if _, ok := z.Entity(9); ok {
		t.Fatal("replica 9 outlived a batch its heir built past the grace without it")
	}
	if _, ok := z.Entity(7); !ok {
		t.Fatal("adopted replica 7 swept by its old owner's batch")
	}
	if st := z.Stats(); st.ReplicasHeldDropped != 1 {
		t.Fatalf("ReplicasHeldDropped = %d, want 1", st.ReplicasHeldDropped)
	}
}

// TestReplicaBatchesAreTheirsAlone: each neighbour's batch lists exactly
// the owned entities within BorderRange of it, and the batches of one
// tick share one allocation without sharing room: appending to one batch
// changes no other, and the next Step leaves a handed-off batch as it was.
func TestReplicaBatchesAreTheirsAlone(t *testing.T) {
	z := oneZone(t, func(c *Config) { c.NPCs = 0 })
	for _, p := range []struct {
		id   uint64
		x, z float32
	}{{1, -50, -50}, {2, -50, -500}, {3, -500, -500}} {
		if err := z.Join(0, p.id, "c", "p", [3]float32{p.x, 0, p.z}, 0); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(b ReplicaBatch) []uint64 {
		var out []uint64
		for _, r := range b.Entities {
			out = append(out, r.ID)
		}
		return out
	}
	out := z.Step(50 * time.Millisecond)
	want := map[string][]uint64{"x1z0": {1, 2}, "x0z1": {1}, "x1z1": {1}}
	batches := slices.Clone(out.Replicas)
	if len(batches) != len(want) {
		t.Fatalf("%d batches, want %d", len(batches), len(want))
	}
	got := map[string][]uint64{}
	for _, b := range batches {
		got[b.To] = ids(b)
		if !slices.Equal(got[b.To], want[b.To]) {
			t.Errorf("batch to %s lists %v, want %v", b.To, got[b.To], want[b.To])
		}
	}
	for i := range batches {
		batches[i].Entities = append(batches[i].Entities, Replica{ID: 99})
		for j, b := range batches {
			if n := len(got[b.To]); j != i && !slices.Equal(ids(b)[:n], got[b.To]) {
				t.Fatalf("appending to the batch to %s changed the batch to %s: %v", batches[i].To, b.To, ids(b))
			}
		}
		batches[i].Entities = batches[i].Entities[:len(batches[i].Entities)-1]
	}
	z.Step(100 * time.Millisecond)
	for _, b := range batches {
		if !slices.Equal(ids(b), got[b.To]) {
			t.Errorf("the next Step changed the batch to %s: %v, want %v", b.To, ids(b), got[b.To])
		}
	}
}

// TestOnlyPlayerSlotsCarryPlayerState: NPC slots, and replicas of
// players, hold no player state (queue, interest set, fence): a fifth of
// a zone's slots and more at borders. A replica that becomes a player
// here (acquired) gets one, and a player's slot freed gives it back: an
// NPC that takes the slot has none (kept for the slot's next player, the
// states and their buffers stayed with slots NPCs and replicas took over,
// a quarter more than players in a capacity run). TestTwoByTwoCrossings
// checks the same after hundreds of handoffs.
func TestOnlyPlayerSlotsCarryPlayerState(t *testing.T) {
	z := oneZone(t, func(c *Config) { c.NPCs = 5 })
	if err := z.Join(0, 1, "c1", "p", [3]float32{-500, 0, -500}, 0); err != nil {
		t.Fatal(err)
	}
	z.Input(0, 1, []move.Move{fwd(1, 0)})
	z.Step(50 * time.Millisecond)
	for s := range z.ents {
		e := &z.ents[s]
		if player := e.kind == KindPlayer; player != (e.pl != nil) {
			t.Errorf("slot %d (kind %d) has player state %v", s, e.kind, e.pl != nil)
		}
	}
	ps := z.byID.at(1)
	if err := z.Leave(1); err != nil {
		t.Fatal(err)
	}
	if z.ents[ps].pl != nil {
		t.Fatal("a freed player slot kept its player state")
	}
	s := z.slotAlloc(NPCID(0, 99))
	e := &z.ents[s]
	if s != ps || e.pl != nil {
		t.Fatalf("the NPC in slot %d (the player's was %d) has player state %v", s, ps, e.pl != nil)
	}
	if p := e.p(); p.hasConn || z.conn(e) != "" || p.queue.LastApplied() != 0 || p.set.Len() != 0 {
		t.Errorf("reused slot reads as a player: conn %q, applied %d, view %d", z.conn(e), p.queue.LastApplied(), p.set.Len())
	}
}

// checkPlayerStateOnlyOwned fails unless exactly the slots of players
// owned here (frozen included) hold player state.
func checkPlayerStateOnlyOwned(t *testing.T, z *Zone) {
	t.Helper()
	for s := range z.ents {
		e := &z.ents[s]
		owned := (e.role == roleOwned || e.role == roleFrozen) && e.kind == KindPlayer
		if owned != (e.pl != nil) {
			t.Fatalf("zone %s slot %d (kind %d, role %d): player state %v", z.ID(), s, e.kind, e.role, e.pl != nil)
		}
	}
}

// TestZoneGridCoversItsZone: a zone's grid covers its rectangle and the
// margin its replicas and views reach into, not the whole world (every
// Build clears and sums every cell). In a 10 × 10 world of 1 km zones a
// whole-world grid would be 364 cells a side.
func TestZoneGridCoversItsZone(t *testing.T) {
	w, err := world.Grid("big", 10, 10, 1000, [2]float64{0, 0})
	if err != nil {
		t.Fatal(err)
	}
	z := oneZone(t, func(c *Config) { c.World, c.Zone, c.NPCs = w, "x5z5", 0 })
	nx, nz := z.grid.Cells()
	margin := z.cfg.BorderRange + float64(z.cfg.Interest.LeaveRadius)
	want := int(math.Ceil((1000 + 2*margin) / z.cfg.CellSize))
	if nx != want || nz != want {
		t.Fatalf("grid %d × %d cells, want %d × %d (the zone and %g m around it)", nx, nz, want, want, margin)
	}
	// A corner zone's grid stops at the world's edge.
	c := oneZone(t, func(c *Config) { c.World, c.Zone, c.NPCs = w, "x0z0", 0 })
	if nx, _ := c.grid.Cells(); nx != int(math.Ceil((1000+margin)/c.cfg.CellSize)) {
		t.Fatalf("corner zone's grid %d cells wide, want %d", nx, int(math.Ceil((1000+margin)/c.cfg.CellSize)))
	}
}

// TestGridCellFollowsCrowding: with CellSize left 0 a sparse zone's grid
// takes cells of half the leave radius, a crowded one a quarter, and an
// explicit CellSize stays; the players' views do not change with it.
func TestGridCellFollowsCrowding(t *testing.T) {
	step := func(z *Zone, ticks int) {
		for range ticks {
			z.Step(z.now + z.period)
		}
	}
	r := 110.0
	sparse := oneZone(t, func(c *Config) { c.NPCs = 50 })
	// The same zone with the quarter cell fixed: same NPCs, same walks.
	ref := oneZone(t, func(c *Config) { c.NPCs, c.CellSize = 50, r/4 })
	if got := sparse.grid.CellSize(); got != r/4 {
		t.Fatalf("new zone's cell %g m, want %g", got, r/4)
	}
	for _, z := range []*Zone{sparse, ref} {
		for i := range 5 {
			if err := z.Join(0, uint64(i+1), "c", "p", [3]float32{-500 + float32(i), 0, -500}, 0); err != nil {
				t.Fatal(err)
			}
		}
		step(z, adaptEvery+1)
	}
	if got := sparse.grid.CellSize(); got != r/2 || sparse.Stats().CellChanges != 1 {
		t.Fatalf("sparse zone's cell %g m after %d changes, want %g", got, sparse.Stats().CellChanges, r/2)
	}
	for id := uint64(1); id <= 5; id++ {
		got, want := sparse.InterestIDs(id), ref.InterestIDs(id)
		slices.Sort(got)
		slices.Sort(want)
		if len(got) < 4 || !slices.Equal(got, want) {
			t.Fatalf("player %d sees %v with the larger cells, %v with the smaller", id, got, want)
		}
	}
	// 2,000 NPCs in the zone's square kilometre: a crowd.
	crowd := oneZone(t, func(c *Config) { c.NPCs = 2000 })
	step(crowd, 2*adaptEvery+1)
	if got := crowd.grid.CellSize(); got != r/4 || crowd.Stats().CellChanges != 0 {
		t.Fatalf("crowded zone's cell %g m after %d changes, want %g unchanged", got, crowd.Stats().CellChanges, r/4)
	}
	// Crowded at once: the sparse zone goes back to the quarter.
	for i := range 1500 {
		if err := sparse.Join(sparse.now, uint64(100+i), "c", "p", [3]float32{-990 + float32(i%40)*24, 0, -990 + float32(i/40)*24}, 0); err != nil {
			t.Fatal(err)
		}
	}
	step(sparse, 2*adaptEvery)
	if got := sparse.grid.CellSize(); got != r/4 || sparse.Stats().CellChanges != 2 {
		t.Fatalf("crowded sparse zone's cell %g m after %d changes, want %g after 2", got, sparse.Stats().CellChanges, r/4)
	}
	fixed := oneZone(t, func(c *Config) { c.NPCs, c.CellSize = 50, 30 })
	step(fixed, 2*adaptEvery+1)
	if got := fixed.grid.CellSize(); got != 30 {
		t.Fatalf("explicit cell size became %g m", got)
	}
}

// A gap in a player's moves waits GapTimeout of the zone's ticks, not of
// the wall clock: a zone whose tick came 1.5 s late (a starved host, the
// missing move queued in its mailbox behind the tick) had no chance to take
// the move, and skipped it as lost on that very tick (actors/zone
// TestCrowdCrossesAtOnce under load: 51 of 80,000 moves lost, tick p99
// 1.9 s). A gap nobody fills is still skipped after GapTimeout of ticks.
func TestGapWaitsForTicksNotWallTime(t *testing.T) {
	z := oneZone(t, func(c *Config) { c.MaxCredit = 5 * time.Second })
	z.Join(0, 1, "c1", "p", [3]float32{-500, 0, -500}, 0)
	now := 50 * time.Millisecond
	z.Step(now)
	z.Input(now, 1, []move.Move{fwd(1, 0), fwd(2, 0)})
	z.Input(now, 1, []move.Move{fwd(4, 0), fwd(5, 0)}) // move 3 still on its way
	now += 50 * time.Millisecond
	if c := z.Step(now).Controls()[0]; c.LastApplied != 2 {
		t.Fatalf("applied up to %d, want 2 (waiting for 3)", c.LastApplied)
	}
	now += 1500 * time.Millisecond // one late tick: the mailbox not taken meanwhile
	if c := z.Step(now).Controls()[0]; c.LastApplied != 2 || z.Stats().MovesLost != 0 {
		t.Fatalf("after one tick 1.5 s late: applied up to %d, %d lost; want 2, none (the gap waits)", c.LastApplied, z.Stats().MovesLost)
	}
	z.Input(now, 1, []move.Move{fwd(3, 0)})
	now += 50 * time.Millisecond
	if c := z.Step(now).Controls()[0]; c.LastApplied != 5 || z.Stats().MovesLost != 0 {
		t.Fatalf("after move 3 came: applied up to %d, %d lost; want 5, none", c.LastApplied, z.Stats().MovesLost)
	}
	// The safety net: a gap nobody fills, ticks on time.
	z.Input(now, 1, []move.Move{fwd(7, 0)})
	ticks := 0
	for ; z.Stats().MovesLost == 0 && ticks < 100; ticks++ {
		now += 50 * time.Millisecond
		z.Step(now)
	}
	if want := int(handoff.DefaultGapTimeout / (50 * time.Millisecond)); ticks < want-1 || ticks > want+1 || z.Stats().MovesLost != 1 {
		t.Fatalf("an unfilled gap skipped after %d ticks (%d lost), want %d ticks, 1 lost", ticks, z.Stats().MovesLost, want)
	}
}
