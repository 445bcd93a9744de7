package admin

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ghostwire/ghostwire/actors/cluster/natstest"
)

// TestFanOutListsTheNodesItsWatcherMissed: the nodes a cluster-wide call
// fans out to (and a drain or a move may name) are the bucket's as the
// call finds it, not as the service's watcher last delivered them. The
// watcher is stopped here, as a watcher stands still through a NATS
// election and ≥ 11 s after; a node that joins and one that leaves
// meanwhile are both seen. With NATS gone, the last listing answers.
func TestFanOutListsTheNodesItsWatcherMissed(t *testing.T) {
	srv := natstest.Start(t)
	nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(0))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "nodes"})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "gone"} {
		if _, err := kv.PutString(ctx, n, "record"); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Start(ctx, Config{NC: nc, Node: "a", Nodes: kv, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	want := func(what string, want ...string) {
		t.Helper()
		if got := s.nodeIDs(ctx); !slices.Equal(got, want) {
			t.Fatalf("%s: fan-out to %v, want %v", what, got, want)
		}
	}
	want("at the start", "a", "gone")

	s.cancel() // the watcher stops; Stop's second cancel is harmless
	s.wg.Wait()
	if _, err := kv.PutString(ctx, "b", "record"); err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	want("with the watcher stopped", "a", "b")

	srv.Shutdown()
	srv.WaitForShutdown()
	want("with NATS gone", "a", "b")
}
