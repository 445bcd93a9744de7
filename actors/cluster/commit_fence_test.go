package cluster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// A cross-process Commit whose record write finds its zone's lease fenced
// (the last renewal answered longer than the fence ago: on a loaded host a
// renewal's round trip takes seconds) waits for a renewal and is written,
// not answered false for good. Refused, every copy the source resent in
// that window was fenced in turn until it gave up (CommitGiveUp): the
// player owned by nobody, its record naming the zone it left.
// A lease gone is not waited for: that Commit is answered false.
func TestFencedCommitWaitsForTheLease(t *testing.T) {
	nc := natsServer(t)
	const ttl = time.Minute // the renewal loop's own tick (TTL/6) comes after the test
	zones := zonesBucket(t, nc, ttl)
	f := newFencedPlayers(t, nc, zones, ttl, "z", "gone")
	l, lost, clock, p, kv := f.l, f.lost, f.clock, f.p, f.kv

	clock.Store(int64(ttl - ttl/3 + time.Second)) // past the fence, before the give-up
	if l.Valid("z") {
		t.Fatal("valid past the fence without a renewal")
	}
	commit := func(player uint64, zone string) bool {
		t.Helper()
		done := make(chan bool, 1)
		p.Commit(player, zone, 2, func(ok bool) { done <- ok })
		select {
		case ok := <-done:
			return ok
		case <-time.After(10 * time.Second):
			t.Fatalf("player %d's Commit not answered after 10 s", player)
			return false
		}
	}
	if !commit(5, "z") {
		t.Fatalf("a Commit behind a late renewal answered false (fenced %d, waits %d, lost %d)", p.Fenced.Load(), p.FenceWaits.Load(), lost.Load())
	}
	e, err := kv.Get(context.Background(), PlayerKey(5))
	if err != nil {
		t.Fatal(err)
	}
	var rec pb.PlayerRecord
	if err := proto.Unmarshal(e.Value(), &rec); err != nil || rec.GetZone() != "z" || rec.GetEpoch() != 2 {
		t.Fatalf("record %v (%v), want zone z at epoch 2", &rec, err)
	}
	// Deleted behind this node's back: the renewal finds it gone.
	clock.Add(int64(ttl - ttl/3 + time.Second))
	if err := zones.Delete(context.Background(), "gone"); err != nil {
		t.Fatal(err)
	}
	if commit(6, "gone") {
		t.Fatal("a Commit for a lease gone answered true")
	}
	if _, err := kv.Get(context.Background(), PlayerKey(6)); err == nil {
		t.Fatal("a Commit for a lease gone wrote the record")
	}
}

