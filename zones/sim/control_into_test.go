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
// taken, so fences differ; connections taking players over), the same
// state, newest move and correction, and no Control where Control has
// none — also for the previous tick's views after the churn (a player
// gone from its slot). The fence is written only when it is news to the
// player's connection: a changed fence, and any fence to a connection
// that has none yet (a join, a takeover), always reaches its Control; an
// unchanged one is left out, but for the refresh every fenceEvery ticks.
func TestControlIntoMatchesControl(t *testing.T) {
	z, now := crowdZoneWith(t, 250, 380, nil)
	var mv []move.Move
	var prev []ViewRef
	// held: the fence each player's connection holds, from the Controls
	// ControlInto wrote one into (none: a new connection).
	held := map[uint64]handoff.EventFence{}
	unwritten := handoff.EventFence{Gen: ^uint64(0)}
	written, left, refreshed := 0, 0, 0
	check := func(tick int, refs []ViewRef) {
		t.Helper()
		for _, ref := range refs {
			c, want := z.Control(ref)
			var st move.ControlState
			ev := unwritten
			la, correct, ok := z.ControlInto(ref, &st, &ev)
			if ok != want || z.HasControl(ref) != want {
				t.Fatalf("tick %d player %d: ControlInto ok %v, HasControl %v, Control %v", tick, ref.Entity, ok, z.HasControl(ref), want)
			}
			if !ok {
				if ev != unwritten {
					t.Fatalf("tick %d player %d: a fence written with no Control", tick, ref.Entity)
				}
				continue
			}
			if st != c.State || la != c.LastApplied || correct != c.Correct {
				t.Fatalf("tick %d player %d: ControlInto (%v, %d, %v), Control (%v, %d, %v)",
					tick, ref.Entity, st, la, correct, c.State, c.LastApplied, c.Correct)
			}
			fence, _ := z.ControlEvents(&c)
			h, has := held[ref.Entity]
			switch {
			case ev == unwritten && (!has || h != fence):
				t.Fatalf("tick %d player %d: fence %v left out of the Control, its connection holds %v (has %v)",
					tick, ref.Entity, fence, h, has)
			case ev == unwritten:
				left++
			case ev != fence:
				t.Fatalf("tick %d player %d: ControlInto's fence %v, ControlEvents' %v", tick, ref.Entity, ev, fence)
			default:
				if has && h == fence {
					refreshed++
				}
				written++
				held[ref.Entity] = fence
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
		if tick%5 == 3 { // a new connection takes a player over: it holds no fence
			id := uint64(tick*11%250) + 1
			z.TakeOver(now, id)
			delete(held, id)
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
		delete(held, uint64(tick*7%250)+1) // churn's player left and joined again: a new connection
		check(tick, prev)
	}
	if controls == 0 || corrections == 0 || fenced == 0 {
		t.Fatalf("scene too tame: %d controls, %d corrections, %d with a fence", controls, corrections, fenced)
	}
	if left == 0 || refreshed == 0 || written == 0 {
		t.Fatalf("fences: %d written (%d unchanged, refreshed), %d left out: want each", written, refreshed, left)
	}
	t.Logf("fences: %d written (%d refreshed), %d left out", written, refreshed, left)
}
