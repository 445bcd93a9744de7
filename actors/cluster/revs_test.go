package cluster

import (
	"testing"
	"time"
	"unsafe"
)

// TestRevisionCacheSweepsIdle: a cached revision unused for revIdle goes at
// the next sweep; one used since stays, with what it was last given.
func TestRevisionCacheSweepsIdle(t *testing.T) {
	p := &Players{revs: map[uint64]recRev{}, born: time.Now()}
	now := time.Duration(0)
	p.rememberAt(&playerJob{player: 1, zone: "a", epoch: 3}, 10, 0, now)
	p.rememberAt(&playerJob{player: 2, zone: "b", epoch: 4}, 20, 0, now)
	now += revIdle / 2
	p.rememberAt(&playerJob{player: 2, zone: "c", epoch: 5}, 21, 7, now)
	now += revIdle/2 + time.Second // player 1 idle past revIdle, player 2 not
	p.rememberAt(&playerJob{player: 3, zone: "d", epoch: 6}, 30, 0, now)
	if _, ok := p.revs[1]; ok {
		t.Error("player 1's idle revision is still cached")
	}
	if got, want := p.revs[2], (recRev{rev: 21, zone: "c", epoch: 5, used: revIdle / 2, sum: 7}); got != want {
		t.Errorf("player 2's revision %+v, want %+v", got, want)
	}
	if _, ok := p.revs[3]; !ok {
		t.Error("player 3's revision is not cached")
	}
}

// TestRecRevLayout: a cached revision is 48 bytes (64 with a time.Time):
// 40 and the record's sum (an idle player's checkpoint not rewritten).
func TestRecRevLayout(t *testing.T) {
	if n := unsafe.Sizeof(recRev{}); n > 48 {
		t.Errorf("recRev is %d bytes, want ≤ 48", n)
	}
}
