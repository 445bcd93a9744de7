package gateway_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ghostwire/ghostwire/actors/conn"
	"github.com/ghostwire/ghostwire/actors/gateway"
)

// TestBatchSyscallsExported: the batched system calls are on /metrics,
// one series per call, and agree with Stats (a client's session moved
// datagrams both ways, so both count); so are the reader's waits.
func TestBatchSyscallsExported(t *testing.T) {
	defer verifyNoLeaks(t)()
	reg := prometheus.NewRegistry()
	r := newRig(t, func(c *gateway.Config) { c.Registerer = reg })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := playOnce(ctx, r.gw.PublicAddr().String(), r.token(t, 1), 1, 3); err != nil {
		t.Fatal(err)
	}
	// The batches against the datagrams, once the gateway has handled all
	// it read: a batch the reader hands the gateway actor (the client's
	// late Disconnect copies) is counted as read at once, its datagrams
	// when the actor takes it, which a close in between never does (CI,
	// under -race: 8 read batches for 7 datagrams). The client is gone,
	// so the counts stand still once everything read is handled.
	still := stillStats(t, r.gw, 500*time.Millisecond, 10*time.Second)
	if still.ReadBatches == 0 || still.ReadBatches > still.DatagramsIn || still.WriteBatches == 0 || still.WriteBatches > still.DatagramsOut {
		t.Fatalf("%d read batches for %d datagrams in, %d write batches for %d out",
			still.ReadBatches, still.DatagramsIn, still.WriteBatches, still.DatagramsOut)
	}
	r.close(t)
	s := r.gw.Stats()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	waits := -1.0
	rounds := map[string]float64{}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "ghostwire_gateway_batch_syscalls_total":
			for _, m := range mf.GetMetric() {
				got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			}
		case "ghostwire_gateway_read_waits_total":
			waits = mf.GetMetric()[0].GetCounter().GetValue()
		case "ghostwire_gateway_shard_rounds_total":
			for _, m := range mf.GetMetric() {
				rounds[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	// The reader waited on the empty socket between the client's round
	// trips (on Linux; elsewhere reads block uncounted).
	if waits != float64(s.ReadWaits) || runtime.GOOS == "linux" && s.ReadWaits == 0 {
		t.Fatalf("exported %v read waits, Stats has %d", waits, s.ReadWaits)
	}
	if got["recvmmsg"] != float64(s.ReadBatches) || got["sendmmsg"] != float64(s.WriteBatches) {
		t.Fatalf("exported %v, Stats has %d reads, %d writes", got, s.ReadBatches, s.WriteBatches)
	}
	// The shards' rounds, by cause: the client's datagrams woke its
	// shard (posted; its deadlines may have too, timer), and the first
	// round of each shard ran straight.
	if rounds["posted"] != float64(s.ShardRounds[conn.RoundPosted]) || rounds["timer"] != float64(s.ShardRounds[conn.RoundTimer]) ||
		rounds["straight"] != float64(s.ShardRounds[conn.RoundStraight]) {
		t.Fatalf("exported rounds %v; Stats has %v", rounds, s.ShardRounds)
	}
	if s.ShardRounds[conn.RoundPosted] == 0 || s.ShardRounds[conn.RoundStraight] == 0 {
		t.Fatalf("shard rounds %v: want posted and straight ones", s.ShardRounds)
	}
}

// stillStats waits until the gateway's datagram and batch counts stand
// still for quiet (bounded by limit) and returns them.
func stillStats(t *testing.T, gw *gateway.Gateway, quiet, limit time.Duration) gateway.Stats {
	t.Helper()
	key := func(s gateway.Stats) [4]uint64 {
		return [4]uint64{s.DatagramsIn, s.ReadBatches, s.DatagramsOut, s.WriteBatches}
	}
	last, since := gw.Stats(), time.Now()
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		s := gw.Stats()
		if key(s) != key(last) {
			last, since = s, time.Now()
			continue
		}
		if time.Since(since) >= quiet {
			return s
		}
	}
	t.Fatalf("the gateway's counts did not stand still for %v within %v", quiet, limit)
	return last
}
