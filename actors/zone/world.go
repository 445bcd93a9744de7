package zone

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/zones/sim"
	"github.com/ghostwire/ghostwire/zones/world"
)

// World is the zone actors of a world map that run in one actor system:
// all of them (Start), or those this node owns in a cluster (StartZones).
type World struct {
	sys  *actor.ActorSystem
	w    *world.World
	base sim.Config
	p    Params
	// run: the zones running here. Spawn and Remove (one caller at a
	// time: the node's membership) replace it; readers (metrics, the
	// directory, admin, tests) on other goroutines load it.
	run atomic.Pointer[running]
	all []*actor.PID // every zone of the map, by name (local zone or proxy)
	m   *Metrics

	loadMu sync.Mutex
	load   map[string][2]int // players, NPCs per running zone, about once a second
}

type running struct {
	pids map[string]*actor.PID
	ids  []string // in map order
}

// Start spawns one zone actor per zone of w, each configured from base
// (its Zone and World fields are set here). base.NPCs is the world's total,
// split evenly over the zones (the first zones get the remainder). p's Sim
// field is ignored; its Now, Metrics, Log and Spawn apply to every zone.
func Start(sys *actor.ActorSystem, w *world.World, base sim.Config, p Params) (*World, error) {
	ids := make([]string, 0, w.Len())
	for _, zn := range w.Zones() {
		ids = append(ids, zn.ID)
	}
	return StartZones(sys, w, base, p, ids)
}

// StartZones is Start for the zones named in ids only (the ones this node
// owns); each gets the NPC share its place in the map gives it. Messages
// for the other zones go to whatever actor runs under their names (a
// cluster proxy).
func StartZones(sys *actor.ActorSystem, w *world.World, base sim.Config, p Params, ids []string) (*World, error) {
	if p.Metrics == nil {
		p.Metrics = new(Metrics)
	}
	out := &World{sys: sys, w: w, base: base, p: p, m: p.Metrics, load: map[string][2]int{}}
	out.run.Store(&running{pids: map[string]*actor.PID{}})
	next := p.Load
	out.p.Load = func(zone string, players, npcs int) {
		out.loadMu.Lock()
		out.load[zone] = [2]int{players, npcs}
		out.loadMu.Unlock()
		if next != nil {
			next(zone, players, npcs)
		}
	}
	for _, zn := range w.Zones() {
		out.all = append(out.all, actor.NewPID(sys.Address(), ActorName(zn.ID)))
	}
	for _, zn := range w.Zones() {
		if !slices.Contains(ids, zn.ID) {
			continue
		}
		if err := out.Spawn(zn.ID); err != nil {
			out.Stop()
			return nil, err
		}
	}
	for _, id := range ids {
		if _, ok := w.Zone(id); !ok {
			out.Stop()
			return nil, fmt.Errorf("zone %q is not in world %q", id, w.Name())
		}
	}
	return out, nil
}

// Spawn starts the actor of zone id here (the node claimed it), with the
// zone's share of the world's NPCs spawned afresh.
func (w *World) Spawn(id string) error { return w.SpawnWith(id, nil) }

// SpawnWith is Spawn with the zone's NPCs as its previous owner handed
// them over, when npcs is not nil (Params.NPCs): a zone handover keeps
// them, and their number, instead of spawning its share again.
func (w *World) SpawnWith(id string, npcs []sim.NPCState) error {
	i := w.w.Index(id)
	if i < 0 {
		return fmt.Errorf("zone %q is not in world %q", id, w.w.Name())
	}
	cur := w.run.Load()
	if _, ok := cur.pids[id]; ok {
		return nil
	}
	n := w.w.Len()
	cfg := w.base
	cfg.Zone, cfg.World = id, w.w
	cfg.NPCs = w.base.NPCs / n
	if i < w.base.NPCs%n {
		cfg.NPCs++
	}
	if w.p.NPCGeneration != nil {
		cfg.NPCGeneration = w.p.NPCGeneration(id)
	}
	zp := w.p
	zp.Sim = cfg
	zp.NPCs = npcs
	if err := zp.Validate(); err != nil {
		return err
	}
	pid, err := w.sys.Root.SpawnNamed(Props(zp), ActorName(id))
	if err != nil {
		return fmt.Errorf("zone %s: %w", id, err)
	}
	next := &running{pids: maps.Clone(cur.pids)}
	next.pids[id] = pid
	for _, zn := range w.w.Zones() {
		if _, ok := next.pids[zn.ID]; ok {
			next.ids = append(next.ids, zn.ID)
		}
	}
	w.run.Store(next)
	return nil
}