// A player's writes that must not be lost wait for a late renewal too, in
// order: a join's record written while the lease is fenced, and a leaving
// player's last checkpoint (the node's pipelined path), which takes the
// record offline. Dropped, the join left no record (every checkpoint of
// the player refused) and the Leave left the record ONLINE for good.
func TestFencedPlacementAndLeaveWaitForTheLease(t *testing.T) {
	nc := natsServer(t)
	const ttl = time.Minute
	zones := zonesBucket(t, nc, ttl)
	f := newFencedPlayers(t, nc, zones, ttl, "z")
	l, lost, clock, p, kv := f.l, f.lost, f.clock, f.p, f.kv
	if err := p.Pipeline(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
	record := func(player uint64) *pb.PlayerRecord {
		var rec pb.PlayerRecord
		if e, err := kv.Get(context.Background(), PlayerKey(player)); err == nil {
			_ = proto.Unmarshal(e.Value(), &rec)
		}
		return &rec
	}
	fence := func() {
		clock.Add(int64(ttl - ttl/3 + time.Second)) // past the fence, before the give-up
		if l.Valid("z") {
			t.Fatal("valid past the fence without a renewal")
		}
	}
	cp := handoff.Checkpoint{Entity: 9, Epoch: 1, LastApplied: 7}
	fence()
	p.Placed(9, "z", 1, true, &cp, "n1")
	waitFor(t, 5*time.Second, "the fenced join's record", func() bool {
		r := record(9)
		return r.GetZone() == "z" && r.GetState() == pb.PlayerState_PLAYER_STATE_ONLINE
	})
	fence()
	cp.LastApplied = 12
	p.Checkpoint("z", []handoff.Checkpoint{cp}, true, func(string) string { return "n1" })
	waitFor(t, 5*time.Second, "the fenced leave to take the record offline", func() bool {
		r := record(9)
		return r.GetState() == pb.PlayerState_PLAYER_STATE_OFFLINE && r.GetCheckpoint().GetLastApplied() == 12
	})
	if lost.Load() != 0 || p.FenceWaits.Load() != 2 {
		t.Fatalf("lost %d, fence waits %d; want 0, 2", lost.Load(), p.FenceWaits.Load())
	}
}

// While a placement waits on its writer for one zone's late renewal, the
// writer still takes the Commits of other zones (its Commit lane): a
// cross-process handoff into a zone whose lease is fine must not wait for
// another zone's renewal (the census of TestClusterThreeNodesAcrossBorders
// waits a minute at most for the handoffs in flight).
func TestCommitLaneServedWhileAPlacementWaitsForItsLease(t *testing.T) {
	nc := natsServer(t)
	const ttl = time.Minute
	hold := newHoldKV(zonesBucket(t, nc, ttl), "z")
	f := newFencedPlayers(t, nc, hold, ttl, "z", "y")
	clock, p, kv := f.clock, f.p, f.kv
	hold.armed.Store(true) // z's next renewal is applied, its answer held
	clock.Add(int64(ttl - ttl/3 + time.Second))
	p.Joined(9, "z", 1) // waits on writer 1 for z's renewal
	waitFor(t, 5*time.Second, "the join to wait for z's renewal", func() bool { return p.FenceWaits.Load() == 1 })
	<-hold.applied
	done := make(chan bool, 1)
	p.Commit(13, "y", 2, func(ok bool) { done <- ok }) // writer 1 too
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("the Commit into y answered false")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the Commit into y waited 5 s for z's renewal")
	}
	close(hold.release)
	waitFor(t, 5*time.Second, "the join's record once z renewed", func() bool {
		_, err := kv.Get(context.Background(), PlayerKey(9))
		return err == nil
	})
}

// fencedPlayers is node n1's leases on a clock the test moves, holding
// zones, and its record writers fenced by them and waiting on them, as
// actors/node wires them.
type fencedPlayers struct {
	l     *Leases
	lost  *atomic.Int32
	clock *atomic.Int64 // nanoseconds past the leases' epoch
	p     *Players
	kv    jetstream.KeyValue // the players bucket
}

func newFencedPlayers(t *testing.T, nc *nats.Conn, leaseKV jetstream.KeyValue, ttl time.Duration, zones ...string) fencedPlayers {
	t.Helper()
	clock := new(atomic.Int64)
	t0 := time.Unix(1_000_000, 0)
	l, lost := countingLeases(t, leaseKV, "n1", ttl)
	t.Cleanup(func() { l.Close(context.Background()) })
	l.now = func() time.Time { return t0.Add(time.Duration(clock.Load())) }
	for _, z := range zones {
		if _, err := l.Claim(context.Background(), z); err != nil {
			t.Fatal(err)
		}
	}
	js, _ := jetstream.New(nc)
	kv, err := js.CreateOrUpdateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: "players"})
	if err != nil {
		t.Fatal(err)
	}
	p := NewPlayers(kv, "n1", nil)
	t.Cleanup(p.Close)
	p.SetFence(l.Valid)
	p.SetFenceWait(l.WaitValid)
	return fencedPlayers{l: l, lost: lost, clock: clock, p: p, kv: kv}
}
