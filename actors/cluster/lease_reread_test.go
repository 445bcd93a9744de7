package cluster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// lateWriteKV is a zones bucket whose Get of one key, once armed, lets one
// more write of the owner's own value land right after it read the entry
// (an earlier request of the owner's, queued at a busy server behind the
// read: the server answers reads and writes on different queues).
type lateWriteKV struct {
	jetstream.KeyValue
	key   string
	armed atomic.Bool
}

func (k *lateWriteKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	e, err := k.KeyValue.Get(ctx, key)
	if err == nil && key == k.key && k.armed.CompareAndSwap(true, false) {
		if _, werr := k.KeyValue.Update(ctx, key, e.Value(), e.Revision()); werr != nil {
			return nil, werr
		}
	}
	return e, err
}

// A lease read back after a refused renewal (a moved revision) is read
// again when the renewal at the revision it read is refused too, as long
// as it still names this node at its epoch: each of those writes was this
// node's own, landed late. Read once, the second refusal lost the zone:
// twice in a run of TestClusterThreeNodesAcrossBorders at load 12, both
// right after a claim whose epoch write's reply had been lost, the lease
// still this node's at the server.
func TestLeaseReadBackAgainWhenItsOwnWriteLandsBehindTheRead(t *testing.T) {
	nc := natsServer(t)
	const ttl = 3 * time.Second
	kv := &lateWriteKV{KeyValue: zonesBucket(t, nc, ttl), key: "z"}
	l, lost := countingLeases(t, kv, "a", ttl)
	defer l.Close(context.Background())
	epoch, err := l.Claim(context.Background(), "z")
	if err != nil {
		t.Fatal(err)
	}
	// A renewal of this node's whose reply was lost: the next one is
	// refused for a moved revision and reads the lease back.
	e, err := kv.KeyValue.Get(context.Background(), "z")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.KeyValue.Update(context.Background(), "z", e.Value(), e.Revision()); err != nil {
		t.Fatal(err)
	}
	kv.armed.Store(true) // and another lands right behind that read
	l.renewAll()
	if kv.armed.Load() {
		t.Fatal("the lease was not read back")
	}
	if got, held := l.Held("z"); !held || got != epoch || lost.Load() != 0 {
		t.Fatalf("after two late writes of its own: held %v at epoch %d (want %d), lost %d; want held, not lost", held, got, epoch, lost.Load())
	}
	if !l.Valid("z") {
		t.Fatal("not valid after the lease was renewed")
	}
}
