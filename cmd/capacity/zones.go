package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ghostwire/ghostwire/actors/zone"
	"github.com/ghostwire/ghostwire/zones/sim"
	"github.com/ghostwire/ghostwire/zones/world"
)

// playersByZone counts the players each zone of the world owns (not its
// replicas of its neighbours'): how the run spread its players, which
// decides the ghosts a player sees (World.ZoneFor spreads them over the
// map's spawn zones; --spawn x1z0 crowds them into one).
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

// worldMap is the map file the node runs: file as it is, or with spawn
// (comma-separated zone ids) file's map — the default world if file is
// empty — with those spawn zones, written into dir. Both empty: "" (the
// node's built-in default).
func worldMap(file, spawn, dir string) (string, error) {
	if spawn == "" {
		return file, nil
	}
	w := world.Default()
	if file != "" {
		var err error
		if w, err = world.Load(file); err != nil {
			return "", fmt.Errorf("--world: %w", err)
		}
	}
	ids := strings.Split(spawn, ",")
	for i := range ids {
		ids[i] = strings.TrimSpace(ids[i])
	}
	w, err := w.WithSpawn(ids...)
	if err != nil {
		return "", fmt.Errorf("--spawn: %w", err)
	}
	data, err := w.Marshal()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "world.json")
	return path, os.WriteFile(path, data, 0o644)
}
