package ghost

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/ghostwire/ghostwire/replication/notify"
)

// The position track is 40 bytes (posTrack's comment): 16-bit stamps,
// the list's tail in ft[1] and fq[1]'s stamp in the tail node's spare
// bits, so the node stays 16 bytes and a tail index fits a stamp.
func TestPosTrackLayout(t *testing.T) {
	if got := unsafe.Sizeof(posTrack{}); got != 32 {
		t.Fatalf("posTrack is %d bytes, want 32", got)
	}
	if got := unsafe.Sizeof(posNode{}); got != 16 {
		t.Fatalf("posNode is %d bytes, want 16", got)
	}
	if maxPoolNodes > 1<<16 {
		t.Fatalf("a pool of %d nodes: a tail index does not fit ft[1]", maxPoolNodes)
	}
}

// Positions in flight and delivered across long gaps: a ghost idle for
// seconds to hours (views every few seconds, or one jump of the clock),
// and the fates of two packets carrying its position reported only after
// the gap, before or after the first view past it — the first delivered
// (a jump of 30 m the client shows), the second lost (back where it was).
// Then the ghost walks again: the client decodes every position right.
// A track that forgot the client's newest without forgetting what it
// knew delivered would code the walk against the old spot while the
// client predicts from the jump (posTrack.rebase).
func TestPositionsAcrossLongGaps(t *testing.T) {
	gaps := []time.Duration{
		5 * time.Second,
		posFlightAge*time.Millisecond - time.Second,
		posFlightAge*time.Millisecond + time.Second,
		(posFlightAge + posRebaseSpan + 500) * time.Millisecond,
		32 * time.Second,
		40 * time.Second,
		70 * time.Second,
		10 * time.Minute,
		3 * time.Hour,
	}
	for _, gap := range gaps {
		for _, start := range []time.Duration{time.Second, (1<<32 - 20_000) * time.Millisecond, (1<<16 - 3_000) * time.Millisecond} {
			for _, views := range []bool{true, false} {
				for _, fateFirst := range []bool{true, false} {
					name := fmt.Sprintf("gap %v start %v views %v fate first %v", gap, start, views, fateFirst)
					t.Run(name, func(t *testing.T) { posGapCase(t, gap, start, views, fateFirst) })
				}
			}
		}
	}
}

func posGapCase(t *testing.T, gap, start time.Duration, views, fateFirst bool) {
	d := newDuo(t, DefaultConfig())
	d.now = start
	a, b := d.npc(1, 100), d.npc(2, 200)
	check := func(what string) {
		t.Helper()
		if m := mismatch(d.reg, d.mir, []ViewEntry{a, b}); m != "" {
			t.Fatalf("%s: %s", what, m)
		}
	}
	walk := func() {
		a.State.Pos[0] += 0.37
		b.State.Pos[2] += 0.21
	}
	for range 40 {
		walk()
		d.view(a, b)
		d.trip()
		check("walking")
	}
	// A jump the client receives, its fate late; then back, lost.
	a.State.Pos[0] += 30
	d.view(a, b)
	s1, p1, _ := d.send(MaxPacketBytes)
	d.recv(p1)
	sent1 := d.now
	a.State.Pos[0] -= 30
	d.view(a, b)
	s2, _, _ := d.send(MaxPacketBytes)
	sent2 := d.now
	end := d.now + gap
	if views {
		for d.now+5*time.Second < end {
			d.now += 5*time.Second - 50*time.Millisecond
			d.view(a, b)
			seq, _, _ := d.send(MaxPacketBytes)
			d.fate(seq, false) // lost: the client shows the jump till the end
		}
	}
	late := func() {
		d.tab.OnFate(notify.Fate{Seq: s1, Delivered: true, SentAt: sent1})
		d.tab.OnFate(notify.Fate{Seq: s2, Delivered: false, SentAt: sent2})
		if err := checkInvariants(d.tab); err != nil {
			t.Fatal(err)
		}
	}
	d.now = end - 50*time.Millisecond
	if fateFirst {
		late()
		d.view(a, b)
	} else {
		d.view(a, b)
		late()
	}
	d.trip()
	check("the first view after the gap")
	// b stood still through the gap, its newest delivered value as old
	// as the gap: it jumps away and back. A track that read that age
	// wrapped would take the jump's delivery for an older value, and the
	// way back for what the client shows.
	b.State.Pos[2] += 30
	d.view(a, b)
	d.trip()
	check("b's jump")
	b.State.Pos[2] -= 30
	d.view(a, b)
	d.trip()
	check("b back")
	for i := range 40 {
		walk()
		d.view(a, b)
		d.trip()
		check(fmt.Sprintf("walking %d views after the gap", i))
	}
}

