package zone

import (
	"math"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/ghostwire/ghostwire/actors/msg"
)

// TestJoinEntriesStaleAfterGenWraps holds the per-slot entries (joinAt,
// joinHot) to the joins map across joinGen's wrap: entries filed at a
// generation the counter comes back to after 2^32 changes of joins must
// not count again. A player joined again through a new connection, the
// counter wrapped and advanced back to the old entries' generation, gets
// its views and Controls on the new connection, not the old one's.
func TestJoinEntriesStaleAfterGenWraps(t *testing.T) {
	sys := quietSystem()
	defer sys.Shutdown()
	var now time.Duration
	a, z := syncActor(t, sys, &now)
	conns := map[string]*benchConn{}
	join := func(player uint64, name string) {
		c := &benchConn{}
		c.views.AcceptRefs()
		pid, _ := sys.ProcessRegistry.Add(c, "hconn$"+name)
		conns[name] = c
		j := benchJoin(player, pid, &c.views)
		j.Port = msg.ControlPort{Queue: benchQueues[player%2], Conn: c}
		a.onJoin(j)
	}
	tick := func() {
		now += z.Period()
		a.onTick()
	}
	for i := range 3 {
		join(uint64(i+1), "p"+strconv.Itoa(i+1))
	}
	tick()
	tick()
	filed := a.joinGen // the entries' generation
	for _, h := range a.joinAt {
		if h.player != 0 && h.gen != filed {
			t.Fatalf("entry of player %d at gen %d, want %d", h.player, h.gen, filed)
		}
	}
	old, oldCtl := conns["p2"].taken.Load(), conns["p2"].controls.Load()
	a.joinGen = math.MaxUint32 // 2^32 - filed - 1 changes later
	join(2, "p2again")         // wraps
	for range filed - 1 {      // and back to the entries' generation
		a.joinsChanged()
	}
	if a.joinGen != filed {
		t.Fatalf("joinGen %d after the wrap and %d changes, want %d", a.joinGen, filed-1, filed)
	}
	tick()
	if got := conns["p2"].taken.Load() - old; got != 0 {
		t.Fatalf("the old connection of player 2 took %d views after the wrap: a stale entry counted", got)
	}
	if got := conns["p2"].controls.Load() - oldCtl; got != 0 {
		t.Fatalf("the old connection of player 2 got %d Controls after the wrap: a stale entry counted", got)
	}
	if conns["p2again"].taken.Load() != 1 {
		t.Fatalf("the new connection of player 2 took %d views, want 1", conns["p2again"].taken.Load())
	}
}

// TestJoinHotSize keeps a slot's entry (joinAt: one for every slot of
// the zone, NPCs' and replicas' too) at 48 bytes: 56 while it carried the
// Join's pointer, which the tick seldom reads (it looks the Join up).
func TestJoinHotSize(t *testing.T) {
	if n := unsafe.Sizeof(joinHot{}); n > 48 {
		t.Errorf("joinHot is %d bytes, want ≤ 48", n)
	}
}
