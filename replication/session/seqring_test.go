package session

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// TestSeqRingGrowsLikeAFixedFIFO drives the growable ring against a plain
// slice FIFO with the same bound through fills to the bound (so it grows all
// the way, wrapping at each size) and partial drains: same order, same
// len/full answers, and no allocation once grown.
func TestSeqRingGrowsLikeAFixedFIFO(t *testing.T) {
	const max = 1000 // not a power of two: the last doubling is capped
	var r seqRing[uint64]
	if cap(r.buf) != 0 {
		t.Fatalf("fresh ring holds %d slots, want 0 (grown on demand)", cap(r.buf))
	}
	for range 3 { // a ghost packet or three in flight: 64 bytes of room
		r.push(0, max)
	}
	if len(r.buf) != 8 {
		t.Fatalf("three in flight take %d slots, want 8", len(r.buf))
	}
	r.pop()
	r.pop()
	r.pop()
	var ref []uint64
	rng := rand.New(rand.NewPCG(7, 8))
	next := uint64(1)
	check := func() {
		t.Helper()
		if r.len() != len(ref) || r.full(max) != (len(ref) == max) {
			t.Fatalf("len %d full %v, want %d %v", r.len(), r.full(max), len(ref), len(ref) == max)
		}
		if len(ref) > 0 && r.front() != ref[0] {
			t.Fatalf("front %d, want %d", r.front(), ref[0])
		}
	}
	for round := 0; round < 40; round++ {
		for n := rng.IntN(max + 1); n > 0 && !r.full(max); n-- {
			r.push(next, max)
			ref = append(ref, next)
			next++
			check()
		}
		for n := rng.IntN(len(ref) + 1); n > 0; n-- {
			r.pop()
			ref = ref[1:]
			check()
		}
	}
	for !r.full(max) {
		r.push(next, max)
		ref = append(ref, next)
		next++
	}
	check()
	if len(r.buf) != max {
		t.Fatalf("ring grew to %d slots, want the bound %d", len(r.buf), max)
	}
	if a := testing.AllocsPerRun(100, func() { r.pop(); r.push(next, max); next++ }); a != 0 {
		t.Fatalf("%v allocations per push/pop once grown, want 0", a)
	}
}

// TestRelayManyInFlight keeps the relay's in-flight bound full, so its rings
// and fate queue must grow from empty to their maximum, and checks every
// section's fate comes out once, in order, with the right outcome, and that
// the section beyond the bound is dropped as before.
func TestRelayManyInFlight(t *testing.T) {
	const inflight = 300
	r, err := NewGhostRelay(64, inflight)
	if err != nil {
		t.Fatal(err)
	}
	sec := []byte{0xA5, 0x5A}
	pbuf := make([]byte, 64)
	var w bitstream.Writer
	for g := uint64(1); g <= inflight+1; g++ {
		now := time.Duration(g) * time.Millisecond
		if err := r.Offer(g, 1, sec, 16, now); err != nil {
			t.Fatal(err)
		}
		w.Reset(pbuf)
		n, err := r.Write(&w, 1000+g, now)
		if err != nil {
			t.Fatal(err)
		}
		if want := 1; g == inflight+1 {
			if n != 0 {
				t.Fatalf("section %d beyond the bound was written", g)
			}
		} else if n != want {
			t.Fatalf("section %d not written", g)
		}
	}
	if len(r.pkts.buf) != inflight || len(r.gs.buf) != inflight {
		t.Fatalf("rings hold %d/%d slots, want grown to %d", len(r.pkts.buf), len(r.gs.buf), inflight)
	}
	// The section beyond the bound was dropped at once.
	got := r.PopFates(nil)
	if len(got) != 1 || got[0].Seq != inflight+1 || got[0].Delivered {
		t.Fatalf("over-bound fates %+v, want one drop of %d", got, inflight+1)
	}
	// Resolve every packet without popping: the fate queue grows to hold all.
	for g := uint64(1); g <= inflight; g++ {
		r.OnFate(notify.Fate{Seq: 1000 + g, Delivered: g%3 != 0, SentAt: time.Duration(g)})
	}
	got = r.PopFates(got[:0])
	if len(got) != inflight || r.Lost() != 0 {
		t.Fatalf("%d fates, %d lost; want %d, 0", len(got), r.Lost(), inflight)
	}
	for i, f := range got {
		g := uint64(i + 1)
		if f.Seq != g || f.Delivered != (g%3 != 0) || f.SentAt != time.Duration(g) {
			t.Fatalf("fate %d: %+v, want seq %d delivered %v", i, f, g, g%3 != 0)
		}
	}
}

// TestGhostSeqAcrossTheWrap: a Server's 31-bit ghost packet entries order,
// match and restore the full sequences of the packets in flight (within
// MaxMaxInFlight below notify's NextSeq) on both sides of every 2^31
// boundary, with and without the early mark.
func TestGhostSeqAcrossTheWrap(t *testing.T) {
	for _, next := range []uint64{1, 1 << 16, 1<<31 - 3, 1 << 31, 1<<31 + 5, 1<<32 + 2, 5<<31 + 1, 1<<62 - 7} {
		for _, back := range []uint64{1, 2, 1000, notify.MaxMaxInFlight} {
			if back > next {
				continue
			}
			seq := next - back
			v := ghostSeqOf(seq)
			for _, e := range []uint32{v, v | ghostEarly} {
				if got := ghostSeqFull(e&^ghostEarly, next); got != seq {
					t.Fatalf("next %d, seq %d: restored %d", next, seq, got)
				}
				if !ghostSeqIs(e, seq) || ghostSeqIs(e, seq+1) || ghostSeqIs(e, seq-1) {
					t.Fatalf("next %d, seq %d: entry %#x matches wrongly", next, seq, e)
				}
				if ghostSeqBefore(e, seq) || !ghostSeqBefore(e, seq+1) || !ghostSeqBefore(e, next) || (seq > 0 && ghostSeqBefore(e, seq-1)) {
					t.Fatalf("next %d, seq %d: entry %#x ordered wrongly", next, seq, e)
				}
			}
		}
	}
}
