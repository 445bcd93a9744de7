package sim

import "time"

// MaxLevel is the deepest degradation level.
const MaxLevel = 3

// overload tracks tick cost and the degradation level. The levels, in the
// order they are applied (far-entity update rate first, as the issue asks),
// with F = Config.FarEvery (default 2):
//
//	level 0: far members of a view by reference (beyond FarFraction ×
//	         enter radius) get a state refreshed every F-th tick (1: every
//	         tick)
//	level 1: … every 2F-th tick
//	level 2: … every 4F-th tick; interest sets recomputed every 2nd tick
//	level 3: … every 8F-th tick; interest every 4th tick; NPCs step every
//	         2nd tick (by two ticks' worth)
//
// Each level is entered after Raise overruns in a row and left after Lower
// calm ticks in a row; every overrun and change is counted (Stats), so a
// zone never falls behind silently.
type overload struct {
	level         int
	over, calm    int
	lastCost      time.Duration
	reported      bool
	farEvery      uint64 // Config.FarEvery
	heldEvery     uint64 // farEvery << level
	interestEvery uint64
	npcEvery      uint64
}

// ReportTickCost tells the zone how long the last Step took (wall time, as
// the actor measured it). Without reports the zone never degrades.
func (z *Zone) ReportTickCost(d time.Duration) {
	z.ov.lastCost, z.ov.reported = d, true
}

// ReportMissedTicks tells the zone the scheduler skipped n ticks (the actor
// fell behind by more than a period). Each counts as an overrun.
func (z *Zone) ReportMissedTicks(n int) {
	z.stats.MissedTicks += uint64(n)
	z.ov.over += n
}

// Level returns the degradation level.
func (z *Zone) Level() int { return z.ov.level }

// SetLevel forces a degradation level (tests, an operator).
func (z *Zone) SetLevel(l int) {
	z.ov.level = min(max(l, 0), MaxLevel)
	z.ov.apply()
}

func (o *overload) apply() {
	o.heldEvery = o.farEvery << o.level // F × 1, 2, 4, 8
	o.interestEvery = 1
	o.npcEvery = 1
	if o.level >= 2 {
		o.interestEvery = 1 << (o.level - 1) // 2, 4
	}
	if o.level >= 3 {
		o.npcEvery = 2
	}
}

// account runs at the start of each Step with the cost of the previous one.
func (o *overload) account(z *Zone) {
	z.stats.TicksAtLevel[o.level]++
	if !o.reported {
		return
	}
	o.reported = false
	cfg := &z.cfg.Overload
	p := float64(z.period)
	switch c := float64(o.lastCost); {
	case c > cfg.High*p:
		z.stats.Overruns++
		o.over++
		o.calm = 0
	case c < cfg.Low*p:
		o.calm++
		o.over = 0
	default:
		o.over, o.calm = 0, 0
	}
	switch {
	case o.over >= cfg.Raise && o.level < MaxLevel:
		o.level++
		o.over = 0
		z.stats.LevelUps++
		o.apply()
	case o.calm >= cfg.Lower && o.level > 0:
		o.level--
		o.calm = 0
		z.stats.LevelDowns++
		o.apply()
	}
}
