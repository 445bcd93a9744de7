package cluster

import (
	"context"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/proto/pbconv"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

func playersFixture(t *testing.T) (*Players, jetstream.KeyValue) {
	t.Helper()
	nc := natsServer(t)
	js, _ := jetstream.New(nc)
	kv := playersBucket(t, js)
	p := NewPlayers(kv, "n1", nil)
	if err := p.Pipeline(context.Background(), nc); err != nil { // as a node writes them
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, kv
}

func record(t *testing.T, p *Players, player uint64) *pb.PlayerRecord {
	t.Helper()
	rec, err := p.Record(context.Background(), player)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// Checkpoints land in the player's record while it names the zone and
// epoch that wrote them; once the player moved on (a newer owner
// recorded), the old zone's late checkpoints are refused and the record
// keeps the newer state; the last checkpoint takes the record offline.
func TestCheckpointsAreFencedByTheRecord(t *testing.T) {
	p, _ := playersFixture(t)
	gw := func(string) string { return "gw1" }
	p.Joined(5, "a", 1)
	cp := handoff.Checkpoint{Entity: 5, Epoch: 1, Control: move.ControlState{Pos: [3]float32{10, 0, 20}}, LastApplied: 40, Health: 900, Name: "p5"}
	waitFor(t, 3*time.Second, "the join record", func() bool { return record(t, p, 5) != nil })
	for i := range 3 {
		cp.Control.Pos[0], cp.LastApplied = float32(10+i), uint64(40+i)
		p.Checkpoint("a", []handoff.Checkpoint{cp}, false, gw)
	}
	waitFor(t, 3*time.Second, "three checkpoints", func() bool { return p.Checkpoints.Load() == 3 })
	rec := record(t, p, 5)
	got, err := pbconvCheckpoint(rec)
	if err != nil || got.Control.Pos[0] != 12 || got.LastApplied != 42 || rec.GetGateway() != "gw1" || rec.GetState() != pb.PlayerState_PLAYER_STATE_ONLINE {
		t.Fatalf("record %v (%v)", rec, err)
	}

	// Zone b takes the player at epoch 2; zone a's checkpoint, late, is refused.
	p.Acquired(5, "b", 2)
	waitFor(t, 3*time.Second, "the handoff record", func() bool { return record(t, p, 5).GetZone() == "b" })
	cp.Control.Pos[0] = -99
	p.Checkpoint("a", []handoff.Checkpoint{cp}, false, gw)
	waitFor(t, 3*time.Second, "the stale checkpoint to be refused", func() bool { return p.CheckpointsRefused.Load() == 1 })
	if rec := record(t, p, 5); rec.GetZone() != "b" || rec.GetCheckpoint().GetControl().GetPos().GetX() == -99 {
		t.Fatalf("a stale checkpoint overwrote the record: %v", rec)
	}

	// Zone b's own checkpoints go in; its last one takes the record offline.
	cp.Epoch, cp.Control.Pos[0] = 2, 77
	p.Checkpoint("b", []handoff.Checkpoint{cp}, true, gw)
	waitFor(t, 3*time.Second, "the leaving checkpoint", func() bool { return p.Checkpoints.Load() == 4 })
	if rec := record(t, p, 5); rec.GetState() != pb.PlayerState_PLAYER_STATE_OFFLINE || rec.GetCheckpoint().GetControl().GetPos().GetX() != 77 {
		t.Fatalf("record after leaving: %v", rec)
	}
}

func pbconvCheckpoint(rec *pb.PlayerRecord) (*handoff.Checkpoint, error) {
	return pbconv.CheckpointFromProto(rec.GetCheckpoint(), rec.GetEpoch())
}

// A zone keeps its players' connection addresses as PID strings; the
// gateway a checkpoint names is parsed from them.
func TestGatewayOfConn(t *testing.T) {
	b, _ := fuzzBridge(t)
	for conn, want := range map[string]string{
		actor.NewPID("nonhost", "link-n2").String():                                          "n2",
		(&actor.PID{Address: "nonhost", Id: "link-n3", RequestId: idTag("conn$7")}).String(): "n3", // a connection's tag (connTag)
		actor.NewPID("nonhost", "conn-77").String():                                          "n1",
		actor.NewPID("nonhost", "link-bad node").String():                                    "n1",
		"": "n1",
	} {
		if got := b.GatewayOfConn(conn); got != want {
			t.Errorf("GatewayOfConn(%q) = %q, want %q", conn, got, want)
		}
	}
}

// BenchmarkPlayerCheckpoints: one second's checkpoints of a zone of 1,000
// players (each player once) written to a real nats-server's KV by
// compare-and-set, as a zone's node writes them. writes/s is the
// sustained rate the record writers reach (the load at 1,000 players is
// 1,000/s).
func BenchmarkPlayerCheckpoints(b *testing.B) {
	nc := natsServer(b)
	js, _ := jetstream.New(nc)
	kv, err := js.CreateOrUpdateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: "players", Storage: jetstream.FileStorage})
	if err != nil {
		b.Fatal(err)
	}
	p := NewPlayers(kv, "n1", nil)
	defer p.Close()
	if err := p.Pipeline(context.Background(), nc); err != nil {
		b.Fatal(err)
	}
	const players = 1000
	cps := joinedCheckpoints(p, players)
	gw := func(string) string { return "gw" }
	ctx := context.Background()
	if err := p.CheckpointSync(ctx, "z", cps, gw); err != nil { // the joins land first, in order
		b.Fatal(err)
	}
	b.ResetTimer()
	start, cpu0 := time.Now(), processCPU()
	for range b.N {
		for i := range cps {
			cps[i].Control.Pos[1]++
		}
		if err := p.CheckpointSync(ctx, "z", cps, gw); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*players)/time.Since(start).Seconds(), "writes/s")
	// The process's CPU (writers, client and the nats-server, all in this
	// process) per write: what a checkpoint costs a node, whatever else
	// holds the cores.
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N*players), "cpu-µs/write")
	if r := p.CheckpointsRefused.Load(); r != 0 {
		b.Fatalf("%d checkpoints refused", r)
	}
}

