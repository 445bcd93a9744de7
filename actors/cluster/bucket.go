package cluster

import "github.com/nats-io/nats.go/jetstream"

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
