package node

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ghostwire/ghostwire/client"
)

// A drain's target restores the handed zones' players from the records
// its take request lists, without reading the whole players bucket (every
// player who ever played: a scan of it froze a handover's players for
// seconds in an old world). n2's zones go to n1, whose gateway holds both
// players' connections: they play on with no record lookup of their own
// (a restore that missed them leaves them to look their records up after
// 3 s of silence), and n1 read no bucket.
func TestHandoverRestoresItsListedPlayers(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreThrottle)
	nodes := startNodes(t, func(c *Config) { c.ShutdownTimeout = Duration(20 * time.Second) }, "x0z0,x1z0", "x0z1,x1z1")
	defer stopAll(nodes)
	n1, n2 := nodes[0], nodes[1]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ss, closeAll := dialWalkers(t, ctx, []*Node{n1, n1}, []string{"x0z1", "x1z1"})
	defer closeAll()
	waitFor(t, 15*time.Second, "both clients playing", func() bool {
		return !slices.ContainsFunc(ss, func(s *client.Session) bool { return !sessionAcked(s, 30) })
	})
	scans, relooks := n1.players.BucketScans.Load(), n1.Gateway().Stats().Relooks

	sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
	err := n2.Stop(sctx)
	scancel()
	if err != nil {
		t.Fatal(err)
	}
	before := make([]uint64, len(ss))
	for i, s := range ss {
		before[i] = s.Stats().Moves.LastAck
	}
	waitFor(t, 20*time.Second, "both clients playing on in n1's zones", func() bool {
		return len(n1.Zones().IDs()) == 4 && !slices.ContainsFunc(ss, func(s *client.Session) bool {
			return !sessionAcked(s, before[slices.Index(ss, s)]+60)
		})
	})
	if n := n1.players.BucketScans.Load() - scans; n != 0 {
		t.Errorf("n1 read the whole players bucket %d times for the handed zones", n)
	}
	if n := n1.Gateway().Stats().Relooks - relooks; n != 0 {
		t.Errorf("%d connections looked their records up: the restore missed their players", n)
	}
}
