package node

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"go.uber.org/goleak"
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
