package event

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// staggerRun runs the seed's 1 ms update loop: at every millisecond the
// actions due then are recorded on key 0 (payload = action index), then a
// packet is written and read. It returns the send times and, per send, the
// action whose state it carried.
func staggerRun(t *testing.T, actions []time.Duration, until time.Duration) (sends []time.Duration, carried []int) {
	t.Helper()
	p := newPair(t, DefaultConfig())
	next := 0
	for now := time.Duration(0); now <= until; now += ms {
		for next < len(actions) && actions[next] == now {
			must(t, p.s.SendStaggered(0, []byte{byte(next)}, now))
			next++
		}
		before := p.s.Stats().Staggered
		seq := p.write(now, 64)
		p.deliver(seq)
		g := p.take()
		if p.s.Stats().Staggered > before {
			sends = append(sends, now)
			if len(g) == 1 {
				carried = append(carried, int(g[0].Payload[0]))
			} else {
				carried = append(carried, -1) // a repeat: the receiver ignored it
			}
		} else if len(g) != 0 {
			t.Fatalf("delivered %v without a send", g)
		}
	}
	return sends, carried
}

func msList(ds []time.Duration) []int {
	var out []int
	for _, d := range ds {
		out = append(out, int(d/ms))
	}
	return out
}

// TestStaggerSchedule pins RL-8: the seed's schedule, its coalescing, and the
// behaviour chosen for the seed's edge case (an action while a long gap is
// pending).
func TestStaggerSchedule(t *testing.T) {
	for _, tc := range []struct {
		name    string
		actions []int // ms
		sends   []int // ms
		carried []int // action index delivered at each send, -1 = repeat ignored by the receiver
	}{
		{"one action from idle", []int{0}, []int{0, 100, 300}, []int{0, -1, -1}},
		{"one action at 1000 from idle", []int{1000}, []int{1000, 1100, 1300}, []int{0, -1, -1}},
		// Seed behaviour: the second action is coalesced into the pending
		// 100 ms send, and restarts the doubling there.
		{"actions at 0 and 20", []int{0, 20}, []int{0, 100, 200, 400}, []int{0, 1, -1, -1}},
		// Edge case, fixed: the seed would wait for the pending send at 700 ms
		// (sends 0, 100, 300, 700, 800, 1000); the fix caps the wait at
		// last send + 100 ms.
		{"actions at 0 and 310 (fixed edge case)", []int{0, 310}, []int{0, 100, 300, 400, 500, 700}, []int{0, -1, -1, 1, -1, -1}},
		{"actions at 0 and 150", []int{0, 150}, []int{0, 100, 200, 300, 500}, []int{0, -1, 1, -1, -1}},
		{"action long after the schedule ended", []int{0, 2000}, []int{0, 100, 300, 2000, 2100, 2300}, []int{0, -1, -1, 1, -1, -1}},
		{"burst of actions within 50 ms", []int{0, 10, 20, 30, 40}, []int{0, 100, 200, 400}, []int{0, 4, -1, -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var actions []time.Duration
			for _, a := range tc.actions {
				actions = append(actions, time.Duration(a)*ms)
			}
			sends, carried := staggerRun(t, actions, 3*time.Second)
			if got := msList(sends); !slices.Equal(got, tc.sends) {
				t.Fatalf("sends at %v ms, want %v", got, tc.sends)
			}
			if !slices.Equal(carried, tc.carried) {
				t.Fatalf("delivered actions %v, want %v", carried, tc.carried)
			}
		})
	}
}

// TestStaggerProperties: random action patterns; sends are never closer than
// 2·StaggerBase = 100 ms (so never < 50 ms, the seed's promise), every action
// is first sent within 100 ms, and the last action's state is sent exactly 3
// times (0, 100, 300 ms after its first send) and then nothing.
func TestStaggerProperties(t *testing.T) {
	for seed := uint64(0); seed < 20; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0x57a6))
			var actions []time.Duration
			at := time.Duration(0)
			for i := 0; i < 30; i++ {
				at += time.Duration(1+rng.IntN([]int{40, 150, 600}[i%3])) * ms
				actions = append(actions, at)
			}
			sends, carried := staggerRun(t, actions, at+time.Second)
			for i := 1; i < len(sends); i++ {
				if gap := sends[i] - sends[i-1]; gap < 100*ms {
					t.Fatalf("sends %v and %v only %v apart", sends[i-1], sends[i], gap)
				}
			}
			// First send of each action's state (or of a later action that
			// replaced it before any send) within 100 ms of the action.
			for i, a := range actions {
				ok := false
				for _, s := range sends {
					if s >= a && s <= a+100*ms {
						ok = true
						break
					}
				}
				if !ok {
					t.Fatalf("action %d at %v not sent within 100 ms (sends %v)", i, a, msList(sends))
				}
			}
			last := len(actions) - 1
			n := len(sends)
			if n < 3 || carried[n-3] != last || carried[n-2] != -1 || carried[n-1] != -1 ||
				sends[n-2]-sends[n-3] != 100*ms || sends[n-1]-sends[n-2] != 200*ms {
				t.Fatalf("tail of the schedule: sends %v carried %v, want the last action then 2 repeats at +100, +300", msList(sends[max(0, n-4):]), carried[max(0, n-4):])
			}
		})
	}
}

// TestStaggerKeysIndependent: each key runs its own schedule and version.
func TestStaggerKeysIndependent(t *testing.T) {
	p := newPair(t, DefaultConfig())
	must(t, p.s.SendStaggered(1, []byte("a"), 0))
	p.through(0, 100)
	must(t, p.s.SendStaggered(2, []byte("b"), 30*ms))
	p.through(30*ms, 100) // key 2 at once; key 1 not before 100 ms
	p.through(100*ms, 100)
	p.through(130*ms, 100)
	g := p.take()
	want := []got{{Staggered, 0, 1, "a"}, {Staggered, 0, 2, "b"}}
	if !slices.Equal(g, want) {
		t.Fatalf("got %v, want %v", g, want)
	}
	if st := p.s.Stats(); st.Staggered != 4 {
		t.Fatalf("staggered sends %d, want 4 (two per key so far)", st.Staggered)
	}
}
