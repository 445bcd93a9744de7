package node

import cmap "github.com/orcaman/concurrent-map"

// protoactor's process registry is 1,024 buckets of concurrent-map's maps,
// each split again into SHARD_COUNT (32) locked shards: 32,768 Go maps, 2.8
// MB of heap per actor system before the first actor (2.8 KB a player at
// 1,000 players). The 1,024 buckets already spread the registry's locks
// far wider than two cores can contend for, so one shard each is enough:
// 90 KB. concurrent-map reads SHARD_COUNT when it makes a map and on every
// lookup, so it is lowered here, in an init that runs before any actor
// system exists (the actor package makes no map at its own init), and never
// raised (a map made with fewer shards than SHARD_COUNT would be indexed
// past its end). TestActorSystemFootprint checks it.
func init() {
	if cmap.SHARD_COUNT > registryShards {
		cmap.SHARD_COUNT = registryShards
	}
}

const registryShards = 1
