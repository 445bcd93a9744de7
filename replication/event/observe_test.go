package event

import (
	"math"
	"math/rand/v2"
	"testing"
)

// refObserve is the loss estimate and copy count as observe computed them
// on every fate before the zero-estimate path (lossZero, lossFloor): the
// reference TestObserveMatchesReference holds observe to.
type refObserve struct {
	n      int
	loss   float64
	redund int
}

func (r *refObserve) observe(c *Config, delivered bool) {
	if c.ResidualLoss == 0 {
		return
	}
	x := 0.0
	if !delivered {
		x = 1
	}
	if r.n < lossWindow {
		r.n++
	}
	r.loss += (x - r.loss) / float64(r.n)
	k := c.Redundancy
	if k == 0 {
		return
	}
	all := r.loss
	for i := 0; i < k; i++ {
		all *= r.loss
	}
	for all > c.ResidualLoss && k < MaxRedundancy {
		all *= r.loss
		k++
	}
	r.redund = k
}

// TestObserveMatchesReference feeds random fates — clean stretches long
// enough for the estimate to fall below lossFloor, bursts, steady loss —
// to a Sender and to the reference: the copy count must be the
// reference's after every fate, and the estimate within lossFloor of it
// (0 where the reference's fell below the floor, and what the floor took
// off decays by 63/64 a fate), and the zero-estimate path must be taken
// again after a loss. It fails with a delivered fate on that path not
// counted (a young window's next loss then divides by too few), with the
// count running past the window, with the floor taken where it would
// change the copy count (the 1e-20 case: 1e-9² is above it), and without
// the floor (the estimate never comes back to 0).
func TestObserveMatchesReference(t *testing.T) {
	for _, tc := range []struct {
		name       string
		residual   float64
		redundancy int
	}{
		{"default", DefaultResidualLoss, DefaultRedundancy},
		{"copies off", DefaultResidualLoss, 0},
		{"one copy", 1e-3, 1},
		{"a residual below the floor's square", 1e-20, 1},
		{"adaptation off", 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.ResidualLoss, c.Redundancy = tc.residual, tc.redundancy
			s, err := NewSender(c)
			if err != nil {
				t.Fatal(err)
			}
			ref := refObserve{redund: tc.redundancy}
			rng := rand.New(rand.NewPCG(1, uint64(tc.redundancy)))
			lost, back := false, false
			for step := 0; step < 200_000; {
				// A stretch of fates at one loss rate: none, rare, heavy.
				p := []float64{0, 0, 0.001, 0.05, 0.3}[rng.IntN(5)]
				for n := 200 + rng.IntN(3000); n > 0; n-- {
					delivered := rng.Float64() >= p
					s.observe(delivered)
					ref.observe(s.cfg, delivered)
					step++
					if int(s.redund) != ref.redund {
						t.Fatalf("fate %d: %d copies, the reference %d (loss %g, the reference's %g)", step, s.redund, ref.redund, s.loss, ref.loss)
					}
					if d := math.Abs(s.loss - ref.loss); d > lossFloor {
						t.Fatalf("fate %d: estimate %g, the reference %g", step, s.loss, ref.loss)
					}
					lost = lost || !delivered
					back = back || lost && s.lossN&lossZero != 0
				}
			}
			if !lost || !back {
				t.Errorf("a loss: %v; the estimate 0 again after it: %v", lost, back)
			}
		})
	}
}
