package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/world"
)

// harness runs every zone of a world in one goroutine, delivering messages
// in order as the zone actors would, with players that send one move per
// tick to whatever zone their route names.
type harness struct {
	t       *testing.T
	w       *world.World
	now     time.Duration
	period  time.Duration
	zones   map[string]*Zone
	names   []string
	players map[uint64]*player
	byConn  map[string]*player
	queue   []handoff.Msg
	rng     *rand.Rand
	view    []ghost.ViewEntry
	views   map[uint64][]uint64 // last view (entity ids) per player
	viewed  map[uint64]time.Duration
	npcs    int
	// slow names zones whose replica batches reach their neighbours one
	// tick late (after the receivers' next Step), as a busy zone actor's
	// would: batches from different senders then interleave with ticks.
	slow map[string]bool
	late []ReplicaBatch
}

type player struct {
	id      uint64
	conn    string
	route   handoff.Route
	sent    uint64
	yaw     uint16
	acked   uint64 // LastApplied from the newest Control
	walk    func(p *player, tick int) (fwd int8, yaw uint16)
	routes  int // route switches
	lastPos [3]float32
	// advanced: the tick times of the Controls that acknowledged new
	// moves, with the route switches the player had taken by then.
	advanced []advance
}

type advance struct {
	at     time.Duration
	routes int
}

func newHarness(t *testing.T, w *world.World, npcsPerZone int, tweak func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, w: w, zones: map[string]*Zone{}, players: map[uint64]*player{}, byConn: map[string]*player{},
		rng: rand.New(rand.NewPCG(7, 7)), views: map[uint64][]uint64{}, viewed: map[uint64]time.Duration{}}
	for _, zn := range w.Zones() {
		cfg := Config{Zone: zn.ID, World: w, NPCs: npcsPerZone, Seed: 42}
		if tweak != nil {
			tweak(&cfg)
		}
		z, err := New(cfg, 0)
		if err != nil {
			t.Fatal(err)
		}
		h.zones[zn.ID] = z
		h.names = append(h.names, zn.ID)
		h.period = z.Period()
	}
	h.npcs = npcsPerZone * w.Len()
	return h
}

func (h *harness) join(id uint64, x, z float32, walk func(p *player, tick int) (int8, uint16)) *player {
	h.t.Helper()
	zn, ok := h.w.ZoneAt(float64(x), float64(z))
	if !ok {
		h.t.Fatalf("join outside the world at %g,%g", x, z)
	}
	p := &player{id: id, conn: fmt.Sprintf("conn-%d", id), route: handoff.Route{Zone: zn.ID, Epoch: 1}, walk: walk}
	if err := h.zones[zn.ID].Join(h.now, id, p.conn, fmt.Sprintf("p%d", id), [3]float32{x, 0, z}, 0); err != nil {
		h.t.Fatal(err)
	}
	h.players[id] = p
	h.byConn[p.conn] = p
	return p
}

// deliver runs every queued message to completion (messages can produce
// more), in FIFO order.
func (h *harness) deliver() {
	for len(h.queue) > 0 {
		m := h.queue[0]
		h.queue = h.queue[1:]
		if m.Kind == handoff.KindRoute {
			p := h.byConn[m.To]
			if p.route.Apply(m) {
				p.routes++
			}
			continue
		}
		z := h.zones[m.To]
		z.Handoff(h.now, m)
		h.queue = append(h.queue, z.Pending()...)
	}
}

// tick: players send, zones step, messages and replicas flow.
func (h *harness) tick(n int) {
	for i := 0; i < n; i++ {
		h.now += h.period
		for _, id := range h.sortedPlayers() {
			p := h.players[id]
			fwd, yaw := p.walk(p, int(h.now/h.period))
			p.sent++
			mv := move.Move{Seq: p.sent, Dt: 48, Forward: fwd, Yaw: yaw} // 50 ms: one move per tick
			z := h.zones[p.route.Zone]
			z.Input(h.now, p.id, []move.Move{mv})
			h.queue = append(h.queue, z.Pending()...)
		}
		h.deliver()
		var batches []ReplicaBatch
		for _, name := range h.names {
			z := h.zones[name]
			out := z.Step(h.now)
			h.queue = append(h.queue, out.Send...)
			batches = append(batches, out.Replicas...)
			for _, c := range out.Controls() {
				p := h.byConn[c.Conn]
				if c.LastApplied < p.acked {
					h.t.Fatalf("player %d: LastApplied went back from %d to %d", p.id, p.acked, c.LastApplied)
				}
				if c.LastApplied > p.acked {
					p.advanced = append(p.advanced, advance{h.now, p.routes})
				}
				p.acked, p.lastPos = c.LastApplied, c.State.Pos
			}
			for _, v := range out.Views {
				h.view = z.AppendView(h.view[:0], v)
				ids := make([]uint64, 0, len(h.view))
				for _, e := range h.view {
					if e.Entity == v.Entity {
						h.t.Fatalf("player %d sees itself", v.Entity)
					}
					ids = append(ids, e.Entity)
				}
				slices.Sort(ids)
				if _, dup := h.views[v.Entity]; dup && h.viewed[v.Entity] == h.now {
					h.t.Fatalf("player %d got two views in one tick", v.Entity)
				}
				h.viewed[v.Entity] = h.now
				h.views[v.Entity] = ids
			}
		}
		h.deliver()
		late := h.late
		h.late = nil
		for _, b := range append(late, batches...) {
			if h.slow[b.From] && b.Tick == h.zones[b.From].Tick() {
				h.late = append(h.late, b) // this tick's, from a slow zone: next tick
				continue
			}
			h.zones[b.To].Replicas(h.now, &b)
		}
		h.checkOwnership()
	}
}

