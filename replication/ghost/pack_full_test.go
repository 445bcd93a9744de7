package ghost

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// TestWriteUsualReportsFull: writeUsual reports the record that leaves
// the packet no room for another (its bit length past ustop, budget −
// minRec) as recFull — written and committed as any, and fillUsual's walk
// stops on it as fill's does on a full packet, without trying the rest
// of its candidates — and a record below ustop as recWritten.
func TestWriteUsualReportsFull(t *testing.T) {
	reg, pc, _ := newTestRegistry(t)
	for _, tc := range []struct {
		name string
		stop int
		want int
	}{
		{name: "past ustop: full", stop: 0, want: recFull},
		{name: "below ustop: written", stop: 1 << 20, want: recWritten},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab, sw := tableFor(t, reg), writerFor(t, reg)
			e := ViewEntry{Entity: 1, Class: pc, Priority: 1}
			now := time.Second
			var buf [MaxPacketBytes]byte
			var w bitstream.Writer
			view := func() {
				t.Helper()
				now += 50 * time.Millisecond
				e.State.Pos[0] += 0.5
				sn := sw.Next(1)
				sn.Set(0, e.Entity, e.Class, &e.State)
				sw.Seal(sn)
				if err := tab.SetSnapshotView(now, sn, []ViewRef{NewViewRef(0, pc, 1)}); err != nil {
					t.Fatal(err)
				}
			}
			// A create and two updates delivered: the next update is the
			// usual record (a delivered pair predicts it).
			seq := uint64(0)
			for range 3 {
				view()
				seq++
				w.Reset(buf[:])
				if _, err := tab.Write(&w, seq, now); err != nil {
					t.Fatal(err)
				}
				tab.OnFate(notify.Fate{Seq: seq, Delivered: true, SentAt: now})
			}
			view()
			seq++
			id, ok := tab.idxGet(1)
			if !ok {
				t.Fatal("the entity has no ghost")
			}
			// Write's packet, as fill sets it for writeUsual.
			tab.pk.borrow()
			defer tab.pk.release()
			p := &tab.pk
			p.scratch.Reset(p.sbuf[:])
			pk := tab.beginPacket(seq)
			p.useq, p.unow, p.uwidth, p.ubudget, p.ustop = seq, tab.clock(now), tab.IDWidth(), MaxPacketBytes*8, tc.stop
			_, got := tab.writeUsual(int32(id), nil)
			tab.endPacket(pk)
			if got != tc.want {
				t.Fatalf("writeUsual = %d with ustop %d after %d bits, want %d (recWritten %d, recFull %d, recOther %d)",
					got, tc.stop, p.scratch.BitLen(), tc.want, recWritten, recFull, recOther)
			}
			if p.scratch.BitLen() == 0 || tab.pkts[pk].n != 1 {
				t.Errorf("%d bits and %d records written, want the record", p.scratch.BitLen(), tab.pkts[pk].n)
			}
		})
	}
}
