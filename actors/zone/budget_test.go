package zone

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/zones/sim"
	"github.com/ghostwire/ghostwire/zones/world"
)

// TestBudgetHoldsOnlyTheTicksPlayers: the zone actor's event budgets are
// per tick, and the map of them holds only the players sent an event this
// tick, not every player ever sent one; a map grown for a burst gives its
// room back. 500 players, one burst tick that echoes to every one, then
// cmd/capacity's shape (an echo a player a second: 25 players a tick) for
// two windows: the map held 18.5 KB (37 B a player) while its entries
// stayed until their player left, and as much emptied every tick but
// never made anew after the burst; 1.3 KB (2.5 B a player) now.
func TestBudgetHoldsOnlyTheTicksPlayers(t *testing.T) {
	const players = 500
	defer func(r int) { runtime.MemProfileRate = r }(runtime.MemProfileRate)
	runtime.MemProfileRate = 1
	sys := quietSystem()
	defer sys.Shutdown()
	var now time.Duration
	a, z := syncActorWith(t, sys, &now, sim.Config{Zone: "x0z0", World: world.Default(), Classes: ghostClasses(t)})
	a.p.Spawn = crowdSpawn
	conns := joinRefConns(sys, a, players, "bconn$")
	echo := []byte("echo")
	send := func(from, to int) {
		for id := from; id < to; id++ {
			if !a.sendEvent(uint64(id%players+1), event.Ordered, EchoLane, 0, echo) {
				t.Fatalf("player %d: event not sent", id%players+1)
			}
			a.flushOutputs() // as after each Input's events
		}
		now += z.Period()
		a.onTick()
	}
	send(0, players) // the burst: every player's echo in one tick
	left := 0        // budgets of a tick left after it
	for k := range 2 * budgetWindow {
		send(25*k, 25*k+25)
		left = max(left, len(a.budget))
	}
	if left != 0 {
		t.Errorf("%d budgets left after a tick, want 0 (they are the tick's)", left)
	}
	held := budgetHeap()
	runtime.KeepAlive(a)
	runtime.KeepAlive(conns)
	t.Logf("the budget map holds %.0f B (%.1f B a player)", held, held/players)
	if held > 4096 {
		t.Errorf("the budget map holds %.0f B for 25 players a tick, want ≤ 4,096", held)
	}
}

// budgetHeap is the live heap allocated by the zone actor's event
// budgets (its map's growth in sendEvent, its remaking).
func budgetHeap() float64 {
	runtime.GC()
	runtime.GC() // the profile is of the last completed cycle
	n, _ := runtime.MemProfile(nil, false)
	recs := make([]runtime.MemProfileRecord, n+256)
	n, _ = runtime.MemProfile(recs, false)
	sum := 0.0
	for _, r := range recs[:n] {
		if b := r.InUseBytes(); b > 0 && budgetFrame(r.Stack()) {
			sum += float64(b)
		}
	}
	return sum
}

func budgetFrame(stk []uintptr) bool {
	frames := runtime.CallersFrames(stk)
	for {
		f, more := frames.Next()
		if strings.Contains(f.Function, "(*zoneActor).sendEvent") || strings.Contains(f.Function, "(*zoneActor).newBudgetTick") {
			return true
		}
		if !more {
			return false
		}
	}
}
