package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// PlayersBucketConfig is the players bucket's configuration (Players):
// on disk (a crashed node's zones are restored from it), one value a key
// (a record's older versions are never read: the record's revision is
// its compare-and-set fence, not its history).
//
// Its heap in nats-server v2.15.2 is mostly the file store's write cache
// of the block being written, ≈ 2.5 KB a player at 2,000 alone
// (BenchmarkPlayersStoreHeap; 0.8–1.2 KB in the node's heap profiles):
// a KV bucket's stream gets 4 MB blocks, and the cache keeps all a
// block's bytes while writes keep coming. Nothing
// here can shrink it: no bucket, stream or server option sets the block
// size (a bound, MaxBytes, gives 32 KB blocks only at ≤ 128 KB, too small
// for the records), and neither a Put without the revision check nor
// compression made it smaller (measured 2026-12-02).
func PlayersBucketConfig(bucket string) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{Bucket: bucket, History: 1, Storage: jetstream.FileStorage}
}

// Keys lists a bucket's keys, sorted; an empty bucket is an empty list.
// A listing its context cut short is an error, never a shorter list:
// KeyValue.Keys ends when its watcher's channel closes, and nats.go closes
// it when the context expires, so it returns the keys delivered so far
// with no error — a node directory read as missing every node not yet
// delivered.
func Keys(ctx context.Context, kv jetstream.KeyValue) ([]string, error) {
	keys, err := kv.Keys(ctx)
	if cerr := ctx.Err(); cerr != nil {
		return nil, fmt.Errorf("listing bucket %s: %w", kv.Bucket(), cerr)
	}
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	return keys, err
}
