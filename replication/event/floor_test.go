package event

import (
	"slices"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/notify"
)

// TestOrderedLaneAtTheFloor runs BenchmarkOrderedLaneLoss10's scenario (10 %
// loss each way, 100 ms RTT, 20 packets/s, 20 ordered events/s on 8 lanes)
// for its first two seeds beside the floor: each event's earliest possible
// delivery on the same packets and losses (orderedFloor; latencyRun fails
// if any event beats it, which would make the oracle wrong).
//
// Two facts are pinned. The floor of seed 1 alone has its p99 above 150 ms,
// so the benchmark's 150 ms target is not reachable by any sender on every
// sample: an event waits 0–50 ms for a packet and travels 50 ms, so it is
// late beyond 150 ms exactly when the first two packets after its send
// call are lost, with probability 0.1² = 1 % — the p99 sits on that edge,
// and the sample decides on which side. And the default sender is at the
// floor: no event arrives more than one packet interval after its floor.
// A unit whose copies stop before its fate is known (two copies at 10 %
// loss, or copies the byte budget left out and never wrote again) waits
// for a loss verdict and a resend, 150–250 ms past its floor, and holds up
// its lane.
func TestOrderedLaneAtTheFloor(t *testing.T) {
	late := 0
	var worst time.Duration
	for _, seed := range []uint64{1, 3} {
		var fr floorRun
		latencyRun{
			loss: 0.10, rtt: 100 * ms, interval: 50 * ms, rate: 20, duration: 600 * time.Second,
			cfg: DefaultConfig(), ncfg: notify.DefaultConfig(), seed: seed, floor: &fr,
		}.run(t)
		if seed == 1 {
			s := slices.Clone(fr.floor)
			slices.Sort(s)
			if p := percentile(s, 0.99); p <= 150*ms {
				t.Fatalf("seed 1: floor p99 %v; the scenario changed (it was 154.6 ms)", p)
			}
		}
		for i, f := range fr.floor {
			if d := fr.lat[i] - f; d > 50*ms {
				late++
				worst = max(worst, d)
			}
		}
	}
	if late > 0 {
		t.Fatalf("%d events arrived more than a packet interval after their floor (worst by %v)", late, worst)
	}
}
