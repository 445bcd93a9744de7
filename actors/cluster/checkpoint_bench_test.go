package cluster

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ghostwire/ghostwire/actors/cluster/natstest"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// embeddedNATS is a nats-server set up as actors/node's embedded one
// (file store, no sublist cache), with a connection to it.
func embeddedNATS(tb testing.TB) (*nats.Conn, *natsserver.Server) {
	tb.Helper()
	opts := natstest.Options(tb)
	opts.NoSublistCache, opts.JetStreamMaxMemory, opts.JetStreamMaxStore = true, 64<<20, 1<<30
	srv := natstest.Run(tb, opts)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		nc.Close()
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	return nc, srv
}

// benchCheckpoint is a checkpoint as a node's zones make them for a bot
// of the load tests: every field set (a 16-byte payload, the extras, two
// event lanes), a connection PID's string.
func benchCheckpoint(id uint64) handoff.Checkpoint {
	c := handoff.Checkpoint{Entity: id, Epoch: 3, LastApplied: 12_345 + id, Health: 870, Flags: 5,
		Name: fmt.Sprintf("bot-%04d", id), Conn: fmt.Sprintf("127.0.0.1:7101/conn-%d", id),
		Control: move.ControlState{Pos: [3]float32{812.25, 3.5, -402.75}, Vel: [3]float32{4.1, 0, -2.3}, Yaw: 1.234, PayloadLen: 16},
		Extra:   [4]uint32{17, 90_000, 3, 123_456}}
	for i := range c.Control.Payload {
		c.Control.Payload[i] = byte(i*37 + 11)
	}
	c.Events.Gen = 0x1234_5678_9abc
	c.Events.Last[0], c.Events.Last[1] = 4_000+id, 17
	return c
}

// BenchmarkCheckpointRecords (informative): the players' checkpoints of
// a 1,000-player node through the real path — Players.Checkpoint, the
// pipelined writers, the client, an embedded-style nats-server's file
// store, the bucket as actors/node makes it (PlayersBucketConfig) — at
// the rate the zones make them: each player once a second (the RPO), a
// twentieth of them each 50 ms tick over four zones. An op is one such
// second. cpu-µs/checkpoint is the process's CPU (getrusage: writers,
// client and server) per checkpoint, less what the same time idle costs;
// allocs/checkpoint the process's allocations (server's too) per
// checkpoint; B/record the bytes the stream holds per record (subject,
// headers, value and the store's framing) and value-B the value's.
func BenchmarkCheckpointRecords(b *testing.B) {
	p, kv := pipelinedPlayers(b)
	const players, zones, ticks, gap = 1000, 4, 20, 50 * time.Millisecond
	cps := make([]handoff.Checkpoint, players)
	for i := range cps {
		id := uint64(i + 1)
		cps[i] = benchCheckpoint(id)
		p.Placed(id, fmt.Sprintf("x%dz0", i%zones), 3, true, nil, "")
	}
	gw := func(string) string { return "zoned-1" }
	ctx := context.Background()
	for z := range zones { // the placements land first; the revisions are cached
		var mine []handoff.Checkpoint
		for i := z; i < players; i += zones {
			mine = append(mine, cps[i])
		}
		if err := p.CheckpointSync(ctx, fmt.Sprintf("x%dz0", z), mine, gw); err != nil {
			b.Fatal(err)
		}
	}
	// The zones' slices: zone z's players, a tick's share each.
	var byZone [zones][]handoff.Checkpoint
	for i := range cps {
		byZone[i%zones] = append(byZone[i%zones], cps[i])
	}
	idle0 := processCPU()
	for range ticks {
		time.Sleep(gap)
	}
	idle := processCPU() - idle0
	base := p.Checkpoints.Load()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	b.ResetTimer()
	cpu0 := processCPU()
	for n := range b.N {
		checkpointSecond(p, byZone[:], ticks, n, gap, gw)
	}
	want := base + uint64(b.N*players)
	waitFor(b, 10*time.Second, "every checkpoint", func() bool { return p.Checkpoints.Load() >= want })
	cpu := processCPU() - cpu0 - time.Duration(b.N)*idle
	b.StopTimer()
	runtime.ReadMemStats(&ms1)
	done := float64(b.N * players)
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/done, "cpu-µs/checkpoint")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/done, "allocs/checkpoint")
	b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/done, "B-alloc/checkpoint")
	if r := p.CheckpointsRefused.Load() + p.Errors.Load() + p.Dropped.Load(); r != 0 {
		b.Fatalf("%d checkpoints refused, failed or dropped", r)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		b.Fatal(err)
	}
	si := st.(*jetstream.KeyValueBucketStatus).StreamInfo()
	b.ReportMetric(float64(si.State.Bytes)/float64(si.State.Msgs), "B/record")
	e, err := kv.Get(ctx, PlayerKey(1))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(e.Value())), "value-B")
}

