package ghost

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// writeUsual (with flightDeltas) writes what writeRecord writes, and leaves
// the table as writeRecord leaves it: snapshot views (whose usual records
// it takes) against entry views of the same states (which go by
// writeRecord alone), on a server's schedule — each packet's fate before
// the next Write, views 48–52 ms apart, walkers at constant velocity —
// with the corners they must leave or take as writeRecord does: drops
// (rest markers resent), stops (rest markers, then a position the client
// has), jumps (past the window: absolute), late fates (positions in
// flight, up to posRingLen: deferred), entities leaving and entering,
// and short budgets (misses). Half the entities are a crowd's: each
// update carries a move sequence (Extra[0], a 25-bit code and more), now
// and then a new velocity, health or flags, so their records pass one run
// of the writer's fast path (runMax), and some pass two.
func TestWriteUsualIsWriteRecord(t *testing.T) {
	reg, cs := codeTestClasses(t)
	ta := tableFor(t, reg) // entry views: writeRecord
	tb := tableFor(t, reg) // snapshot views: writeUsual, else writeRecord
	sw := writerFor(t, reg)
	r := rand.New(rand.NewPCG(9, 4))
	const n = 64
	ents := make([]ViewEntry, n)
	vel := make([][2]float64, n)
	pause := make([]int, n)
	for i := range ents {
		c := cs[i%len(cs)]
		ents[i] = ViewEntry{Entity: uint64(100 + i), Class: c, Priority: float32(1 + i%5), State: randCodeState(r)}
		if i%2 == 0 { // the crowd's: a move sequence, small counters
			ents[i].State.Extra = [4]uint32{uint32(4000 + 37*i), uint32(i % 3), 0, 0}
		}
		fitState(c, &ents[i].State)
		vel[i] = [2]float64{r.Float64()*6 - 3, r.Float64()*6 - 3}
	}
	now := time.Second
	var ba, bb [MaxPacketBytes]byte
	var wa, wb bitstream.Writer
	var late []notify.Fate
	var killing []uint32
	unkills := 0
	for seq := uint64(1); seq <= 600; seq++ {
		dt := time.Duration(48+r.IntN(5)) * time.Millisecond
		now += dt
		for i := range ents {
			e := &ents[i]
			switch k := r.IntN(100); {
			case k < 3: // a jump: past any window
				e.State.Pos[0] = r.Float64()*200 - 100
			case k < 6 || pause[i] > 0: // stands still (a rest marker goes)
				pause[i] = max(pause[i]-1, 0)
			case k < 8: // stops for a few views
				pause[i] = 1 + r.IntN(6)
			case k < 10: // a new heading
				vel[i] = [2]float64{r.Float64()*6 - 3, r.Float64()*6 - 3}
			case k < 12: // a new yaw
				e.State.Yaw = r.Float64() * 6
			default: // walks on
				e.State.Pos[0] += vel[i][0] * dt.Seconds()
				e.State.Pos[2] += vel[i][1] * dt.Seconds()
			}
			if i%2 == 0 { // the crowd's
				e.State.Extra[0] += uint32(r.IntN(3))
				switch k := r.IntN(16); {
				case k < 4:
					e.State.Vel = [3]float64{r.Float64()*8 - 4, 0, r.Float64()*8 - 4}
				case k < 5:
					e.State.Health = int32(r.IntN(201))
				case k < 6:
					e.State.Flags = uint32(r.IntN(256))
				case k < 7: // a wide counter now and then: no code (Encode writes it)
					e.State.Extra[3] = []uint32{0, r.Uint32()}[r.IntN(2)]
				}
				fitState(e.Class, &e.State)
			}
		}
		// Now and then a few entities leave the view for a while, also
		// while the fates stall: their kills cannot go (records of theirs
		// in flight), so they re-enter with their ids and only what
		// changed meanwhile. The zone's snapshot holds every entity (a
		// view is a part of it), as a zone's does: an entity that leaves
		// the snapshot itself is TestReentryOutsideTheSnapshot's case.
		view := ents
		if seq%37 > 33 {
			view = ents[:n-5]
		}
		killing = killing[:0]
		for rc := range uint32(tb.live) {
			if tb.slots[rc].phase == phaseKilling {
				killing = append(killing, tb.idOf(rc))
			}
		}
		if err := ta.SetView(now, view); err != nil {
			t.Fatal(err)
		}
		sn := sw.Next(len(ents))
		for i := range ents {
			sn.Set(i, ents[i].Entity, ents[i].Class, &ents[i].State)
		}
		refs := make([]ViewRef, len(view))
		for i := range view {
			refs[i] = NewViewRef(uint32(i), view[i].Class, view[i].Priority)
		}
		sw.Seal(sn)
		if err := tb.SetSnapshotView(now, sn, refs); err != nil {
			t.Fatal(err)
		}
		for _, id := range killing {
			if tb.inUse(id) && tb.slotOf(id).phase == phaseLive {
				unkills++ // re-entered before its kill went out
			}
		}
		size := MaxPacketBytes
		if seq%2 == 0 {
			size = 20 + r.IntN(140) // misses
		}
		wa.Reset(ba[:size])
		wb.Reset(bb[:size])
		na, errA := ta.Write(&wa, seq, now)
		nb, errB := tb.Write(&wb, seq, now)
		if errA != nil || errB != nil || na != nb || wa.BitLen() != wb.BitLen() || !bytes.Equal(wa.Bytes(), wb.Bytes()) {
			t.Fatalf("packet %d: writeRecord wrote %d records in %d bits (%v), writeUsual's table %d in %d bits (%v)",
				seq, na, wa.BitLen(), errA, nb, wb.BitLen(), errB)
		}
		f := notify.Fate{Seq: seq, Delivered: r.IntN(6) != 0, SentAt: now}
		late = append(late, f)
		switch {
		case seq%150 >= 125: // the return path stalls: posRingLen in flight, then all at once
			continue
		case r.IntN(10) == 0: // a fate after the next Write: a position in flight
			if len(late) == 1 {
				continue
			}
		}
		for _, f := range late {
			ta.OnFate(f)
			tb.OnFate(f)
		}
		late = late[:0]
		if err := checkInvariants(tb); err != nil {
			t.Fatalf("packet %d: %v", seq, err)
		}
	}
	sa, sb := ta.Stats(), tb.Stats()
	if sa != sb {
		t.Fatalf("stats differ: writeRecord's table %+v, writeUsual's %+v", sa, sb)
	}
	if sa.Updates < 10000 || sa.UpdatesLost < 500 || sa.AbsolutePos < 100 || sa.PosDeferred < 20 || unkills < 10 {
		t.Fatalf("too few of the cases compared: %d re-entries before the kill, %+v", unkills, sa)
	}
	if err := checkInvariants(ta); err != nil {
		t.Fatal(err)
	}
	if err := checkInvariants(tb); err != nil {
		t.Fatal(err)
	}
}

