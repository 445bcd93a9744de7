package sim

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/move"
)

// BenchmarkZoneReplicas (informative): taking one neighbour's batch, its
// 60 entities within 40 m of the border already replicas here, in a zone
// holding a quarter of cmd/capacity's 1,000 players (a zone takes one
// batch per neighbour each tick).
func BenchmarkZoneReplicas(b *testing.B) {
	defer lockThread()()
	z, now := crowdZone(b, 250)
	batch := ReplicaBatch{From: "x1z0", To: "x0z0"}
	for i := range 60 {
		batch.Entities = append(batch.Entities, Replica{ID: NPCID(1, uint64(i)), Kind: KindNPC, Epoch: 1,
			State: move.ControlState{Pos: [3]float32{float32(i%40) + 1, 0, float32(-990 + 16*i)}}})
	}
	for range 40 {
		now += 50 * time.Millisecond
		z.Step(now)
		batch.Sent = now
		z.Replicas(now, &batch)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		now += 50 * time.Millisecond
		batch.Sent = now
		z.Replicas(now, &batch)
	}
}