// A node that may no longer act for a zone (its lease lapsed while it was
// paused or cut off) writes no record for it: not a join, not a
// checkpoint.
func TestPlayersWriteNothingForAFencedZone(t *testing.T) {
	p, _ := playersFixture(t)
	var fenced atomic.Bool
	p.SetFence(func(zone string) bool { return zone != "lost" || !fenced.Load() })
	p.Joined(9, "lost", 1)
	waitFor(t, 3*time.Second, "the join record", func() bool { return record(t, p, 9) != nil })
	fenced.Store(true)
	cp := handoff.Checkpoint{Entity: 9, Epoch: 1, Name: "p9", Control: move.ControlState{Pos: [3]float32{5, 0, 5}}}
	if err := p.CheckpointSync(context.Background(), "lost", []handoff.Checkpoint{cp}, func(string) string { return "gw" }); err == nil {
		t.Fatal("a checkpoint for a fenced zone was written")
	}
	p.Joined(10, "lost", 1)
	p.Joined(11, "kept", 1)
	waitFor(t, 3*time.Second, "the other zone's join", func() bool { return record(t, p, 11) != nil })
	waitFor(t, 3*time.Second, "both writes fenced", func() bool { return p.Fenced.Load() == 2 })
	if record(t, p, 10) != nil || record(t, p, 9).GetCheckpoint() != nil {
		t.Fatalf("writes for the fenced zone: record 10 %v, record 9 %v, fenced %d", record(t, p, 10), record(t, p, 9), p.Fenced.Load())
	}
}

// countingKV counts the reads and compare-and-set requests of the record
// writers.
type countingKV struct {
	jetstream.KeyValue
	gets, updates atomic.Int64
}

func (c *countingKV) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	c.updates.Add(1)
	return c.KeyValue.Update(ctx, key, value, revision)
}

func (c *countingKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	c.gets.Add(1)
	return c.KeyValue.Get(ctx, key)
}

