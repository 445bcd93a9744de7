package handoff

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/move"
)

// The model: zones with a Machine and a MoveQueue per owned entity, players
// whose connection routes their moves by Route (epoch-fenced), and a
// network that delays, reorders, duplicates and (for control messages)
// drops. Invariants, checked after every step:
//   - never two owners of an entity;
//   - every entity's applied moves are 1, 2, 3, … with no repeat and no gap;
// and after the run settles: exactly one owner each, every sent move applied.

type modelZone struct {
	m      *Machine
	queues map[uint64]*MoveQueue
	out    Output
}

type inflight struct {
	msg   Msg
	input bool   // a connection's input batch (msg.Entity, msg.Moves) to msg.To
	conn  uint64 // for Route: the player it is for
	born  time.Duration
}

type modelPlayer struct {
	id      uint64
	route   Route
	sent    uint64 // newest move sent
	applied []uint64
	hasConn bool
}

type model struct {
	t       *testing.T
	rng     *rand.Rand
	now     time.Duration
	zones   map[string]*modelZone
	names   []string
	players map[uint64]*modelPlayer
	net     []inflight
	loss    float64
	dup     float64
	trace   []string
}

func connAddr(id uint64) string { return fmt.Sprintf("conn-%d", id) }

func newModel(t *testing.T, seed uint64, zones, players int, loss, dup float64) *model {
	md := &model{t: t, rng: rand.New(rand.NewPCG(seed, 99)), zones: map[string]*modelZone{}, players: map[uint64]*modelPlayer{}, loss: loss, dup: dup}
	cfg := Config{RetryInterval: 20 * time.Millisecond, OfferTimeout: 200 * time.Millisecond, CommitGiveUp: 5 * time.Second, MaxAge: 10 * time.Second}
	for i := range zones {
		name := fmt.Sprintf("z%d", i)
		m, err := New(name, cfg)
		if err != nil {
			t.Fatal(err)
		}
		md.zones[name] = &modelZone{m: m, queues: map[uint64]*MoveQueue{}}
		md.names = append(md.names, name)
	}
	for p := range players {
		id := uint64(p + 1)
		home := md.zones[md.names[p%zones]]
		if _, err := home.m.Spawn(id, 0); err != nil {
			t.Fatal(err)
		}
		pl := &modelPlayer{id: id, route: Route{Zone: home.m.Zone(), Epoch: 1}, hasConn: p%4 != 3} // every 4th is an NPC
		if pl.hasConn {
			home.m.SetConn(id, connAddr(id))
		}
		home.queues[id] = &MoveQueue{Shared: &QueueShared{GapTimeout: time.Hour}}
		md.players[id] = pl
	}
	return md
}

func (md *model) logf(format string, a ...any) {
	md.trace = append(md.trace, fmt.Sprintf("%8v ", md.now)+fmt.Sprintf(format, a...))
	if len(md.trace) > 60 {
		md.trace = md.trace[1:]
	}
}

func (md *model) fail(format string, a ...any) {
	md.t.Helper()
	for _, l := range md.trace {
		md.t.Log(l)
	}
	md.t.Fatalf(format, a...)
}

// flush moves a zone's output into the network and its effects into the
// zone's queues.
func (md *model) flush(z *modelZone) {
	o := &z.out
	for _, a := range o.Acquired {
		q := &MoveQueue{Shared: &QueueShared{GapTimeout: time.Hour}}
		q.Reset(a.State.LastApplied)
		q.Push(a.Moves...)
		z.queues[a.State.Entity] = q
		md.logf("%s acquired %d at epoch %d from %s (last %d, %d moves)", z.m.Zone(), a.State.Entity, a.Epoch, a.From, a.State.LastApplied, len(a.Moves))
	}
	for _, r := range o.Released {
		delete(z.queues, r.Entity)
		md.logf("%s released %d to %s", z.m.Zone(), r.Entity, r.To)
	}
	for _, r := range o.Resumed {
		z.queues[r.Entity].Push(r.Moves...)
		md.logf("%s resumed %d (%v)", z.m.Zone(), r.Entity, r.Reason)
	}
	for _, d := range o.Deliver {
		z.queues[d.Entity].Push(d.Moves...)
	}
	for _, m := range o.Send {
		if m.Kind == KindRoute {
			md.net = append(md.net, inflight{msg: m, conn: m.Entity, born: md.now})
		} else {
			md.net = append(md.net, inflight{msg: m, born: md.now})
		}
	}
	o.Reset()
}

