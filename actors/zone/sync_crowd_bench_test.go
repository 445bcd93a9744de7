package zone

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/zones/world"
)

// BenchmarkZoneTickSyncCrowd (informative) is BenchmarkZoneTickSync with
// its 250 players spread over 380 m × 380 m of the zone, as
// sim.BenchmarkZoneTickCrowd: ≈ 46 in each view, where cmd/capacity's
// bots see ≈ 43 at 1,000 players (BenchmarkZoneTickSync's, spread over
// the whole zone, see ≈ 10). The per-member work of a view (the interest
// scan, the references' buckets) weighs here as on a node.
func BenchmarkZoneTickSyncCrowd(b *testing.B) {
	runZoneTickSync(b, func(_ *actor.ActorSystem, a *zoneActor) { a.p.Spawn = crowdSpawn })
}

// crowdSpawn places player id as sim's crowdZoneWith does with side 380:
// spread by id over a 380 m square 50 m inside the zone's corner.
func crowdSpawn(id uint64, r world.Rect) [3]float32 {
	h := id*0x9E3779B97F4A7C15 + 1
	x := float32(r.Min[0] + 50 + float64(h&0xFFFF)/0xFFFF*380)
	z := float32(r.Min[1] + 50 + float64(h>>16&0xFFFF)/0xFFFF*380)
	return [3]float32{x, 0, z}
}
