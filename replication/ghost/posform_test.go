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
	for it := range 200000 {
		var p posTrack
		p.head, p.tail = -1, -1
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
			p.push(&x, ts, &c)
			ts += stamp(1 + r.IntN(300))
		}
		q := pos(&base)
		if r.IntN(4) == 0 { // the client's newest shown: exercises posSame
			q = p.delivered(&x, 0, 1).q
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
		fl := p.inflight(&x, &buf)
		wantSame := check && p.clientHasIn(&x, 0, fl, &q)
		want := d0
		if !wantSame {
			p.spread(&x, 0, fl, &q, tq, &qt.lim, &want)
		}
		if p.fast1(&x) != (n <= 1) {
			t.Fatalf("case %d: %d in flight, fast1 %v", it, n, p.fast1(&x))
		}
		if n > 1 {
			slow++
			p.reset(&x)
			continue
		}
		got := d0
		gotSame := p.form1(&x, &q, tq, &qt.lim, check, &got)
		if gotSame != wantSame || got != want {
			t.Fatalf("case %d: track %+v, in flight %v, q %v at %d (check %v): form %v %v, general %v %v",
				it, p, fl, q, tq, check, gotSame, got, wantSame, want)
		}
		fast++
		p.reset(&x)
	}
	if fast == 0 || slow == 0 {
		t.Fatalf("fast path %d cases, general %d", fast, slow)
	}
}
