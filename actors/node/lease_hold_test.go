package node

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ghostwire/ghostwire/zones/sim"
)

// A zone whose lease's renewal is overdue is held (Leases.SetHold →
// membership.hold): it ticks no more, so it applies no move and begins no
// handoff that a new owner would not know of, until the renewal lands and
// lets it go. The other zones run on.
func TestZoneHeldWhileItsLeaseIsOverdue(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreThrottle)
	n, ticks := startHoldingNode(t)
	defer n.Stop(context.Background())
	const held, other = "x0z0", "x1z1"
	n.member.hold(held, true)
	// Held: two readings a few ticks apart agree (the Pause may come after
	// the first Inspect, which overtakes queued messages).
	var last map[string]uint64
	waitFor(t, 10*time.Second, "the held zone to stop ticking", func() bool {
		a := ticks()
		time.Sleep(200 * time.Millisecond)
		b := ticks()
		last = b
		return a[held] == b[held] && b[other] > a[other]
	})
	n.member.hold(held, false)
	waitFor(t, 10*time.Second, "the zone to tick again once let go", func() bool { return ticks()[held] > last[held] })
	if _, ok := n.Leases().Held(held); !ok {
		t.Fatal("the zone's lease is no longer held: a hold must not give it up")
	}
}

// startHoldingNode starts a node with a membership (it holds its zones'
// leases) and returns it with a reading of every zone's tick count.
func startHoldingNode(t *testing.T) (*Node, func() map[string]uint64) {
	t.Helper()
	n, err := Start(context.Background(), testConfig(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n.member == nil {
		n.Stop(context.Background())
		t.Fatal("no membership: the node cannot hold a zone")
	}
	return n, func() map[string]uint64 {
		out := map[string]uint64{}
		inspect(t, n, func(z *sim.Zone) { out[z.ID()] = z.Tick() })
		return out
	}
}
