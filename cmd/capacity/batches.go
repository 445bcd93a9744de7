package main

import (
	"fmt"

	"github.com/ghostwire/ghostwire/actors/gateway"
)

// batchRates fills s's batch figures from the gateway's counters at the
// window's start (a) and end (b), w seconds apart.
func batchRates(s *Step, a, b gateway.Stats, w float64) {
	if rb := b.ReadBatches - a.ReadBatches; rb > 0 {
		s.DatagramsPerRead = float64(b.DatagramsIn-a.DatagramsIn) / float64(rb)
	}
	if wb := b.WriteBatches - a.WriteBatches; wb > 0 {
		s.DatagramsPerWrite = float64(b.DatagramsOut-a.DatagramsOut) / float64(wb)
	}
	if w <= 0 {
		return
	}
	s.ReadWaitsPerS = float64(b.ReadWaits-a.ReadWaits) / w
	var rounds uint64
	for i := range b.ShardRounds {
		rounds += b.ShardRounds[i] - a.ShardRounds[i]
	}
	s.ShardRoundsPerS = float64(rounds) / w
}

// batchLine says how full the batched system calls were, and on how many
// Ps the node ran.
func batchLine(s Step) string {
	return fmt.Sprintf("batches: %.1f datagrams a recvmmsg, %.1f a sendmmsg; %.0f reader waits/s, %.0f shard rounds/s; %d Ps (%d changes in the window, %d of them raises on lag; probe lag %.0f µs)",
		s.DatagramsPerRead, s.DatagramsPerWrite, s.ReadWaitsPerS, s.ShardRoundsPerS, s.Ps, s.PsChanges, s.PsLagRaises, s.ProbeLagUs)
}
