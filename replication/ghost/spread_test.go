package ghost

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// widenPred is spreader.pair as it was (the reference's).
func widenPred(d *[3]uint64, q *[3]uint32, a, b *posVal, t stamp, lim *[3]uint32) {
	f, ok := predFactor(a, b, t)
	for x := range 3 {
		r := b.q[x]
		// An axis on which the pair did not move predicts b exactly
		// (b + round(0·f), b ≤ lim): no float work (the height of a
		// walker on flat ground, every axis of a ghost at rest).
		if ok && a.q[x] != r {
			r = predictAxis(a.q[x], r, f, lim[x])
		}
		d[x] = max(d[x], uint64(absDiff(q[x], r)))
	}
}

// predSpreadList is predSpread as it was before the in-flight positions
// were copied out (every pair by walking the pool's list), and with the
// client's two newest delivered values dl (newest last) exactly as the
// client keeps them, not as the track packs them: the reference the
// faster one must match exactly.
func predSpreadList(p *posTrack, x *posPool, id uint32, dl []posVal, q *[3]uint32, t stamp, lim *[3]uint32, d *[3]uint64) bool {
	if len(dl) == 0 {
		return false
	}
	d1 := &dl[len(dl)-1]
	var d0 *posVal
	if len(dl) == 2 {
		d0 = &dl[0]
	}
	fl := inflightList(p, x, id, t)
	pairs := func(n1, c *posVal) {
		widenPred(d, q, c, n1, t, lim)
		for _, m := range fl {
			if m.t.sub(n1.t) < 0 && (c == nil || m.t.sub(c.t) > 0) {
				widenPred(d, q, &m, n1, t, lim)
			}
		}
	}
	if p.n() == 0 {
		widenPred(d, q, d0, d1, t, lim)
		return true
	}
	pairs(d1, d0)
	for _, n1 := range fl {
		if n1.t.sub(d1.t) > 0 {
			pairs(&n1, d1)
		}
	}
	return true
}

// inflightList is ghost id's positions in flight by walking the track as
// stored (its own, oldest first, then the pool's list from its head), not
// by inflight's copy.
func inflightList(p *posTrack, x *posPool, id uint32, t stamp) []posVal {
	var fl []posVal
	own := min(int(p.n()), ownFlight)
	for k := range own {
		v := posVal{t: p.ownStamp(x, k).at(t)}
		var hi uint32
		if x.wide {
			hi = x.wx.dhi[id][2+k]
		}
		x.unpackQ(p.ownQ(x, id, k), hi, &v.q)
		fl = append(fl, v)
	}
	if int(p.n()) <= own {
		return fl
	}
	for i, k := p.head(x), uint8(own); k < p.n(); i, k = x.nodes[i].next, k+1 {
		fl = append(fl, x.value(i, t))
	}
	return fl
}

// The pairs predSpread takes from runs of the in-flight positions are the
// pairs of the list walk: random tracks with up to posRingLen in flight,
// some delivered out of order (in flight older than the newest delivered),
// stamps near the 32-bit wrap, spans around predictMaxMS, jumps and values
// at the bounds; positions packed in one word (the default bounds) and in
// two (31-bit axes). The pool gives back exactly the positions pushed.
func TestPredSpreadMatchesListWalk(t *testing.T) {
	t.Run("54-bit positions", func(t *testing.T) {
		testPredSpread(t, [3]uint32{1<<19 - 1, 1<<16 - 1, 1<<19 - 1}, [3]uint{19, 16, 19})
	})
	t.Run("93-bit positions", func(t *testing.T) {
		testPredSpread(t, [3]uint32{1<<31 - 1, 1<<31 - 2, 1<<31 - 1}, [3]uint{31, 31, 31})
	})
}

