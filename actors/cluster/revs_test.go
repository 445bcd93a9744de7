package cluster

import (
	"runtime"
	"testing"
	"time"
	"unsafe"
)

// TestRevisionCacheSweepsIdle: a cached revision unused for revIdle goes at
// the next sweep; one used since stays, with what it was last given.
func TestRevisionCacheSweepsIdle(t *testing.T) {
	p := &Players{revs: map[uint64]revEntry{}, born: time.Now()}
	now := time.Duration(0)
	p.rememberAt(&playerJob{player: 1, zone: "a", epoch: 3}, 10, 0, now)
	p.rememberAt(&playerJob{player: 2, zone: "b", epoch: 4}, 20, 0, now)
	now += revIdle / 2
	p.rememberAt(&playerJob{player: 2, zone: "c", epoch: 5}, 21, 7, now)
	now += revIdle/2 + time.Second // player 1 idle past revIdle, player 2 not
	p.rememberAt(&playerJob{player: 3, zone: "d", epoch: 6}, 30, 0, now)
	if _, ok := p.revOf(1); ok {
		t.Error("player 1's idle revision is still cached")
	}
	if got, want := p.revs[2].used, revSeconds(revIdle/2); got != want {
		t.Errorf("player 2's revision used at %d s, want %d", got, want)
	}
	if got, want := mustRev(t, p, 2), (recRev{rev: 21, zone: "c", epoch: 5, sum: 7}); got != want {
		t.Errorf("player 2's revision %+v, want %+v", got, want)
	}
	if got, want := mustRev(t, p, 3), (recRev{rev: 30, zone: "d", epoch: 6}); got != want {
		t.Errorf("player 3's revision %+v, want %+v", got, want)
	}
	// The sweep kept the places the kept entries name, and no other.
	if len(p.places) != 2 || len(p.placeOf) != 2 {
		t.Errorf("places after the sweep %+v, want c@5 and d@6 alone", p.places)
	}
}

func mustRev(t *testing.T, p *Players, player uint64) recRev {
	t.Helper()
	c, ok := p.revOf(player)
	if !ok {
		t.Fatalf("player %d's revision is not cached", player)
	}
	return c
}

// TestRevisionCachePlaces: players share the place (zone and epoch) they
// name, a player's new place is its own from then on, and a sweep that
// renumbers the places leaves every kept entry naming what it named.
func TestRevisionCachePlaces(t *testing.T) {
	p := &Players{revs: map[uint64]revEntry{}, born: time.Now()}
	now := time.Duration(0)
	for id := range uint64(6) {
		p.rememberAt(&playerJob{player: id, zone: "a", epoch: 1 + id%2}, 100+id, id, now)
	}
	if len(p.places) != 2 {
		t.Fatalf("six players in two places: %d places", len(p.places))
	}
	p.rememberAt(&playerJob{player: 0, zone: "b", epoch: 9}, 200, 0, now) // a handover to b
	now += revIdle + time.Second
	for _, id := range []uint64{1, 2, 3} { // 0, 4 and 5 idle: they go, and a@1 with them
		p.rememberAt(&playerJob{player: id, zone: "a", epoch: 1 + id%2}, 300+id, id, now)
	}
	p.rememberAt(&playerJob{player: 6, zone: "c", epoch: 1}, 400, 0, now)
	want := map[uint64]recRev{
		1: {rev: 301, zone: "a", epoch: 2, sum: 1},
		2: {rev: 302, zone: "a", epoch: 1, sum: 2},
		3: {rev: 303, zone: "a", epoch: 2, sum: 3},
		6: {rev: 400, zone: "c", epoch: 1},
	}
	if len(p.revs) != len(want) {
		t.Fatalf("%d cached, want %d", len(p.revs), len(want))
	}
	for id, w := range want {
		if got := mustRev(t, p, id); got != w {
			t.Errorf("player %d: %+v, want %+v", id, got, w)
		}
	}
	if len(p.places) != 3 {
		t.Errorf("places %+v, want a@1, a@2 and c@1", p.places)
	}
}

// TestRevEntryLayout: a cached revision is 24 bytes (48 with the zone and
// epoch in every entry, 64 with a time.Time): a map slot with its key 32.
func TestRevEntryLayout(t *testing.T) {
	if n := unsafe.Sizeof(revEntry{}); n > 24 {
		t.Errorf("revEntry is %d bytes, want ≤ 24", n)
	}
}

// TestRevisionCacheFootprint measures the revision cache at a node's
// shape: 2,000 players, each in one of eight zones, all cached (every
// player's record written recently). The profile of cmd/capacity at
// 2,000 put ≈ 131 B a player in this map with 56-byte slots (this test:
// 111–112 B); with 32-byte slots it measures 63 B.
func TestRevisionCacheFootprint(t *testing.T) {
	// Ten caches of a node's 2,000 players each. A map's hash seed is its
	// own, and how its 2,000 entries split into tables with it moves one
	// cache between 44 and 82 B a player (the 24-byte entry and its key in
	// 32-byte slots at the load the split leaves); ten caches average
	// that, and the bound sits above the worst split, under the 48-byte
	// entries' 111–112 (TestRevEntryLayout pins the entry's size itself).
	const players, caches, maxBytesEach = 2000, 10, 96
	zones := []string{"z0", "z1", "z2", "z3", "z4", "z5", "z6", "z7"}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	ps := make([]*Players, caches)
	for c := range ps {
		p := &Players{revs: map[uint64]revEntry{}, born: time.Now()}
		for i := range uint64(players) {
			p.rememberAt(&playerJob{player: 1e6 + i*7, zone: zones[i%8], epoch: 40 + i%8}, 1000+i, i|1, time.Second)
		}
		ps[c] = p
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(ps)
	each := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / (players * caches)
	t.Logf("the revision cache: %d B a player at %d", each, players)
	if each > maxBytesEach {
		t.Fatalf("the revision cache keeps %d B a player, want ≤ %d", each, maxBytesEach)
	}
}
