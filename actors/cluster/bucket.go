package cluster

import "github.com/nats-io/nats.go/jetstream"

// PlayersBucketConfig is the players bucket's configuration (Players):
// on disk (a crashed node's zones are restored from it), one value a key
// (a record's older versions are never read: the record's revision is
// its compare-and-set fence, not its history).
func PlayersBucketConfig(bucket string) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{Bucket: bucket, History: 1, Storage: jetstream.FileStorage}
}
