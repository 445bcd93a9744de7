package ghost

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// onFateByRecords is OnFate with every record applied by fateRecords,
// the walk of every kind: the reference the delivered walks
// (deliveredRecords' usualRun, lateRun and single late records) must
// match.
func onFateByRecords(t *Table, f notify.Fate) {
	i, ok := t.findPacket(f.Seq)
	if !ok {
		t.OnFate(f) // counted unknown, as OnFate does
		return
	}
	if f.Delivered {
		t.sampleFateDelay(max(t.lastNow-f.SentAt, 0))
	}
	p := &t.pkts[i]
	sent, view := t.msOf(f.SentAt), t.msOfStamp(p.t)
	t.fateRecords(p, 0, int(p.n), int(p.start), f, sent, view)
	p.resolved = true
	t.releaseResolved()
}

// TestDeliveredWalksMatchFateRecords: two tables take the same views and
// write the same packets; one applies each fate by OnFate (usualRun,
// lateRun, and lateRun for a single record that is not usual — the
// first of every packet whose fate comes three packets late, its
// position one of more than the track holds), the other by fateRecords
// for every record. Their slots, tracks and packets must stay the same,
// with fates in time, late, twelve packets late (a track full: flPosFull),
// and one packet in seven lost.
func TestDeliveredWalksMatchFateRecords(t *testing.T) {
	for _, delay := range []uint64{0, 1, 3, 5, 12} {
		const per, ents = 24, 100
		reg, pc, nc := newTestRegistry(t)
		sw := writerFor(t, reg)
		rng := rand.New(rand.NewPCG(delay, 1))
		states, classes, vel := make([]State, ents), make([]*Class, ents), make([][2]float64, ents)
		for i := range states {
			classes[i] = nc
			if i%4 == 0 {
				classes[i] = pc
			}
			states[i].Pos = [3]float64{rng.Float64()*200 - 100, 0, rng.Float64()*200 - 100}
			states[i].Health = 100
			states[i].Name = MustName("wolf")
			vel[i] = [2]float64{rng.Float64()*6 - 3, rng.Float64()*6 - 3}
		}
		tabs := [2]*Table{tableFor(t, reg), tableFor(t, reg)}
		var refs []ViewRef
		for j := range per {
			refs = append(refs, NewViewRef(uint32(10+j), classes[10+j], float32(j%5)+0.5))
		}
		now, seq := time.Second, uint64(0)
		var bufs [2][800]byte
		var w bitstream.Writer
		for tick := range 120 {
			now += time.Duration(48+tick%5) * time.Millisecond
			for i := range states {
				states[i].Pos[0] += vel[i][0] / 20
				states[i].Pos[2] += vel[i][1] / 20
			}
			sn := sw.Next(ents)
			for i := range states {
				sn.Set(i, uint64(i+1), classes[i], &states[i])
			}
			sw.Seal(sn)
			seq++
			var n [2]int
			for k, tab := range tabs {
				if err := tab.SetSnapshotView(now, sn, refs); err != nil {
					t.Fatal(err)
				}
				w.Reset(bufs[k][:])
				var err error
				if n[k], err = tab.Write(&w, seq, now); err != nil {
					t.Fatal(err)
				}
			}
			if n[0] != n[1] || !bytes.Equal(bufs[0][:], bufs[1][:]) {
				t.Fatalf("delay %d, packet %d: the two tables wrote %d and %d bits, or other bytes", delay, seq, n[0], n[1])
			}
			if seq > delay {
				f := notify.Fate{Seq: seq - delay, Delivered: (seq-delay)%7 != 0, SentAt: now - time.Duration(delay)*50*time.Millisecond}
				tabs[0].OnFate(f)
				onFateByRecords(tabs[1], f)
			}
			a, b := tabs[0], tabs[1]
			if !slices.Equal(a.slots, b.slots) || !slices.Equal(a.pos, b.pos) {
				for id := range min(len(a.slots), len(b.slots)) {
					if a.slots[id] != b.slots[id] || a.pos[id] != b.pos[id] {
						t.Fatalf("delay %d, after packet %d's fate: ghost %d differs:\nOnFate          %+v %+v\nfateRecords     %+v %+v",
							delay, seq-delay, id, a.slots[id], a.pos[id], b.slots[id], b.pos[id])
					}
				}
				t.Fatalf("delay %d, after packet %d's fate: %d and %d ids", delay, seq-delay, len(a.slots), len(b.slots))
			}
		}
		if a, b := tabs[0].Stats(), tabs[1].Stats(); !reflect.DeepEqual(a, b) {
			t.Fatalf("delay %d: stats differ:\nOnFate      %+v\nfateRecords %+v", delay, a, b)
		}
	}
}

