package ghost

import (
	"math"
	"testing"
	"time"
)

// Each snapshot of a ghost's history carries the yaw of its own update.
// An update with a position and a yaw appends the position's snapshot with
// the new yaw; the yaw must not also overwrite the snapshot before it,
// which would make the interpolated yaw run one update early and never
// lie between two different values (the position group is decoded before
// the yaw group, and the snapshot is recorded after both).
func TestMirrorHistoryYawIsEachUpdates(t *testing.T) {
	reg, pc, _ := newTestRegistry(t)
	net := newFakeNet(7, 0, 30*time.Millisecond, 0)
	g := newRig(t, reg, DefaultConfig(), net, MaxPacketBytes)
	e := ViewEntry{Entity: 1, Class: pc, Priority: 1}
	const tick = 50 * time.Millisecond
	yawAt := func(at time.Duration) float64 { return 0.1 * float64(at/tick) }
	for now := tick; now <= 2*time.Second; now += 5 * time.Millisecond {
		if now%tick == 0 {
			e.State.Pos = [3]float64{5 * now.Seconds(), 0, 0}
			e.State.Yaw = yawAt(now)
			g.tick(now, []ViewEntry{e})
		} else {
			g.pump(now)
		}
	}
	gh, ok := g.mir.ByEntity(1)
	if !ok {
		t.Fatal("the ghost was never created")
	}
	h := &gh.hist
	if h.n < 4 {
		t.Fatalf("only %d snapshots in the history", h.n)
	}
	// The yaw is coded: compare to within its quantum.
	const tol = 0.01
	for i := range int(h.n) {
		s := h.at(i)
		at := time.Duration(s.ms) * time.Millisecond
		if want := yawAt(at); math.Abs(angleDiff(s.yaw, want)) > tol {
			t.Errorf("snapshot %d of %d (at %v) has yaw %.3f, want %.3f (its own update's)", i, h.n, at, s.yaw, want)
		}
	}
}

func angleDiff(a, b float64) float64 {
	d := math.Mod(a-b, 2*math.Pi)
	if d > math.Pi {
		d -= 2 * math.Pi
	} else if d < -math.Pi {
		d += 2 * math.Pi
	}
	return d
}
