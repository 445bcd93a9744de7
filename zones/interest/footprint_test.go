package interest

import (
	"runtime"
	"testing"
)

// TestSetFootprint measures what a player's interest set holds between
// ticks (its 24-byte header and its buffer) at cmd/capacity's ≈ 41
// members in view (1,000 players and 200 NPCs) and at ≈ 80 (2,000
// players' density). 8-byte entries, each with its priority: 515 B and
// 934 B a player; 4-byte entries, the priorities recomputed in the tick
// (AppendPriorities): 306 B and 506 B (301 B and 506 B in 2026-12-01's
// run); with an eighth of headroom, not a quarter and 4, and room traded
// between sets (refit): 269 B and 447 B. Those counted ≈ 37 B a player
// that two collections free and one does not, and on a loaded host the
// first case read 269 or 301–307 B from run to run (over its bound one
// run in three): measured after two collections each side, 231 B and
// 410 B in every run (226 B and 410 B under -race).
func TestSetFootprint(t *testing.T) {
	for _, tc := range []struct {
		name     string
		side     float64
		maxBytes float64 // a player, at the members a view measured
	}{
		{name: "41 in view", side: 910, maxBytes: 250},
		{name: "80 in view", side: 640, maxBytes: 440},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const players = 1000
			c := newCrowd(t, players, 200, tc.side, 27.5, Config{EnterRadius: 100, LeaveRadius: 110})
			for range 3 { // the tracker's tables and scratch at their size
				c.tick()
			}
			warm := c.sets
			c.sets = make([]Set, players)
			members := 0
			for range 5 {
				members = c.tick()
			}
			// The sets' bytes: the heap with them, less the heap without
			// them (after the same ticks, so nothing else differs). Two
			// collections each side: after one, what the next frees
			// still counted in one reading and not the other.
			var with, without runtime.MemStats
			runtime.GC()
			runtime.GC()
			runtime.ReadMemStats(&with)
			c.sets = warm
			runtime.GC()
			runtime.GC()
			runtime.ReadMemStats(&without)
			per := float64(with.HeapAlloc-without.HeapAlloc) / players
			view := float64(members) / players
			t.Logf("%s: %.0f B a player's set at %.1f members (%.1f B a member)", tc.name, per, view, per/view)
			if per > tc.maxBytes {
				t.Errorf("a set holds %.0f B a player at %.1f members, want ≤ %.0f", per, view, tc.maxBytes)
			}
			runtime.KeepAlive(c)
		})
	}
}

// TestSetRoomFollowsUse measures a set's bytes (its 24-byte header and
// its buffer, the tracker's spare buffers shared out) after a minute of
// a drifting crowd (1,200 ticks at 20 Hz, ≈ 85 members in view, 357 B of
// buffer used a set): while a set kept the room of its largest size for
// good, with a quarter and 4 entries of headroom, 548 B; with room traded
// between sets (refit) and an eighth of headroom, 452–458 B; 431 B (393
// under -race) since a set trades a buffer three sixteenths and 4 entries
// too roomy, not half (shrinkSlack). It also holds the trade to what it
// saves: fewer than one allocation a tick for the 1,000 sets (0.49 a tick
// before; 3.3 when a set that shrank allocated its smaller buffer; 0.18
// with half; 0.37 now, 0.74 under -race).
func TestSetRoomFollowsUse(t *testing.T) {
	const players = 1000
	c := newCrowd(t, players, 200, 640, 27.5, Config{EnterRadius: 100, LeaveRadius: 110})
	for range 200 {
		c.tick()
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	members := 0
	const ticks = 1000
	for range ticks {
		members = c.tick()
	}
	runtime.ReadMemStats(&m1)
	perTick := float64(m1.Mallocs-m0.Mallocs) / ticks
	// The sets' bytes: the heap with them, less the heap with empty ones
	// (the tracker's spare buffers stay: they are the sets' too).
	var with, without runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&with)
	c.sets = make([]Set, players)
	runtime.GC()
	runtime.ReadMemStats(&without)
	per := float64(int64(with.HeapAlloc)-int64(without.HeapAlloc)) / players
	t.Logf("%.0f B a set at %.1f members after %d ticks; %.2f allocations a tick", per, float64(members)/players, 200+ticks, perTick)
	if per > 440 {
		t.Errorf("a set holds %.0f B after a drift, want ≤ 440: its room does not follow its use", per)
	}
	if perTick >= 1 {
		t.Errorf("%.2f allocations a tick for %d sets, want < 1", perTick, players)
	}
	runtime.KeepAlive(c)
}

