package node

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ghostwire/ghostwire/actors/zone"
)

// A lease's let-go restarts only what its hold stopped: a zone a census
// paused (the World.Pause of TestClusterThreeNodesAcrossBorders's walk)
// stays paused through a hold and its let-go, and ticks again once the
// census lets go. Before pauses had owners the let-go restarted the
// zone's ticks in the middle of the census.
func TestLeaseLetGoKeepsACensusPause(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreThrottle)
	n, ticks := startHoldingNode(t)
	defer n.Stop(context.Background())
	const held, other = "x0z0", "x1z1"
	n.Zones().Pause(true) // the census
	n.member.hold(held, true)
	n.member.hold(held, false)
	// The witness: the other zone, restarted alone, ticks on while the
	// held one must not. Inspect comes after the Pauses sent before it.
	n.member.sys.Root.Send(n.Zones().PID(other), &zone.Pause{Paused: false})
	a := ticks()
	waitFor(t, 10*time.Second, "the other zone to tick five times", func() bool { return ticks()[other] >= a[other]+5 })
	if b := ticks(); b[held] != a[held] {
		t.Fatalf("zone %s ticked from %d to %d after its lease's let-go: the census's pause must hold", held, a[held], b[held])
	}
	n.Zones().Pause(false)
	waitFor(t, 10*time.Second, "the zone to tick again once the census let go", func() bool { return ticks()[held] > a[held] })
}
