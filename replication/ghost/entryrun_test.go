package ghost

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// An entry view's update record is what writeUpdate writes for it, bit for
// bit: writeRecord gathers the records of the position and yaw alone into
// one run itself (as it does a snapshot entry's), and only the others go
// by writeUpdate, so the snapshot-against-entry tests no longer compare
// those runs with writeUpdate. Single-ghost tables of every class, random
// moves (small and large), yaws and other groups, packets delivered, lost
// and left in flight for a packet, so the position goes absolute, by
// window over every kind of track, or not at all, and resends happen.
func TestEntryUpdateIsWriteUpdate(t *testing.T) {
	reg, cs := codeTestClasses(t)
	r := rand.New(rand.NewPCG(58, 3))
	compared, runs := 0, 0
	for ti := range 3 * len(cs) {
		c := cs[ti%len(cs)]
		yawMask := uint64(0)
		if c.yawIdx >= 0 {
			yawMask = 1 << uint(c.yawIdx)
		}
		tab := tableFor(t, reg)
		e := ViewEntry{Entity: uint64(1 + r.IntN(1<<20)), Class: c, Priority: 1, State: randCodeState(r)}
		fitState(c, &e.State)
		now := time.Second
		var buf [MaxPacketBytes]byte
		var w bitstream.Writer
		var held []notify.Fate
		for seq := uint64(1); seq <= 150; seq++ {
			switch r.IntN(8) {
			case 0: // everything
				e.State = randCodeState(r)
				fitState(c, &e.State)
			case 1, 2, 3: // a step
				e.State.Pos[0] += (r.Float64() - 0.5) * []float64{0.05, 1, 30}[r.IntN(3)]
				e.State.Pos[2] += (r.Float64() - 0.5) * 0.3
			case 4: // a step and a turn
				e.State.Pos[1] += r.Float64() - 0.5
				e.State.Yaw += r.Float64() - 0.5
			case 5: // a turn
				e.State.Yaw += r.Float64() - 0.5
			}
			now += 50 * time.Millisecond
			if err := tab.SetView(now, []ViewEntry{e}); err != nil {
				t.Fatal(err)
			}
			// What writeRecord would write by writeUpdate, from the
			// table before the Write.
			var want [MaxPacketBytes]byte
			var ww bitstream.Writer
			ww.Reset(want[:])
			wantOK, runOnly := false, false
			live := tab.live == 1 && tab.slots[0].phase == phaseLive
			if s := &tab.slots[0]; live {
				dirty := tab.dirtyOf(0, s)
				mask := dirty & c.all
				if mask == 0 {
					mask = tab.unconfirmed(0, s, c)
				}
				q, yaw := tab.latest(0, s)
				var pf posForm
				if mask&c.posBit != 0 {
					tab.posForm(0, s, q, &pf)
					if pf.kind != posSend {
						mask &^= c.posBit
					}
				}
				if mask != 0 {
					if err := tab.writeUpdate(&ww, tab.idOf(0), 0, c, mask, tab.IDWidth(), &pf, q, yaw, nil); err != nil {
						t.Fatal(err)
					}
					wantOK, runOnly = true, mask&^(c.posBit|yawMask) == 0
				}
			}
			w.Reset(buf[:])
			n, err := tab.Write(&w, seq, now)
			if err != nil {
				t.Fatal(err)
			}
			if live && !wantOK && n != 0 {
				t.Fatalf("class %s packet %d: %d records, want none", c.Name, seq, n)
			}
			if wantOK && n == 1 { // none: not due (collect's choice)
				// The section: gamma(2) (3 bits), the stamp and the width, then the record.
				var rd bitstream.Reader
				rd.Reset(w.Bytes())
				if _, err := rd.ReadBits(3+sectionFixed, "head"); err != nil {
					t.Fatal(err)
				}
				got := w.BitLen() - 3 - sectionFixed
				if got != ww.BitLen() {
					t.Fatalf("class %s packet %d: %d bits, writeUpdate %d", c.Name, seq, got, ww.BitLen())
				}
				var rw bitstream.Reader
				rw.Reset(ww.Bytes())
				for got > 0 {
					k := min(got, 32)
					a, _ := rd.ReadBits(uint(k), "a")
					b, _ := rw.ReadBits(uint(k), "b")
					if a != b {
						t.Fatalf("class %s packet %d: record %x, writeUpdate %x", c.Name, seq, w.Bytes(), ww.Bytes())
					}
					got -= k
				}
				compared++
				if runOnly {
					runs++
				}
			}
			// Fates: delivered or lost now, or held for a packet (a
			// position in flight at the next Write).
			f := notify.Fate{Seq: seq, Delivered: r.IntN(3) != 0, SentAt: now}
			for _, h := range held {
				tab.OnFate(h)
			}
			held = held[:0]
			if r.IntN(3) == 0 {
				held = append(held, f)
			} else {
				tab.OnFate(f)
			}
		}
	}
	if compared < 1000 || runs < 300 {
		t.Fatalf("only %d updates compared, %d of the position and yaw alone", compared, runs)
	}
}
