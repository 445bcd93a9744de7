package ghost

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// A new ghost takes the record after the others, which keeps the
// per-group sequences (slot.lf, lastField) of whatever ghost held it
// before: alloc does not reset them, as the create's write sets every
// group's before any is read. Two tables take the same churning scope
// (entities leaving and entering every second, so freed records are
// taken again) and the same fates, a sixth of the packets lost; before
// every view and write one of them has the sequences of every free record
// overwritten at random. Every packet must come out bit for bit the same.
func TestRecordReuseWritesAsFresh(t *testing.T) {
	reg, pc, nc := newTestRegistry(t)
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 44))
		poison := rand.New(rand.NewPCG(seed, 45))
		tabs := [2]*Table{tableFor(t, reg), tableFor(t, reg)}
		sw := writerFor(t, reg)
		newEnt := churnEnts(rng, pc, nc, 200)
		ents := make([]churnEnt, 0, 40)
		for range 30 {
			ents = append(ents, newEnt())
		}
		scramble := func(tab *Table) {
			st := int(tab.stride)
			for rc := int(tab.live); rc < len(tab.slots); rc++ {
				tab.slots[rc].lf = [lfSlot]uint8{uint8(poison.Uint32()), uint8(poison.Uint32())}
				for g := range st {
					tab.lastField[rc*st+g] = uint8(poison.Uint32())
				}
			}
		}
		type sent struct {
			seq uint64
			at  time.Duration
		}
		var inflight []sent
		var refs []ViewRef
		now, seq, reused := time.Second, uint64(0), 0
		for v := range 1200 {
			now += 50 * time.Millisecond
			for range rng.IntN(3) { // entities leave for others: their records are taken again
				ents[rng.IntN(len(ents))] = newEnt()
			}
			if v%20 == 0 && len(ents) > 20 && rng.IntN(2) == 0 {
				ents = ents[:len(ents)-rng.IntN(5)]
			} else if v%20 == 0 && len(ents) < 40 {
				ents = append(ents, newEnt())
			}
			for i := range ents {
				e := &ents[i]
				e.st.Pos[0] += e.vel[0] / 20
				e.st.Pos[2] += e.vel[1] / 20
				e.st.Health = int32(v / 50 % 7)
			}
			sn := sw.Next(len(ents))
			refs = refs[:0]
			for i := range ents {
				sn.Set(i, ents[i].id, ents[i].c, &ents[i].st)
				refs = append(refs, NewViewRef(uint32(i), ents[i].c, ents[i].priority))
			}
			sw.Seal(sn)
			assigned := tabs[0].Stats().GhostsAssigned
			scramble(tabs[1])
			for _, tab := range tabs {
				if err := tab.SetSnapshotView(now, sn, refs); err != nil {
					t.Fatal(err)
				}
			}
			if a := tabs[0].Stats().GhostsAssigned; a > assigned && v > 100 {
				reused += int(a - assigned)
			}
			for len(inflight) > 2 {
				f := notify.Fate{Seq: inflight[0].seq, Delivered: inflight[0].seq%6 != 0, SentAt: inflight[0].at}
				for _, tab := range tabs {
					tab.OnFate(f)
				}
				inflight = inflight[1:]
			}
			seq++
			scramble(tabs[1])
			var bufs [2][800]byte
			var bits [2]int
			for k, tab := range tabs {
				var w bitstream.Writer
				w.Reset(bufs[k][:])
				if _, err := tab.Write(&w, seq, now); err != nil {
					t.Fatal(err)
				}
				bits[k] = w.BitLen()
			}
			if bits[0] != bits[1] || !bytes.Equal(bufs[0][:], bufs[1][:]) {
				t.Fatalf("seed %d, packet %d: %d bits, with the free records' sequences scrambled %d bits, and not the same", seed, seq, bits[0], bits[1])
			}
			inflight = append(inflight, sent{seq, now})
		}
		for _, tab := range tabs {
			if err := checkInvariants(tab); err != nil {
				t.Fatal(err)
			}
		}
		if s := tabs[0].Stats(); reused < 100 || s.UpdatesLost == 0 {
			t.Fatalf("seed %d: %d ghosts made after the start, %d updates lost: the test lost its point", seed, reused, s.UpdatesLost)
		}
	}
}