// A join and a handoff each cost the record one write, the checkpoint in
// it; a handoff between two zones of this node is one compare-and-set
// with the revision the node wrote last (no read); the write stays
// fenced: a placement older than the record is refused, one after
// another node's write reads the record and goes on, and a record a
// cross-process Commit already wrote at the epoch gets the checkpoint.
func TestPlacementCarriesTheCheckpoint(t *testing.T) {
	nc := natsServer(t)
	js, _ := jetstream.New(nc)
	raw := playersBucket(t, js)
	kv := &countingKV{KeyValue: raw}
	p := NewPlayers(kv, "n1", nil)
	t.Cleanup(p.Close)
	cp := func(epoch uint64, x float32) *handoff.Checkpoint {
		return &handoff.Checkpoint{Entity: 5, Epoch: handoff.Epoch(epoch), Name: "p5", Control: move.ControlState{Pos: [3]float32{x, 0, 1}}}
	}
	check := func(what, zone string, epoch uint64, x float32) {
		t.Helper()
		rec := record(t, p, 5)
		got, err := pbconvCheckpoint(rec)
		if rec.GetZone() != zone || rec.GetEpoch() != epoch || err != nil || got.Control.Pos[0] != x || rec.GetGateway() != "gw1" {
			t.Fatalf("%s: record %v (%v), want zone %s epoch %d x %g", what, rec, err, zone, epoch, x)
		}
	}
	written := func(n uint64) func() bool {
		return func() bool { return p.Written.Load() == n && p.Checkpoints.Load() == n }
	}

	p.Placed(5, "a", 1, true, cp(1, 10), "gw1")
	waitFor(t, 3*time.Second, "the join with its checkpoint", written(1))
	check("join", "a", 1, 10)

	gets := kv.gets.Load()
	p.Placed(5, "b", 2, false, cp(2, 20), "gw1") // a handoff from a to b, both here
	waitFor(t, 3*time.Second, "the handoff with its checkpoint", written(2))
	if n := kv.gets.Load() - gets; n != 0 {
		t.Fatalf("a handoff between this node's zones read the record %d times", n)
	}
	check("handoff", "b", 2, 20)

	// Another node takes the player (epoch 3): this node's late placement
	// at epoch 2 is refused; a newer one (epoch 4) reads the record, whose
	// revision it no longer knows, and goes on.
	other := &pb.PlayerRecord{Player: 5, Zone: "c", Epoch: 3, Node: "n2", State: pb.PlayerState_PLAYER_STATE_ONLINE}
	val, _ := proto.Marshal(other)
	if _, err := raw.Put(context.Background(), PlayerKey(5), val); err != nil {
		t.Fatal(err)
	}
	p.Placed(5, "b", 2, false, cp(2, 21), "gw1")
	waitFor(t, 3*time.Second, "the late placement refused", func() bool { return p.Conflicts.Load() == 1 })
	if rec := record(t, p, 5); rec.GetZone() != "c" || rec.GetCheckpoint() != nil {
		t.Fatalf("a late placement overwrote the record: %v", rec)
	}
	p.Placed(5, "d", 4, false, cp(4, 40), "gw1")
	waitFor(t, 3*time.Second, "the placement after another node's write", written(3))
	check("after another node's write", "d", 4, 40)

	// A cross-process Commit writes the record first (no checkpoint); the
	// acquisition's placement adds it.
	done := make(chan bool, 1)
	p.Commit(5, "e", 5, func(ok bool) { done <- ok })
	if !<-done {
		t.Fatal("commit not written")
	}
	p.Placed(5, "e", 5, false, cp(5, 50), "gw1")
	waitFor(t, 3*time.Second, "the checkpoint after a commit", func() bool { return p.Checkpoints.Load() == 4 })
	check("after a commit", "e", 5, 50)
	if c := p.Conflicts.Load(); c != 1 {
		t.Fatalf("%d conflicts, want 1", c)
	}
}

