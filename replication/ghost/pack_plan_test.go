package ghost

import (
	"bytes"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// TestUsualPlanFollowsTheRegistry: writeUsual reads a class from the plans
// of the scratch its Write borrowed, which tables of every registry share;
// a table's usual records are writeRecord's (the same packets as a twin
// given entry views) while a table of another registry, whose class
// indexes name other classes (the NPC at 0, the player at 1), writes
// right before each of its Writes. With the plans of the other registry
// the player's records would carry the NPC's group count and yaw bits.
func TestUsualPlanFollowsTheRegistry(t *testing.T) {
	regB, pc, nc := newTestRegistry(t) // player 0, NPC 1
	names := bitstream.NewStringTable(16)
	if err := names.Set(0, "wolf"); err != nil {
		t.Fatal(err)
	}
	regA, err := NewRegistry(DefaultBounds())
	if err != nil {
		t.Fatal(err)
	}
	ncA, pcA := NPCClass(names), PlayerClass(names)
	if err := regA.Register(ncA, pcA); err != nil { // NPC 0, player 1
		t.Fatal(err)
	}
	ta, tb, twin := tableFor(t, regA), tableFor(t, regB), tableFor(t, regB)
	swA, swB := writerFor(t, regA), writerFor(t, regB)
	const n = 16
	ents := make([]ViewEntry, n)
	entsA := make([]ViewEntry, n)
	for i := range ents {
		c, cA := pc, pcA
		if i%2 == 1 {
			c, cA = nc, ncA
		}
		st := State{Pos: [3]float64{float64(i)*4 - 30, 0, float64(i) - 8}, Health: 50, Name: MustName("wolf")}
		ents[i] = ViewEntry{Entity: uint64(100 + i), Class: c, Priority: float32(1 + i%3), State: st}
		entsA[i] = ViewEntry{Entity: uint64(100 + i), Class: cA, Priority: float32(1 + i%3), State: st}
	}
	refs := make([]ViewRef, n)
	refsA := make([]ViewRef, n)
	for i := range ents {
		refs[i] = NewViewRef(uint32(i), ents[i].Class, ents[i].Priority)
		refsA[i] = NewViewRef(uint32(i), entsA[i].Class, entsA[i].Priority)
	}
	now := time.Second
	var ba, bb, bt [MaxPacketBytes]byte
	var wa, wb, wt bitstream.Writer
	for seq := uint64(1); seq <= 60; seq++ {
		now += 50 * time.Millisecond
		for i := range ents {
			for _, e := range []*ViewEntry{&ents[i], &entsA[i]} {
				e.State.Pos[0] += 0.1 + 0.01*float64(i)
				e.State.Pos[2] -= 0.05 * float64(i%5)
				e.State.Yaw = float64(seq)*0.2 + float64(i)
			}
		}
		snA, snB := swA.Next(n), swB.Next(n)
		for i := range ents {
			snA.Set(i, entsA[i].Entity, entsA[i].Class, &entsA[i].State)
			snB.Set(i, ents[i].Entity, ents[i].Class, &ents[i].State)
		}
		swA.Seal(snA)
		swB.Seal(snB)
		if err := ta.SetSnapshotView(now, snA, refsA); err != nil {
			t.Fatal(err)
		}
		if err := tb.SetSnapshotView(now, snB, refs); err != nil {
			t.Fatal(err)
		}
		if err := twin.SetView(now, ents); err != nil {
			t.Fatal(err)
		}
		wa.Reset(ba[:])
		wb.Reset(bb[:])
		wt.Reset(bt[:])
		if _, err := ta.Write(&wa, seq, now); err != nil {
			t.Fatal(err)
		}
		nb, errB := tb.Write(&wb, seq, now)
		nt, errT := twin.Write(&wt, seq, now)
		if errB != nil || errT != nil || nb != nt || wb.BitLen() != wt.BitLen() || !bytes.Equal(wb.Bytes(), wt.Bytes()) {
			t.Fatalf("packet %d after the other registry's: %d records in %d bits (%v), the twin's %d in %d bits (%v)",
				seq, nb, wb.BitLen(), errB, nt, wt.BitLen(), errT)
		}
		f := notify.Fate{Seq: seq, Delivered: seq%5 != 0, SentAt: now}
		ta.OnFate(f)
		tb.OnFate(f)
		twin.OnFate(f)
	}
	// Enough usual records of both classes to tell: every ghost updated
	// most packets after the creates.
	if u := tb.Stats().Updates; u < 40*n {
		t.Fatalf("%d updates written, want at least %d", u, 40*n)
	}
}
