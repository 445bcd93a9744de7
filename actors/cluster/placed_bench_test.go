package cluster

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/zones/handoff"
)

// BenchmarkPlacedRecord (informative): a handoff's placement with its
// checkpoint in the same write (Players.Placed as an acquisition: over the
// revision this node wrote last, one compare-and-set request) on an
// embedded-style nats-server's players bucket, one at a time, each
// waited for. An op is one placement: its record's encoding, the KV
// request and its answer, client and server.
func BenchmarkPlacedRecord(b *testing.B) {
	p, _ := pipelinedPlayers(b)
	const players = 64
	cps := make([]handoff.Checkpoint, players)
	for i := range cps {
		cps[i] = benchCheckpoint(uint64(i + 1))
		p.Placed(cps[i].Entity, "x0z0", 3, true, nil, "")
	}
	waitFor(b, 10*time.Second, "the joins", func() bool { return p.Written.Load() >= players })
	done := make(chan bool, 1)
	place := func(i int, epoch uint64) {
		cp := cps[i]
		cp.Epoch = handoff.Epoch(epoch)
		p.enqueue(&playerJob{player: cp.Entity, zone: "x0z0", epoch: epoch, cp: &cp, place: true, gateway: "zoned-1",
			done: func(err error) { done <- err == nil }})
		if !<-done {
			b.Fatalf("placement of %d at epoch %d not written", cp.Entity, epoch)
		}
	}
	epoch := uint64(3)
	for i := range players { // every revision cached
		place(i, epoch+1)
	}
	epoch++
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if n%players == 0 {
			epoch++
		}
		place(n%players, epoch)
		n++
	}
}
