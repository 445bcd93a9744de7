package main

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ghostwire/ghostwire/actors/zone"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// playersByZone counts the players each zone of the world owns (not its
// replicas of its neighbours'): how the run spread its players, which
// decides the ghosts a player sees. botswarm's ids leave the same
// remainder for World.ZoneFor's modulo, so a run crowds into one zone.
func playersByZone(w *zone.World, timeout time.Duration) (map[string]int, error) {
	var mu sync.Mutex // Inspect runs fn in each zone's actor, one after another
	out := make(map[string]int)
	err := w.Inspect(timeout, func(z *sim.Zone) {
		n := z.Stats().Players
		mu.Lock()
		out[z.ID()] = n
		mu.Unlock()
	})
	return out, err
}

// zoneLine is the players a zone, in zone id order.
func zoneLine(s Step) string {
	ids := make([]string, 0, len(s.PlayersByZone))
	for id := range s.PlayersByZone {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("%s %d", id, s.PlayersByZone[id])
	}
	return "players by zone: " + strings.Join(parts, ", ")
}
