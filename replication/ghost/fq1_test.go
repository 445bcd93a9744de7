package ghost

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// The second positions in flight (posPool.fq1, 8 bytes an id) exist only
// while fates come late: a table whose fates come before its next write
// (a server's) never makes them; fates three packets late make them, and
// once the fates come in time again trim gives them back within a few
// seconds. The client decodes every packet throughout (the duo's mirror),
// and the table's invariants hold.
func TestFq1OnlyWhileLate(t *testing.T) {
	reg, pc, nc := newTestRegistry(t)
	tab, err := NewTable(reg, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	sw := writerFor(t, reg)
	mir, err := NewMirror(reg, DefaultMirrorConfig())
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	const n = 48
	states := make([]State, n)
	classes := make([]*Class, n)
	vel := make([][2]float64, n)
	refs := make([]ViewRef, n)
	for i := range states {
		classes[i] = nc
		if i%4 == 0 {
			classes[i] = pc
		}
		states[i].Pos = [3]float64{rng.Float64()*200 - 100, 0, rng.Float64()*200 - 100}
		states[i].Health = 100
		vel[i] = [2]float64{rng.Float64()*6 - 3, rng.Float64()*6 - 3}
		refs[i] = NewViewRef(uint32(i), classes[i], rng.Float32()+0.01)
	}
	var buf [800]byte
	var w bitstream.Writer
	now, seq := time.Second, uint64(0)
	type sent struct {
		seq uint64
		at  time.Duration
		pkt []byte
	}
	var inflight []sent
	run := func(views, delay int) {
		for range views {
			now += 50 * time.Millisecond
			for i := range states {
				states[i].Pos[0] += vel[i][0] / 20
				states[i].Pos[2] += vel[i][1] / 20
			}
			sn := sw.Next(n)
			for i := range states {
				sn.Set(i, uint64(i+1), classes[i], &states[i])
			}
			sw.Seal(sn)
			if err := tab.SetSnapshotView(now, sn, refs); err != nil {
				t.Fatal(err)
			}
			seq++
			w.Reset(buf[:])
			if _, err := tab.Write(&w, seq, now); err != nil {
				t.Fatal(err)
			}
			inflight = append(inflight, sent{seq, now, append([]byte(nil), w.Bytes()...)})
			for len(inflight) > delay {
				p := inflight[0]
				inflight = inflight[1:]
				r := bitstream.NewReader(p.pkt)
				if err := mir.Read(r, p.at); err != nil {
					t.Fatalf("packet %d: %v", p.seq, err)
				}
				tab.OnFate(notify.Fate{Seq: p.seq, Delivered: true, SentAt: p.at})
			}
			if err := checkInvariants(tab); err != nil {
				t.Fatal(err)
			}
		}
	}
	run(100, 0) // 5 s, each fate before the next write
	if tab.pp.fq1 != nil {
		t.Fatalf("fates before the next write: fq1 made (%d ids), want none", len(tab.pp.fq1))
	}
	run(100, 3) // fates three packets late: up to four positions in flight
	if len(tab.pp.fq1) != len(tab.slots) {
		t.Fatalf("fates three packets late: fq1 of %d ids, want %d (the per-id arrays')", len(tab.pp.fq1), len(tab.slots))
	}
	run(80, 0) // 4 s in time again: two checks without a second in flight
	if tab.pp.fq1 != nil {
		t.Fatalf("4 s after the fates came in time again: fq1 of %d ids kept, want none", len(tab.pp.fq1))
	}
	run(40, 2)
	if tab.pp.fq1 == nil {
		t.Fatal("fates two packets late again: no fq1")
	}
}
