package main

import (
	"testing"

	"github.com/ghostwire/ghostwire/actors/gateway"
)

func TestBatchRates(t *testing.T) {
	a := gateway.Stats{DatagramsIn: 100, DatagramsOut: 50, ReadBatches: 10, WriteBatches: 5, ReadWaits: 4,
		ShardRounds: [3]uint64{1, 2, 3}}
	b := gateway.Stats{DatagramsIn: 2100, DatagramsOut: 1330, ReadBatches: 110, WriteBatches: 25, ReadWaits: 44,
		ShardRounds: [3]uint64{41, 12, 13}}
	var s Step
	batchRates(&s, a, b, 2)
	if s.DatagramsPerRead != 20 || s.DatagramsPerWrite != 64 || s.ReadWaitsPerS != 20 || s.ShardRoundsPerS != 30 {
		t.Fatalf("got %+v, want 20 a read, 64 a write, 20 waits/s, 30 rounds/s", s)
	}
	s.Ps, s.PsChanges, s.PsLagRaises, s.ProbeLagUs = 1, 1, 1, 42
	const want = "batches: 20.0 datagrams a recvmmsg, 64.0 a sendmmsg; 20 reader waits/s, 30 shard rounds/s; 1 Ps (1 changes in the window, 1 of them raises on lag; probe lag 42 µs)"
	if got := batchLine(s); got != want {
		t.Fatalf("batchLine = %q, want %q", got, want)
	}
	// No batch in the window (nothing connected): zeros, no division by zero.
	var z Step
	batchRates(&z, a, a, 0)
	if z.DatagramsPerRead != 0 || z.DatagramsPerWrite != 0 || z.ShardRoundsPerS != 0 {
		t.Fatalf("an empty window gave %+v", z)
	}
}
