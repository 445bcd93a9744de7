package sim

import (
	"math"

	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/zones/interest"
)

// refBuckets maps a float32's top 11 bits (sign, exponent, two mantissa
// bits) to ghost.WeightedViewRef's bucket for the float with those bits
// and no others, as a reference to entry 0. A ghost bucket is 4 per
// octave, read off exactly those bits, so for a priority p × class weight
// w whose clamps do not apply, the reference to entry i is
// refBuckets[bits(p×w)>>21] | i: a multiply, a shift and a load where
// WeightedViewRef clamps p, multiplies and clamps the bucket (≈ 21
// instructions a reference, a third of a view's). Whether the clamps can
// apply is checked once for every priority the zone's interest tracker can
// give (Zone.checkRefBuckets), not per reference.
var refBuckets = func() (t [1 << 11]ghost.ViewRef) {
	for v := range t {
		t[v] = ghost.WeightedViewRef(0, 1, math.Float32frombits(uint32(v)<<21))
	}
	return t
}()

// fastRef is the reference to snapshot entry idx at priority p of a class
// of weight w, by refBuckets: WeightedViewRef(idx, w, p) wherever
// Zone.checkRefBuckets found them equal, idx < 1<<24.
func fastRef(idx uint32, w, p float32) ghost.ViewRef {
	return refBuckets[math.Float32bits(p*w)>>21] | ghost.ViewRef(idx)
}

// checkRefBuckets reports whether fastRef equals ghost.WeightedViewRef for
// every priority the zone's tracker can give a member (PriorityRange) and
// every kind's class weight in w (0: no class, never referenced).
//
// Both are monotonic step functions of p (rounding, the clamps and the
// log-scale bucket all are), and fastRef is constant wherever bits(p×w)>>21
// is. So it suffices that they agree at both ends of each interval of p on
// which bits(p×w)>>21 is constant: between the two ends WeightedViewRef,
// monotonic, cannot move either. An interval's end is found by bisecting
// the float32 bits of p (≈ 31 steps; a few dozen intervals a kind, each
// checked once per change of the weights).
func (z *Zone) checkRefBuckets(w *[interest.MaxKinds]float32) bool {
	for k, wk := range w {
		if wk == 0 {
			continue
		}
		// A kind's references take the weight of kind k mod MaxKinds; an
		// entity of a kind beyond MaxKinds weighs 1 in the tracker.
		lo, hi := z.track.PriorityRange(uint8(k))
		l1, h1 := z.track.PriorityRange(interest.MaxKinds)
		if !refBucketsAgree(min(lo, l1), max(hi, h1), wk) {
			return false
		}
	}
	return true
}

// refBucketsAgree reports whether fastRef(0, w, p) equals
// WeightedViewRef(0, w, p) for every p in [lo, hi] (positive, finite).
func refBucketsAgree(lo, hi, w float32) bool {
	if !(lo > 0) || !(hi >= lo) || math.IsInf(float64(hi), 0) || !(w > 0) || math.IsInf(float64(w), 0) {
		return false
	}
	bin := func(b uint32) uint32 { return math.Float32bits(math.Float32frombits(b)*w) >> 21 }
	same := func(b uint32) bool {
		p := math.Float32frombits(b)
		return fastRef(0, w, p) == ghost.WeightedViewRef(0, w, p)
	}
	// Positive floats order as their bits do.
	for a, end := math.Float32bits(lo), math.Float32bits(hi); ; {
		// The last b in [a, end] with a's bin.
		v, l, h := bin(a), a, end
		for l < h {
			m := l + (h-l+1)/2
			if bin(m) == v {
				l = m
			} else {
				h = m - 1
			}
		}
		if !same(a) || !same(l) {
			return false
		}
		if l == end {
			return true
		}
		a = l + 1
	}
}
