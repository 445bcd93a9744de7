package node

import (
	"context"
	"log/slog"
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
	l, err := startNATS(context.Background(), cfg, slog.New(slog.DiscardHandler))
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
