package sim

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// TestControlIntoMatchesControl holds ControlInto to Control and
// ControlEvents, which it replaces in a zone actor's per-view loop: for
// every view of every tick of a churning crowd (players teleported, so
// corrections are due; leaving and joining, so slots are reused; events
// taken, so fences differ), the same state, newest move, correction and
// fence, and no Control where Control has none — also for the previous
// tick's views after the churn (a player gone from its slot).
func TestControlIntoMatchesControl(t *testing.T) {
	z, now := crowdZoneWith(t, 250, 380, nil)
	var mv []move.Move
	var prev []ViewRef
	check := func(tick int, refs []ViewRef) {
		t.Helper()
		for _, ref := range refs {
			c, want := z.Control(ref)
			var st move.ControlState
			var ev handoff.EventFence
			la, correct, ok := z.ControlInto(ref, &st, &ev)
			if ok != want || z.HasControl(ref) != want {
				t.Fatalf("tick %d player %d: ControlInto ok %v, HasControl %v, Control %v", tick, ref.Entity, ok, z.HasControl(ref), want)
			}
			if !ok {
				continue
			}
			fence, _ := z.ControlEvents(&c)
			if st != c.State || la != c.LastApplied || correct != c.Correct || ev != fence {
				t.Fatalf("tick %d player %d: ControlInto (%v, %d, %v, %v), Control (%v, %d, %v, %v)",
					tick, ref.Entity, st, la, correct, ev, c.State, c.LastApplied, c.Correct, fence)
			}
		}
	}
	controls, corrections, fenced := 0, 0, 0
	for tick := range 60 {
		now += 50 * time.Millisecond
		crowdInput(z, 250, now, tick, mv)
		for p := uint64(1); p <= 250; p += 7 {
			z.TakeEvent(p, 1, tick%2, uint64(tick+1))
		}
		out := z.Step(now)
		check(tick, out.Views)
		for _, ref := range out.Views {
			if c, ok := z.Control(ref); ok {
				controls++
				if c.Correct {
					corrections++
				}
				if f, _ := z.ControlEvents(&c); f != (handoff.EventFence{}) {
					fenced++
				}
			}
		}
		prev = append(prev[:0], out.Views...)
		churn(t, z, now, tick)
		check(tick, prev)
	}
	if controls == 0 || corrections == 0 || fenced == 0 {
		t.Fatalf("scene too tame: %d controls, %d corrections, %d with a fence", controls, corrections, fenced)
	}
}
