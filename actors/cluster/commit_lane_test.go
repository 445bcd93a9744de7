package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// backlog queues n checkpoints on writer w (players w+4, w+8, …, whose
// records exist at epoch 1 in zone "z"): a node's second of checkpoints
// on a writer, and more.
func backlog(t testing.TB, p *Players, w uint64, n int) {
	t.Helper()
	cps := make([]handoff.Checkpoint, 0, n)
	for i := range n {
		id := w + playerWorkers*uint64(1+i%512)
		cps = append(cps, handoff.Checkpoint{Entity: id, Epoch: 1, Name: "p",
			Control: move.ControlState{Pos: [3]float32{float32(i), 0, 1}}})
	}
	p.Checkpoint("z", cps, false, func(string) string { return "gw" })
}

// backlogRecords writes the records backlog's checkpoints go into.
func backlogRecords(t testing.TB, p *Players, w uint64) {
	t.Helper()
	cps := make([]handoff.Checkpoint, 512)
	for i := range cps {
		id := w + playerWorkers*uint64(1+i)
		p.Joined(id, "z", 1)
		cps[i] = handoff.Checkpoint{Entity: id, Epoch: 1, Name: "p"}
	}
	if err := p.CheckpointSync(context.Background(), "z", cps, func(string) string { return "gw" }); err != nil {
		t.Fatal(err)
	}
}

// drain waits for what writer w has queued: a checkpoint written through
// its queue, behind everything before it.
func drain(t testing.TB, p *Players, w uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.CheckpointSync(ctx, "z", []handoff.Checkpoint{{Entity: w + playerWorkers, Epoch: 1, Name: "p"}},
		func(string) string { return "gw" }); err != nil {
		t.Fatal(err)
	}
}

// A cross-process handoff waits for its Commit's record write. Queued
// behind a writer's backlog of checkpoints (under load: seconds of them,
// and the source gives the Commit up after 5 s), it stretched every
// handoff; it goes before them now, after one batch in flight at most —
// but never before an older write of its own player, which would then
// land over it (a join's plain put takes the record back), nor does one
// land after it: the record's epochs only go up.
func TestCommitGoesBeforeTheCheckpointBacklog(t *testing.T) {
	p, kv := playersFixture(t)
	const w, queued = 1, 2000
	backlogRecords(t, p, w)

	// A player with nothing queued: its Commit overtakes the backlog.
	const mover = w + playerWorkers*1000
	before := p.Checkpoints.Load()
	backlog(t, p, w, queued)
	written := make(chan uint64, 1)
	p.Commit(mover, "z2", 2, func(ok bool) {
		if !ok {
			t.Error("the Commit's write failed")
		}
		written <- p.Checkpoints.Load() - before
	})
	select {
	case n := <-written:
		// One batch in flight (maxBatch) and the queue's head while the
		// Commit was queued; on one lane, every checkpoint before it.
		if n > queued/2 {
			t.Fatalf("the Commit's write completed after %d of the %d checkpoints queued before it: it waited behind them", n, queued)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the Commit's write did not complete in 30 s")
	}
	if rec := record(t, p, mover); rec.GetZone() != "z2" || rec.GetEpoch() != 2 {
		t.Fatalf("record %v, want z2 at epoch 2", rec)
	}
	drain(t, p, w)
	if d := p.Dropped.Load(); d != 0 {
		t.Fatalf("%d writes dropped: the backlog must fit the queue", d)
	}

	// A player with an older write queued (a fresh join's plain put in
	// the backlog): its Commit waits for it, and its record's epochs only
	// go up.
	const joiner = w + playerWorkers*1001
	watch, err := kv.Watch(context.Background(), PlayerKey(joiner), jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = watch.Stop() }()
	backlog(t, p, w, queued/2)
	p.Joined(joiner, "z", 1)
	backlog(t, p, w, queued/2)
	done := make(chan bool, 1)
	p.Commit(joiner, "z2", 2, func(ok bool) { done <- ok })
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("the Commit behind its player's join was refused")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the Commit's write did not complete in 30 s")
	}
	if d := p.Dropped.Load(); d != 0 {
		t.Fatalf("%d writes dropped: the backlog must fit the queue", d)
	}
	var epochs []uint64
	for len(epochs) < 2 {
		select {
		case e := <-watch.Updates():
			var rec pb.PlayerRecord
			if err := proto.Unmarshal(e.Value(), &rec); err != nil {
				t.Fatal(err)
			}
			if n := len(epochs); n > 0 && rec.GetEpoch() < epochs[n-1] {
				t.Fatalf("the record went from epoch %d back to %d (%s): a write landed after a newer one", epochs[n-1], rec.GetEpoch(), rec.GetZone())
			}
			epochs = append(epochs, rec.GetEpoch())
		case <-time.After(10 * time.Second):
			t.Fatalf("record writes seen: epochs %v, want the join's and the Commit's", epochs)
		}
	}
	drain(t, p, w)
	if rec := record(t, p, joiner); rec.GetZone() != "z2" || rec.GetEpoch() != 2 {
		t.Fatalf("record %v after the backlog, want z2 at epoch 2", rec)
	}
}

// BenchmarkCommitBehindCheckpoints: a Commit's record write queued behind
// a writer's 2,000 checkpoints (two seconds of a 4,000-player node's, or
// a NATS hiccup's backlog), on a real nats-server's KV, pipelined as a
// node writes them. commit-ms: the mean from the Commit to its write's
// completion — what a cross-process handoff waits for before its zone
// takes the player. Each round waits for the backlog to drain.
func BenchmarkCommitBehindCheckpoints(b *testing.B) {
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
	const w, mover = 1, 1 + playerWorkers*1000
	backlogRecords(b, p, w)
	var waited time.Duration
	epoch := uint64(1)
	done := make(chan bool, 1)
	for b.Loop() {
		backlog(b, p, w, 2000)
		epoch++
		start := time.Now()
		p.Commit(mover, "z2", epoch, func(ok bool) { done <- ok })
		if !<-done {
			b.Fatal("the Commit's write failed")
		}
		waited += time.Since(start)
		drain(b, p, w)
	}
	b.ReportMetric(float64(waited.Microseconds())/1000/float64(b.N), "commit-ms")
}
