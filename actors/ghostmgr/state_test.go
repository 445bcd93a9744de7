package ghostmgr

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/notify"
)

// TestStateFollowsTheManager: the State the owner reads (a connection's
// pump, in its own line) says after every call what the Manager and its
// table say: the table's Pending and whether a view waits. Random views
// (taken at once, or waiting for the clock), writes of any room, fates
// delivered and lost in and out of order, Apply, Close. Each of the
// State's writes (Take, apply, Write, OnFate, Close) dropped fails it.
func TestStateFollowsTheManager(t *testing.T) {
	for seed := range uint64(20) {
		var st State
		f := newFixtureState(t, &st)
		if f.m.st != &st {
			t.Fatal("the Manager keeps its State elsewhere than where New was asked")
		}
		rng := rand.New(rand.NewPCG(seed, 7))
		var sent []uint64
		check := func(step int, op string) {
			t.Helper()
			if st.Pending() != f.m.Table().Pending() || st.Pending() != f.m.Pending() {
				t.Fatalf("seed %d step %d after %s: State pending %v, table %v", seed, step, op, st.Pending(), f.m.Table().Pending())
			}
			// The view waits in the slot (nothing here takes it back as
			// a zone's next tick would): a State that says one waits
			// while the slot is empty missed Apply's or Close's write.
			if st.ViewWaiting() && !f.views.Waiting() || st.ViewWaiting() != f.m.ViewWaiting() {
				t.Fatalf("seed %d step %d after %s: State view waiting %v, the slot holds one %v", seed, step, op, st.ViewWaiting(), f.views.Waiting())
			}
		}
		check(0, "New")
		for step := 1; step <= 400; step++ {
			var op string
			switch r := rng.IntN(10); {
			case r < 2:
				op = "publish"
				f.publish(1+rng.IntN(6), rng.Float64()*100, rng.IntN(2) == 0)
			case r < 3:
				op = "take"
				f.m.Take()
				if f.views.Waiting() && !st.ViewWaiting() {
					t.Fatalf("seed %d step %d: a nudge for the slot's view, and the State says none waits", seed, step)
				}
			case r < 4:
				op = "apply"
				f.m.Apply(f.now)
			case r < 6:
				op = "write"
				if seq, n := f.write(t, 8+rng.IntN(8*400)); n > 0 || rng.IntN(2) == 0 {
					sent = append(sent, seq)
				}
			case r < 8 && len(sent) > 0:
				op = "fate"
				k := 0
				if rng.IntN(4) == 0 {
					k = rng.IntN(len(sent)) // a later packet's first: the earlier ones missed
				}
				f.m.OnFate(notify.Fate{Seq: sent[k], Delivered: rng.IntN(3) != 0, SentAt: f.now})
				sent = sent[k+1:]
			default:
				op = "clock"
				f.now += time.Duration(rng.IntN(3)) * time.Millisecond
			}
			check(step, op)
		}
		f.m.Close()
		check(401, "Close")
	}
}
