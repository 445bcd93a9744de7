package zone

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/sim"
	"github.com/ghostwire/ghostwire/zones/world"
)

// TestZoneActorFootprint measures what a zone keeps a player, part by
// part, at the shape of one of a 2,000-player node's four zones: a zone
// actor with 500 players crowded as BenchmarkZoneTickSyncCrowd's (≈ 85 in
// view, where cmd/capacity's bots see ≈ 80 at 2,000) and 50 NPCs, after 40
// ticks of inputs at 30 Hz. The parts are the live bytes of every
// allocation the zone made (runtime.MemProfile at a rate of 1, after a
// collection: exact, not sampled), by the first frame of its stack that
// names one, as cmd/capacity's --breakdown files them; what the test
// itself made (its connections, Joins, the actor system) is left out.
// 2026-12-02 (87 in view): interest sets and the tracker 484 B a player,
// slots and the rest of the zone 327 (the 176-byte slots 213, the slot
// index 33, the tick's views 25, the held records 16), player records
// 208, the actor's Joins by slot (65) and by id (37) and the connection's
// address string (32) 158, handoff records and move queues 155, grid 49 —
// 1,380 B a player in the zone's part — beside 944 B of views (the tick's
// snapshot, each player's references) and 216 B of Controls in flight,
// which cmd/capacity files under views and connections. 1,342 B (1,333
// under -race) since a slot is 160 bytes (sim's npcSlot), a slot's join
// entry 48 (joinHot) and a player's record 192 (its connection's address
// read from the handoff machine's record). With an echo a player a second
// among the inputs, as cmd/capacity's bots send (the zone's event budgets):
// 1,382 B while the actor's budget map kept an entry for every player sent
// an event while here (+35 B a player), 1,347 B since it holds only the
// tick's (and the interest sets trade a buffer an eighth too roomy, not
// half: 484 → 474 B); the bound (1,365) fails with the budgets kept.
func TestZoneActorFootprint(t *testing.T) {
	const players = 500
	defer func(r int) { runtime.MemProfileRate = r }(runtime.MemProfileRate)
	runtime.MemProfileRate = 1
	sys := quietSystem()
	defer sys.Shutdown()
	var now time.Duration
	a, z := syncActorWith(t, sys, &now, sim.Config{Zone: "x0z0", World: world.Default(), NPCs: 50, Classes: ghostClasses(t),
		Overload: sim.OverloadConfig{High: 1e9, Low: 1e8, Raise: 1 << 30, Lower: 1}})
	a.p.Spawn = crowdSpawn
	conns := joinRefConns(sys, a, players, "fconn$")
	seq := uint64(0)
	echo := []byte("echo")
	for k := range 40 { // three inputs a player every two ticks, as runZoneTickSync
		for r := range 1 + k%2 {
			seq++
			for i := range players {
				in := msg.NewInput()
				in.Player = uint64(i + 1)
				in.Moves = append(in.Moves[:0], move.Move{Seq: seq, Dt: 32, Forward: 127, Yaw: uint16(seq * 500)})
				if r == 0 && i%20 == k%20 {
					// An echo a player a second, as cmd/capacity's bots
					// (botswarm's --echo-interval): 25 players a tick.
					in.Add(event.Ordered, EchoLane, 0, echo)
				}
				a.onInput(in)
			}
		}
		now += z.Period()
		a.onTick()
	}
	parts := zoneHeapParts()
	runtime.KeepAlive(a)
	runtime.KeepAlive(conns)

	inView := 0.0
	for i := range players {
		inView += float64(len(z.InterestIDs(uint64(i+1)))) / players
	}
	var names []string
	zone := 0.0
	for name, b := range parts {
		names = append(names, name)
		if name != partViews && name != partTest && name != partMsg {
			zone += b / players
		}
	}
	sort.Slice(names, func(i, j int) bool { return parts[names[i]] > parts[names[j]] })
	var sb strings.Builder
	for _, name := range names {
		fmt.Fprintf(&sb, "\n  %6.0f B  %s", parts[name]/players, name)
	}
	t.Logf("a zone at 500 players: %.0f B a player in the zone's part (%.1f in view):%s", zone, inView, sb.String())
	if zone > 1365 {
		t.Errorf("the zone keeps %.0f B a player, want ≤ 1,365", zone)
	}
	if s := parts[partInterest] / players; s > 500 {
		t.Errorf("the interest sets and tracker hold %.0f B a player, want ≤ 500", s)
	}
}

// The parts of TestZoneActorFootprint.
const (
	partInterest = "interest sets and the tracker (zones/interest)"
	partViews    = "views: the tick's snapshot and the players' references (cmd/capacity's \"views from the zone\")"
	partTest     = "the test's own (connections, Joins, the actor system)"
	partMsg      = "messages: Controls in flight (cmd/capacity's \"connection\" part)"
)

// zoneParts match the frames of an allocation's stack, allocation site
// first, as cmd/capacity's breakdown does (its "zones" part split).
var zoneParts = []struct{ name, match string }{
	// The process's first PID.String (onJoin's connection address) builds
	// protobuf's descriptors once: cmd/capacity's idle baseline has them.
	{partTest, "google.golang.org/protobuf/internal/filedesc."},
	{partViews, "replication/ghost.(*SnapshotWriter)"},
	{partViews, "zones/sim.(*Zone).Snapshot"},
	{partViews, "actors/msg.NewViewRefs"},
	{partMsg, "actors/msg."},
	{partInterest, "zones/interest."},
	{"player records (sim.playerSlot)", "zones/sim.(*Zone).pl"},
	{"handoff records and move queues (zones/handoff)", "zones/handoff."},
	{"grid (zones/grid)", "zones/grid."},
	{"slots and the rest of the zone (zones/sim)", "zones/sim."},
	{"the actor's Joins by slot and by id, its other state (actors/zone)", "actors/zone."},
}

// zoneHeapParts returns the live heap by zoneParts (after a collection;
// exact for what was allocated at runtime.MemProfileRate 1).
func zoneHeapParts() map[string]float64 {
	runtime.GC()
	runtime.GC() // the profile is of the last completed cycle
	n, _ := runtime.MemProfile(nil, false)
	recs := make([]runtime.MemProfileRecord, n+256)
	n, _ = runtime.MemProfile(recs, false)
	out := map[string]float64{}
	for _, r := range recs[:n] {
		if b := r.InUseBytes(); b > 0 {
			out[zonePart(r.Stack())] += float64(b)
		}
	}
	return out
}

func zonePart(stk []uintptr) string {
	frames := runtime.CallersFrames(stk)
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.File, "_test.go") {
			return partTest
		}
		for _, p := range zoneParts {
			if strings.Contains(f.Function, p.match) {
				return p.name
			}
		}
		if !more {
			return partTest
		}
	}
}
