package main

import (
	"strings"
	"testing"

	"github.com/ghostwire/ghostwire/zones/world"
)

func TestZoneLineInIDOrder(t *testing.T) {
	s := Step{PlayersByZone: map[string]int{"x1z0": 2000, "x0z0": 0, "x1z1": 3, "x0z1": 1}}
	const want = "players by zone: x0z0 0, x0z1 1, x1z0 2000, x1z1 3"
	if got := zoneLine(s); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// --spawn writes the map the node runs with only those spawn zones; a bad
// id is an error naming the flag, not a run on another map.
func TestWorldMapSpawn(t *testing.T) {
	dir := t.TempDir()
	if f, err := worldMap("", "", dir); err != nil || f != "" {
		t.Fatalf(`worldMap("", "") = %q, %v; want the built-in default ("")`, f, err)
	}
	f, err := worldMap("", "x1z0", dir)
	if err != nil {
		t.Fatal(err)
	}
	w, err := world.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(w.Spawn(), ","); got != "x1z0" || w.Len() != 4 {
		t.Fatalf("map of %d zones spawning %q, want the default's 4 spawning x1z0", w.Len(), got)
	}
	if _, err := worldMap("", "x9z9", dir); err == nil || !strings.Contains(err.Error(), "--spawn") {
		t.Fatalf("--spawn x9z9: %v, want an error naming --spawn", err)
	}
}