// BenchmarkCheckpointTick (informative; for instruction counts, which
// BenchmarkCheckpointRecords's sleeps and a shared host's load blur): one
// 50 ms tick's checkpoints of BenchmarkCheckpointRecords's node — four
// zones' 12–13 each, written together (CheckpointSync) — as fast as they
// are acknowledged. An op is a tick (50 checkpoints); cpu-µs/checkpoint
// is the process's CPU per checkpoint (getrusage). Under callgrind
// (GOMAXPROCS=1, GOGC=off) it runs without a timeout at 10x and 50x, and
// the difference of the two is 40 ticks: client and server instructions
// a checkpoint (2026-12-01: 65.3 k with proto.MarshalAppend's record,
// 57 k with pbconv's own encoder; ≈ 20 k of it nats-server's JetStream
// path, ≈ 7 k its scans of the one header, ≈ 21 k the runtime's).
func BenchmarkCheckpointTick(b *testing.B) {
	p, _ := pipelinedPlayers(b)
	const players, zones, ticks = tickPlayers, tickZones, tickTicks
	byZone := placedTickZones(p)
	gw := func(string) string { return "zoned-1" }
	ctx := context.Background()
	tick := func(t int) {
		var wg sync.WaitGroup
		for z := range zones {
			zc := byZone[z]
			lo, hi := tickRange(len(zc), t)
			wg.Go(func() {
				for i := lo; i < hi; i++ {
					zc[i].Control.Pos[0] = float32(t)
				}
				if err := p.CheckpointSync(ctx, fmt.Sprintf("x%dz0", z), zc[lo:hi], gw); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
	for t := range ticks { // every record written once: the revisions are cached
		tick(t)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for n := range b.N {
		tick(n)
	}
	b.StopTimer()
	per := float64(b.N * players / ticks)
	b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/1e3/per, "cpu-µs/checkpoint")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/per, "µs/checkpoint")
	if r := p.CheckpointsRefused.Load() + p.Errors.Load() + p.Dropped.Load(); r != 0 {
		b.Fatalf("%d checkpoints refused, failed or dropped", r)
	}
}

// pipelinedPlayers is the node's record writer on an embedded-style
// nats-server's players bucket, its checkpoints pipelined; closed with b.
func pipelinedPlayers(b *testing.B) (*Players, jetstream.KeyValue) {
	b.Helper()
	nc, _ := embeddedNATS(b)
	p, kv := benchPlayers(b, nc)
	if err := p.Pipeline(context.Background(), nc); err != nil {
		b.Fatal(err)
	}
	return p, kv
}

// BenchmarkCheckpointTickPeriodic (informative; for instruction counts):
// BenchmarkCheckpointTick's tick of 50 checkpoints sent as the zones send
// their periodic ones (Players.Checkpoint, nobody waiting), an op ending
// when every one is written or found unchanged. moving: every player's
// state changed since its last checkpoint (each is written); idle: none
// did (a player who sends no moves: its record is not rewritten,
// Players.Unchanged). cpu-µs/checkpoint is the process's CPU (getrusage).
func BenchmarkCheckpointTickPeriodic(b *testing.B) {
	for _, idle := range []bool{false, true} {
		name := "moving"
		if idle {
			name = "idle"
		}
		b.Run(name, func(b *testing.B) {
			p, _ := pipelinedPlayers(b)
			const players, zones, ticks = tickPlayers, tickZones, tickTicks
			byZone := placedTickZones(p)
			gw := func(string) string { return "zoned-1" }
			tick := func(t int) {
				want := checkpointsSettled(p)
				for z := range zones {
					zc := byZone[z]
					lo, hi := tickRange(len(zc), t)
					if !idle {
						for i := lo; i < hi; i++ {
							zc[i].Control.Pos[0] = float32(t)
						}
					}
					p.Checkpoint(fmt.Sprintf("x%dz0", z), zc[lo:hi], false, gw)
					want += uint64(hi - lo)
				}
				waitFor(b, time.Minute, "the tick's checkpoints", func() bool { return checkpointsSettled(p) >= want })
			}
			for t := range 2 * ticks { // every record written twice: the revisions (and sums) are cached
				tick(t)
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for n := range b.N {
				tick(2*ticks + n)
			}
			b.StopTimer()
			per := float64(b.N * players / ticks)
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/1e3/per, "cpu-µs/checkpoint")
			if r := p.CheckpointsRefused.Load() + p.Errors.Load() + p.Dropped.Load(); r != 0 {
				b.Fatalf("%d checkpoints refused, failed or dropped", r)
			}
		})
	}
}

// The checkpoint-tick benchmarks' world: tickPlayers players over
// tickZones zones, each zone's checkpointing its players over tickTicks
// ticks.
const tickPlayers, tickZones, tickTicks = 1000, 4, 20

// placedTickZones places the benchmarks' players in p (x0z0 … x3z0, epoch
// 3) and returns their checkpoints by zone.
func placedTickZones(p *Players) [tickZones][]handoff.Checkpoint {
	var byZone [tickZones][]handoff.Checkpoint
	for i := range tickPlayers {
		id := uint64(i + 1)
		byZone[i%tickZones] = append(byZone[i%tickZones], benchCheckpoint(id))
		p.Placed(id, fmt.Sprintf("x%dz0", i%tickZones), 3, true, nil, "")
	}
	return byZone
}

// tickRange is the part of a zone's n checkpoints tick t writes.
func tickRange(n, t int) (lo, hi int) {
	per := (n + tickTicks - 1) / tickTicks
	return min(t%tickTicks*per, n), min((t%tickTicks+1)*per, n)
}

// checkpointSecond checkpoints every player once, as the zones do in a
// second: zone z's players (byZone[z], in zone "x<z>z0") a tick's share
// each of ticks ticks gap apart, every record changed (round numbers the
// values), so each is written, not skipped as unchanged.
func checkpointSecond(p *Players, byZone [][]handoff.Checkpoint, ticks, round int, gap time.Duration, gw func(string) string) {
	for t := range ticks {
		for z, zc := range byZone {
			per := (len(zc) + ticks - 1) / ticks
			lo, hi := min(t*per, len(zc)), min((t+1)*per, len(zc))
			for i := lo; i < hi; i++ {
				zc[i].Control.Pos[0] = float32(round*ticks + t)
			}
			p.Checkpoint(fmt.Sprintf("x%dz0", z), zc[lo:hi], false, gw)
		}
		time.Sleep(gap)
	}
}

// benchPlayers is a Players on a players bucket made as zoned makes it,
// on nc's server (closed at the benchmark's end).
func benchPlayers(b *testing.B, nc *nats.Conn) (*Players, jetstream.KeyValue) {
	b.Helper()
	js, _ := jetstream.New(nc)
	kv, err := js.CreateOrUpdateKeyValue(context.Background(), PlayersBucketConfig("ghostwire_players"))
	if err != nil {
		b.Fatal(err)
	}
	p := NewPlayers(kv, "zoned-1", nil)
	b.Cleanup(p.Close)
	return p, kv
}
