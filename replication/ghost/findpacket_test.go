package ghost

import (
	"slices"
	"testing"
)

// TestFindPacketAtTheHeadAndBehindIt: findPacket names each packet in
// flight by its seq — the oldest, the usual fate's (the ring's head,
// found without a search), and those behind it (fates out of order) —
// and no packet for a seq resolved, never written, newer than the newest,
// or 2^32 older than one in flight (the same low 32 bits).
func TestFindPacketAtTheHeadAndBehindIt(t *testing.T) {
	r := newFieldRig(t)
	r.seq = 3 << 32 // the ring keeps 32 bits of a seq: start past them
	var seqs []uint64
	for range 5 {
		r.step(2, 100) // every other seq: the ones between were never written
		seqs = append(seqs, r.seq)
	}
	tab := r.tab
	found := func(seq uint64, want bool) {
		t.Helper()
		i, ok := tab.findPacket(seq)
		switch {
		case ok != want:
			t.Fatalf("findPacket(%#x) found %v, want %v", seq, ok, want)
		case ok && uint64(tab.pkts[i].seq) != seq&(1<<32-1):
			t.Fatalf("findPacket(%#x) = packet %#x", seq, tab.pkts[i].seq)
		}
	}
	check := func(resolved ...uint64) {
		t.Helper()
		for _, s := range seqs {
			found(s, !slices.Contains(resolved, s))
			found(s-1, false)     // never written
			found(s-1<<32, false) // 2^32 before: the same low bits
		}
		found(seqs[len(seqs)-1]+2, false) // not written yet
	}
	if int(tab.pktLen) != len(seqs) {
		t.Fatalf("%d packets in flight, want %d", tab.pktLen, len(seqs))
	}
	check()
	r.fate(seqs[2], true) // out of order: behind the head
	check(seqs[2])
	r.fate(seqs[0], false) // the head
	check(seqs[0], seqs[2])
	r.fate(seqs[1], true) // the head, and the resolved one behind it goes too
	check(seqs[0], seqs[1], seqs[2])
	if tab.pktLen != 2 {
		t.Fatalf("%d packets in flight after three of five resolved, want 2", tab.pktLen)
	}
	r.fate(seqs[4], true)
	r.fate(seqs[3], true)
	check(seqs...)
	if tab.pktLen != 0 || tab.stats.UnknownFates != 0 {
		t.Fatalf("%d packets in flight, %d fates unknown: want 0 and 0", tab.pktLen, tab.stats.UnknownFates)
	}
}
