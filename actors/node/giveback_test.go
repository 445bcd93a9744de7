package node

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// A rolling restart of a cluster laid out by --zones lists (found by
// hand): n2's drain hands its listed zones to the others, and n2,
// restarted with the same list, takes them back — from the explicit n1,
// which does not list them, and from the auto spare n3 — its players
// playing on throughout. Before, the restart failed ("zone x0z1 is owned
// by node n1") and n2's zones stayed on the other nodes for good. A zone
// that two lists name is still refused at start, and a zone an operator
// moved is not asked back.
func TestListedZonesTakenBackAfterARestart(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreThrottle)
	nodes := startNodes(t, func(c *Config) { c.ShutdownTimeout = Duration(20 * time.Second) }, "x0z0,x1z0", "x0z1,x1z1", "auto")
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	defer func() { stopAll([]*Node{n1, n3}) }()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ss, closeAll := dialWalkers(t, ctx, []*Node{n1, n1, n1}, []string{"x0z1", "x1z1", "x0z0"})
	defer closeAll()
	acked := sessionAcked
	playing := func(what string) {
		t.Helper()
		before := make([]uint64, len(ss))
		for i, s := range ss {
			before[i] = s.Stats().Moves.LastAck
		}
		waitFor(t, 20*time.Second, what, func() bool {
			for i, s := range ss {
				if !acked(s, before[i]+30) {
					return false
				}
			}
			return true
		})
	}
	playing("every client playing")
	owner := func(z string) string { return n1.Leases().Owners()[z].Node }

	cfg2 := n2.cfg
	sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
	err := n2.Stop(sctx)
	scancel()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "n2's zones on n1 and n3", func() bool {
		a, b := owner("x0z1"), owner("x1z1")
		return a != "" && b != "" && a != b && a != "n2" && b != "n2"
	})
	playing("every client playing after the drain")

	// Two lists naming one zone: still a configuration error.
	clash := testConfig(t)
	clash.NodeID, clash.Zones, clash.NATSURL, clash.KeyFile = "n4", "x0z0", n1.NATSURL(), cfg2.KeyFile
	if n4, err := Start(ctx, clash, testLog(t, false)); err == nil {
		_ = n4.Stop(context.Background())
		t.Fatal("a node listing n1's listed zone x0z0 started")
	} else if !strings.Contains(err.Error(), "zone x0z0 is owned by node n1") || !strings.Contains(err.Error(), "lists it too") {
		t.Fatalf("start with n1's listed zone: %v, want the owner named and the clash said", err)
	}

	n2, err = Start(ctx, cfg2, testLog(t, false))
	if err != nil {
		t.Fatalf("n2 restarted with its --zones list: %v", err)
	}
	defer func() { _ = n2.Stop(context.Background()) }()
	waitFor(t, 15*time.Second, "n2's listed zones back on n2", func() bool {
		ids := n2.Zones().IDs()
		return slices.Contains(ids, "x0z1") && slices.Contains(ids, "x1z1") && owner("x0z1") == "n2" && owner("x1z1") == "n2"
	})
	if owner("x0z0") != "n1" || owner("x1z0") != "n1" {
		t.Fatalf("n1's listed zones: x0z0 on %q, x1z0 on %q", owner("x0z0"), owner("x1z0"))
	}
	playing("every client playing after the give-back")

	// An operator's move stands: n2 asks for x1z1 back, n3 refuses.
	if err := n2.MoveZone(ctx, "x1z1", "n3"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "x1z1 on n3", func() bool { return owner("x1z1") == "n3" })
	time.Sleep(4 * n2.Leases().TTL()) // four loops of n2's, each asking
	if o := owner("x1z1"); o != "n3" {
		t.Fatalf("x1z1 on %q after the operator moved it to n3", o)
	}
	playing("every client playing after the operator's move")
}

// A give-back request decodes to what was encoded; anything else on the
// give subject that starts with its mark is refused with an error (the
// rebalance's plain node id does not start with it), never taken for a
// zone and node it does not name.
func TestGiveBackRequestDecodes(t *testing.T) {
	zone, node, err := decodeGiveBack(encodeGiveBack("x1z0", "n-2"))
	if err != nil || zone != "x1z0" || node != "n-2" {
		t.Fatalf("decode(encode(x1z0, n-2)) = %q, %q, %v", zone, node, err)
	}
	if b := []byte("n2"); b[0] == giveBackMark {
		t.Fatal("a node id starts with the give-back mark")
	}
	for _, bad := range [][]byte{
		nil,
		{giveBackMark},
		[]byte("n2"),
		append([]byte{giveBackMark}, 0xff, 0xff),
		encodeGiveBack("x1 z0", "n2"),
		encodeGiveBack("x1z0", ""),
		encodeGiveBack("", "n2"),
	} {
		if z, n, err := decodeGiveBack(bad); err == nil {
			t.Errorf("decode(%q) = %q, %q, no error", bad, z, n)
		}
	}
}

// FuzzDecodeGiveBack: a give-back request from another node never panics
// the decoder, and what it accepts names a valid zone and node that encode
// back to the same request.
func FuzzDecodeGiveBack(f *testing.F) {
	f.Add(encodeGiveBack("x0z0", "n1"))
	f.Add([]byte("n1"))
	f.Add([]byte{giveBackMark})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		zone, node, err := decodeGiveBack(data)
		if err != nil {
			return
		}
		z2, n2, err := decodeGiveBack(encodeGiveBack(zone, node))
		if err != nil || z2 != zone || n2 != node {
			t.Fatalf("%q, %q did not survive a round trip: %q, %q, %v", zone, node, z2, n2, err)
		}
	})
}
