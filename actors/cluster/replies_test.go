package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A writer's pipelined checkpoints are acknowledged to the same few
// subjects batch after batch (at most maxBatch a writer), not one new
// subject a publish: nats-server's stream client keeps the last 512
// subjects it delivered to, and a new one cost a sublist match, its
// allocations and an entry evicted (≈ 4,100 instructions and 4
// allocations a checkpoint, BenchmarkCheckpointTick). Every checkpoint
// is still written, each to its own record. On a real nats-server.
func TestPipelineRepliesAreReused(t *testing.T) {
	nc := natsServer(t)
	js, _ := jetstream.New(nc)
	p := NewPlayers(playersBucket(t, js), "n1", nil)
	t.Cleanup(p.Close)
	if err := p.Pipeline(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
	// A second subscription to writer 0's replies sees each ack's subject.
	var mu sync.Mutex
	seen := map[string]int{}
	sub, err := nc.Subscribe(p.pipe.reply[0]+"*", func(m *nats.Msg) {
		mu.Lock()
		seen[m.Subject]++
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	const players = 200 // 50 a writer
	cps := joinedCheckpoints(p, players)
	gw := func(string) string { return "gw" }
	const rounds = 6 // ≥ 300 publishes on writer 0
	for r := range rounds + 1 {
		for i := range cps {
			cps[i].Control.Pos[1] = float32(r)
		}
		if err := p.CheckpointSync(context.Background(), "z", cps, gw); err != nil {
			t.Fatal(err)
		}
	}
	if n := p.Checkpoints.Load(); n != (rounds+1)*players {
		t.Fatalf("%d checkpoints written, want %d", n, (rounds+1)*players)
	}
	for i := range cps {
		if got := record(t, p, cps[i].Entity).GetCheckpoint().GetControl().GetPos().GetY(); got != rounds {
			t.Fatalf("player %d's record holds round %v, want %d", cps[i].Entity, got, rounds)
		}
	}
	waitFor(t, 5*time.Second, "the acks' copies", func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, c := range seen {
			n += c
		}
		return n >= rounds*players/playerWorkers // the first round's first writes go alone (no revision yet)
	})
	mu.Lock()
	defer mu.Unlock()
	if len(seen) > maxBatch {
		t.Fatalf("writer 0's acks came to %d subjects, want at most %d (one a batch slot)", len(seen), maxBatch)
	}
}

// A batch whose ack did not come in time moves its writer's replies to
// the next numbers (batchWriter.gen): the late ack, when it comes, is not
// taken for the next batch's publish of the same slot.
func TestPipelineLateAckNotTakenByTheNextBatch(t *testing.T) {
	_, p, ack := ackedPipeline()
	var w batchWriter
	first := w.gen * maxBatch // as writeBatch numbers a batch
	w.sent[0], w.sent[1] = true, true
	ack(first, 100) // publish 1's never comes in time
	p.awaitAcks(&w, 1, first, 2, 2)
	if w.rev[0] != 100 || w.err[1] != errAckTimeout {
		t.Fatalf("first batch: %d %v, %d %v; want 100, a timeout", w.rev[0], w.err[0], w.rev[1], w.err[1])
	}
	w.reset()
	next := w.gen * maxBatch
	if next == first {
		t.Fatal("the batch after a timeout is numbered as the one that timed out")
	}
	w.sent[0], w.sent[1] = true, true
	ack(first+1, 666) // the late one
	ack(next+1, 201)
	ack(next, 200)
	p.awaitAcks(&w, 1, next, 2, 2)
	if w.rev[0] != 200 || w.err[0] != nil || w.rev[1] != 201 || w.err[1] != nil {
		t.Fatalf("next batch: %d %v, %d %v; want 200, 201 (the late ack of the batch before dropped)", w.rev[0], w.err[0], w.rev[1], w.err[1])
	}
}
