package cluster

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
)

// failingKV fails its first fail reads (as a busy KV's timed-out round
// trips do), then works.
type failingKV struct {
	countingKV
	fail atomic.Int64
}

var errBusyKV = errors.New("test: context deadline exceeded")

func (f *failingKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if f.fail.Add(-1) >= 0 {
		f.gets.Add(1)
		return nil, errBusyKV
	}
	return f.countingKV.Get(ctx, key)
}

// A Commit's record write that failed (a KV error or timeout) is tried
// again a few times before the Commit is answered false: its source stops
// resending after CommitGiveUp, and the last copy's failed write left the
// player owned nowhere (three-node test at load ≈ 18: 10 Commit records
// not written, none refused). A write refused (a newer owner recorded) is
// final at once.
func TestCommitRecordWriteTriedAgain(t *testing.T) {
	nc := natsServer(t)
	js, _ := jetstream.New(nc)
	raw, err := js.CreateOrUpdateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: "players"})
	if err != nil {
		t.Fatal(err)
	}
	newer, _ := proto.Marshal(&pb.PlayerRecord{Player: 9, Zone: "c", Epoch: 7})
	if _, err := raw.Put(context.Background(), PlayerKey(9), newer); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		player uint64
		fail   int64
		want   bool
		reads  int64 // Get calls, failed ones included
	}{
		{name: "written at the first try", player: 5, want: true, reads: 1},
		{name: "two failed tries, then written", player: 6, fail: 2, want: true, reads: 3},
		{name: "every try failed", player: 7, fail: commitTries, want: false, reads: commitTries},
		{name: "refused: a newer owner recorded", player: 9, want: false, reads: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kv := &failingKV{countingKV: countingKV{KeyValue: raw}}
			kv.fail.Store(tc.fail)
			p := NewPlayers(kv, "n1", nil)
			defer p.Close()
			done := make(chan bool, 1)
			p.Commit(tc.player, "b", 3, func(ok bool) { done <- ok })
			select {
			case ok := <-done:
				if ok != tc.want || kv.gets.Load() != tc.reads {
					t.Fatalf("Commit answered %v after %d reads; want %v after %d", ok, kv.gets.Load(), tc.want, tc.reads)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("Commit never answered")
			}
		})
	}
}
