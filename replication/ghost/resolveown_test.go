package ghost

import (
	"math/rand/v2"
	"testing"
)

// resolveOwn, resolveOldest1 and resolveOldest2, OnFate's inlined ways, leave a track
// exactly as resolve does wherever they take the fate, and take it on the
// server's usual tracks (the oldest of one or two positions in flight,
// delivered newer than the newest delivered; or the only one, dropped):
// random tracks of up to five positions in flight, fates of any of them
// or of none, delivered or not, stamps wrapping and gaps past gapFar.
func TestResolveOwnMatchesResolve(t *testing.T) {
	qt := quant{lim: [3]uint32{1<<19 - 1, 1<<16 - 1, 1<<19 - 1}, bits: [3]uint{19, 16, 19}}
	r := rand.New(rand.NewPCG(11, 12))
	taken, taken2, usual := 0, 0, 0
	for it := range 20000 {
		var x posPool
		x.init(&qt)
		x.fq1 = make([]uint64, 8) // the per-id second positions in flight (Table.resizeRecords)
		var p posTrack
		p.reset(&x)
		now := stamp(r.Uint32())
		var sent []stamp
		pos := func() [3]uint32 { return [3]uint32{r.Uint32N(1 << 19), r.Uint32N(1 << 16), r.Uint32N(1 << 19)} }
		for range r.IntN(6) {
			now += stamp(1 + r.IntN([]int{60, 600, 1500}[r.IntN(3)]))
			q := pos()
			p.push(&x, 0, now, &q)
			sent = append(sent, now)
			if r.IntN(2) == 0 {
				k := r.IntN(len(sent))
				p.resolve(&x, 0, posKey(now, sent[k]), r.IntN(4) != 0)
				sent = append(sent[:k], sent[k+1:]...)
			}
		}
		ft := now + 50 // of no position in flight
		if len(sent) > 0 && r.IntN(8) != 0 {
			ft = sent[r.IntN(len(sent))]
		}
		delivered := r.IntN(3) != 0
		want := p
		wantPool, wantFq1 := append([]posNode(nil), x.nodes...), x.fq1[0]
		want.resolve(&x, 0, posKey(now+50, ft), delivered)
		x.nodes = wantPool // resolve of a list node changes the pool: restore the links
		x.fq1[0] = wantFq1 // and a promotion the second's place
		got := p
		ok := got.resolveOwn(&x, posKey(now+50, ft), delivered)
		if !ok && delivered {
			ok = got.resolveOldest2(posKey(now+50, ft), x.fq1[0])
			if ok {
				taken2++
			}
		}
		if delivered {
			// usualRun's way: resolveOldest1 with one in flight, else
			// resolveOldest2; the same fates taken, the same tracks.
			got1, ok1 := p, false
			if p.meta < 2*metaN1 {
				ok1 = got1.resolveOldest1(posKey(now+50, ft))
			} else {
				ok1 = got1.resolveOldest2(posKey(now+50, ft), x.fq1[0])
			}
			if ok1 != ok || got1 != got {
				t.Fatalf("iteration %d: fate of %d on %+v: usualRun's way took it %v (%+v), resolveOwn's %v (%+v)", it, ft, p, ok1, got1, ok, got)
			}
		}
		if !ok {
			if got != p {
				t.Fatalf("iteration %d: resolveOwn declined but changed the track: %+v, was %+v", it, got, p)
			}
		} else {
			taken++
			if got != want {
				t.Fatalf("iteration %d: fate of %d (delivered %v) on %+v: resolveOwn %+v, resolve %+v", it, ft, delivered, p, got, want)
			}
		}
		if p.ft[0] == pstamp(ft) && (p.n() == 1 && !delivered || (p.n() == 1 || p.n() == 2) && delivered && p.dn() > 0 && pstamp(ft).sub(p.t1) > 0) {
			usual++
			if !ok {
				t.Fatalf("iteration %d: the usual fate (delivered %v) on %+v not taken", it, delivered, p)
			}
		}
	}
	if taken < 2000 || taken2 < 500 || usual != taken {
		t.Fatalf("took %d fates (%d of two in flight), %d usual ones: the cases are not covered", taken, taken2, usual)
	}
}
