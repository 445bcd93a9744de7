package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
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
	"github.com/ghostwire/ghostwire/zones/sim"
)

// gatedKV is a players bucket whose first read of one key waits until
// open is closed (or its context ends): a Commit's record write held as
// long as a test needs, as a busy KV holds it for seconds under load.
// The reads of key from then on fail while fail counts down (a busy KV's
// timed-out round trips).
type gatedKV struct {
	jetstream.KeyValue
	key     string
	reached chan struct{} // closed when the first read of key waits
	open    chan struct{}
	once    sync.Once
	fail    atomic.Int64
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
		if g.fail.Add(-1) >= 0 {
			return nil, errBusyKV
		}
	}
	return g.KeyValue.Get(ctx, key)
}

// slowCommit is lineNodes whose node at writes the player records
// through a gate on one player's key (gatedKV): that node's first read of
// the record, the Commit's write of a player handed to it, waits until
// the test opens the gate.
type slowCommit struct {
	nodes [3]*benchNode
	at    int
	kv    jetstream.KeyValue
	gate  *gatedKV
}

func lineNodesSlowCommit(t *testing.T, at int, player uint64) *slowCommit {
	t.Helper()
	s := &slowCommit{at: at}
	var bridge **Bridge
	s.nodes = lineNodesWith(t, func(n int, p *zone.Params, c *Config) {
		if n != at {
			return
		}
		nc, err := nats.Connect(c.NC.ConnectedUrl())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, _ := jetstream.New(nc)
		if s.kv, err = js.CreateOrUpdateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: "players"}); err != nil {
			t.Fatal(err)
		}
		s.gate = newGatedKV(s.kv, PlayerKey(player))
		players := NewPlayers(s.gate, c.Node, nil)
		t.Cleanup(players.Close)
		c.Players = players
		b := new(*Bridge)
		bridge = b
		p.Checkpoint = func(zone string, cps []handoff.Checkpoint, leaving bool) {
			players.Checkpoint(zone, cps, leaving, (*b).GatewayOfConn)
		}
	})
	*bridge = s.nodes[at].bridge
	return s
}

// commitHeld joins player on c through gateway n1 to x1z0 (n2) and
// teleports it to into, in node at's zone: it returns once the Commit of
// that handoff waits at the gate for its record write. c's route stays
// x1z0.
func (s *slowCommit) commitHeld(t *testing.T, c *loginConn, player uint64, into [3]float32) {
	t.Helper()
	gw := s.nodes[0]
	gw.sys.Root.Send(c.route, c.join(gw.sys, player))
	c.play(t, gw.sys, player, 1, 3, "join on n2")
	gw.sys.Root.Send(c.route, &zone.Teleport{Entity: player, Pos: into})
	select {
	case <-s.gate.reached:
	case <-time.After(5 * time.Second):
		t.Fatalf("no Commit record write on the new owner's node after 5 s: %s", s.handoffState(t, player))
	}
}

// handoffState says where player's handoff from x1z0 stands, for a
// failure's message: the phase in each node's zone, each node's lease and
// link counters, and node at's record writes and Commits.
func (s *slowCommit) handoffState(t *testing.T, player uint64) string {
	t.Helper()
	var b strings.Builder
	for i, n := range s.nodes {
		var phase handoff.Phase
		var epoch handoff.Epoch
		var peer string
		owned := false
		err := n.zones.Inspect(2*time.Second, func(z *sim.Zone) {
			phase, epoch, peer = z.Handoffs().Status(player)
			e, ok := z.Entity(player)
			owned = ok && e.Owned
		})
		bm := n.bridge.Metrics()
		// A lease lost (a renewal stalled past lineLeaseTTL) is never
		// claimed again here: its zone's batches are dropped.
		own := []string{"x0z0", "x1z0", "x2z0"}[i]
		lease, held := n.leases.Held(own)
		fmt.Fprintf(&b, "n%d: phase %v epoch %d peer %q owned %v (inspect err %v), teleports %d, lease of %s held %v (epoch %d) valid %v, bridge no-owner %d gaps %d resent %d; ",
			i+1, phase, epoch, peer, owned, err, n.m.Teleports.Load(), own, held, lease, n.leases.Valid(own),
			bm.NoOwner.Load(), bm.BatchGaps.Load(), bm.BatchesResent.Load())
	}
	at := s.nodes[s.at]
	pl, bm := at.bridge.cfg.Players, at.bridge.Metrics()
	fmt.Fprintf(&b, "n%d players: written %d errors %d dropped %d fenced %d fence-waits %d; bridge: zone batches in %d, stale epoch %d, malformed %d, commits coalesced %d, record refused %d",
		s.at+1, pl.Written.Load(), pl.Errors.Load(), pl.Dropped.Load(), pl.Fenced.Load(), pl.FenceWaits.Load(),
		bm.Msgs[KindZone][dirIn].Load(), bm.StaleEpoch.Load(), bm.Malformed.Load(), bm.CommitsCoalesced.Load(), bm.RecordRefused.Load())
	return b.String()
}

// open opens the gate once ten batches from n2 have reached node at
// since x1z0 passed something on (x1z0 sends the new owner's zone a
// replica batch every tick, through the same proxy and stream: behind
// them, what was passed on has reached the node, and, unheld, its zone),
// and waits until the Commit's record write names zoneID.
func (s *slowCommit) open(t *testing.T, player uint64, zoneID string) {
	t.Helper()
	batches := func() uint64 { return s.nodes[s.at].bridge.Metrics().Msgs[KindZone][dirIn].Load() }
	after := batches()
	waitFor(t, 5*time.Second, "ten batches from n2 behind what x1z0 passed on", func() bool { return batches() >= after+10 })
	close(s.gate.open)
	waitFor(t, 5*time.Second, "the Commit's record write", func() bool { return s.record(player).GetZone() == zoneID })
}

// record reads player's record (empty if none).
func (s *slowCommit) record(player uint64) *pb.PlayerRecord {
	var rec pb.PlayerRecord
	if e, err := s.kv.Get(context.Background(), PlayerKey(player)); err == nil {
		_ = proto.Unmarshal(e.Value(), &rec)
	}
	return &rec
}

// heldBehind fails t unless node at's bridge held want items behind the
// Commit.
func (s *slowCommit) heldBehind(t *testing.T, want uint64, what string) {
	t.Helper()
	if held := s.nodes[s.at].bridge.Metrics().HeldBehindCommit.Load(); held != want {
		t.Errorf("%d items held behind the Commit, want %d (%s)", held, want, what)
	}
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
			s := lineNodesSlowCommit(t, tc.node, player)
			nodes, gw := s.nodes, s.nodes[0]
			old := actor.NewPID(gw.sys.Address(), zone.ActorName("x1z0"))
			c := newLoginConn(gw.sys, old)
			s.commitHeld(t, c, player, tc.into)
			// The Commit waits for its write; the client quits.
			forwarded := nodes[1].m.Forwarded.Load()
			gw.sys.Root.Send(old, &msg.Leave{Player: player, Conn: c.pid, Reason: handshake.ReasonClientQuit})
			c.views.Close()
			waitFor(t, 5*time.Second, "x1z0 to pass the Leave on", func() bool { return nodes[1].m.Forwarded.Load() > forwarded })
			// The Commit is written: the new owner's zone takes the player,
			// then its Leave, with the last checkpoint (the record offline).
			s.open(t, player, tc.zone)
			s.heldBehind(t, 1, "the Leave")
			deadline := time.Now().Add(5 * time.Second)
			for {
				_, owned := entityIn(t, nodes[tc.node], player)
				rec := s.record(player)
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
