package cluster

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/zones/handoff"
)

// BenchmarkPlayersStoreHeap (informative; run at -benchtime=30x or more:
// a block fills in ≈ 7 s here, and one op is a second): the live heap the
// players' records cost a node of 2,000 — Players (its revision cache),
// the client and the embedded-style nats-server's JetStream file store —
// with each player checkpointed once a second (the RPO) as
// BenchmarkCheckpointRecords does it. heap-B/player is the process's
// HeapAlloc after two collections at the end of each second, less the
// same before the first record (the bucket made, as cmd/capacity's idle
// baseline has it), averaged over the seconds; heap-max-B/player the
// largest second.
//
// Most of it is the file store's write cache of the block being written
// (nats-server v2.15.2): a KV bucket's stream gets 4 MB blocks
// (stream.go:1606, defaultKVBlockSize), and the cache keeps every byte
// written to the block while the last write is under 10 s old
// (filestore.go:7911 lwts, 7297–7314) in a buffer grown through the
// 256 KB, 1 MB and 4 MB pools (7847–7855), whether the write is a
// compare-and-set or a plain Put: 2,485 B a player at 2,000 averaged over
// 30 seconds (-benchtime 30x, 2026-12-02). No stream, bucket or server
// option sets the block size (only a bucket bound ≤ 128 KB gives 32 KB
// blocks); with the constant patched to 256 KB the same read 938 B.
func BenchmarkPlayersStoreHeap(b *testing.B) {
	p, _ := pipelinedPlayers(b)
	const players, zones, ticks, gap = 2000, 4, 20, 50 * time.Millisecond
	before := heapAfterTwoGCs()
	cps := make([]handoff.Checkpoint, players)
	var byZone [zones][]handoff.Checkpoint
	for i := range cps {
		id := uint64(i + 1)
		cps[i] = benchCheckpoint(id)
		p.Placed(id, fmt.Sprintf("x%dz0", i%zones), 3, true, nil, "")
	}
	for i := range cps {
		byZone[i%zones] = append(byZone[i%zones], cps[i])
	}
	gw := func(string) string { return "zoned-1" }
	ctx := context.Background()
	for z := range zones { // every record written once: the revisions are cached
		if err := p.CheckpointSync(ctx, fmt.Sprintf("x%dz0", z), byZone[z], gw); err != nil {
			b.Fatal(err)
		}
	}
	base := p.Checkpoints.Load()
	var sum, most uint64
	b.ResetTimer()
	for n := range b.N {
		checkpointSecond(p, byZone[:], ticks, n, gap, gw)
		want := base + uint64((n+1)*players)
		waitFor(b, 10*time.Second, "every checkpoint", func() bool { return p.Checkpoints.Load() >= want })
		b.StopTimer()
		h := heapAfterTwoGCs() - before
		sum += h
		most = max(most, h)
		b.StartTimer()
	}
	b.StopTimer()
	if r := p.CheckpointsRefused.Load() + p.Errors.Load() + p.Dropped.Load(); r != 0 {
		b.Fatalf("%d checkpoints refused, failed or dropped", r)
	}
	b.ReportMetric(float64(sum)/float64(b.N)/players, "heap-B/player")
	b.ReportMetric(float64(most)/players, "heap-max-B/player")
}

// heapAfterTwoGCs is the live heap as cmd/capacity reads it: HeapAlloc
// after two collections (the second frees what the first's finalizers
// and sync.Pool victims still held).
func heapAfterTwoGCs() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