// An entity that leaves the zone's snapshot itself (not only a
// connection's view of it) and comes back before its kill went out: entry
// views diff its state against the table's copy of it and mark the groups
// that changed; snapshot views mark every group, because neither the
// writer (it stamps an entry absent from its previous snapshot new in
// every group) nor the table (a gone ghost keeps its entry's place and
// position, not its groups) knows what changed. Both are the protocol's
// (a group sent again with its value is applied by stamp, a no-op for the
// client): the snapshot view sends a superset, and the client ends with
// the same state either way. TestWriteUsualIsWriteRecord covers the case
// where the snapshot keeps the entity (the views agree to the bit).
func TestReentryOutsideTheSnapshot(t *testing.T) {
	reg, pc, _ := newTestRegistry(t)
	ta, tb := tableFor(t, reg), tableFor(t, reg)
	sw := writerFor(t, reg)
	ma, _ := NewMirror(reg, DefaultMirrorConfig())
	mb, _ := NewMirror(reg, DefaultMirrorConfig())
	a := ViewEntry{Entity: 1, Class: pc, Priority: 1}
	b := ViewEntry{Entity: 2, Class: pc, Priority: 1}
	a.State.Pos, b.State.Pos = [3]float64{1, 0, 1}, [3]float64{5, 0, 5}
	a.State.Health, b.State.Health = 70, 70
	now := time.Second
	var seq uint64
	var ba, bb [MaxPacketBytes]byte
	var wa, wb bitstream.Writer
	var ra, rb bitstream.Reader
	round := func(deliver bool, view ...ViewEntry) {
		t.Helper()
		now += 50 * time.Millisecond
		if err := ta.SetView(now, view); err != nil {
			t.Fatal(err)
		}
		sn := sw.Next(len(view))
		refs := make([]ViewRef, len(view))
		for i := range view {
			sn.Set(i, view[i].Entity, view[i].Class, &view[i].State)
			refs[i] = NewViewRef(uint32(i), view[i].Class, view[i].Priority)
		}
		sw.Seal(sn)
		if err := tb.SetSnapshotView(now, sn, refs); err != nil {
			t.Fatal(err)
		}
		seq++
		wa.Reset(ba[:])
		wb.Reset(bb[:])
		if _, err := ta.Write(&wa, seq, now); err != nil {
			t.Fatal(err)
		}
		if _, err := tb.Write(&wb, seq, now); err != nil {
			t.Fatal(err)
		}
		if !deliver {
			return // the return path stalls: nothing delivered, no fate
		}
		ra.Reset(wa.Bytes())
		rb.Reset(wb.Bytes())
		if err := ma.Read(&ra, now); err != nil {
			t.Fatal(err)
		}
		if err := mb.Read(&rb, now); err != nil {
			t.Fatal(err)
		}
		ta.OnFate(notify.Fate{Seq: seq, Delivered: true, SentAt: now})
		tb.OnFate(notify.Fate{Seq: seq, Delivered: true, SentAt: now})
	}
	for range 4 {
		round(true, a, b)
	}
	stall := seq
	b.State.Pos[0] += 1
	round(false, a, b) // b's update in flight: its kill must wait
	round(false, a)    // b leaves the snapshot
	b.State.Yaw = 1    // changes while out of it
	round(false, a, b) // and is back before its kill went out
	ida, _ := ta.idxGet(2)
	idb, _ := tb.idxGet(2)
	sa, sb := ta.slotOf(ida), tb.slotOf(idb)
	if sa.phase != phaseLive || sb.phase != phaseLive {
		t.Fatalf("b re-entered as phase %d (entry views), %d (snapshot views), want live: the case is not tested", sa.phase, sb.phase)
	}
	want := uint64(1) << uint(pc.yawIdx)
	// The yaw went out in the packet just written (nothing else of b
	// was dirty): entry views have nothing left, snapshot views the rest.
	if got := ta.unconfirmed(ta.recOf(ida), sa, pc) | ta.dirtyAt(ida); got&want == 0 || got&^(want|pc.posBit) != 0 {
		t.Errorf("entry views: b's unconfirmed or dirty groups %b, want the yaw's %b (and the position)", got, want)
	}
	if got := tb.unconfirmed(tb.recOf(idb), sb, pc) | tb.dirtyAt(idb); got&pc.all != pc.all {
		t.Errorf("snapshot views: b's unconfirmed or dirty groups %b, want every group %b", got, pc.all)
	}
	// The return path comes back: the stalled packets are reported lost
	// (the clients never read them), and the views go on delivered.
	for s := stall + 1; s <= seq; s++ {
		ta.OnFate(notify.Fate{Seq: s, Delivered: false, SentAt: now})
		tb.OnFate(notify.Fate{Seq: s, Delivered: false, SentAt: now})
	}
	for range 8 {
		round(true, a, b)
	}
	for _, m := range []*Mirror{ma, mb} {
		for g := range m.All() {
			want := a.State
			if g.Entity == 2 {
				want = b.State
			}
			if g.State.Yaw-want.Yaw > 0.05 || want.Yaw-g.State.Yaw > 0.05 || g.State.Health != want.Health {
				t.Errorf("entity %d: the client holds %+v, want %+v", g.Entity, g.State, want)
			}
		}
		if m.Len() != 2 {
			t.Errorf("the client holds %d ghosts, want 2", m.Len())
		}
	}
}

