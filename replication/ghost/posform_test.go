package ghost

import (
	"math/rand/v2"
	"testing"
)

// posForm's fused path for a narrow track with at most one position in
// flight (form1) answers as the general walk does (inflight, clientHasIn,
// spread), bit for bit, over random tracks: stamps close together (equal,
// older, newer, more than predictMaxMS apart), positions near each other
// and the bounds, with and without an older delivered value; fast1 takes
// exactly the tracks with at most one in flight.
func TestFormMatchesGeneral(t *testing.T) {
	qt := quant{lim: [3]uint32{1<<19 - 1, 1<<16 - 1, 1<<19 - 1}, bits: [3]uint{19, 16, 19}}
	r := rand.New(rand.NewPCG(13, 1))
	var x posPool
	x.init(&qt)
	x.fq1 = make([]uint64, 8) // the per-id second positions in flight (Table.resizeRecords)
	pos := func(base *[3]uint32) [3]uint32 {
		var c [3]uint32
		for a := range 3 {
			switch r.IntN(4) {
			case 0:
				c[a] = base[a]
			case 1:
				c[a] = r.Uint32N(qt.lim[a] + 1)
			default:
				v := int64(base[a]) + int64(r.IntN(41)) - 20
				c[a] = uint32(max(0, min(v, int64(qt.lim[a]))))
			}
		}
		return c
	}
	st := func(base stamp) stamp {
		if r.IntN(8) == 0 {
			return base + stamp(r.IntN(4000)) - 2000
		}
		return base + stamp(r.IntN(401)) - 200
	}
	var fast, slow int
	var same [3]int // cases where the client shows q, by positions in flight (2: two or more)
	for it := range 200000 {
		var p posTrack
		t0 := stamp(r.Uint32())
		base := [3]uint32{r.Uint32N(qt.lim[0] + 1), r.Uint32N(qt.lim[1] + 1), r.Uint32N(qt.lim[2] + 1)}
		dn := 1 + r.IntN(2)
		for range dn {
			c := pos(&base)
			p.insert(&x, 0, st(t0), x.packLo(&c), 0)
		}
		n := r.IntN(2)
		if r.IntN(10) == 0 {
			n = 2 + r.IntN(3)
		}
		ts := st(t0)
		for range n {
			c := pos(&base)
			p.push(&x, 0, ts, &c)
			ts += stamp(1 + r.IntN(300))
		}
		q := pos(&base)
		if r.IntN(4) == 0 { // the client's newest shown: exercises posSame
			q = p.delivered(&x, 0, 1, t0).q
		}
		if r.IntN(8) == 0 { // at rest: everything in flight is q too
			q = p.delivered(&x, 0, 1, t0).q
			p.reset(&x)
			p.insert(&x, 0, t0, x.packLo(&q), 0)
			ts = t0 + 1
			for range n {
				p.push(&x, 0, ts, &q)
				ts += stamp(1 + r.IntN(300))
			}
		}
		tq := st(t0)
		if r.IntN(2) == 0 {
			tq = ts + stamp(r.IntN(1200))
		}
		var d0 [3]uint64
		if r.IntN(4) == 0 {
			d0 = [3]uint64{uint64(r.IntN(50)), uint64(r.IntN(50)), uint64(r.IntN(50))}
		}
		check := r.IntN(3) != 0

		var buf [posRingLen]posVal
		fl := p.inflight(&x, 0, &buf, tq)
		wantSame := check && p.clientHasIn(&x, 0, fl, &q)
		want := d0
		if !wantSame {
			p.spread(&x, 0, fl, &q, tq, &qt.lim, &want)
		}
		if p.fast1(&x) != (n <= 1) {
			t.Fatalf("case %d: %d in flight, fast1 %v", it, n, p.fast1(&x))
		}
		gotN := d0
		if gotSame := p.formN(&x, 0, &q, x.packLo(&q), tq, &qt.lim, check, &gotN); gotSame != wantSame || gotN != want {
			t.Fatalf("case %d: track %+v, in flight %v, q %v at %d (check %v): formN %v %v, general %v %v",
				it, p, fl, q, tq, check, gotSame, gotN, wantSame, want)
		}
		if wantSame {
			same[min(n, 2)]++
		}
		if n > 1 {
			slow++
			p.reset(&x)
			continue
		}
		got := d0
		gotSame := p.form1(&x, &q, x.packLo(&q), tq, &qt.lim, check, &got)
		if gotSame != wantSame || got != want {
			t.Fatalf("case %d: track %+v, in flight %v, q %v at %d (check %v): form %v %v, general %v %v",
				it, p, fl, q, tq, check, gotSame, got, wantSame, want)
		}
		fast++
		p.reset(&x)
	}
	if fast == 0 || slow == 0 || min(same[0], same[1], same[2]) == 0 {
		t.Fatalf("fast path %d cases, general %d; the client showing q with 0, 1, 2+ in flight: %v", fast, slow, same)
	}
}

