package ghost

import (
	"testing"
	"time"
)

// A burst of packets in flight (a fate delay of a second once) grows the
// record ring and the position pool; once the fates are back to one packet
// in flight, the ring shrinks to about twice its use and the pool, no
// longer used (each ghost's positions in flight are its track's own), goes
// entirely within a couple of seconds, the ghosts stay exact, and a table
// at its steady use allocates nothing.
func TestInFlightStoresShrinkAfterBurst(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	view := d.npcs(60)
	move := func() {
		for i := range view {
			view[i].State.Pos[2] += 0.5
		}
		d.view(view...)
	}
	d.view(view...)
	d.settle(view...)
	var burst []uint64
	var pkts [][]byte
	for range 24 { // ≈ 1.2 s without a fate
		move()
		seq, pkt, _ := d.send(MaxPacketBytes)
		burst, pkts = append(burst, seq), append(pkts, pkt)
	}
	ring, pool := len(d.tab.ents), cap(d.tab.pp.nodes)
	if ring < 1024 || pool < len(view)*(posRingLen-ownFlight) { // each ghost's newest past its own two
		t.Fatalf("the burst did not grow the stores: ring %d, pool %d", ring, pool)
	}
	for i, seq := range burst {
		d.recv(pkts[i])
		d.fate(seq, true)
	}
	for range 60 { // 3 s of one packet in flight
		move()
		d.trip()
	}
	if r, p := len(d.tab.ents), cap(d.tab.pp.nodes); r > 256 || p != 0 || cap(d.tab.pp.free) != 0 {
		t.Fatalf("after the burst: ring %d (was %d), pool %d (was %d), %d words of free bits", r, ring, p, pool, cap(d.tab.pp.free))
	}
	d.settle(view...)
	if diff := mismatch(d.reg, d.mir, view); diff != "" {
		t.Fatal(diff)
	}
	allocs := testing.AllocsPerRun(100, func() {
		for i := range view {
			view[i].State.Pos[2] += 0.5
		}
		d.now += 50 * time.Millisecond
		if err := d.tab.SetView(d.now, view); err != nil {
			t.Fatal(err)
		}
		d.seq++
		d.w.Reset(d.buf[:])
		if _, err := d.tab.Write(&d.w, d.seq, d.now); err != nil {
			t.Fatal(err)
		}
		d.tab.OnFate(notifyDelivered(d.seq, d.now))
	})
	if allocs != 0 {
		t.Fatalf("%.2f allocations per steady view and packet after trimming", allocs)
	}
}

// A peak of ghosts in scope grows the per-id arrays; once the scope is
// small again and its ids low, the next trims bring them down to an eighth
// above the ids in use, and the ghosts stay exact through the shrink and
// a regrowth.
func TestIDArraysShrinkAfterPeak(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	crowd := d.npcs(200)
	d.view(crowd...)
	d.settle(crowd...)
	if n := len(d.tab.slots); n < 200 {
		t.Fatalf("200 ghosts in %d slots", n)
	}
	few := crowd[:12] // ids 0..11
	for range 60 {    // 3 s: the kills go out and are delivered, trims run
		for i := range few {
			few[i].State.Pos[2] += 0.5
		}
		d.view(few...)
		d.trip()
	}
	d.settle(few...)
	if int(d.tab.top) != len(few) {
		t.Fatalf("top %d, want %d", d.tab.top, len(few))
	}
	if n, lf := len(d.tab.slots), len(d.tab.lastField); n > 24 || len(d.tab.pos) != n || len(d.tab.rare.views.states) != n || len(d.tab.rare.views.qs) != n || lf != n*int(d.tab.stride) {
		t.Fatalf("after the peak: %d slots, %d tracks, %d states, %d qs, %d field seqs", n, len(d.tab.pos), len(d.tab.rare.views.states), len(d.tab.rare.views.qs), lf)
	}
	if diff := mismatch(d.reg, d.mir, few); diff != "" {
		t.Fatal(diff)
	}
	d.view(crowd[:100]...) // grows again
	d.settle(crowd[:100]...)
	d.exact(crowd[:100])
}