// A header past one run (an id and a mask of a class of many groups) is
// not writeUsualRuns' record: it reports recOther, having written nothing
// (its position, read before the walk, must start within the first word).
func TestWriteUsualRunsLeavesALongHeader(t *testing.T) {
	_, cs := codeTestClasses(t)
	pc := cs[0] // position first
	ps := new(packScratch)
	ps.scratch.Reset(ps.sbuf[:])
	ps.ubudget = 8 * MaxPacketBytes
	var gc [snapCodes]uint64
	for _, hn := range []uint{runMax + 1, runMax + 8} {
		if r := ps.writeUsualRuns(pc, hn, &gc, 0, 1<<pc.posIdx, 1, 5, 10); r != recOther || ps.scratch.BitLen() != 0 {
			t.Fatalf("a %d-bit header: %d, %d bits written; want recOther, none", hn, r, ps.scratch.BitLen())
		}
	}
	if r := ps.writeUsualRuns(pc, runMax-4, &gc, 0, 1<<pc.posIdx, 1, 5, 10); r != recWritten || ps.scratch.BitLen() != runMax+6 {
		t.Fatalf("a %d-bit header and a 10-bit position: %d, %d bits written; want recWritten, %d", runMax-4, r, ps.scratch.BitLen(), runMax+6)
	}
}
