package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/zone"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// gatedKV is a players bucket whose first read of one key waits until
// open is closed (or its context ends): a Commit's record write held as
// long as a test needs, as a busy KV holds it for seconds under load.
type gatedKV struct {
	jetstream.KeyValue
	key     string
	reached chan struct{} // closed when the first read of key waits
	open    chan struct{}
	once    sync.Once
}

func newGatedKV(kv jetstream.KeyValue, key string) *gatedKV {
	return &gatedKV{KeyValue: kv, key: key, reached: make(chan struct{}), open: make(chan struct{})}
}

func (g *gatedKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if key == g.key {
		first := false
		g.once.Do(func() { first = true })
		if first {
			close(g.reached)
			select {
			case <-g.open:
			case <-ctx.Done():
			}
		}
	}
	return g.KeyValue.Get(ctx, key)
}

// A player's zone on n2 hands it to another node's zone just as its
// client quits, and the new owner's node is slow to write the Commit's
// player record (a busy KV: seconds under load, past the source's
// CommitGiveUp). The old zone passes the Leave on at once (it no longer
// owns the player once it sends Commit), so the Leave reaches the new
// owner's node behind the Commit — and, before, went on to the zone while
// the Commit waited for its write: the zone, not owning the player yet,
// dropped it, then took the player when the write completed — a player
// with nobody behind it, its record online, for good (no zone timer ends
// it). What follows a Commit to its zone must wait for it there.
func TestLeaveBehindASlowCommitRecordWriteEndsThePlayer(t *testing.T) {
	for i, tc := range passOnTargets {
		t.Run(tc.name, func(t *testing.T) {
			player := uint64(700 + i)
			var kv jetstream.KeyValue
			var gate *gatedKV
			var players *Players
			var bridge **Bridge
			nodes := lineNodesWith(t, func(n int, p *zone.Params, c *Config) {
				if n != tc.node {
					return
				}
				nc, err := nats.Connect(c.NC.ConnectedUrl())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(nc.Close)
				js, _ := jetstream.New(nc)
				if kv, err = js.CreateOrUpdateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: "players"}); err != nil {
					t.Fatal(err)
				}
				gate = newGatedKV(kv, PlayerKey(player))
				players = NewPlayers(gate, c.Node, nil)
				t.Cleanup(players.Close)
				c.Players = players
				b := new(*Bridge)
				bridge = b
				p.Checkpoint = func(zone string, cps []handoff.Checkpoint, leaving bool) {
					players.Checkpoint(zone, cps, leaving, (*b).GatewayOfConn)
				}
			})
			*bridge = nodes[tc.node].bridge
			gw := nodes[0]
			old := actor.NewPID(gw.sys.Address(), zone.ActorName("x1z0"))
			c := newLoginConn(gw.sys, old)
			gw.sys.Root.Send(old, c.join(gw.sys, player))
			c.play(t, gw.sys, player, 1, 3, "join on n2")
			gw.sys.Root.Send(old, &zone.Teleport{Entity: player, Pos: tc.into})
			select {
			case <-gate.reached:
			case <-time.After(5 * time.Second):
				t.Fatal("no Commit record write on the new owner's node after 5 s")
			}
			// The Commit waits for its write; the client quits.
			forwarded := nodes[1].m.Forwarded.Load()
			gw.sys.Root.Send(old, &msg.Leave{Player: player, Conn: c.pid, Reason: handshake.ReasonClientQuit})
			c.views.Close()
			waitFor(t, 5*time.Second, "x1z0 to pass the Leave on", func() bool { return nodes[1].m.Forwarded.Load() > forwarded })
			// x1z0 sends the new owner's zone a replica batch every tick,
			// through the same proxy and stream as the Leave: ten of them
			// after it, and the Leave has reached the new owner's node
			// (and, before, its zone).
			batches := func() uint64 { return nodes[tc.node].bridge.Metrics().Msgs[KindZone][dirIn].Load() }
			after := batches()
			waitFor(t, 5*time.Second, "ten batches from n2 behind the Leave", func() bool { return batches() >= after+10 })
			close(gate.open)
			record := func() *pb.PlayerRecord {
				var rec pb.PlayerRecord
				if e, err := kv.Get(context.Background(), PlayerKey(player)); err == nil {
					_ = proto.Unmarshal(e.Value(), &rec)
				}
				return &rec
			}
			// The Commit is written: the new owner's zone takes the player,
			// then its Leave, with the last checkpoint (the record offline).
			waitFor(t, 5*time.Second, "the Commit's record write", func() bool { return record().GetZone() == tc.zone })
			if held := nodes[tc.node].bridge.Metrics().HeldBehindCommit.Load(); held != 1 {
				t.Errorf("%d items held behind the Commit, want 1 (the Leave)", held)
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				_, owned := entityIn(t, nodes[tc.node], player)
				rec := record()
				if !owned && rec.GetState() == pb.PlayerState_PLAYER_STATE_OFFLINE {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("5 s after the Commit's write: owned in %s %v, record %v; want it gone, its record offline", tc.zone, owned, rec)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}