func (h *harness) sortedPlayers() []uint64 {
	ids := make([]uint64, 0, len(h.players))
	for id := range h.players {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// checkOwnership: after all messages are delivered every entity has exactly
// one owner, and the NPC count is what the zones spawned.
func (h *harness) checkOwnership() {
	h.t.Helper()
	owners := map[uint64][]string{}
	npcs := 0
	for _, name := range h.names {
		if err := h.zones[name].checkRolesAgree(); err != nil {
			h.t.Fatalf("tick %v, zone %s: %v", h.now, name, err)
		}
		h.zones[name].Entities(func(e EntityInfo) {
			if e.Owned {
				owners[e.ID] = append(owners[e.ID], name)
				if e.Kind == KindNPC {
					npcs++
				}
			}
		})
	}
	for id, o := range owners {
		if len(o) != 1 {
			h.t.Fatalf("tick %v: entity %d owned by %v", h.now, id, o)
		}
	}
	for id := range h.players {
		if len(owners[id]) != 1 {
			h.t.Fatalf("tick %v: player %d owned by %v", h.now, id, owners[id])
		}
	}
	if npcs != h.npcs {
		h.t.Fatalf("tick %v: %d NPCs, want %d", h.now, npcs, h.npcs)
	}
}

func (h *harness) stats() Stats {
	var s Stats
	for _, z := range h.zones {
		st := z.Stats()
		s.MovesApplied += st.MovesApplied
		s.HandoffsOut += st.HandoffsOut
		s.HandoffsIn += st.HandoffsIn
		s.HandoffsAborted += st.HandoffsAborted
		s.MovesThrottled += st.MovesThrottled
		s.MovesDropped += st.MovesDropped
		s.MovesLost += st.MovesLost
	}
	return s
}

func (h *harness) owner(id uint64) *Zone {
	for _, z := range h.zones {
		if e, ok := z.Entity(id); ok && e.Owned {
			return z
		}
	}
	return nil
}

// randomWalk changes heading now and then and keeps going.
func randomWalk(rng *rand.Rand) func(p *player, tick int) (int8, uint16) {
	return func(p *player, tick int) (int8, uint16) {
		if tick%80 == 0 {
			p.yaw = uint16(rng.IntN(65536))
		}
		return 127, p.yaw
	}
}

func dist(a, b [3]float32) float64 {
	dx, dz := float64(a[0]-b[0]), float64(a[2]-b[2])
	return math.Sqrt(dx*dx + dz*dz)
}

// checkRolesAgree reports a slot whose role disagrees with the handoff
// machine's phase for its entity: owned slots must be owned there (so
// InputBatch may queue their moves without asking it), frozen ones
// offered; a player state whose connection the machine does not hold
// (or the other way: Zone.conn reads it there); and a slot whose Zone.owned entry is not its own player state
// while owned (InputBatch queues moves there without looking at the slot).
func (z *Zone) checkRolesAgree() error {
	if len(z.owned) != len(z.ents) {
		return fmt.Errorf("%d owned entries for %d slots", len(z.owned), len(z.ents))
	}
	for s := range z.ents {
		e := &z.ents[s]
		if e.role == roleReplica && !slices.Contains(z.replicas, int32(s)) {
			return fmt.Errorf("slot %d (entity %d) is a replica not in the replicas list", s, e.id)
		}
		if p := z.owned[s]; p != nil && (e.role != roleOwned || e.kind != KindPlayer || e.pl != p) {
			return fmt.Errorf("slot %d (entity %d, role %d) has an owned entry that is not its player state", s, e.id, e.role)
		}
		if e.pl != nil && e.pl.hasConn != (z.hand.Conn(e.id) != "") {
			return fmt.Errorf("slot %d (entity %d): has a connection %v here, %q in the handoff machine", s, e.id, e.pl.hasConn, z.hand.Conn(e.id))
		}
		ph, _, _ := z.hand.Status(e.id)
		switch {
		case e.role == roleOwned && ph != handoff.PhaseOwned,
			e.role == roleFrozen && ph != handoff.PhaseOffering:
			return fmt.Errorf("slot %d (entity %d) is %d here but %s in the handoff machine", s, e.id, e.role, ph)
		}
	}
	return nil
}