// form1's steady track — two delivered positions and one in flight, a view
// apart, as on a server whose fates come a view later (pair2) — answers as
// the general walk does: walkers and runners at constant velocity (their
// codes a view apart differ by rounding too), at the bounds, views evenly
// spaced (whole factors) or a few ms off (float factors), some views
// skipped.
func TestFormSteadyMatchesGeneral(t *testing.T) {
	qt := quant{lim: [3]uint32{1<<19 - 1, 1<<16 - 1, 1<<19 - 1}, bits: [3]uint{19, 16, 19}}
	r := rand.New(rand.NewPCG(21, 4))
	var x posPool
	x.init(&qt)
	x.fq1 = make([]uint64, 8) // the per-id second positions in flight (Table.resizeRecords)
	var whole, float, pairs2 int
	for it := range 200000 {
		var p posTrack
		at, view := randomWalker(r, &qt)
		t0 := stamp(r.Uint32())
		ks := []int64{0, 1 + r.Int64N(2), 0, 0}
		ks[2] = ks[1] + 1 + r.Int64N(2)
		ks[3] = ks[2] + 1 + r.Int64N(2)
		var ms [4]int64
		for i, k := range ks {
			ms[i] = view(k)
		}
		for i := range 2 {
			c := at(ms[i])
			p.insert(&x, 0, t0+stamp(ms[i]), x.packLo(&c), 0)
		}
		c := at(ms[2])
		p.push(&x, 0, t0+stamp(ms[2]), &c)
		q := at(ms[3])
		tq := t0 + stamp(ms[3])
		var d0 [3]uint64
		if r.IntN(8) == 0 {
			d0 = [3]uint64{uint64(r.IntN(50)), uint64(r.IntN(50)), uint64(r.IntN(50))}
		}
		var buf [posRingLen]posVal
		fl := p.inflight(&x, 0, &buf, tq)
		want := d0
		p.spread(&x, 0, fl, &q, tq, &qt.lim, &want)
		got := d0
		// The reference's float pairs (spread's own use predWhole).
		ref := d0
		vs := [3]posVal{p.delivered(&x, 0, 0, tq), p.delivered(&x, 0, 1, tq), fl[0]}
		widenPred(&ref, &q, &vs[0], &vs[1], tq, &qt.lim)
		widenPred(&ref, &q, &vs[1], &vs[2], tq, &qt.lim)
		if ref != want {
			t.Fatalf("case %d: spread %v, reference %v", it, want, ref)
		}
		if p.form1(&x, &q, x.packLo(&q), tq, &qt.lim, false, &got) || got != want {
			t.Fatalf("case %d: track %+v, in flight %v, q %v at %d: form %v, general %v", it, p, fl, q, tq, got, want)
		}
		if ms[1]-ms[0] <= predictMaxMS && ms[3]-ms[1] <= predictMaxMS {
			pairs2++
			if (ms[3]-ms[1])%(ms[1]-ms[0]) == 0 && (ms[3]-ms[2])%(ms[2]-ms[1]) == 0 {
				whole++
			} else {
				float++
			}
		}
		p.reset(&x)
	}
	if whole < 1000 || float < 1000 {
		t.Fatalf("steady tracks: %d of %d with whole factors, %d float", whole, pairs2, float)
	}
}