// TestSetRoomNoThrash: a buffer refit makes (setRoom, its size class's
// rounding cut to shrinkSlack) holds its size and is never so roomy that
// the next Update at the same size trades it away again (shrinkSlack), at
// every size an Update asks for (the header's hLen entries at least).
func TestSetRoomNoThrash(t *testing.T) {
	tr, err := NewTracker(Config{})
	if err != nil {
		t.Fatal(err)
	}
	check := func(n int) {
		var s Set
		tr.refit(&s, n)
		if c := cap(s.buf); c < n || c > n+shrinkSlack(n) {
			t.Fatalf("%d entries: a new buffer has room for %d, want %d to %d", n, c, n, n+shrinkSlack(n))
		}
	}
	for n := hLen; n <= 4096; n++ {
		check(n)
	}
	for n := 4096; n <= 1<<17; n += 61 {
		check(n)
	}
}

// TestRefitTradesBuffers: a set that outgrows its buffer leaves it spare,
// a set too roomy for its use takes that one and leaves its own (no
// allocation), and a set too roomy with nothing smaller spare keeps its
// buffer rather than allocate a smaller one.
func TestRefitTradesBuffers(t *testing.T) {
	tr, err := NewTracker(Config{})
	if err != nil {
		t.Fatal(err)
	}
	var grower, roomy Set
	tr.refit(&grower, 100)
	small := cap(grower.buf)
	roomy.buf = make([]Entry, 0, 1000)
	if a := testing.AllocsPerRun(100, func() { tr.refit(&roomy, 50) }); a != 0 || cap(roomy.buf) != 1000 {
		t.Errorf("a roomy set with nothing spare: %.2f allocations, room for %d, want 0 and its own 1000", a, cap(roomy.buf))
	}
	tr.refit(&grower, 200) // outgrown: a new buffer, the old one spare
	if cap(grower.buf) < 200 || len(tr.spare) != 1 || cap(tr.spare[0]) != small {
		t.Fatalf("grown: room %d, spare %d buffers, want ≥ 200 and the old one (%d) spare", cap(grower.buf), len(tr.spare), small)
	}

	// The shrink changes the tracker, so each measured refit gets a fresh
	// tracker and sets, built outside the measurement.
	var shrinker Set
	var last *Tracker
	a := allocsPer(100, func() {
		last, err = NewTracker(Config{})
		if err != nil {
			t.Fatal(err)
		}
		var g Set
		last.refit(&g, 100)
		last.refit(&g, 200)
		shrinker = Set{buf: make([]Entry, 0, 400)}
	}, func() { last.refit(&shrinker, 100) })
	if a != 0 {
		t.Errorf("a set that shrank allocated %.2f times a refit, want 0 (a spare buffer fits)", a)
	}
	if cap(shrinker.buf) != small || len(last.spare) != 1 || cap(last.spare[0]) != 400 {
		t.Errorf("shrunk: room %d, spare %d, want the spare %d and its own 400 spare", cap(shrinker.buf), cap(last.spare[0]), small)
	}
}

// allocsPer is testing.AllocsPerRun for a call that changes what it runs
// on: setup rebuilds the state outside the count, and the mean over runs
// (rounded down, as AllocsPerRun does) keeps the runtime's own odd
// allocation on another goroutine from reading as the call's.
func allocsPer(runs int, setup, f func()) float64 {
	var total uint64
	for i := 0; i < runs; i++ {
		setup()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		f()
		runtime.ReadMemStats(&m1)
		total += m1.Mallocs - m0.Mallocs
	}
	return float64(total / uint64(runs))
}

// TestTrackerRoomByAnEighth: a tracker whose zone grows one slot at a time
// (sim.Zone.growSlots: Resize(n+1) for every new slot) keeps at most an
// eighth and 8 slots of room in its per-slot arrays (index and bySlot, 20
// bytes a slot), never append's doubling: grown so to 600 slots (one of a
// 2,000-player node's four zones) they held 17,024 B where 12,000 are
// used; now 13,440.
func TestTrackerRoomByAnEighth(t *testing.T) {
	tr, err := NewTracker(Config{})
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 5000; n++ {
		tr.Resize(n)
		if len(tr.index) != n || len(tr.bySlot) != n {
			t.Fatalf("%d slots: index %d long, bySlot %d, want %d", n, len(tr.index), len(tr.bySlot), n)
		}
		if room := max(cap(tr.index), cap(tr.bySlot)) - n; room > n/8+8 {
			t.Errorf("%d slots: room for %d more, want ≤ %d (an eighth and 8)", n, room, n/8+8)
		}
		if n == 600 {
			b := cap(tr.index)*4 + cap(tr.bySlot)*16
			t.Logf("600 slots: %d B (%d used)", b, 600*20)
		}
	}
}
