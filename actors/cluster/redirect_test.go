package cluster

import (
	"bytes"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/nats-io/nats.go"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/zone"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/handshake"
)

// A connection about to redirect its client (a drain) sends its Leave,
// reason Redirected, before the Redirect — the zone holds the player's
// events from then on — and still takes what the zone sent before it saw
// that Leave. With the zone on another node the Leave passes the zone's
// proxy here, and the zone's last Output comes after it: the bridge must
// still deliver it to the connection, or that event is lost (an echo
// missing at every drain that had one in flight,
// TestZonedDrainedMidRunRedirectsTheBots). Any other Leave ends the
// connection: forgotten at once, what comes after is dropped (Unknown).
func TestBridgeDeliversToARedirectingConnection(t *testing.T) {
	reg, _ := ghost.NewRegistry(ghost.DefaultBounds())
	_ = reg.Register(ghost.PlayerClass(nil), ghost.NPCClass(nil))
	sys := quietSystem()
	t.Cleanup(sys.Shutdown)
	l := &Leases{held: map[string]*held{}, owners: map[string]Owner{}, changed: make(chan struct{})}
	b := &Bridge{cfg: Config{World: "w", Node: "n2", Sys: sys, Leases: l, Registry: reg, MaxBatch: 512,
		Now: func() time.Duration { return 0 }}, m: new(Metrics), log: discard(), served: map[string]*nats.Subscription{},
		links: map[string]*link{}, locals: map[uint64]*msg.Join{}, warned: map[string]bool{}, bases: map[uint64]*viewBase{},
		outs: map[uint64]*actor.PID{}, ins: map[uint64]*arqIn{}}
	// Zone "r" runs on another node: here, its proxy.
	proxy, err := sys.Root.SpawnNamed(b.ProxyProps("r"), zone.ActorName("r"))
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		reason handshake.Reason
		kept   bool
	}{
		{handshake.ReasonRedirected, true},
		{handshake.ReasonClientQuit, false},
	} {
		player := uint64(100 + i)
		conn := &probe{}
		pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return conn }))
		sys.Root.Send(proxy, &msg.Join{Player: player, Conn: pid, Ghosts: pid, Views: new(msg.ViewSlot)})
		sys.Root.Send(proxy, &msg.Leave{Player: player, Conn: pid, Reason: c.reason})
		// The proxy answers a Pause once it took everything before it.
		if _, err := sys.Root.RequestFuture(proxy, &zone.Pause{}, 2*time.Second).Result(); err != nil {
			t.Fatal(err)
		}
		unknown := b.m.Unknown.Load()
		// The zone's Output, sent before it took the Leave, arrives.
		payload := []byte("echo before the Leave")
		if err := b.deliverConn(&pb.ConnBatch{FromNode: "n1", Outputs: []*pb.EventsOut{{Player: player,
			Events: []*pb.GameEvent{{Class: uint32(event.Ordered), Payload: payload}}}}}); err != nil {
			t.Fatal(err)
		}
		if !c.kept {
			if got := b.m.Unknown.Load() - unknown; got != 1 {
				t.Fatalf("Leave(%v): %d Outputs dropped as unknown, want 1 (the connection ended)", c.reason, got)
			}
			if b.local(player) != nil {
				t.Fatalf("Leave(%v): the ended connection is still remembered", c.reason)
			}
			continue
		}
		waitFor(t, 2*time.Second, "the Output to reach the redirecting connection", func() bool { return conn.count() == 1 })
		conn.mu.Lock()
		o, ok := conn.got[0].(*msg.Output)
		conn.mu.Unlock()
		if !ok || o.Player != player || len(o.Events) != 1 || !bytes.Equal(o.Events[0].Payload, payload) {
			t.Fatalf("Leave(%v): the connection got %#v, want the zone's Output", c.reason, conn.got[0])
		}
		if got := b.m.Unknown.Load() - unknown; got != 0 {
			t.Fatalf("Leave(%v): %d updates dropped as unknown, want 0", c.reason, got)
		}
	}
}
