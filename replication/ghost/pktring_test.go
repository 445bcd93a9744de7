package ghost

import (
	"testing"
)

// A burst of packets in flight (a second without a fate) doubles the
// packet ring to 32 records; once the fates come back to one packet in
// flight it halves back to its first 4 within a few seconds (it kept the
// burst's room for the connection's life), the ghosts stay exact, and a
// ring at a steady use of more than half its records (fates ten packets
// late: 16 records) neither moves nor allocates.
func TestPacketRingShrinksAfterBurst(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	view := d.npcs(60)
	d.view(view...)
	d.settle(view...)
	type sent struct {
		seq uint64
		pkt []byte
	}
	var queue []sent
	// step takes a view of the walking ghosts, their health changing
	// (every packet carries records: a position waits while posRingLen
	// of it are in flight, a health does not), sends a packet, and
	// delivers the oldest in flight once more than lag are.
	step := func(lag int) {
		for i := range view {
			view[i].State.Pos[2] += 0.5
			view[i].State.Health = 1 + view[i].State.Health%90
		}
		d.view(view...)
		seq, pkt, _ := d.send(MaxPacketBytes)
		queue = append(queue, sent{seq, pkt})
		for len(queue) > lag {
			d.recv(queue[0].pkt)
			d.fate(queue[0].seq, true)
			queue = queue[1:]
		}
	}
	for range 24 { // ≈ 1.2 s without a fate
		step(24)
	}
	if n := len(d.tab.pkts); n != 32 {
		t.Fatalf("%d packets in flight in a ring of %d, want 32", d.tab.pktLen, n)
	}
	for range 200 { // 10 s of one packet in flight (and the burst's fates): a halving a check at most
		step(0)
	}
	if n := len(d.tab.pkts); n != initialPackets {
		t.Fatalf("after the burst: a ring of %d packets, want %d", n, initialPackets)
	}
	for range 40 { // fates ten packets late: the ring grows to 16
		step(10)
	}
	ring := &d.tab.pkts[0]
	for range 100 {
		step(10)
	}
	if n := len(d.tab.pkts); n != 16 || &d.tab.pkts[0] != ring {
		t.Fatalf("ten packets in flight: a ring of %d, moved %v; want 16, not moved", n, &d.tab.pkts[0] != ring)
	}
	for range 10 {
		step(0)
	}
	d.settle(view...)
	d.exact(view)
}

// A peak of entities in view (a crowd the player walked through) grows
// the view order's hints; once the view is at most half their room, the
// next trim gives it back, the hints kept (the next views still find
// their ghosts), and a view walking within the room does not move them.
func TestViewOrderShrinksAfterPeak(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	crowd := d.npcs(200)
	d.view(crowd...)
	d.settle(crowd...)
	if c := cap(d.tab.order); c < 200 {
		t.Fatalf("a view of 200 in %d hints", c)
	}
	few := crowd[:40]
	walk := func(n int) {
		for range n {
			for i := range few {
				few[i].State.Pos[2] += 0.5
			}
			d.view(few...)
			d.trip()
		}
	}
	walk(40) // 2 s: a trim runs
	if c, want := cap(d.tab.order), roomFor(40+40/8, 2); c != want || want != 48 {
		t.Fatalf("a view of 40 after 200: %d hints of room, want %d (48: an eighth over, a 96-byte block)", c, want)
	}
	order := &d.tab.order[0]
	few = crowd[:26] // more than half of 48: kept
	walk(40)
	if &d.tab.order[0] != order {
		t.Fatalf("a view of 26 in room for 50 moved the hints (now %d)", cap(d.tab.order))
	}
	d.settle(few...)
	d.exact(few)
}