// A scope that settles smaller than it was (70 ghosts, then 45) gives the
// per-id arrays back down to its ids, with their size classes' room
// (recordsFit; whole 8s before), within a few seconds (they used to wait for
// the ids to fit in half, then kept an eighth of room: 56), a scope
// walking within that room does not move them again,
// and the room a growth past them took is given back.
func TestIDArraysFollowScope(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	crowd := d.npcs(70)
	d.view(crowd...)
	d.settle(crowd...)
	if n := len(d.tab.slots); n < 70 {
		t.Fatalf("70 ghosts in %d slots", n)
	}
	scope := crowd[:45] // ids 0..44
	step := func(views int) {
		for range views {
			for i := range scope {
				scope[i].State.Pos[2] += 0.5
			}
			d.view(scope...)
			d.trip()
		}
	}
	step(80) // 4 s: the kills go out and are delivered, trims run
	if n, want := len(d.tab.slots), d.tab.recordsFit(45); n != want || len(d.tab.pos) != n || len(d.tab.lastField) != n*int(d.tab.stride) {
		t.Fatalf("45 ghosts after 70: %d slots (want %d), %d tracks, %d field seqs", n, want, len(d.tab.pos), len(d.tab.lastField))
	}
	slots := &d.tab.slots[0]
	for _, n := range []int{47, 41, 48} { // within the room: nothing moves
		scope = crowd[:n]
		step(40)
	}
	if &d.tab.slots[0] != slots {
		t.Fatalf("a scope of 41-48 moved the per-id arrays (now %d)", len(d.tab.slots))
	}
	scope = crowd[:50]
	step(10)
	if n, want := len(d.tab.slots), d.tab.recordsFit(48+48/8); n != want || want < 54 {
		t.Fatalf("50 ghosts after 48: %d slots, want %d (48 and an eighth, to the size classes' room)", n, want)
	}
	scope = crowd[:46]
	step(80)
	if n := len(d.tab.slots); n != 48 {
		t.Fatalf("46 ghosts after 50: %d slots, want 48", n)
	}
	d.settle(scope...)
	d.exact(scope)
}

// A burst of leaves (40 ghosts out of scope at once, snapshot views)
// grows the gone records; once their kills are delivered the trim gives
// the room back (it stayed for the connection's life: 2 KB), and with a
// few still leaving it keeps about what they need.
func TestGoneRecordsShrinkAfterBurst(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	sw := writerFor(t, d.reg)
	ents := make([]ViewEntry, 44)
	all := make([]int, len(ents))
	for i := range ents {
		ents[i] = d.npc(uint64(i+1), float64(i))
		all[i] = i
	}
	d.snapView(sw, ents, all...)
	d.settleSnap(sw, ents, all...)
	d.snapView(sw, ents, all[40:]...) // 40 leave
	if n := len(d.tab.gone); n != 40 {
		t.Fatalf("%d gone records after 40 left, want 40", n)
	}
	peak := cap(d.tab.gone)
	d.settleSnap(sw, ents, all[40:]...)
	walk := func(in []int) { // the ghosts that stay walk: packets carry records, fates trim
		for range 50 { // two and a half seconds
			for _, i := range in {
				ents[i].State.Pos[2] += 0.5
			}
			d.snapView(sw, ents, in...)
			d.trip()
		}
	}
	walk(all[40:])
	if n, c := len(d.tab.gone), cap(d.tab.gone); n != 0 || c != 0 {
		t.Fatalf("after the kills: %d gone records in room for %d (%d at the burst), want none", n, c, peak)
	}
	// Two leave and stay unconfirmed (their kills are never delivered)
	// while 30 others leave and are settled: the room follows the two.
	d.snapView(sw, ents, all...)
	d.settleSnap(sw, ents, all...)
	d.snapView(sw, ents, all[2:]...)
	seq, _, _ := d.send(MaxPacketBytes) // the two kills, never reported
	walk(all[32:])
	if n, c := len(d.tab.gone), cap(d.tab.gone); n != 2 || c > 4 {
		t.Fatalf("two kills unconfirmed: %d gone records in room for %d, want 2 in at most 4", n, c)
	}
	d.fate(seq, true)
	if err := checkInvariants(d.tab); err != nil {
		t.Fatal(err)
	}
}