// A fate 65,536 ms late — its stamp's 16 bits those of a position sent
// at the latest view, still in flight — resolves nothing (posKey): the
// client has the late packet's jump and not the newer packet's way back,
// and the track must not take one for the other.
func TestLateFateMatchesNoNewerPosition(t *testing.T) {
	for _, start := range []time.Duration{time.Second, (1<<32 - 20_000) * time.Millisecond} {
		d := newDuo(t, DefaultConfig())
		d.now = start
		a := d.npc(1, 100)
		for range 10 {
			a.State.Pos[0] += 0.37
			d.view(a)
			d.trip()
		}
		a.State.Pos[0] += 30
		d.view(a)
		s1, p1, _ := d.send(MaxPacketBytes)
		d.recv(p1)
		sent1 := d.now
		a.State.Pos[0] -= 30
		d.now += 1<<16*time.Millisecond - 50*time.Millisecond
		d.view(a)
		if pstamp(d.tab.viewMS) != pstamp(sent1/time.Millisecond) {
			t.Fatal("the case is not tested: the two views' 16 bits differ")
		}
		s2, _, _ := d.send(MaxPacketBytes) // lost
		d.tab.OnFate(notify.Fate{Seq: s1, Delivered: true, SentAt: sent1})
		d.tab.OnFate(notify.Fate{Seq: s2, Delivered: false, SentAt: d.now})
		if err := checkInvariants(d.tab); err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			a.State.Pos[0] += 0.37
			d.view(a)
			d.trip()
			if m := mismatch(d.reg, d.mir, []ViewEntry{a}); m != "" {
				t.Fatalf("start %v, %d views on: %s", start, i, m)
			}
		}
	}
}

// A table living for hours: a walking ghost and one that stops for
// minutes at a time, views every 100 ms to 2 s, packets lost and fates
// late by up to 40 s, for 4 hours of view time (≈ 1,750 stamp rebases):
// the client decodes every position the table sends, and the table keeps
// its invariants.
func TestPositionsForHours(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	d.now = (1<<32 - 3_600_000) * time.Millisecond // the 32-bit stamps wrap on the way
	r := rand.New(rand.NewPCG(40, 2))
	a, b := d.npc(1, 100), d.npc(2, 200)
	type held struct {
		seq     uint64
		at, due time.Duration
		recv    bool
	}
	var flight []held
	end := d.now + 4*time.Hour
	var bStill time.Duration
	var va [3]float64
	rebases, checked := 0, 0
	for d.now < end {
		step := 100 * time.Millisecond
		if r.IntN(20) == 0 {
			step = time.Duration(1+r.IntN(20)) * 100 * time.Millisecond
		}
		if (d.now+step)>>posRebaseShift/time.Millisecond != d.now>>posRebaseShift/time.Millisecond {
			rebases++
		}
		d.now += step - 50*time.Millisecond
		if r.IntN(50) == 0 { // a new heading
			va = [3]float64{float64(r.IntN(101)-50) / 100, 0, float64(r.IntN(101)-50) / 100}
		}
		for k := range 3 {
			if p := a.State.Pos[k] + va[k]; p < -1900 || p > 1900 {
				va[k] = -va[k]
			}
			a.State.Pos[k] += va[k]
		}
		if d.now > bStill {
			b.State.Pos[1] += float64(r.IntN(31)-15) / 100
			b.State.Pos[1] = max(-200, min(b.State.Pos[1], 200))
			if r.IntN(200) == 0 {
				bStill = d.now + time.Duration(r.IntN(600))*time.Second
			}
		}
		d.view(a, b)
		kept := flight[:0]
		for _, f := range flight {
			if f.due <= d.now {
				d.tab.OnFate(notify.Fate{Seq: f.seq, Delivered: f.recv, SentAt: f.at})
			} else {
				kept = append(kept, f)
			}
		}
		flight = kept
		seq, pkt, _ := d.send(MaxPacketBytes)
		h := held{seq: seq, at: d.now, due: d.now + 50*time.Millisecond, recv: r.IntN(10) != 0}
		switch r.IntN(200) {
		case 0:
			h.due = d.now + time.Duration(r.IntN(40_000))*time.Millisecond
		case 1:
			h.due = d.now + time.Duration(r.IntN(3_000))*time.Millisecond
		}
		// The client gets it now or never; its fate comes when due, in
		// any order. With no other packet in flight, this one carries
		// both ghosts as they are.
		if h.recv {
			d.recv(pkt)
			if len(flight) == 0 {
				checked++
				if m := mismatch(d.reg, d.mir, []ViewEntry{a, b}); m != "" {
					t.Fatalf("at %v: %s", d.now, m)
				}
			}
		}
		flight = append(flight, h)
	}
	if err := checkInvariants(d.tab); err != nil {
		t.Fatal(err)
	}
	if rebases < 1500 || checked < 30000 || d.mir.Stats().Unreferenced != 0 {
		t.Fatalf("%d stamp rebases, %d packets checked, %d positions the client could not reference", rebases, checked, d.mir.Stats().Unreferenced)
	}
}
