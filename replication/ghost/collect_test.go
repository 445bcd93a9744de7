package ghost

import (
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// collectRef is collect as one switch for every ghost (the walk before
// collectRun and collectOne split it): the reference the split must
// match, bucket for bucket, in the same order, with the same ghosts
// pressed. It returns each bucket's ghosts (records) in chain order and
// the pressed ones.
func collectRef(t *Table, now msTime) (map[int][]int32, []int) {
	k, classes := t.cfg, t.reg.classes
	maxStale, resend, deadline := k.maxStaleMS, k.resendMS, k.deadlineMS
	gap := max(resend, min(msCeil(t.fateDelay), msWindow))
	nowMS := int32(now)
	buckets := map[int][]int32{}
	var pressed []int
	for i := int(t.live) - 1; i >= 0; i-- {
		s := &t.slots[i]
		var b int
		switch s.phase {
		case phaseKilling:
			if s.fl&(flCreated|flKillInFlight) != flCreated || s.inflight != 0 {
				continue
			}
			b = killBucket
		case phaseCreating:
			if s.has(flCreateInFlight) {
				continue
			}
			b = tierCreate*tierBuckets + k.grown(s.prioB, nowMS-int32(s.since))
		case phaseLive:
			c := classes[s.ci]
			sent := nowMS - int32(s.sentAt)
			if sent < c.minMS {
				continue
			}
			late := int32(0)
			if deadline > 0 && s.pendChg != 0 && sent >= gap {
				if l := nowMS - int32(s.pendChg); l >= deadline {
					late = l
				}
			}
			if s.dirty == 0 {
				if s.ackBack == 0 {
					continue
				}
				if late > 0 {
					b = tierOverdue*tierBuckets + k.waited(owtBTable[s.prioB], late)
					pressed = append(pressed, i)
					break
				}
				if resend == 0 || sent < resend {
					continue
				}
				b = tierResend*tierBuckets + int(s.prioB)
				break
			}
			if s.posBlocked() && t.dirtyOf(uint32(i), s) == c.posBit {
				continue
			}
			age := nowMS - int32(s.since)
			if age >= maxStale || late > 0 {
				b = tierOverdue*tierBuckets + k.waited(owtBTable[s.prioB], max(age, late))
				if age < maxStale {
					pressed = append(pressed, i)
				}
			} else if a := int(uint32(age)); a < len(k.grownB) {
				b = tierUpdate*tierBuckets + min(int(s.prioB)+int(k.grownB[a]), tierBuckets-1)
			} else {
				b = tierUpdate*tierBuckets + k.grown(s.prioB, age)
			}
		}
		buckets[b] = append([]int32{int32(i)}, buckets[b]...)
	}
	slices.Sort(pressed)
	return buckets, pressed
}

// TestCollectIsCollectRef gives tables of random slots — every phase,
// dirty or not, positions blocked or not, times around every threshold
// (MinInterval, the gap, ConfirmDeadline, MaxStaleness, the end of
// grownB, times after now) — under configs with and without a deadline
// and resends, and a MaxStaleness past maxGrownB, and checks that collect
// (collectRun, collectOne) buckets every ghost as collectRef does: the
// same buckets, the same chains, the same pressed ghosts, the same count.
// Dropping any of collectRun's tests (its lateness, MinInterval, the
// blocked position, the overdue) fails it.
func TestCollectIsCollectRef(t *testing.T) {
	reg, _, _ := newTestRegistry(t)
	cfgs := []func(*Config){
		func(*Config) {},
		func(c *Config) { c.ConfirmDeadline = 0 },
		func(c *Config) { c.ResendInterval = 0 },
		func(c *Config) { c.MaxStaleness = 6 * time.Second; c.ConfirmDeadline = 2 * time.Second },
		func(c *Config) { c.MaxStaleness = 40 * time.Millisecond },
		func(c *Config) { c.StaleUnit = 30 * time.Millisecond },
		func(c *Config) { c.StaleUnit = 300 * time.Millisecond; c.MaxStaleness = time.Second },
	}
	rng := rand.New(rand.NewPCG(7, 35))
	kinds := [...]phase{phaseCreating, phaseLive, phaseLive, phaseLive, phaseLive, phaseKilling}
	checked := 0
	const ghosts = 300
	tabs := make([]*Table, len(cfgs))
	for ci, set := range cfgs {
		cfg := DefaultConfig()
		set(&cfg)
		tab, err := NewTable(reg, cfg)
		if err != nil {
			t.Fatal(err)
		}
		tab.slots = make([]slot, ghosts)
		tab.live = ghosts // the records are dense: none free below live
		tabs[ci] = tab
	}
	// Round by round, every config in turn: the tables share one scratch
	// (borrow), so what one collect leaves in it (collectRun's last wait,
	// of another StaleUnit) meets the next table's ghosts, whose waits
	// take the same few values near the marks.
	for round := range 40 {
		for ci, tab := range tabs {
			now := int32(9000 + rng.IntN(20000))
			// A time near one of the thresholds, or anywhere.
			near := func() msTime {
				marks := []int32{0, 50, 100, tab.cfg.resendMS, tab.cfg.deadlineMS, tab.cfg.maxStaleMS, int32(len(tab.cfg.grownB)), msWindow, 8000}
				d := marks[rng.IntN(len(marks))] + int32(rng.IntN(5)) - 2
				if rng.IntN(8) == 0 {
					d = -int32(rng.IntN(40)) // after now
				}
				return msTime(max(now-d, 0))
			}
			tab.fateDelay = time.Duration(rng.IntN(300)) * time.Millisecond
			for i := range tab.slots {
				s := &tab.slots[i]
				*s = slot{}
				s.phase = kinds[rng.IntN(len(kinds))]
				s.ci = uint8(rng.IntN(len(reg.classes)))
				s.prioB = uint8(rng.IntN(tierBuckets))
				s.sentAt, s.since = near(), near()
				if rng.IntN(3) > 0 {
					s.pendChg = near()
				}
				if rng.IntN(4) > 0 {
					s.dirty = uint32(rng.Uint64()) & uint32(reg.classes[s.ci].all)
				}
				if rng.IntN(4) == 0 {
					s.dirty = uint32(reg.classes[s.ci].posBit)
				}
				s.ackBack = uint8(rng.IntN(3))
				s.fl = uint8(rng.Uint32())
				s.inflight = uint8(rng.IntN(2))
			}
			want, wantPressed := collectRef(tab, msTime(now))

			p := &tab.pk
			p.borrow()
			n := p.collect(tab, msTime(now))
			got, count := map[int][]int32{}, 0
			for w := range p.nonEmpty {
				for m := p.nonEmpty[w]; m != 0; m &= m - 1 {
					b := w*64 + bits.TrailingZeros64(m)
					for i := p.head[b]; i >= 0; i = p.next[i] {
						got[b] = append(got[b], i)
						count++
					}
				}
			}
			var gotPressed []int
			for i := range ghosts {
				if p.pressed[i>>6]&(1<<uint(i&63)) != 0 {
					gotPressed = append(gotPressed, i)
				}
			}
			p.clear()
			p.release()
			if len(got) != len(want) || count != n {
				t.Fatalf("config %d round %d: %d buckets, %d ghosts (collect says %d); want %d buckets", ci, round, len(got), count, n, len(want))
			}
			for b, ids := range want {
				if !slices.Equal(got[b], ids) {
					t.Fatalf("config %d round %d: bucket %d holds %v, want %v", ci, round, b, got[b], ids)
				}
			}
			if !slices.Equal(gotPressed, wantPressed) {
				t.Fatalf("config %d round %d: pressed %v, want %v", ci, round, gotPressed, wantPressed)
			}
			checked += n
		}
	}
	if checked < 10_000 {
		t.Fatalf("only %d candidates checked", checked)
	}
}