// apply pops every ready move of every entity a zone owns and is not
// freezing.
func (md *model) apply(z *modelZone) {
	for id, q := range z.queues {
		ph, _, _ := z.m.Status(id)
		if ph != PhaseOwned {
			continue
		}
		for {
			mv, ok := q.Peek(md.now)
			if !ok {
				break
			}
			q.Pop()
			p := md.players[id]
			want := uint64(len(p.applied) + 1)
			if mv.Seq != want {
				md.fail("entity %d: zone %s applied move %d, want %d (applied so far %v)", id, z.m.Zone(), mv.Seq, want, tail(p.applied))
			}
			p.applied = append(p.applied, mv.Seq)
		}
	}
}

func tail(s []uint64) []uint64 {
	if len(s) > 5 {
		return s[len(s)-5:]
	}
	return s
}

func (md *model) checkOwners() {
	for id := range md.players {
		var owners []string
		for _, n := range md.names {
			if md.zones[n].m.Owns(id) {
				owners = append(owners, n)
			}
		}
		if len(owners) > 1 {
			md.fail("entity %d has %d owners: %v", id, len(owners), owners)
		}
	}
	for _, n := range md.names {
		if err := md.zones[n].m.checkTimed(); err != nil {
			md.fail("zone %s: %v", n, err)
		}
	}
}

func (md *model) deliver(i int) {
	f := md.net[i]
	drop := false
	if md.rng.Float64() < md.dup {
		// Keep a copy in flight: it will be delivered again later.
	} else {
		md.net = slices.Delete(md.net, i, i+1)
	}
	lossy := !f.input && f.msg.Kind != KindForward
	if lossy && md.rng.Float64() < md.loss {
		drop = true
	}
	if drop {
		md.logf("lost %v", f.msg.String())
		return
	}
	switch {
	case f.input:
		z := md.zones[f.msg.To]
		act := z.m.Input(md.now, f.msg.Entity, f.msg.Moves, &z.out)
		if act == InputLocal {
			z.queues[f.msg.Entity].Push(f.msg.Moves...)
		}
		if act == InputDropped {
			md.fail("input %d moves %d..%d for entity %d dropped at %s", len(f.msg.Moves), f.msg.Moves[0].Seq, f.msg.Moves[len(f.msg.Moves)-1].Seq, f.msg.Entity, f.msg.To)
		}
		md.flush(z)
	case f.msg.Kind == KindRoute:
		p := md.players[f.conn]
		if p.route.Apply(f.msg) {
			md.logf("conn %d now routes to %s (epoch %d)", p.id, p.route.Zone, p.route.Epoch)
		}
	default:
		z := md.zones[f.msg.To]
		md.logf("deliver %v", f.msg.String())
		z.m.Step(md.now, f.msg, &z.out)
		md.flush(z)
	}
}

