package node

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"go.uber.org/goleak"

	"github.com/ghostwire/ghostwire/actors/cluster"
	"github.com/ghostwire/ghostwire/proto/pbconv"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// The embedded server keeps no subject cache: the player records' subjects
// (one a player) would fill it (1,024 entries) with subjects that each come
// back once a second.
func TestEmbeddedNATSKeepsNoSubjectCache(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cfg := DefaultConfig()
	cfg.DataDir, cfg.NATSListen = t.TempDir(), "127.0.0.1:0"
	l, err := startNATS(context.Background(), cfg, 4, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	kv := l.kv[BucketPlayers]
	for i := range 300 {
		if _, err := kv.Put(context.Background(), "p."+strconv.Itoa(1000+i), []byte("r")); err != nil {
			t.Fatal(err)
		}
	}
	sz, err := l.srv.Subsz(&natsserver.SubszOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sublists: %d subscriptions, %d matches, %d cached", sz.NumSubs, sz.NumMatches, sz.NumCache)
	if sz.NumMatches == 0 || sz.NumCache != 0 {
		t.Fatalf("%d subjects cached after %d matches, want none", sz.NumCache, sz.NumMatches)
	}

	// What the node wrote, as cmd/capacity reads it.
	w, err := (&Node{nats: l}).NATSWrites(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p := w.Buckets[BucketPlayers]
	t.Logf("NATS out: %d msgs, %d B; players bucket %+v", w.Msgs, w.Bytes, p)
	if p.Stored != 300 || p.LiveMsgs != 300 || p.BytesEach < 30 || w.Msgs < 300 || w.Bytes < 300 || len(w.Buckets) != 3 {
		t.Fatalf("NATS writes %+v", w)
	}
}

// The zones and nodes buckets are written all the time (lease renewals,
// heartbeats) and hold a few keys: bounded (smallBucketBytes), their
// streams get 32 KB file blocks, so the last block's write cache stays at
// the server's smallest buffer (256 KB) instead of growing with a 4 MB
// block to 4 MB — also after the embedded server restarts, when it sizes
// the blocks again from the stored limits.
func TestSmallBucketsKeepSmallBlocks(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	if got := zonesBucketBytes(250); got != 0 {
		t.Errorf("a world of 250 zones: zones bucket bounded at %d B, want unbounded", got)
	}
	cfg := DefaultConfig()
	cfg.DataDir, cfg.NATSListen = t.TempDir(), "127.0.0.1:0"
	ctx := context.Background()
	val := make([]byte, 60) // a lease or node record's size
	// Past 1 MB of each bucket's writes: a 4 MB block's cache is a 4 MB
	// buffer by then.
	const writes = 12000
	write := func(l *natsLink, n int) {
		t.Helper()
		for i := range n {
			val[0] = byte(i)
			if _, err := l.kv[BucketZones].Put(ctx, "z-"+strconv.Itoa(i%4), val); err != nil {
				t.Fatal(err)
			}
			if _, err := l.kv[BucketNodes].Put(ctx, "n1", val); err != nil {
				t.Fatal(err)
			}
		}
	}
	blocks := func(when string) {
		t.Helper()
		for _, b := range []string{BucketZones, BucketNodes} {
			files, _ := filepath.Glob(filepath.Join(cfg.DataDir, "nats", "jetstream", "*", "streams", "KV_"+b, "msgs", "*.blk"))
			if len(files) == 0 {
				t.Fatalf("%s: no blocks of %s", when, b)
			}
			for _, f := range files {
				// A block ends after the record that crosses its size.
				if fi, err := os.Stat(f); err != nil || fi.Size() > 32_000+256 {
					t.Errorf("%s: %s block %s is %d B, want ≤ 32 KB (%v)", when, b, filepath.Base(f), fi.Size(), err)
				}
			}
		}
	}

	l, err := startNATS(ctx, cfg, 4, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	before := heapAfterGC()
	write(l, writes)
	grew := heapAfterGC() - before
	t.Logf("%d writes to each bucket: heap +%d KB", writes, grew>>10)
	// Two 256 KB caches and what the writes leave (≈ 0.5 MB); unbounded,
	// two 4 MB caches.
	if grew > 2<<20 {
		t.Errorf("%d writes to each bucket grew the heap by %d KB, want ≤ 2 MB", writes, grew>>10)
	}
	blocks("written")
	l.close()

	l, err = startNATS(ctx, cfg, 4, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	write(l, writes/4)
	blocks("after a restart")
	// Nothing lost: the last lease written is the bucket's last message.
	if e, err := l.kv[BucketZones].Get(ctx, "z-3"); err != nil || e.Revision() != writes+writes/4 || e.Value()[0] != byte((writes/4-1)%256) {
		t.Fatalf("z-3 after the restart: %v (%v)", e, err)
	}
}

func heapAfterGC() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// What the embedded server keeps for 1,000 players' checkpoints, one a
// player a second as their zones write them (cluster.Players, pipelined),
// compressed in time: the players stream's last file block keeps its write
// cache while writes come, in the server's pool buffers (256 KB, 1 MB,
// 4 MB: a KV's blocks are 4 MB and cannot be bounded, see
// smallBucketBytes), so the heap swings with the block; the rest — the
// per-subject state, the record writers' revisions and buffers — is per
// player. A restarted server still has every player's last checkpoint.
func TestEmbeddedNATSPlayersFootprint(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	// Every pool buffer sampled (≥ 256 KB at a 4 KB rate), not one in
	// a few.
	defer func(r int) { runtime.MemProfileRate = r }(runtime.MemProfileRate)
	runtime.MemProfileRate = 4096
	cfg := DefaultConfig()
	cfg.DataDir, cfg.NATSListen = t.TempDir(), "127.0.0.1:0"
	ctx := context.Background()
	l, err := startNATS(ctx, cfg, 4, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	idle := heapAfterGC()
	const players, node, z = 1000, "zoned-5f3a9c", "z-1-0"
	p := cluster.NewPlayers(l.kv[BucketPlayers], node, nil)
	if err := p.Pipeline(ctx, l.nc); err != nil {
		t.Fatal(err)
	}
	cps := make([]handoff.Checkpoint, players)
	for i := range cps {
		id := uint64(200_000 + i)
		cps[i] = handoff.Checkpoint{Entity: id, Epoch: 1, Name: "bot-" + strconv.Itoa(i), Conn: "nonhost/conn-" + strconv.Itoa(i),
			Control:     move.ControlState{Pos: [3]float32{float32(i) * 1.37, 0.5, 812.25}, Vel: [3]float32{1.5, 0, -2.25}, Yaw: 1.2},
			LastApplied: 5000, Health: 100, Events: handoff.EventFence{Gen: 77, Last: [handoff.EventLanes]uint64{12, 3}}}
		p.Joined(id, z, 1)
	}
	gw := func(string) string { return node }
	// 40 rounds of ≈ 260 KB: two and a half 4 MB blocks.
	const rounds = 40
	var heap, cache, rest []int64
	for range rounds {
		for i := range cps {
			cps[i].Control.Pos[1] += 0.25
			cps[i].LastApplied += 20
		}
		if err := p.CheckpointSync(ctx, z, cps, gw); err != nil {
			t.Fatal(err)
		}
		h := heapAfterGC() - idle
		c := blockBuffers()
		heap, cache, rest = append(heap, h), append(cache, c), append(rest, h-c)
	}
	p.Close()
	t.Logf("heap over idle, %d rounds: %s; the write cache's buffers %s; the rest %s (%.0f B a player at most)",
		rounds, kbRange(heap), kbRange(cache), kbRange(rest), float64(slices.Max(rest))/players)
	// One block's cache at most: its buffer, and the block before's
	// given back when it rolled.
	if c := slices.Max(cache); c > 4<<20 {
		t.Errorf("the file store's buffers took %d KB after a GC, want one block's (≤ 4 MB)", c>>10)
	}
	// ≈ 1.2 KB a player: this test's checkpoints (≈ 0.3), the writers'
	// queues and batch buffers and the server's inbound caches (≈ 0.55,
	// the same at any count), the writers' revisions (0.11) and the
	// stream's per-subject state (0.14).
	if r := slices.Max(rest); r > players*1536 {
		t.Errorf("the checkpoints kept %d B a player besides the write cache, want ≤ 1.5 KB", r/players)
	}

	// The records outlive the server.
	l.close()
	l, err = startNATS(ctx, cfg, 4, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	p = cluster.NewPlayers(l.kv[BucketPlayers], node, nil)
	defer p.Close()
	for i := range cps {
		rec, err := p.Record(ctx, cps[i].Entity)
		if err != nil || rec == nil {
			t.Fatalf("player %d after a restart: %v (%v)", cps[i].Entity, rec, err)
		}
		got, err := pbconv.CheckpointFromProto(rec.GetCheckpoint(), rec.GetEpoch())
		if err != nil || got.LastApplied != cps[i].LastApplied || got.Control.Pos != cps[i].Control.Pos || rec.GetZone() != z {
			t.Fatalf("player %d after a restart: %+v (%v), want the last checkpoint %+v", cps[i].Entity, got, err, cps[i])
		}
	}
}

// blockBuffers is what nats-server's file store holds in its pooled block
// buffers (getMsgBlockBuf), as of the last GC: the blocks' caches.
func blockBuffers() int64 {
	n, _ := runtime.MemProfile(nil, false)
	recs := make([]runtime.MemProfileRecord, n+64)
	n, _ = runtime.MemProfile(recs, false)
	var sum int64
	for _, r := range recs[:n] {
		frames := runtime.CallersFrames(r.Stack())
		for {
			f, more := frames.Next()
			if strings.HasSuffix(f.Function, "nats-server/v2/server.getMsgBlockBuf") {
				sum += r.InUseBytes()
				break
			}
			if !more {
				break
			}
		}
	}
	return sum
}

func kbRange(v []int64) string {
	var sum int64
	for _, x := range v {
		sum += x
	}
	return fmt.Sprintf("%d–%d KB (mean %d)", slices.Min(v)>>10, slices.Max(v)>>10, sum/int64(len(v))>>10)
}
