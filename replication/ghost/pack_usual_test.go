package ghost

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// writeUsual and writeFlight write what writeRecord writes, and leave
// the table as writeRecord leaves it: snapshot views (whose usual records
// they take) against entry views of the same states (which go by
// writeRecord alone), on a server's schedule — each packet's fate before
// the next Write, views 48–52 ms apart, walkers at constant velocity —
// with the corners they must leave or take as writeRecord does: drops
// (rest markers resent), stops (rest markers, then a position the client
// has), jumps (past the window: absolute), late fates (positions in
// flight, up to posRingLen: deferred), entities leaving and entering,
// and short budgets (misses).
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
		fitState(c, &ents[i].State)
		vel[i] = [2]float64{r.Float64()*6 - 3, r.Float64()*6 - 3}
	}
	now := time.Second
	var ba, bb [MaxPacketBytes]byte
	var wa, wb bitstream.Writer
	var late []notify.Fate
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
		}
		// Now and then a few entities leave the view for a while (not
		// while the fates stall: there entry and snapshot views differ
		// on main before writeUsual too, a record more or less).
		view := ents
		if seq%37 > 33 && seq%150 < 120 {
			view = ents[:n-5]
		}
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
	if sa.Updates < 10000 || sa.UpdatesLost < 500 || sa.AbsolutePos < 100 || sa.PosDeferred < 20 {
		t.Fatalf("too few of the cases compared: %+v", sa)
	}
	if err := checkInvariants(ta); err != nil {
		t.Fatal(err)
	}
	if err := checkInvariants(tb); err != nil {
		t.Fatal(err)
	}
}
