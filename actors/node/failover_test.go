package node

import (
	"context"
	crand "crypto/rand"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/tokenkey"
	"github.com/ghostwire/ghostwire/client"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/session"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// mintAll mints a token for player listing every node's gateway, in order
// (what a login backend hands out for a cluster).
func mintAll(t *testing.T, nodes []*Node, player uint64) []byte {
	t.Helper()
	var addrs []netip.AddrPort
	for _, n := range nodes {
		addrs = append(addrs, n.PublicAddr())
	}
	tok, err := handshake.IssueToken(nodes[0].TokenKey(), handshake.TokenParams{
		PlayerID: player, ProtocolID: tokenkey.DefaultProtocolID, Expiry: time.Minute,
		Timeout: 10 * time.Second, ServerAddrs: addrs,
	}, time.Now(), crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// cutConn drops every datagram to and from one address once cut: the
// client's view of a gateway whose node crashed or was cut off.
type cutConn struct {
	net.PacketConn
	dead netip.AddrPort
	cut  *atomic.Bool
}

func (c *cutConn) WriteTo(b []byte, to net.Addr) (int, error) {
	if ua, ok := to.(*net.UDPAddr); ok && c.cut.Load() && sameAddr(ua.AddrPort(), c.dead) {
		return len(b), nil
	}
	return c.PacketConn.WriteTo(b, to)
}

func (c *cutConn) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		n, from, err := c.PacketConn.ReadFrom(b)
		if ua, ok := from.(*net.UDPAddr); err == nil && ok && c.cut.Load() && sameAddr(ua.AddrPort(), c.dead) {
			continue
		}
		return n, from, err
	}
}

func sameAddr(a, b netip.AddrPort) bool {
	return a.Port() == b.Port() && a.Addr().Unmap() == b.Addr().Unmap()
}

// A client whose gateway goes silent (its node crashed, or the network
// to it broke) fails over by itself: the session times out, takes a fresh
// token from the application's source (listing the cluster's gateways),
// connects to another gateway and plays on as the same Session, from
// where its player was.
func TestClientFailsOverToAnotherGateway(t *testing.T) {
	nodes := startNodes(t, nil, "x0z0,x1z0", "x0z1,x1z1")
	defer stopAll(nodes)
	player := joinsZone(nodes[0], "x1z0", 1) // on n1; the client dials n2
	var cut atomic.Bool
	cfg := session.DefaultClientConfig()
	cfg.Timeout, cfg.KeepAlive = 1500*time.Millisecond, 300*time.Millisecond
	var asked atomic.Int32
	order := []*Node{nodes[1], nodes[0]} // n2 first: the one that dies
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := client.Dial(ctx, nodes[1].PublicAddr().String(), mintAll(t, order, player),
		client.WithManualInput(), client.WithConfig(cfg),
		client.WithPacketConn(func(pc net.PacketConn) net.PacketConn {
			return &cutConn{PacketConn: pc, dead: nodes[1].PublicAddr(), cut: &cut}
		}),
		client.WithFailover(func(context.Context) ([]byte, error) {
			asked.Add(1)
			return mintAll(t, order, player), nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	walk := func(d time.Duration) {
		t.Helper()
		tick := time.NewTicker(time.Second / 30)
		defer tick.Stop()
		for end := time.Now().Add(d); time.Now().Before(end); {
			<-tick.C
			if _, err := s.SendMove(move.Move{Dt: 32, Forward: 60, Yaw: move.YawFromRadians(2)}); err != nil {
				t.Fatalf("session ended: %v", err)
			}
		}
	}
	walk(time.Second)
	var before sim.EntityInfo
	inspect(t, nodes[0], func(z *sim.Zone) {
		if e, ok := z.Entity(player); ok && e.Owned {
			before = e
		}
	})
	if before.ID != player {
		t.Fatal("the player is not in n1's zones")
	}
	cut.Store(true) // n2 goes silent for this client
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().Failovers == 0 || s.Server() != nodes[0].PublicAddr() {
		if time.Now().After(deadline) {
			t.Fatalf("no failover: %d failovers, server %v, err %v", s.Stats().Failovers, s.Server(), s.Err())
		}
		walk(100 * time.Millisecond)
	}
	// It plays on: the new server's states reach the client (the new
	// connection completes its handshake, looks the record up and joins).
	reconciled := s.Stats().Predictor.Reconciled
	for deadline := time.Now().Add(10 * time.Second); s.Stats().Predictor.Reconciled <= reconciled+5; {
		if s.Err() != nil || time.Now().After(deadline) {
			t.Fatalf("not playing after the failover: err %v, reconciled %d → %d", s.Err(), reconciled, s.Stats().Predictor.Reconciled)
		}
		walk(100 * time.Millisecond)
	}
	// The same player, in the same zone, from where it was (not a spawn
	// point): it walked on from its live state.
	var after sim.EntityInfo
	inspect(t, nodes[0], func(z *sim.Zone) {
		if e, ok := z.Entity(player); ok && e.Owned {
			after = e
		}
	})
	reach := 4 * float64(move.WalkSpeed) // a few seconds of walking at most
	if dx, dz := float64(after.State.Pos[0]-before.State.Pos[0]), float64(after.State.Pos[2]-before.State.Pos[2]); after.ID != player || dx*dx+dz*dz > reach*reach {
		t.Fatalf("after the failover the player is at %v (was at %v)", after.State.Pos, before.State.Pos)
	}
	if asked.Load() == 0 {
		t.Fatal("the token source was never asked")
	}
}