// TestShuffledFatesMatchFateRecords is TestDeliveredWalksMatchFateRecords
// with the fates a session reports: each tick a random few of the packets
// in flight, in random order (a newer delivery ahead of an older open
// fate), the newest often before the next Write (usualNewest's), one in
// seven of the rest lost, and one fate in nine with a SentAt that goes
// back (below a ghost's ackAt even for its newest packet). Half the
// entities stand still for spells, and all of them one tick in eleven, so
// a packet's ghosts are not every ghost's newest packet; ghosts enter and
// leave the view, so creates and kills come among the updates and alone.
// Both tables' slots, tracks and statistics must stay the same.
func TestShuffledFatesMatchFateRecords(t *testing.T) {
	for seed := range uint64(6) {
		const per, ents = 24, 60
		reg, pc, nc := newTestRegistry(t)
		sw := writerFor(t, reg)
		rng := rand.New(rand.NewPCG(seed, 7))
		states, classes, vel := make([]State, ents), make([]*Class, ents), make([][2]float64, ents)
		for i := range states {
			classes[i] = nc
			if i%4 == 0 {
				classes[i] = pc
			}
			states[i].Pos = [3]float64{rng.Float64()*200 - 100, 0, rng.Float64()*200 - 100}
			states[i].Health = 100
			states[i].Name = MustName("wolf")
			vel[i] = [2]float64{rng.Float64()*6 - 3, rng.Float64()*6 - 3}
		}
		tabs := [2]*Table{tableFor(t, reg), tableFor(t, reg)}
		var all, refs []ViewRef
		for j := range per + 12 {
			all = append(all, NewViewRef(uint32(10+j), classes[10+j], float32(j%5)+0.5))
		}
		now, seq := time.Second, uint64(0)
		var bufs [2][800]byte
		var w bitstream.Writer
		type sent struct {
			seq uint64
			at  time.Duration
		}
		var flight []sent
		for tick := range 200 {
			now += time.Duration(40+rng.IntN(20)) * time.Millisecond
			for i := range states {
				if i%2 == 0 && (tick/8+i)%3 == 0 || tick%11 == 0 {
					continue // standing still for a spell, or everyone for a tick
				}
				states[i].Pos[0] += vel[i][0] / 20
				states[i].Pos[2] += vel[i][1] / 20
			}
			sn := sw.Next(ents)
			for i := range states {
				sn.Set(i, uint64(i+1), classes[i], &states[i])
			}
			sw.Seal(sn)
			seq++
			// Ghosts enter and leave: creates and kills among the updates.
			refs = refs[:0]
			for j, r := range all {
				if (tick/6+j*j)%5 != 0 {
					refs = append(refs, r)
				}
			}
			var n [2]int
			for k, tab := range tabs {
				if err := tab.SetSnapshotView(now, sn, refs); err != nil {
					t.Fatal(err)
				}
				w.Reset(bufs[k][:])
				var err error
				if n[k], err = tab.Write(&w, seq, now); err != nil {
					t.Fatal(err)
				}
			}
			if n[0] != n[1] || !bytes.Equal(bufs[0][:], bufs[1][:]) {
				t.Fatalf("seed %d, packet %d: the two tables wrote %d and %d bits, or other bytes", seed, seq, n[0], n[1])
			}
			flight = append(flight, sent{seq, now})
			rng.Shuffle(len(flight), func(i, j int) { flight[i], flight[j] = flight[j], flight[i] })
			// A random few, or all while more than eight are in flight.
			take := rng.IntN(len(flight) + 1)
			if len(flight) > 8 {
				take = len(flight)
			}
			for _, p := range flight[:take] {
				f := notify.Fate{Seq: p.seq, Delivered: rng.IntN(7) != 0, SentAt: p.at}
				if rng.IntN(9) == 0 {
					f.SentAt -= time.Duration(rng.IntN(300)) * time.Millisecond
				}
				tabs[0].OnFate(f)
				onFateByRecords(tabs[1], f)
				a, b := tabs[0], tabs[1]
				if !slices.Equal(a.slots, b.slots) || !slices.Equal(a.pos, b.pos) {
					for id := range min(len(a.slots), len(b.slots)) {
						if a.slots[id] != b.slots[id] || a.pos[id] != b.pos[id] {
							t.Fatalf("seed %d, after packet %d's fate (%+v, newest %d): ghost %d differs:\nOnFate          %+v %+v\nfateRecords     %+v %+v",
								seed, p.seq, f, seq, id, a.slots[id], a.pos[id], b.slots[id], b.pos[id])
						}
					}
					t.Fatalf("seed %d, after packet %d's fate: %d and %d ids", seed, p.seq, len(a.slots), len(b.slots))
				}
			}
			flight = slices.Delete(flight, 0, take)
		}
		if a, b := tabs[0].Stats(), tabs[1].Stats(); !reflect.DeepEqual(a, b) {
			t.Fatalf("seed %d: stats differ:\nOnFate      %+v\nfateRecords %+v", seed, a, b)
		}
	}
}