// form1's server track — two delivered positions and nothing in flight,
// as on a server whose fates come before its next write (pair1r) —
// answers as the general walk does and as the float reference does:
// walkers and runners at constant velocity, at the bounds, views evenly
// spaced (whole factors) or a few ms off (float factors), some views
// skipped, and now and then a pair too far apart or a value too old to
// extrapolate (the general way).
func TestFormDeliveredMatchesGeneral(t *testing.T) {
	qt := quant{lim: [3]uint32{1<<19 - 1, 1<<16 - 1, 1<<19 - 1}, bits: [3]uint{19, 16, 19}}
	r := rand.New(rand.NewPCG(34, 2))
	var x posPool
	x.init(&qt)
	x.fq1 = make([]uint64, 8) // the per-id second positions in flight (Table.resizeRecords)
	var whole, float, far int
	for it := range 200000 {
		var p posTrack
		at, view := randomWalker(r, &qt)
		ks := []int64{0, 1 + r.Int64N(2), 0}
		ks[2] = ks[1] + 1 + r.Int64N(2)
		if r.IntN(16) == 0 { // a pair or a value past predictMaxMS
			ks[1+r.IntN(2)] += 20
		}
		ks[2] = max(ks[2], ks[1]+1)
		var ms [3]int64
		for i, k := range ks {
			ms[i] = view(k)
		}
		t0 := stamp(r.Uint32())
		for i := range 2 {
			c := at(ms[i])
			p.insert(&x, 0, t0+stamp(ms[i]), x.packLo(&c), 0)
		}
		q := at(ms[2])
		tq := t0 + stamp(ms[2])
		var d0 [3]uint64
		if r.IntN(8) == 0 {
			d0 = [3]uint64{uint64(r.IntN(50)), uint64(r.IntN(50)), uint64(r.IntN(50))}
		}
		want := d0
		p.spread(&x, 0, nil, &q, tq, &qt.lim, &want)
		ref := d0
		vs := [2]posVal{p.delivered(&x, 0, 0, tq), p.delivered(&x, 0, 1, tq)}
		if ms[1]-ms[0] <= predictMaxMS {
			widenPred(&ref, &q, &vs[0], &vs[1], tq, &qt.lim)
		} else { // the track keeps the older stamp capped (gapFar): no motion either way
			widenPred(&ref, &q, nil, &vs[1], tq, &qt.lim)
		}
		if ref != want {
			t.Fatalf("case %d: spread %v, reference %v", it, want, ref)
		}
		got := d0
		if p.form1(&x, &q, x.packLo(&q), tq, &qt.lim, false, &got) || got != want {
			t.Fatalf("case %d: track %+v, q %v at %d: form %v, general %v", it, p, q, tq, got, want)
		}
		switch span, dt := ms[1]-ms[0], ms[2]-ms[1]; {
		case span > predictMaxMS || dt > predictMaxMS:
			far++
		case dt%span == 0 && dt/span <= 2:
			whole++
		default:
			float++
		}
	}
	if whole < 1000 || float < 1000 || far < 1000 {
		t.Fatalf("server tracks: %d with whole factors, %d float, %d past predictMaxMS", whole, float, far)
	}
}

