package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/ghostwire/ghostwire/actors/zone"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// A cross-process Commit whose record write outlasted the source's
// resends (CommitGiveUp) and the zone's MaxAge still reaches the zone as
// one it takes: once the record names the zone at the new epoch, the
// write is the commit. Delivered with its own send time, the zone dropped
// it as stale and the player was owned nowhere, its record online at the
// new epoch without a checkpoint (TestClusterThreeNodesAcrossBorders at
// load ≈ 14: "player 105 owned by []", 26 players so).
func TestCommitTakenAfterASlowRecordWrite(t *testing.T) {
	f := newBridgeFixture(t)
	js, _ := jetstream.New(f.nc)
	kv, err := js.CreateOrUpdateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: "players"})
	if err != nil {
		t.Fatal(err)
	}
	players := NewPlayers(kv, "n1", nil)
	defer players.Close()
	f.b.cfg.Players = players
	const now = 100 * time.Second // the node clock when the write completes
	f.b.cfg.Now = func() time.Duration { return now }
	maxAge := handoff.DefaultConfig().MaxAge
	// The source's last copy, sent well over MaxAge before the write
	// completed (the source gave up resending).
	sent := now - 4*maxAge
	b, _ := proto.Marshal(&pb.ZoneBatch{Zone: "z", ZoneEpoch: f.epoch, FromNode: "n2", Items: []*pb.ZoneItem{{Item: &pb.ZoneItem_Handoff{Handoff: &pb.HandoffItem{
		Msg: &pb.HandoffMessage{Kind: pb.HandoffKind_HANDOFF_KIND_COMMIT, Entity: 8, Epoch: 3, From: "y", To: "z", SentNs: f.b.wallStamp(sent),
			State: &pb.EntitySnapshot{Entity: 8, Control: &pb.ControlState{Pos: &pb.Vec3{}, Vel: &pb.Vec3{}}, Name: "p"}},
		GatewayNode: "n2"}}}}})
	if err := f.nc.Publish(zoneSubject("w", "z"), b); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the Commit to reach the zone", func() bool { return f.p.count() == 1 })
	f.p.mu.Lock()
	env, ok := f.p.got[0].(*zone.HandoffEnvelope)
	f.p.mu.Unlock()
	if !ok || env.Msg.Kind != handoff.KindCommit || env.Msg.Entity != 8 {
		t.Fatalf("zone got %#v, want player 8's Commit", f.p.got[0])
	}
	// The zone's machine, at the node clock the write completed at.
	m, err := handoff.New("z", handoff.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var out handoff.Output
	m.Step(now, env.Msg, &out)
	if len(out.Acquired) != 1 || out.Acquired[0].Epoch != 4 {
		t.Fatalf("the zone did not take the player (sent %v, now %v; stale %d): %+v", env.Msg.Sent, now, m.Stats().Stale, out)
	}
}
