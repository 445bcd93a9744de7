package world

import (
	"errors"
	"strings"
	"testing"
)

// Any id scheme spreads over the spawn zones: botswarm's ids (base +
// index<<20 + session) all left one remainder of 4 and, by a plain modulo,
// started every bot in one zone of the default world.
func TestSpawnIndexSpreadsStructuredIDs(t *testing.T) {
	w := Default()
	schemes := map[string]func(i uint64) uint64{
		"sequential":          func(i uint64) uint64 { return 1 + i },
		"botswarm":            func(i uint64) uint64 { return 1<<40 + i<<20 + 1 },
		"multiples of 4":      func(i uint64) uint64 { return 4 * i },
		"high bits (sharded)": func(i uint64) uint64 { return i<<48 | 7 },
	}
	const n = 4000
	for name, id := range schemes {
		var by [4]int
		for i := range uint64(n) {
			by[w.SpawnIndex(id(i))]++
		}
		for z, c := range by {
			// n/4 = 1000 each; a fair spread stays within ±15 % (≈ 5 σ).
			if c < 850 || c > 1150 {
				t.Errorf("%s: zone %s got %d of %d players (%v), want ≈ %d", name, w.Zones()[z].ID, c, n, by, n/4)
			}
		}
	}
	// The same on every node: a pure function of the id.
	if a, b := w.SpawnIndex(12345), Default().SpawnIndex(12345); a != b {
		t.Fatalf("SpawnIndex(12345): %d, then %d", a, b)
	}
}

func TestSpawnZonesFromFile(t *testing.T) {
	const base = `{"name": "s", "zones": [
	  {"id": "a", "min": [0, 0], "max": [500, 500]},
	  {"id": "b", "min": [500, 0], "max": [1000, 500]},
	  {"id": "c", "min": [1000, 0], "max": [1500, 500]}]`
	w, err := Parse([]byte(base + `, "spawn": ["c", "a"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(w.Spawn(), ","); got != "c,a" {
		t.Fatalf("Spawn() = %q, want c,a", got)
	}
	seen := map[string]int{}
	for p := range uint64(1000) {
		seen[w.Zones()[w.SpawnIndex(p)].ID]++
	}
	if seen["b"] != 0 || seen["a"] == 0 || seen["c"] == 0 {
		t.Fatalf("players joined %v, want only a and c, both", seen)
	}
	// Marshal keeps the list, Parse reads it back.
	data, err := w.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	w2, err := Parse(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if got := strings.Join(w2.Spawn(), ","); got != "c,a" {
		t.Fatalf("after a round trip Spawn() = %q, want c,a", got)
	}
	// Without the field every zone is one, in map order, and Marshal
	// writes none.
	all, err := Parse([]byte(base + `}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(all.Spawn(), ","); got != "a,b,c" {
		t.Fatalf("Spawn() without the field = %q, want a,b,c", got)
	}
	if data, _ := all.Marshal(); strings.Contains(string(data), "spawn") {
		t.Fatalf("Marshal wrote a spawn list the map did not have:\n%s", data)
	}

	for _, bad := range []struct{ spawn, want string }{
		{`["d"]`, `zone "d": bad spawn zone: not a zone of the map`},
		{`["a", "a"]`, `zone "a": bad spawn zone: listed twice`},
	} {
		_, err := Parse([]byte(base + `, "spawn": ` + bad.spawn + `}`))
		if !errors.Is(err, ErrUnknownSpawn) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("spawn %s: error %v, want %q", bad.spawn, err, bad.want)
		}
	}
}