func testPredSpread(t *testing.T, lim [3]uint32, bits [3]uint) {
	r := rand.New(rand.NewPCG(11, 3))
	qt := quant{lim: lim, bits: bits}
	pos := func() [3]uint32 {
		var q [3]uint32
		for a := range q {
			switch r.IntN(8) {
			case 0:
				q[a] = 0
			case 1:
				q[a] = lim[a]
			default:
				q[a] = uint32(r.IntN(int(lim[a]) + 1))
			}
		}
		return q
	}
	near := func(q [3]uint32) [3]uint32 {
		if r.IntN(4) == 0 {
			return q // at rest
		}
		for a := range q {
			if r.IntN(3) > 0 { // some axes still (a walker's height)
				q[a] = uint32(min(max(int64(q[a])+int64(r.IntN(401)-200), 0), int64(lim[a])))
			}
		}
		return q
	}
	for it := range 20000 {
		var x posPool
		x.init(&qt)
		x.fq1 = make([]uint64, 8) // the per-id second positions in flight (Table.resizeRecords)
		var p posTrack
		p.reset(&x)
		id := uint32(it % 5)
		var dl []posVal // the client's two newest delivered, by stamp
		deliver := func(v posVal) {
			switch {
			case len(dl) == 0:
				dl = append(dl, v)
			case v.t.sub(dl[len(dl)-1].t) > 0:
				dl = append(dl, v)
			case v.t.sub(dl[len(dl)-1].t) < 0 && (len(dl) == 1 || v.t.sub(dl[0].t) > 0):
				dl = append([]posVal{v}, dl[len(dl)-1])
			}
			if len(dl) > 2 {
				dl = dl[len(dl)-2:]
			}
		}
		base := stamp(r.Uint32())
		now := base
		step := func() stamp {
			now += stamp(1 + r.IntN([]int{60, 600, 1500}[r.IntN(3)]))
			return now
		}
		cur := pos()
		var sent []posVal
		for range r.IntN(16) {
			if r.IntN(4) == 0 {
				cur = pos()
			} else {
				cur = near(cur)
			}
			v := posVal{t: step(), q: cur}
			if p.n() == posRingLen {
				sent = sent[1:]
			}
			p.push(&x, id, v.t, &v.q)
			sent = append(sent, v)
			// Resolve some, in any order: early deliveries leave older
			// values in flight behind a newer delivered one.
			for len(sent) > 0 && r.IntN(3) == 0 {
				k := r.IntN(len(sent))
				ok := r.IntN(4) != 0
				p.resolve(&x, id, posKey(now, sent[k].t), ok)
				if ok {
					deliver(sent[k])
				}
				sent = append(sent[:k], sent[k+1:]...)
			}
		}
		var buf [posRingLen]posVal
		if fl := p.inflight(&x, id, &buf, now); !slices.Equal(fl, sent) || !slices.Equal(inflightList(&p, &x, id, now), sent) || (qt.bits[0]+qt.bits[1]+qt.bits[2] > 64) != (x.wx != nil) && len(sent) > 0 {
			t.Fatalf("iteration %d: in flight %v, pushed %v", it, fl, sent)
		}
		// The packed delivered values: the newest exactly; the one
		// before it exactly when the pair may predict motion.
		if int(p.dn()) != len(dl) {
			t.Fatalf("iteration %d: %d delivered, the client holds %v", it, p.dn(), dl)
		}
		if n := len(dl); n > 0 {
			if v := p.delivered(&x, id, 1, now); v != dl[n-1] {
				t.Fatalf("iteration %d: newest delivered %v, want %v", it, v, dl[n-1])
			}
			if v := p.delivered(&x, id, 0, now); n == 2 && dl[1].t.sub(dl[0].t) <= predictMaxMS && v != dl[0] {
				t.Fatalf("iteration %d: older delivered %v, want %v", it, v, dl[0])
			}
		}
		q := near(cur)
		if r.IntN(5) == 0 {
			q = pos()
		}
		at := step()
		var got, want [3]uint64
		if it%3 == 0 {
			got, want = [3]uint64{5, 0, 9}, [3]uint64{5, 0, 9} // widens what is there
		}
		okG := p.predSpread(&x, id, &q, at, &lim, &got)
		okW := predSpreadList(&p, &x, id, dl, &q, at, &lim, &want)
		if okG != okW || got != want {
			t.Fatalf("iteration %d (%d in flight, %d delivered): spread %v %v, list walk %v %v", it, p.n(), p.dn(), got, okG, want, okW)
		}
	}
}