// posForm's way for the server's track (two delivered, nothing in
// flight), written out beside form1's, answers as form1 does — the same
// widening, the same "the client shows it" — for that track and every
// other the fast way takes: whole and float factors, pairs too far apart,
// values equal to the newest delivered, rest markers pending.
func TestPosFormServerTrack(t *testing.T) {
	reg, _, _ := newTestRegistry(t)
	tab, err := NewTable(reg, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	tab.slots = make([]slot, 1)
	tab.pos = make([]posTrack, 1)
	x, lim := &tab.pp, &tab.reg.q.lim
	r := rand.New(rand.NewPCG(8, 5))
	code := func(base *[3]uint32, ms int64, vel *[3]int64) [3]uint32 {
		var c [3]uint32
		for a := range 3 {
			c[a] = uint32(max(0, min(int64(base[a])+vel[a]*ms/50, int64(lim[a]))))
		}
		return c
	}
	var server, same int
	for it := range 100000 {
		var base [3]uint32
		var vel [3]int64
		for a := range 3 {
			base[a] = r.Uint32N(lim[a] + 1)
			if r.IntN(3) != 0 {
				vel[a] = int64(r.IntN(401) - 200)
			}
		}
		tr := &tab.pos[0]
		tr.reset(x)
		ms := int64(0)
		for range 1 + r.IntN(2) { // dn 1 or 2
			c := code(&base, ms, &vel)
			tr.insert(x, 0, stamp(ms), x.packLo(&c), 0)
			ms += 48 + r.Int64N(5)
			if r.IntN(16) == 0 {
				ms += 1000
			}
		}
		if r.IntN(4) == 0 { // one in flight: form1's own ways
			c := code(&base, ms, &vel)
			tr.push(x, 0, stamp(ms), &c)
			ms += 48 + r.Int64N(5)
		}
		if r.IntN(8) == 0 {
			ms += 50
		}
		q := code(&base, ms, &vel)
		if r.IntN(6) == 0 { // the client shows it already
			q = tr.delivered(x, 0, 1, stamp(ms)).q
		}
		tab.viewMS = ms
		s := &tab.slots[0]
		s.restCopies = uint8(r.IntN(2))
		var got posForm
		tab.posForm(0, s, &q, &got)
		var d [3]uint64
		wantSame := tr.form1(x, &q, x.packLo(&q), stamp(ms), lim, s.restCopies == 0, &d)
		if gotSame := got.kind == posSame; gotSame != wantSame || !gotSame && got.d != d || got.ql != x.packLo(&q) {
			t.Fatalf("case %d: track %+v, q %v at %d, rest copies %d: posForm %+v, form1 %v %v",
				it, *tr, q, ms, s.restCopies, got, wantSame, d)
		}
		if tr.meta>>metaDnShift == 2 {
			server++
			if wantSame {
				same++
			}
		}
	}
	if server < 10000 || same < 1000 {
		t.Fatalf("%d server tracks, %d of them shown already", server, same)
	}
}

// randomWalker draws a ghost moving at a constant velocity (walkers and
// runners, some axes at rest) from a random point, clamped at the bounds:
// at gives its codes ms after the start; view gives the time of view k,
// evenly spaced at 50 ms or, for half the walkers, up to 3 ms off.
func randomWalker(r *rand.Rand, qt *quant) (at func(ms int64) [3]uint32, view func(k int64) int64) {
	var base, vel [3]float64
	for a := range 3 {
		base[a] = float64(r.Uint32N(qt.lim[a] + 1))
		vel[a] = float64(r.IntN(2001)-1000) / 100 // codes a ms
		if r.IntN(3) == 0 {
			vel[a] = 0 // height on flat ground, or at rest
		}
	}
	at = func(ms int64) [3]uint32 {
		var c [3]uint32
		for a := range 3 {
			v := int64(base[a] + vel[a]*float64(ms))
			c[a] = uint32(max(0, min(v, int64(qt.lim[a]))))
		}
		return c
	}
	jit := int64(0)
	if r.IntN(2) == 0 {
		jit = 3
	}
	view = func(k int64) int64 {
		if jit == 0 {
			return 50 * k
		}
		return 50*k + r.Int64N(2*jit+1) - jit
	}
	return at, view
}
