package zone

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/zones/sim"
	"github.com/ghostwire/ghostwire/zones/world"
)

// World is every zone actor of a world map running in one actor system.
type World struct {
	sys  *actor.ActorSystem
	w    *world.World
	pids map[string]*actor.PID
	ids  []string
	m    *Metrics
}

// Start spawns one zone actor per zone of w, each configured from base
// (its Zone and World fields are set here). base.NPCs is the world's total,
// split evenly over the zones (the first zones get the remainder). p's Sim
// field is ignored; its Now, Metrics, Log and Spawn apply to every zone.
func Start(sys *actor.ActorSystem, w *world.World, base sim.Config, p Params) (*World, error) {
	if p.Metrics == nil {
		p.Metrics = new(Metrics)
	}
	out := &World{sys: sys, w: w, pids: map[string]*actor.PID{}, m: p.Metrics}
	n := w.Len()
	for i, zn := range w.Zones() {
		cfg := base
		cfg.Zone, cfg.World = zn.ID, w
		cfg.NPCs = base.NPCs / n
		if i < base.NPCs%n {
			cfg.NPCs++
		}
		zp := p
		zp.Sim = cfg
		if err := zp.Validate(); err != nil {
			out.Stop()
			return nil, err
		}
		pid, err := sys.Root.SpawnNamed(Props(zp), ActorName(zn.ID))
		if err != nil {
			out.Stop()
			return nil, fmt.Errorf("zone %s: %w", zn.ID, err)
		}
		out.pids[zn.ID] = pid
		out.ids = append(out.ids, zn.ID)
	}
	return out, nil
}

// Map returns the world map.
func (w *World) Map() *world.World { return w.w }

// Metrics returns the zones' shared counters.
func (w *World) Metrics() *Metrics { return w.m }

// PID returns the actor of zone id (nil if there is none).
func (w *World) PID(id string) *actor.PID { return w.pids[id] }

// IDs returns the zone ids in map order.
func (w *World) IDs() []string { return w.ids }

// ZoneFor picks the zone a new player joins: spread by id over the zones,
// deterministically.
func (w *World) ZoneFor(player uint64) *actor.PID {
	return w.pids[w.ids[int(player%uint64(len(w.ids)))]]
}

// Inspect runs fn inside every zone actor, one after another, and waits for
// each (read-only use; tests and admin).
func (w *World) Inspect(timeout time.Duration, fn func(z *sim.Zone)) error {
	for _, id := range w.ids {
		f := w.sys.Root.RequestFuture(w.pids[id], &Inspect{Fn: fn}, timeout)
		if _, err := f.Result(); err != nil {
			return fmt.Errorf("inspect zone %s: %w", id, err)
		}
	}
	return nil
}

// Pause stops (true) or restarts (false) every zone's ticks.
func (w *World) Pause(paused bool) {
	for _, id := range w.ids {
		w.sys.Root.Send(w.pids[id], &Pause{Paused: paused})
	}
}

// Stop stops every zone actor and waits until they have stopped.
func (w *World) Stop() {
	var fs []*actor.Future
	for _, pid := range w.pids {
		fs = append(fs, w.sys.Root.StopFuture(pid))
	}
	for _, f := range fs {
		_ = f.Wait()
	}
}