// Compacting the pool (trim) moves every in-flight position with its high
// word when the bounds need more than 64 bits: each ghost's positions in
// flight are the same after, and the pool keeps its invariants.
func TestCompactPositionsKeepsWidePositions(t *testing.T) {
	reg, err := NewRegistry(Bounds{Max: [3]float64{2e9, 2e9, 2e9}, Precision: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(NPCClass(nil)); err != nil {
		t.Fatal(err)
	}
	tab, err := NewTable(reg, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if !tab.pp.wide {
		t.Fatal("31-bit axes: the pool packs positions in one word")
	}
	r := rand.New(rand.NewPCG(5, 5))
	tab.grow(40)
	// As many as grow made: it may round up to its size class's room.
	want := make([][]posVal, len(tab.pos))
	for round := range 8 {
		for id := range tab.pos {
			if r.IntN(3) == 0 {
				continue
			}
			p := &tab.pos[id]
			if round == 0 {
				p.reset(&tab.pp)
			}
			v := posVal{t: stamp(1000 + 50*round), q: [3]uint32{r.Uint32() >> 1, r.Uint32() >> 1, r.Uint32() >> 1}}
			p.push(&tab.pp, uint32(id), v.t, &v.q)
			want[id] = append(want[id], v)
			if len(want[id]) > 2 && r.IntN(2) == 0 { // a fate out of order leaves a hole in the pool
				k := r.IntN(len(want[id]))
				p.resolve(&tab.pp, uint32(id), posKey(v.t, want[id][k].t), false)
				want[id] = append(want[id][:k], want[id][k+1:]...)
			}
		}
	}
	tab.compactPositions(int(tab.pp.used))
	if len(tab.pp.wx.hi) != len(tab.pp.nodes) {
		t.Fatalf("%d nodes, %d high words", len(tab.pp.nodes), len(tab.pp.wx.hi))
	}
	for id := range tab.pos {
		var buf [posRingLen]posVal
		if got := tab.pos[id].inflight(&tab.pp, uint32(id), &buf, 1000); !slices.Equal(got, want[id]) {
			t.Fatalf("id %d after compaction: %v, want %v", id, got, want[id])
		}
	}
}

// BenchmarkPredSpread is the prediction window of a walker's track as on a
// server writing every view (50 ms) with fates three packets late: two
// delivered positions and three in flight, so seven pairs.
func BenchmarkPredSpread(b *testing.B) {
	qt := quant{lim: [3]uint32{1<<19 - 1, 1<<16 - 1, 1<<19 - 1}, bits: [3]uint{19, 16, 19}}
	var x posPool
	x.init(&qt)
	x.fq1 = make([]uint64, 8) // the per-id second positions in flight (Table.resizeRecords)
	var p posTrack
	p.reset(&x)
	at := func(k int) (stamp, [3]uint32) {
		return stamp(1000 + 50*k), [3]uint32{200000 + uint32(k*13), 3000, 150000 - uint32(k*7)}
	}
	for k := range 5 {
		t, q := at(k)
		p.push(&x, 0, t, &q)
		if k < 2 {
			p.resolve(&x, 0, posKey(t, t), true)
		}
	}
	t, q := at(5)
	q[0]++
	var buf [posRingLen]posVal
	b.ReportAllocs()
	for b.Loop() {
		var d [3]uint64
		p.spread(&x, 0, p.inflight(&x, 0, &buf, t), &q, t, &qt.lim, &d)
		if d[1] != 0 || d[0] == 0 {
			b.Fatal(d)
		}
	}
}

// predWhole, the integer prediction of a pair a whole number of its spans
// before the value, is predictAxis's float one bit for bit: random pairs
// over the full 31-bit code range and near the bounds, every factor from 1
// to predictMaxMS, and the clamp at 0 and lim.
func TestPredWholeIsFloat(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	val := func(lim uint32) uint32 {
		switch r.IntN(4) {
		case 0:
			return r.Uint32N(16)
		case 1:
			return lim - r.Uint32N(16)
		default:
			return r.Uint32N(lim + 1)
		}
	}
	for it := range 500000 {
		lim := uint32(1<<(1+r.IntN(31)) - 1)
		a, b := val(lim), val(lim)
		if r.IntN(2) == 0 { // near each other: a walker
			b = uint32(min(max(int64(a)+int64(r.IntN(201))-100, 0), int64(lim)))
		}
		m := int64(1 + r.IntN(2))
		if r.IntN(8) == 0 {
			m = int64(1 + r.IntN(predictMaxMS))
		}
		span := int64(1 + r.IntN(int(predictMaxMS/m)))
		f := float64(m*span) / float64(span)
		if got, want := predWhole(a, b, m, lim), predictAxis(a, b, f, lim); got != want {
			t.Fatalf("case %d: a %d b %d ×%d (span %d) lim %d: whole %d, float %d", it, a, b, m, span, lim, got, want)
		}
	}
}

// The spreader's whole-factor pairs widen as the reference's float pairs
// do: tracks a view apart (50 ms) and fates one or two views late, the
// server's usual case, which the random tracks above seldom hit.
func TestSpreaderWholeFactorsMatchReference(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 2))
	lim := [3]uint32{1<<19 - 1, 1<<16 - 1, 1<<19 - 1}
	for it := range 200000 {
		span := stamp(1 + r.IntN(predictMaxMS))
		m := stamp(1 + r.IntN(3))
		tb := stamp(r.Uint32())
		var a, b posVal
		a.t, b.t = tb-span, tb
		for x := range 3 {
			a.q[x] = r.Uint32N(lim[x] + 1)
			b.q[x] = uint32(min(max(int64(a.q[x])+int64(r.IntN(2001))-1000, 0), int64(lim[x])))
			if r.IntN(3) == 0 {
				b.q[x] = a.q[x]
			}
		}
		var q [3]uint32
		for x := range 3 {
			q[x] = uint32(min(max(int64(b.q[x])+int64(r.IntN(4001))-2000, 0), int64(lim[x])))
		}
		t0 := tb + m*span
		var want [3]uint64
		widenPred(&want, &q, &a, &b, t0, &lim)
		s := spreader{q: &q, lim: &lim}
		if !s.from(&b, t0) {
			s.rest(&b)
		} else {
			s.pair(&a, &b)
		}
		if s.w != want {
			t.Fatalf("case %d: a %v b %v q %v at %d: spreader %v, reference %v", it, a, b, q, t0, s.w, want)
		}
	}
}