// Load returns zone id's player and NPC counts as last reported (about
// once a second), and whether it runs here.
func (w *World) Load(id string) (players, npcs int, ok bool) {
	w.loadMu.Lock()
	defer w.loadMu.Unlock()
	l, ok := w.load[id]
	return l[0], l[1], ok
}

// Remove stops the actor of zone id and waits for it (the node lost or
// gave up the zone). Not safe for concurrent use with Spawn.
func (w *World) Remove(id string) {
	cur := w.run.Load()
	pid, ok := cur.pids[id]
	if !ok {
		return
	}
	_ = w.sys.Root.StopFuture(pid).Wait()
	next := &running{pids: maps.Clone(cur.pids), ids: slices.DeleteFunc(slices.Clone(cur.ids), func(s string) bool { return s == id })}
	delete(next.pids, id)
	w.run.Store(next)
	w.loadMu.Lock()
	delete(w.load, id)
	w.loadMu.Unlock()
}

// Map returns the world map.
func (w *World) Map() *world.World { return w.w }

// Metrics returns the zones' shared counters.
func (w *World) Metrics() *Metrics { return w.m }

// PID returns the actor of zone id (nil if there is none).
func (w *World) PID(id string) *actor.PID { return w.run.Load().pids[id] }

// IDs returns the ids of the zones running here, in map order.
func (w *World) IDs() []string { return w.run.Load().ids }

// ZoneFor picks the zone a new player joins: one of the map's spawn zones
// (every zone unless the map lists some), by a hash of the id
// (world.World.SpawnIndex), so the same on every node of a cluster. The
// PID names the zone's actor here: the zone itself, or its cluster proxy.
func (w *World) ZoneFor(player uint64) *actor.PID {
	return w.all[w.w.SpawnIndex(player)]
}

// Inspect runs fn inside every zone actor, one after another, and waits for
// each (read-only use; tests). It travels as a request (RequestFuture), at
// the default priority: each zone runs fn after everything sent to it
// before, so tests use it as a barrier (and it waits behind a zone's
// backlog of inputs). RequestInspect does not wait behind them.
func (w *World) Inspect(timeout time.Duration, fn func(z *sim.Zone)) error {
	run := w.run.Load()
	for _, id := range run.ids {
		f := w.sys.Root.RequestFuture(run.pids[id], &Inspect{Fn: fn}, timeout)
		if _, err := msg.Await(f); err != nil {
			return fmt.Errorf("inspect zone %s: %w", id, err)
		}
	}
	return nil
}

// Pause stops (true) or restarts (false) every zone's ticks as
// PauseManual: a zone paused by another owner too stays paused. The
// Pause goes at the zones' mailbox priority, ahead of the joins, leaves
// and inputs queued before it: sync with Inspect first when those must be
// handled while the ticks are stopped.
func (w *World) Pause(paused bool) {
	run := w.run.Load()
	for _, id := range run.ids {
		w.sys.Root.Send(run.pids[id], &Pause{Paused: paused})
	}
}

// Stop stops every zone actor and waits until they have stopped.
func (w *World) Stop() {
	var fs []*actor.Future
	for _, pid := range w.run.Load().pids {
		fs = append(fs, w.sys.Root.StopFuture(pid))
	}
	for _, f := range fs {
		_ = f.Wait()
	}
}
