package node

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ghostwire/ghostwire/client"
	"github.com/ghostwire/ghostwire/replication/move"
)

// Two nodes drained at once (found by hand: `zonectl drain nb & zonectl
// drain nc`): neither may hand a zone or a client to the other. n2 and n3
// stop together; every zone ends on n1, the one node left, and every
// client plays on through n1. Before, n2 asked n3 to take one of its zones
// while n3 was stopping: refused, the zone stayed unowned for good (n1
// runs a fixed zone list and claims no orphans), its players frozen, and
// clients redirected to n3's closing gateway were refused.
func TestTwoNodesDrainedTogether(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreThrottle)
	nodes := startNodes(t, func(c *Config) { c.ShutdownTimeout = Duration(20 * time.Second) }, "x0z0", "x1z0,x0z1", "x1z1")
	defer stopAll(nodes)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var redirects atomic.Int64
	ss, closeAll := dialWalkers(t, ctx, []*Node{n2, n2, n3, n3}, []string{"x1z0", "x0z1", "x1z1", "x0z0"},
		client.OnRedirect(func(client.Redirected) { redirects.Add(1) }))
	defer closeAll()
	acked := sessionAcked
	waitFor(t, 15*time.Second, "every client playing", func() bool {
		return !slices.ContainsFunc(ss, func(s *client.Session) bool { return !acked(s, 30) })
	})
	before := make([]uint64, len(ss))
	for i, s := range ss {
		before[i] = s.Stats().Moves.LastAck
	}

	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, n := range []*Node{n2, n3} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer scancel()
			errs[i] = n.Stop(sctx)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("n%d stop: %v", i+2, err)
		}
	}
	waitFor(t, 10*time.Second, "every zone on n1", func() bool {
		owners := n1.Leases().Owners()
		for _, z := range []string{"x0z0", "x1z0", "x0z1", "x1z1"} {
			if owners[z].Node != "n1" {
				return false
			}
		}
		return true
	})
	waitFor(t, 20*time.Second, "every client playing on n1", func() bool {
		for i, s := range ss {
			if !acked(s, before[i]+30) || s.Server() != n1.PublicAddr() {
				return false
			}
		}
		return true
	})
	if redirects.Load() != int64(len(ss)) {
		t.Fatalf("%d redirects, want %d", redirects.Load(), len(ss))
	}
}

// dialWalkers connects a client through each gws[i] whose player joins
// zones[i] (the first such player id from 100·(i+1)), walking forward on
// its own inputs. closeAll closes them: deferred after the nodes' stop,
// so that they close first and goleak finds none of theirs running.
func dialWalkers(t *testing.T, ctx context.Context, gws []*Node, zones []string, opts ...client.Option) (ss []*client.Session, closeAll func()) {
	t.Helper()
	closeAll = func() {
		for _, s := range ss {
			_ = s.Close(context.Background())
		}
	}
	for i, gw := range gws {
		p := joinsZone(gw, zones[i], uint64(100*(i+1)))
		s, err := client.Dial(ctx, gw.PublicAddr().String(), mint(t, gw, p), opts...)
		if err != nil {
			closeAll()
			t.Fatal(err)
		}
		ss = append(ss, s)
		if err := s.SetInput(move.Move{Forward: 5}); err != nil {
			closeAll()
			t.Fatal(err)
		}
	}
	return ss, closeAll
}

// sessionAcked: the session is up and its zone acknowledged move n.
func sessionAcked(s *client.Session, n uint64) bool {
	return s.Err() == nil && s.Stats().Moves.LastAck >= n
}

// A drain's target that refuses the zone (it is stopping too, though its
// record does not say so yet: the two drains began together) passes it to
// the next live node instead of leaving it unowned.
func TestDrainPassesARefusedZoneOn(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreThrottle)
	nodes := startNodes(t, nil, "x0z0", "x1z0,x0z1", "x1z1")
	defer stopAll(nodes)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	// n3 refuses takes as a stopping node does; its record still says
	// live, so n2's drain picks it for one of its two zones.
	n3.member.mu.Lock()
	n3.member.draining = true
	n3.member.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n2.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	owners := n1.Leases().Owners()
	if owners["x1z0"].Node != "n1" || owners["x0z1"].Node != "n1" {
		t.Fatalf("owners after n2's drain: x1z0 %q, x0z1 %q; want both on n1 (n3 refused)", owners["x1z0"].Node, owners["x0z1"].Node)
	}
}

// An operator's zone move whose target refuses (it began stopping after
// the check that it lives) leaves the zone where it was, running, its
// player playing on: before, the zone was released and asked for, and
// nobody ran it (no node of a fixed --zones list claims orphans).
func TestZoneMoveRefusedKeepsTheZone(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreThrottle)
	nodes := startNodes(t, nil, "x0z0,x1z0", "x0z1,x1z1")
	defer stopAll(nodes)
	n1, n2 := nodes[0], nodes[1]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := joinsZone(n1, "x0z0", 1)
	s, err := client.Dial(ctx, n1.PublicAddr().String(), mint(t, n1, p))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if err := s.SetInput(move.Move{Forward: 5}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the client playing", func() bool { return s.Stats().Moves.LastAck >= 30 })
	n2.member.mu.Lock()
	n2.member.draining = true
	n2.member.mu.Unlock()
	err = n1.MoveZone(ctx, "x0z0", "n2")
	if err == nil {
		t.Fatal("a refused move reported done")
	}
	t.Log(err)
	if owner := n1.Leases().Owners()["x0z0"].Node; owner != "n1" || !slices.Contains(n1.Zones().IDs(), "x0z0") {
		t.Fatalf("x0z0 owned by %q, running on n1: %v", owner, slices.Contains(n1.Zones().IDs(), "x0z0"))
	}
	acked := s.Stats().Moves.LastAck
	waitFor(t, 10*time.Second, "the client playing on", func() bool { return s.Err() == nil && s.Stats().Moves.LastAck >= acked+30 })
}
