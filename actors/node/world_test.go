package node

import (
	"context"
	crand "crypto/rand"
	"errors"
	"net/netip"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ghostwire/ghostwire/actors/tokenkey"
	"github.com/ghostwire/ghostwire/client"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/session"
)

func mint(t *testing.T, n *Node, player uint64) []byte {
	t.Helper()
	tok, err := handshake.IssueToken(n.TokenKey(), handshake.TokenParams{
		PlayerID: player, ProtocolID: tokenkey.DefaultProtocolID, Expiry: time.Minute,
		Timeout: 10 * time.Second, ServerAddrs: []netip.AddrPort{n.PublicAddr()},
	}, time.Now(), crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// A client joins the default world through the real gateway, walks, sees
// the world's NPCs, has its moves acknowledged, and is told when the node
// shuts down.
func TestWholeWorldOneClient(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		// protoactor's dead-letter throttle ends ~1 s after its last use.
		ignoreThrottle)
	cfg := testConfig(t)
	cfg.NPCs = 2000 // ~15 within the 100 m interest radius of any point
	n, err := Start(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			n.Stop(context.Background())
		}
	}()
	if _, err := tokenkey.Load(tokenkey.DevPath(cfg.DataDir)); err != nil {
		t.Fatalf("dev key not written to the data dir: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := client.Dial(ctx, n.PublicAddr().String(), mint(t, n, 42))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetInput(move.Move{Forward: 1}); err != nil {
		t.Fatal(err)
	}
	var views []client.GhostView
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		views = s.View(views[:0])
		if len(views) > 0 && s.Stats().Moves.Acked > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(views) == 0 {
		m := n.Zones().Metrics()
		t.Fatalf("no ghosts after 8 s (NPCs=%d); zone views=%d controls=%d joins=%d ticks=%d; gateway %+v; client stats %+v",
			cfg.NPCs, m.Views.Load(), m.Controls.Load(), m.Joins.Load(), m.Ticks.Load(), n.Gateway().Stats(), s.Stats())
	}
	if s.Stats().Moves.Acked == 0 {
		t.Fatalf("no move acknowledged; stats %+v", s.Stats())
	}
	if err := n.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	stopped = true
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("client not told about the shutdown")
	}
	var de *session.DisconnectError
	if err := s.Err(); !errors.As(err, &de) || de.Reason != handshake.ReasonServerShutdown {
		t.Errorf("client error after shutdown = %v, want a disconnect", err)
	}
	_ = s.Close(context.Background())
}
