package msg

import (
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/ghostwire/ghostwire/replication/ghost"
)

// TestViewRefsFootprint: the reference views a node keeps between ticks,
// one a player (its slot's spare), at 2,000 players whose views hold 20 to
// 150 entities and change by a few every tick. What a view holds beyond
// its references is the View itself and the room its Refs were made with
// above what they carry: the rooms' steps (refsRoom) and the slot's
// tolerance for a view that shrank (NewViewRefs) set it. The tolerance
// also sets how often a slot's view does not fit and one comes from the
// pools (a Get and a Put across processors): bounded too, so bytes are
// not bought with churn. Steps of 1.5×: 513 B, 6,885 views got from the
// pools (2,000 of them the first); 4/3: 482 B, 7,088. The room's hint for
// the zone's prefetch (View.room, View.roomBytes) put the View a size
// class up: 498 B.
func TestViewRefsFootprint(t *testing.T) {
	const players, ticks = 2000, 60
	rng := rand.New(rand.NewPCG(3, 31))
	slots := make([]ViewSlot, players)
	size := make([]int, players)
	for p := range size {
		size[p] = 20 + rng.IntN(131)
	}
	var ms runtime.MemStats
	heap := func() uint64 {
		runtime.GC()
		runtime.GC() // the pools' victims too: what stays is the slots' spares
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	refs, changed := 0, 0
	last := make([]*View, players)
	for range ticks {
		refs = 0
		for p := range slots {
			size[p] = min(150, max(20, size[p]+rng.IntN(7)-3))
			n := size[p]
			v := slots[p].NewViewRefs(n, 0)
			if v != last[p] {
				changed++
			}
			last[p] = v
			v.Refs = append(v.Refs[:0], make([]ghost.ViewRef, n)...)
			v.Player, v.Tick = uint64(p+1), 1
			slots[p].Publish(v)
			slots[p].Take().Release()
			refs += n
		}
	}
	after := heap()
	per := float64(after-before) / players
	carried := float64(refs*4) / players
	t.Logf("reference views: %.0f B a player (%.0f B of references carried, %.0f B of View and spare room); %d of %d views from the pools",
		per, carried, per-carried, changed, players*ticks)
	runtime.KeepAlive(slots)
	if per > 520 {
		t.Errorf("reference views hold %.0f B a player, over 520", per)
	}
	if changed > 7500 {
		t.Errorf("%d of %d views not the slot's own, over 7,500", changed, players*ticks)
	}
}