// Two owners (CLUSTER.md: never): a handoff from zone a to b strands (a
// gave up on its Commit while b's record write was slow), the player's
// connection reads its record — still a at epoch 3 — and joins a again,
// which restores it; b's write lands in between and b takes the player too.
// The restore's record write must then be refused (a plain Put took the
// record back for a, and both zones owned the player) and say so, so a
// drops the player again; over an unchanged record it goes through.
func TestRestoreAfterTheRecordMovedIsRefused(t *testing.T) {
	nc := natsServer(t)
	js, _ := jetstream.New(nc)
	raw := playersBucket(t, js)
	p := NewPlayers(raw, "n1", nil)
	t.Cleanup(p.Close)
	put := func(zone string, epoch uint64) {
		t.Helper()
		val, _ := proto.Marshal(&pb.PlayerRecord{Player: 5, Zone: zone, Epoch: epoch, Node: "n2", State: pb.PlayerState_PLAYER_STATE_ONLINE})
		if _, err := raw.Put(context.Background(), PlayerKey(5), val); err != nil {
			t.Fatal(err)
		}
	}
	cp := &handoff.Checkpoint{Entity: 5, Epoch: 5, Name: "p5", Control: move.ControlState{Pos: [3]float32{1, 0, 1}}}
	var refused, written atomic.Int32
	settled := func(ok bool) {
		if ok {
			written.Add(1)
		} else {
			refused.Add(1)
		}
	}
	put("b", 4) // b's Commit: the record moved on after the connection read (a, 3)
	p.Restored(5, "a", 5, 3, cp, "gw1", settled)
	waitFor(t, 3*time.Second, "the restore refused", func() bool { return refused.Load() == 1 })
	if rec := record(t, p, 5); rec.GetZone() != "b" || rec.GetEpoch() != 4 {
		t.Fatalf("a restore over a record that moved on wrote it: %v", rec)
	}
	if p.Conflicts.Load() != 1 || p.Written.Load() != 0 || written.Load() != 0 {
		t.Fatalf("conflicts %d written %d (settled written %d), want 1, 0 and 0", p.Conflicts.Load(), p.Written.Load(), written.Load())
	}
	put("a", 3) // unchanged since the read
	p.Restored(5, "a", 5, 3, cp, "gw1", settled)
	waitFor(t, 3*time.Second, "the restore written, and said so", func() bool { return written.Load() == 1 })
	if rec := record(t, p, 5); rec.GetZone() != "a" || rec.GetEpoch() != 5 || rec.GetCheckpoint() == nil || refused.Load() != 1 || p.Written.Load() != 1 {
		t.Fatalf("restore over the record it came from: %v (refused %d, written %d)", rec, refused.Load(), p.Written.Load())
	}
	// A restore the writers had no room for is settled too, unwritten:
	// the zone must not wait for it.
	p.Close()
	p.Restored(5, "a", 6, 5, cp, "gw1", settled)
	waitFor(t, 3*time.Second, "the restore after Close settled unwritten", func() bool { return refused.Load() == 2 })
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPlayerCheckpointsPaced (informative): a node's checkpoint load
// as its zones make it at 1,000 players: four zones ticking together at
// 20 Hz, each handing over a twentieth of its 250 players a tick (12–13),
// one request at a time per writer and pipelined (Pipeline). cpu-µs/write
// is the process's CPU (writers, client, nats-server) per write, less what
// the same time idle costs.
func BenchmarkPlayerCheckpointsPaced(b *testing.B) {
	for _, mode := range []string{"requests", "pipelined"} {
		b.Run(mode, func(b *testing.B) {
			nc := natsServer(b)
			js, _ := jetstream.New(nc)
			kv, err := js.CreateOrUpdateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: "players", Storage: jetstream.FileStorage})
			if err != nil {
				b.Fatal(err)
			}
			p := NewPlayers(kv, "n1", nil)
			defer p.Close()
			if mode == "pipelined" {
				if err := p.Pipeline(context.Background(), nc); err != nil {
					b.Fatal(err)
				}
			}
			const players, batch, gap = 1000, 48, 50 * time.Millisecond
			cps := joinedCheckpoints(p, players)
			gw := func(string) string { return "gw" }
			if err := p.CheckpointSync(context.Background(), "z", cps, gw); err != nil {
				b.Fatal(err)
			}
			idle0 := processCPU()
			for i := 0; i < players; i += batch {
				time.Sleep(gap)
			}
			idle := processCPU() - idle0
			b.ResetTimer()
			cpu0 := processCPU()
			for range b.N {
				for i := range cps { // moving players: an idle one's record is not rewritten (Unchanged)
					cps[i].Control.Pos[1]++
				}
				for i := 0; i < players; i += batch {
					for k := i; k < min(i+batch, players); k += batch / 4 { // four zones
						p.Checkpoint("z", cps[k:min(k+batch/4, players)], false, gw)
					}
					time.Sleep(gap)
				}
			}
			waitFor(b, 10*time.Second, "every checkpoint", func() bool { return p.Checkpoints.Load() == uint64((b.N+1)*players) })
			cpu := processCPU() - cpu0 - time.Duration(b.N)*idle
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*players), "cpu-µs/write")
			if r := p.CheckpointsRefused.Load() + p.Errors.Load(); r != 0 {
				b.Fatalf("%d checkpoints refused or failed", r)
			}
		})
	}
}

