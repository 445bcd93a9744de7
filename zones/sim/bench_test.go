package sim

import (
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/interest"
)

// crowdZone is one zone of the default world as cmd/capacity loads it at
// 1,000 players: a quarter of them (250) and of the NPCs (50), players
// spread by id, every one with a connection. It returns the zone and the
// time of its last tick.
func crowdZone(t testing.TB, players int) (*Zone, time.Duration) {
	t.Helper()
	return crowdZoneWith(t, players, 0, nil)
}

// crowdZoneWith is crowdZone with its players spread over a square of side
// metres in the zone's corner (0: the whole zone less 50 m at each edge),
// and tweak, if not nil, applied to its config.
func crowdZoneWith(t testing.TB, players int, side float64, tweak func(*Config)) (*Zone, time.Duration) {
	t.Helper()
	reg, err := ghost.NewRegistry(ghost.DefaultBounds())
	if err != nil {
		t.Fatal(err)
	}
	pc, nc := ghost.PlayerClass(nil), ghost.NPCClass(nil)
	if err := reg.Register(pc, nc); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Zone: "x0z0", NPCs: players / 5, Classes: [interest.MaxKinds]*ghost.Class{pc, nc}}
	if tweak != nil {
		tweak(&cfg)
	}
	z, err := New(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	r := z.Rect()
	sx, sz := r.Max[0]-r.Min[0]-100, r.Max[1]-r.Min[1]-100
	if side > 0 {
		sx, sz = side, side
	}
	for i := range players {
		h := uint64(i+1)*0x9E3779B97F4A7C15 + 1
		x := float32(r.Min[0] + 50 + float64(h&0xFFFF)/0xFFFF*sx)
		zz := float32(r.Min[1] + 50 + float64(h>>16&0xFFFF)/0xFFFF*sz)
		if err := z.Join(0, uint64(i+1), "c", "p", [3]float32{x, 0, zz}, 0); err != nil {
			t.Fatal(err)
		}
	}
	return z, 0
}

// crowdTick is one tick of crowdZone at 30 Hz input: every player sends
// one or two moves (walking in circles), the zone steps, and every view is
// built as references (what a zone actor does for local connections).
func crowdTick(z *Zone, players int, now time.Duration, tick int, mv []move.Move, refs []ghost.ViewRef) []ghost.ViewRef {
	crowdInput(z, players, now, tick, mv)
	out := z.Step(now)
	for _, v := range out.Views {
		refs = z.AppendViewRefs(refs[:0], v)
	}
	return refs
}

// crowdInput gives every player of crowdZone the moves of tick: 30 Hz
// moves over 20 Hz ticks, 1, 2, 1, 2, … moves a tick.
func crowdInput(z *Zone, players int, now time.Duration, tick int, mv []move.Move) {
	first := uint64(tick/2)*3 + uint64(tick%2) + 1
	n := 1 + tick%2
	for p := uint64(1); p <= uint64(players); p++ {
		mv = mv[:0]
		for k := range uint64(n) {
			seq := first + k
			mv = append(mv, move.Move{Seq: seq, Dt: 32, Forward: 127, Yaw: uint16(seq * 700)})
		}
		z.Input(now, p, mv)
	}
}

// BenchmarkZoneTick (informative): one tick of a zone holding a quarter of
// cmd/capacity's 1,000 players, inputs and views included. cpu-µs/tick is
// the benchmarking thread's CPU time per tick (Linux; wall time
// elsewhere): on a shared machine wall time counts whatever else holds
// the core.
func BenchmarkZoneTick(b *testing.B) { benchZoneTick(b, 0) }

// BenchmarkZoneTickCrowd (informative) is BenchmarkZoneTick with the
// players crowded into 380 m × 380 m, as BenchmarkZoneGhosts: ≈ 46 in
// view (cmd/capacity's bots see 43 at 1,000 players), ≈ 80 candidates a
// player's interest scan reads.
func BenchmarkZoneTickCrowd(b *testing.B) { benchZoneTick(b, 380) }