func (md *model) step(sending bool) {
	r := md.rng.IntN(100)
	switch {
	case sending && r < 25:
		// A player's connection sends its next move (sometimes with the
		// previous ones again, as the redundant move stream does).
		p := md.players[uint64(md.rng.IntN(len(md.players))+1)]
		if !p.hasConn {
			return
		}
		p.sent++
		first := p.sent
		if md.rng.IntN(4) == 0 && first > 3 {
			first -= 3
		}
		var ms []move.Move
		for s := first; s <= p.sent; s++ {
			ms = append(ms, move.Move{Seq: s, Dt: 32})
		}
		md.net = append(md.net, inflight{msg: Msg{Entity: p.id, To: p.route.Zone, Moves: ms}, input: true, born: md.now})
	case sending && r < 35:
		// An owner starts a handoff to a random other zone.
		id := uint64(md.rng.IntN(len(md.players)) + 1)
		for _, n := range md.names {
			z := md.zones[n]
			if ph, _, _ := z.m.Status(id); ph != PhaseOwned {
				continue
			}
			to := md.names[md.rng.IntN(len(md.names))]
			if to == n {
				return
			}
			md.apply(z)
			q := z.queues[id]
			snap := &Snapshot{Entity: id, LastApplied: q.LastApplied()}
			if md.players[id].hasConn {
				snap.Conn = connAddr(id)
			}
			offer, err := z.m.Begin(md.now, snap, to, q.Queued())
			if err != nil {
				md.fail("Begin: %v", err)
			}
			md.logf("%s begins handing %d to %s (epoch %d)", n, id, to, offer.Epoch)
			md.net = append(md.net, inflight{msg: offer, born: md.now})
			return
		}
	case r < 80 && len(md.net) > 0:
		// Deliver: usually a random message (reordering), sometimes the
		// oldest, and always one that got old, so none exceeds MaxAge.
		i := md.rng.IntN(len(md.net))
		if md.rng.IntN(3) == 0 {
			i = 0
		}
		for j, f := range md.net {
			if md.now-f.born > 2*time.Second {
				i = j
				break
			}
		}
		md.deliver(i)
	default:
		md.now += time.Duration(md.rng.IntN(15)) * time.Millisecond
		for _, n := range md.names {
			z := md.zones[n]
			if md.rng.IntN(4) == 0 {
				// Held by its lease (actors/zone): give-ups and expiry
				// only, nothing resent.
				z.m.Expire(md.now, &z.out)
			} else {
				z.m.Tick(md.now, &z.out)
			}
			md.flush(z)
			md.apply(z)
		}
	}
	md.checkOwners()
}

func (md *model) settle() {
	md.loss, md.dup = 0, 0
	for round := 0; round < 100000; round++ {
		if len(md.net) > 0 {
			md.deliver(0)
		} else {
			md.now += 20 * time.Millisecond
			for _, n := range md.names {
				z := md.zones[n]
				z.m.Tick(md.now, &z.out)
				md.flush(z)
				md.apply(z)
			}
			if len(md.net) == 0 && md.quiet() {
				return
			}
		}
		md.checkOwners()
	}
	md.fail("did not settle")
}

// quiet: no offer or commit open anywhere.
func (md *model) quiet() bool {
	for _, n := range md.names {
		for id := range md.players {
			if ph, _, _ := md.zones[n].m.Status(id); ph == PhaseOffering || ph == PhaseCommitting {
				return false
			}
		}
	}
	return true
}

func runModel(t *testing.T, seed uint64, loss, dup float64) {
	md := newModel(t, seed, 3, 4, loss, dup)
	for range 3000 {
		md.step(true)
	}
	md.settle()
	for id, p := range md.players {
		owners := 0
		for _, n := range md.names {
			if md.zones[n].m.Owns(id) {
				owners++
			}
		}
		if owners != 1 {
			md.fail("entity %d: %d owners after settling", id, owners)
		}
		if uint64(len(p.applied)) != p.sent {
			md.fail("entity %d: %d of %d moves applied (last applied %v)", id, len(p.applied), p.sent, tail(p.applied))
		}
	}
}

func TestPropertyInOrderNetwork(t *testing.T) {
	for seed := range uint64(30) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runModel(t, seed, 0, 0) })
	}
}

func TestPropertyLossyDuplicatingNetwork(t *testing.T) {
	for seed := range uint64(60) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runModel(t, 1000+seed, 0.1, 0.1) })
	}
}