// Pipelined checkpoints keep the compare-and-set: written without a read
// while the node's cached revision holds; after another writer changed
// the record, looked up again and written only while it still names the
// zone and epoch.
func TestPipelinedCheckpointsKeepTheFence(t *testing.T) {
	nc := natsServer(t)
	js, _ := jetstream.New(nc)
	raw := playersBucket(t, js)
	kv := &countingKV{KeyValue: raw}
	p := NewPlayers(kv, "n1", nil)
	t.Cleanup(p.Close)
	if err := p.Pipeline(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
	const players = 40
	cps := joinedCheckpoints(p, players)
	gw := func(string) string { return "gw" }
	ctx := context.Background()
	if err := p.CheckpointSync(ctx, "z", cps, gw); err != nil {
		t.Fatal(err)
	}
	gets, updates := kv.gets.Load(), kv.updates.Load()
	for round := range 3 {
		for i := range cps {
			cps[i].Control.Pos[1] = float32(round + 2)
		}
		if err := p.CheckpointSync(ctx, "z", cps, gw); err != nil {
			t.Fatal(err)
		}
	}
	if n, u := kv.gets.Load()-gets, kv.updates.Load()-updates; n != 0 || u != 0 {
		t.Fatalf("pipelined checkpoints read records %d times and sent %d requests", n, u)
	}
	for id := uint64(1); id <= players; id++ {
		if got, err := pbconvCheckpoint(record(t, p, id)); err != nil || got.Control.Pos[1] != 4 {
			t.Fatalf("player %d: record %v (%v)", id, got, err)
		}
	}
	// Another node takes player 1 (epoch 2); player 2's record is written
	// again by someone else at the same zone and epoch (a new revision).
	put := func(rec *pb.PlayerRecord) {
		val, _ := proto.Marshal(rec)
		if _, err := raw.Put(ctx, PlayerKey(rec.Player), val); err != nil {
			t.Fatal(err)
		}
	}
	put(&pb.PlayerRecord{Player: 1, Zone: "y", Epoch: 2, Node: "n2", State: pb.PlayerState_PLAYER_STATE_ONLINE})
	put(&pb.PlayerRecord{Player: 2, Zone: "z", Epoch: 1, Node: "n1", State: pb.PlayerState_PLAYER_STATE_ONLINE})
	for i := range cps {
		cps[i].Control.Pos[1] = 9
	}
	if err := p.CheckpointSync(ctx, "z", cps, gw); err == nil {
		t.Fatal("the checkpoint of a player another node took was written")
	}
	if r := p.CheckpointsRefused.Load(); r != 1 {
		t.Fatalf("%d checkpoints refused, want 1", r)
	}
	if rec := record(t, p, 1); rec.GetZone() != "y" || rec.GetCheckpoint() != nil {
		t.Fatalf("player 1's record overwritten: %v", rec)
	}
	for id := uint64(2); id <= players; id++ {
		if got, err := pbconvCheckpoint(record(t, p, id)); err != nil || got.Control.Pos[1] != 9 {
			t.Fatalf("player %d: record %v (%v)", id, got, err)
		}
	}
	if e := p.Errors.Load(); e != 0 {
		t.Fatalf("%d errors", e)
	}
}

// playersBucket makes the players' KV bucket in js, as the node does.
func playersBucket(t testing.TB, js jetstream.JetStream) jetstream.KeyValue {
	t.Helper()
	kv, err := js.CreateOrUpdateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: "players"})
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// joinedCheckpoints joins n players (ids 1…n) to zone "z" at epoch 1 in p
// and returns a checkpoint of each, at distinct positions.
func joinedCheckpoints(p *Players, n int) []handoff.Checkpoint {
	cps := make([]handoff.Checkpoint, n)
	for i := range cps {
		id := uint64(i + 1)
		cps[i] = handoff.Checkpoint{Entity: id, Epoch: 1, Name: "p", Control: move.ControlState{Pos: [3]float32{float32(i), 0, 1}}}
		p.Joined(id, "z", 1)
	}
	return cps
}