func benchZoneTick(b *testing.B, side float64) {
	defer lockThread()()
	z, now := crowdZoneWith(b, 250, side, nil)
	var mv []move.Move
	var refs []ghost.ViewRef
	tick := 0
	for range 40 { // interest sets and queues at their steady size
		now += 50 * time.Millisecond
		refs = crowdTick(z, 250, now, tick, mv, refs)
		tick++
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, ok := threadCPU()
	start := time.Now()
	for range b.N {
		now += 50 * time.Millisecond
		refs = crowdTick(z, 250, now, tick, mv, refs)
		tick++
	}
	el := time.Since(start)
	if cpu1, _ := threadCPU(); ok {
		el = cpu1 - cpu0
	}
	b.ReportMetric(float64(el.Microseconds())/float64(b.N), "cpu-µs/tick")
}

// TestZoneFootprint measures what a zone holds per player (slots, interest
// sets, grid, queues, the tick's snapshot): 250 players and 50 NPCs after
// 40 ticks. 2,279 B when every per-slot slice doubled by append and a
// slot kept the tick's state and a held state it only needs under
// overload (112 B each); 1,736 B while every slot carried the player-only
// fields (≈ 320 B), an interest set kept 16 entries of headroom and the
// grid covered the whole world; 1,524 B while every move queue carried
// its bound, gap timeout and counters (56 B) and every player a slice for
// handed-over interest (24 B); 1,422 B while each tick listed every
// player's Control (96 B a player in the Output); 1,295 B while a view's
// reference carried the connection's address; 1,270 B while every handoff
// record (handoff.Machine) carried a handoff's state and the connection
// sat in a map beside it; 1,177 B while a slot's fields left 16 bytes of
// padding (224 B a slot); 1,144 B until far members were held by default
// (Config.FarEvery 2), which costs a held record a slot (64 B) and a second
// snapshot entry a slot (the held one): 1,538–1,547 B; 1,566 B until the
// held record kept the held state itself (64 B a slot, now 12: the state
// is carried in the snapshots, ghost.SealCopies): 1,480 B now. The reading
// varies by ≈ 150 B from run to run (the runtime's per-P span caches count
// as allocated): in a whole-package run 1,885 B, then 1,674–1,697 B,
// 1,572–1,594 B, 1,443–1,466 B, 1,418–1,419 B, 1,326–1,347 B,
// 1,293–1,315 B, 1,675–1,696 B, 1,716 B, 1,628 B (1,480 B alone),
// 1,597–1,619 B (1,448 B alone: a player's record 240 → 208 B, its
// interest set's counters now the tracker's), 1,578–1,601 B (1,429 B
// alone: an entity's handoff record 64 → 48 B), now 1,544–1,545 B (1,396 B
// alone, with or without -race: a slot 208 → 176 B, its replica state
// apart, TestEntitySize); 1,381 B alone since ids find their slots in a slotIndex
// (a map[uint64]int32 before); 1,353–1,354 B alone until the grid stopped
// keeping a caller's id for every slot (16 B a slot): 1,332 B; 1,354 B
// since an owned player's state and its next checkpoint are found by slot
// (Zone.owned, Zone.cpDue: 16 B a slot).
func TestZoneFootprint(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	z, now := crowdZone(t, 250)
	var refs []ghost.ViewRef
	for tick := range 40 {
		now += 50 * time.Millisecond
		refs = crowdTick(z, 250, now, tick, nil, refs)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / 250
	t.Logf("zone footprint: %.0f B per player (250 players, 50 NPCs, %d slots)", per, len(z.ents))
	if per > 1600 {
		t.Errorf("zone holds %.0f B per player, want ≤ 1,600", per)
	}
	runtime.KeepAlive(z)
}

// TestZoneFootprint1000 is TestZoneFootprint at cmd/capacity's 1,000
// players, all in one zone of the default size: ≈ 41 in each view (the
// bots see 43 at 1,000 over four zones), 200 NPCs. 1,763–1,768 B a player
// alone (2026-11-29), 1,573–1,578 B since the interest sets keep 4-byte
// members between ticks; by a heap profile of it before that
// (MemProfileRate 1, 1,663 B there) ≈ 520 B the tick's snapshot
// (cmd/capacity files it under views), ≈ 465 B interest sets (then 8-byte
// entries, a quarter and 4 of headroom; ≈ 300 B now), 216 B slots (176 B each, 1.2 a player, an eighth of room),
// 208 B the player's record, 128 B handoff records, 67 B grid, 62 B move
// queues, 32 B the tick's views, 25 B the tracker's table, 24 B the slot
// index, 24 B the replica batch. The bound (1,680) fails with the 8-byte
// interest members (1,762 B) and leaves ≈ 100 B of room. 1,531 B alone
// on 2026-12-01, 1,492 B since a set's room follows its use
// (interest.Tracker's refit: an eighth of headroom, where a quarter and 4
// was more than a set after 40 ticks needs, but less than a set that
// drifts for a minute holds); 1,513 B with Zone.owned and Zone.cpDue
// (16 B a slot); 1,493 B alone (1,525 B in a whole-package run) with a
// slot at 160 B (npcSlot) and a player's record at 192 (Zone.conn). The
// bound (1,600) leaves ≈ 100 B of room.
func TestZoneFootprint1000(t *testing.T) {
	const players = 1000
	z, refs, per, _, inView := crowdFootprint(t, players)
	t.Logf("zone footprint: %.0f B per player (%d players, %d slots, %.1f in view)", per, players, len(z.ents), inView)
	if per > 1600 {
		t.Errorf("zone holds %.0f B per player at %d players, want ≤ 1,600", per, players)
	}
	runtime.KeepAlive(z)
	runtime.KeepAlive(refs)
}

// crowdFootprint runs a crowd zone of players for 40 ticks (2 s) and
// returns it, its last views, the heap it added a player, the live heap
// after (HeapAlloc, after a collection) and the mean members of a
// player's interest set.
func crowdFootprint(t *testing.T, players int) (z *Zone, refs []ghost.ViewRef, per float64, heap uint64, inView float64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	z, now := crowdZone(t, players)
	for tick := range 40 {
		now += 50 * time.Millisecond
		refs = crowdTick(z, players, now, tick, nil, refs)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	n := 0
	for _, e := range z.ents {
		n += e.p().set.Len()
	}
	per = float64(after.HeapAlloc-before.HeapAlloc) / float64(players)
	return z, refs, per, after.HeapAlloc, float64(n) / float64(players)
}

// TestZoneFootprintAfterBacklog is TestZoneFootprint after a stall: the
// zone's tick came 600 ms late once (18 moves queued a player), then ten
// seconds of play drained the backlog. 2,506 B a player while a move
// queue gave back its room only above 32 moves (a backlog of 9 to 32 kept
// 16 to 32 moves' room, 512 B to 1 KB, for good); its room now follows
// its peak over the last 64 moves: 1,610–1,633 B alone (with or without
// -race), 1,760 B in a whole-package run (the runtime's per-P span caches
// count as allocated, as in TestZoneFootprint); 1,545 B alone and 1,695 B
// in a whole-package run with the held records at 12 B a slot; 1,513 B
// alone and 1,660–1,665 B in a whole-package run with a player's record
// in the 208-byte size class; 1,516 B alone and 1,643–1,644 B in a
// whole-package run with the handoff records at 48 B; 1,482 B alone and
// 1,610 B in a whole-package run with a slot at 176 B.
func TestZoneFootprintAfterBacklog(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	z, now := crowdZone(t, 250)
	var refs []ghost.ViewRef
	tick := 0
	for range 40 {
		now += 50 * time.Millisecond
		refs = crowdTick(z, 250, now, tick, nil, refs)
		tick++
	}
	for range 12 { // the stall: inputs, no tick
		crowdInput(z, 250, now, tick, nil)
		tick++
	}
	now += 12 * 50 * time.Millisecond
	z.Step(now)
	for range 200 {
		now += 50 * time.Millisecond
		refs = crowdTick(z, 250, now, tick, nil, refs)
		tick++
	}
	if q := z.Stats(); q.MovesDropped != 0 || q.MovesLost != 0 {
		t.Fatalf("moves dropped %d, lost %d", q.MovesDropped, q.MovesLost)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / 250
	t.Logf("zone footprint after a backlog: %.0f B per player", per)
	if per > 1665 {
		t.Errorf("zone holds %.0f B per player after a backlog, want ≤ 1,665", per)
	}
	runtime.KeepAlive(z)
}

// TestPlayerSlotSize keeps a player's record (Zone.pl, one a player) in the
// 192-byte size class: 208 bytes while it carried its connection's
// address (the handoff machine's record holds it: Zone.conn), 232 bytes,
// the 240-byte class, while its interest set carried its own counters
// (interest.Stats, now the tracker's).
func TestPlayerSlotSize(t *testing.T) {
	if n := unsafe.Sizeof(playerSlot{}); n > 192 {
		t.Errorf("playerSlot is %d bytes, want ≤ 192 (the 192-byte size class)", n)
	}
}

// TestEntitySize keeps a slot (every entity, players, NPCs and replicas,
// each tick's passes stream them) at 160 bytes: 208 while every slot
// carried a replica's owner, times and hold (now replicaSlot, made for
// replicas only), 176 while every slot carried a wanderer's generator,
// heading and speed (now npcSlot, made for NPCs only).
func TestEntitySize(t *testing.T) {
	if n := unsafe.Sizeof(entity{}); n > 160 {
		t.Errorf("entity is %d bytes, want ≤ 160", n)
	}
}

// TestPlayerSlotInputLines keeps what an input reads of a player's record
// (InputBatch: renumber and burst, then the queue's push fields, the
// first 42 bytes of a handoff.MoveQueue: TestMoveQueuePushFieldsFirst)
// within 50 bytes, one or two lines of a 16-byte aligned record: with
// credit and owed between flags and queue it was 82, two or three.
func TestPlayerSlotInputLines(t *testing.T) {
	var p playerSlot
	from := min(unsafe.Offsetof(p.renumber), unsafe.Offsetof(p.burst))
	if to := unsafe.Offsetof(p.queue) + 42; to-from > 50 {
		t.Errorf("an input reads bytes %d–%d of a playerSlot (%d), want ≤ 50: the queue right after renumber and burst", from, to, to-from)
	}
}

// TestZoneFootprint2000 is TestZoneFootprint1000 at cmd/capacity's 2,000
// players, all in one zone of the default size: ≈ 82 in each view (the
// bots see 79–80 at 2,000 over four zones), 400 NPCs. The part of a
// zone's heap a player that grows with the player count is its interest
// sets' (cmd/capacity's "zones" 1.4 KB a player at 1,000, 1.6 at 2,000),
// and the bound is on them: what the heap gives back when every player's
// set is emptied (its buffer; the 24-byte header stays in the player's
// record). 452 B a player's set and 1,744 B a player's zone (the tick's
// snapshot included, which cmd/capacity files under views) alone while a
// set kept a quarter and 4 entries of headroom and the room of its
// largest size for good; 396 B and 1,685 B with an eighth of headroom
// and room traded between sets (interest.Tracker's refit; in a crowd
// that drifts for a minute, 548 → 452–458 B: interest's
// TestSetRoomFollowsUse).
func TestZoneFootprint2000(t *testing.T) {
	const players = 2000
	z, refs, per, heap, inView := crowdFootprint(t, players)
	for i := range z.ents {
		if e := &z.ents[i]; e.pl != nil {
			e.pl.set = interest.Set{}
		}
	}
	var emptied runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&emptied)
	sets := float64(int64(heap)-int64(emptied.HeapAlloc)) / players
	t.Logf("zone footprint: %.0f B per player, %.0f B of it the interest set (%d players, %d slots, %.1f in view)", per, sets, players, len(z.ents), inView)
	if sets > 425 {
		t.Errorf("a player's interest set holds %.0f B at %.1f in view, want ≤ 425", sets, inView)
	}
	runtime.KeepAlive(z)
	runtime.KeepAlive(refs)
}
