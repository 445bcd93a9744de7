//go:build amd64 && !amd64.v3

// Held to scan.run bit for bit where Go does not fuse multiply-adds (see
// TestViewsDigest in zones/sim); scan4 never fuses.

package interest

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ghostwire/ghostwire/zones/grid"
)

// TestScan4MatchesRun holds scan4 (four candidates at a time, in
// assembly) to scan.run's loop, its reference: the same entries in the
// same order and the same counts, over random runs of every length from
// 0 to 19 (so every remainder of a last group), runs that end at the
// last candidate, marks of the update's token and of others, candidates
// exactly at either radius and at the +Inf Update moves the player's own
// entry to, and viewers on the candidates.
func TestScan4MatchesRun(t *testing.T) {
	if !haveScan4 {
		t.Log("this CPU has no SSSE3 or POPCNT: Update scans with scan.run alone")
		return
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const enter, leave = 100, 110
	for iter := range 2000 {
		n := 1 + rng.IntN(200)
		bx, bz, bkey := make([]float32, n, n+3), make([]float32, n, n+3), make([]uint32, n, n+3)
		marks := make([]uint8, n+3)
		tok := uint8(1 + rng.IntN(255))
		x, z := float32(rng.Float64()*400-200), float32(rng.Float64()*400-200)
		for i := range bkey {
			cx, cz := x+float32(rng.Float64()*260-130), z+float32(rng.Float64()*260-130)
			switch rng.IntN(8) {
			case 0: // exactly at the enter radius
				cx, cz = x+enter, z
			case 1: // exactly at the leave radius
				cx, cz = x, z-leave
			case 2: // the player's own entry, out of reach
				cx = float32(math.Inf(1))
			case 3: // on the viewer
				cx, cz = x, z
			}
			bx[i], bz[i], bkey[i] = cx, cz, rng.Uint32()
			switch rng.IntN(3) {
			case 0:
				marks[i] = tok
			case 1:
				marks[i] = tok + 1
			}
		}
		// Garbage past the end: scan4 must drop those lanes.
		fx, fz, fk := bx[:cap(bx)], bz[:cap(bz)], bkey[:cap(bkey)]
		for i := n; i < len(fk); i++ {
			fx[i], fz[i], fk[i] = x, z, 0xdead
			marks[i] = tok
		}
		var runs []grid.Run
		total := 0
		for a := 0; a < n; {
			l := min(rng.IntN(20), n-a)
			runs = append(runs, grid.Run{A: int32(a), B: int32(a + l)})
			total += l
			a += l + rng.IntN(3)
		}
		if len(runs) == 0 {
			continue
		}
		sc := scan{enter2: enter * enter, leave2: leave * leave, bx: bx, bz: bz, bkey: bkey, marks: marks[:n], tok: tok, x: x, z: z,
			out: make([]Entry, total)}
		wn, wk := 0, 0
		for _, r := range runs {
			o, k := sc.run(wn, r.A, r.B)
			wn, wk = wn+o, wk+k
		}
		want := sc.out[:wn]
		got := make([]Entry, total+3)
		gn, gk := scan4(&got[0], &fx[0], &fz[0], &fk[0], &marks[0], &runs[0], len(runs), x, z, sc.enter2, sc.leave2, uint32(tok))
		if gn != wn || gk != wk || !slices.Equal(got[:gn], want) {
			t.Fatalf("iteration %d (%d candidates, %d runs): scan4 kept %d (%d marked) %v, scan.run %d (%d) %v",
				iter, n, len(runs), gn, gk, got[:min(gn, len(got))], wn, wk, want)
		}
	}
}

// TestUpdateMatchesReferenceWithoutScan4 is TestUpdateMatchesReference on
// the path a CPU without scan4 takes (scan.run, run by run).
func TestUpdateMatchesReferenceWithoutScan4(t *testing.T) {
	defer func(h bool) { haveScan4 = h }(haveScan4)
	haveScan4 = false
	TestUpdateMatchesReference(t)
}
