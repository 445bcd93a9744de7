package node

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/ghostwire/ghostwire/actors/cluster"
	"github.com/ghostwire/ghostwire/actors/zone"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
)

// heartbeat is how often the node record is refreshed in the directory; a
// record three heartbeats old has expired (its node is not counted live).
const heartbeat = time.Second

// expiryLookEvery is how many heartbeats go between two looks at the
// zones bucket's expiry (natsLink.keepZonesExpiry): one request of a few
// hundred bytes every 5 s.
const expiryLookEvery = 5

// directory keeps this node's record in the JetStream KV world directory:
// one NodeRecord (refreshed every heartbeat with its load), which other
// nodes count for their fair share of zones and operators read. Zone
// ownership is not here: it is the zone leases (actors/cluster.Leases).
type directory struct {
	node  string
	nl    *natsLink
	log   *slog.Logger
	look  int // heartbeats between looks at the zones bucket's expiry
	kvN   jetstream.KeyValue
	rec   *pb.NodeRecord
	conns func() int64
	zones func() int

	mu   sync.Mutex
	stop chan struct{}
	wg   sync.WaitGroup
}

// startDirectory writes this node's first record; listed is its --zones
// list (nil: auto), which nodes starting with a list read (giveback.go).
func startDirectory(ctx context.Context, l *natsLink, node string, look int, listed []string, log *slog.Logger) (*directory, error) {
	d := &directory{node: node, nl: l, log: log, look: cmp.Or(look, expiryLookEvery), kvN: l.kv[BucketNodes], conns: func() int64 { return 0 }, zones: func() int { return 0 }, stop: make(chan struct{})}
	now := time.Now().UnixMilli()
	d.rec = &pb.NodeRecord{Node: d.node, StartedUnixMs: now, HeartbeatUnixMs: now, Version: "dev", Listed: listed, Auto: listed == nil}
	if err := d.putNode(ctx); err != nil {
		return nil, err
	}
	d.wg.Add(1)
	go d.loop()
	return d, nil
}

// running fills in what is known once the game runs: addresses and the
// live counts the heartbeat reports.
func (d *directory) running(ctx context.Context, g *game, httpAddr string) error {
	d.mu.Lock()
	d.rec.UdpAddr, d.rec.HttpAddr = g.gw.PublicAddr().String(), httpAddr
	d.conns = func() int64 { return g.gw.Stats().Conns }
	d.zones = func() int { return len(g.zones.IDs()) }
	d.mu.Unlock()
	return d.putNode(ctx)
}

func (d *directory) putNode(ctx context.Context) error {
	d.mu.Lock()
	d.rec.Players = uint32(max(d.conns(), 0))
	d.rec.Zones = uint32(max(d.zones(), 0))
	d.rec.HeartbeatUnixMs = time.Now().UnixMilli()
	b, err := proto.Marshal(d.rec)
	d.mu.Unlock()
	if err != nil {
		return err
	}
	if _, err := d.kvN.Put(ctx, d.node, b); err != nil {
		return fmt.Errorf("directory: node %s: %w", d.node, err)
	}
	return nil
}

func (d *directory) loop() {
	defer d.wg.Done()
	t := time.NewTicker(heartbeat)
	defer t.Stop()
	for beat := 1; ; beat++ {
		select {
		case <-d.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), heartbeat)
			_ = d.putNode(ctx) // a missed heartbeat is retried on the next tick
			if beat%d.look == 0 {
				d.nl.keepZonesExpiry(ctx, d.log)
			}
			cancel()
		}
	}
}

// record is this node's record as last written.
func (d *directory) record() *pb.NodeRecord {
	d.mu.Lock()
	defer d.mu.Unlock()
	return proto.Clone(d.rec).(*pb.NodeRecord)
}

// drain marks this node's record draining and writes it at once: the
// other nodes' drains and redirects skip it from then on (liveOthers,
// liveGateways), and zonectl nodes shows it.
func (d *directory) drain(ctx context.Context) {
	d.mu.Lock()
	d.rec.Draining = true
	d.mu.Unlock()
	// Bounded: with NATS out of reach the stop must not spend its budget
	// here (the next heartbeat carries the mark anyway).
	ctx, cancel := context.WithTimeout(ctx, 2*heartbeat)
	defer cancel()
	if err := d.putNode(ctx); err != nil {
		d.log.Warn("directory: draining not recorded", "err", err)
	}
}

// close stops the heartbeat and removes this node's record.
func (d *directory) close(ctx context.Context) {
	close(d.stop)
	d.wg.Wait()
	_ = d.kvN.Delete(ctx, d.node)
}

// registerClusterMetrics exports the cluster bridge's counters on /metrics.
func registerClusterMetrics(reg prometheus.Registerer, m *cluster.Metrics, zm *zone.Metrics, nl *natsLink, pl *cluster.Players, ls *cluster.Leases) error {
	for k := cluster.KindZone; k <= cluster.KindAck; k++ {
		for dir, name := range []string{"in", "out"} {
			k, dir := k, dir
			labels := prometheus.Labels{"kind": k.String(), "dir": name}
			if err := reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "ghostwire", Subsystem: "cluster",
				Name: "nats_messages_total", Help: "cluster bridge NATS messages by kind (zone: to zones; conn: to connections; ack: reliable-stream acknowledgements) and direction",
				ConstLabels: labels}, func() float64 { return float64(m.Msgs[k][dir].Load()) })); err != nil {
				return fmt.Errorf("cluster metrics: %w", err)
			}
			if err := reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "ghostwire", Subsystem: "cluster",
				Name: "nats_bytes_total", Help: "cluster bridge NATS payload bytes by kind and direction",
				ConstLabels: labels}, func() float64 { return float64(m.Bytes[k][dir].Load()) })); err != nil {
				return fmt.Errorf("cluster metrics: %w", err)
			}
		}
	}
	counters := []struct {
		name, help string
		v          func() uint64
	}{
		{"handoffs_total", "cross-process handoffs committed: entities a zone here acquired from a zone in another process", zm.HandoffsInRemote.Load},
		{"stale_epoch_dropped_total", "cluster messages dropped: a zone epoch this node does not own", m.StaleEpoch.Load},
		{"misrouted_dropped_total", "cluster messages dropped: addressed to another zone than their subject", m.Misrouted.Load},
		{"malformed_dropped_total", "cluster messages or items dropped: undecodable or out of range", m.Malformed.Load},
		{"no_owner_dropped_total", "messages for a zone nobody owns, dropped", m.NoOwner.Load},
		{"unknown_player_dropped_total", "connection updates for a player with no connection here, dropped", m.Unknown.Load},
		{"gone_conn_dropped_total", "connection updates naming a connection of the player here that has gone (it plays on through another), dropped", m.ConnGone.Load},
		{"view_gaps_total", "packed views from another node dropped: the view they are relative to never arrived (healed at the next keyframe)", m.ViewGaps.Load},
		{"errors_total", "cluster messages not sent: encode or publish errors", m.Errors.Load},
		{"batch_gaps_total", "cluster batches that came after one missing on their reliable stream (a resend was asked for)", m.BatchGaps.Load},
		{"batch_duplicates_total", "cluster batches received again (a resend of one already delivered), dropped", m.BatchDuplicates.Load},
		{"batches_resent_total", "cluster batches sent again: asked for by the receiver, or unacknowledged for 300 ms", m.BatchesResent.Load},
		{"streams_evicted_total", "reliable receiving streams forgotten to stay within the bound (a peer opening stream after stream)", m.StreamsEvicted.Load},
		{"batches_skipped_total", "cluster batches lost for good: missing, and no longer held by their sender", m.BatchesSkipped.Load},
		{"remote_inputs_total", "inputs that reached their zone from another node", m.RemoteInputs.Load},
		{"nats_slow_consumer_total", "NATS slow-consumer events: messages dropped because a subscription fell behind", nl.slow.Load},
		{"nats_disconnects_total", "NATS connection losses", nl.disconnects.Load},
		{"nats_reconnects_total", "NATS reconnections", nl.reconnects.Load},
		{"player_records_written_total", "player records written (join, handoff)", pl.Written.Load},
		{"player_record_conflicts_total", "player record writes refused: the record already had a newer epoch", pl.Conflicts.Load},
		{"player_record_dropped_total", "player record writes dropped: the writers' queue was full", pl.Dropped.Load},
		{"player_record_errors_total", "player record writes that failed (KV errors)", pl.Errors.Load},
		{"player_record_unencodable_total", "player record writes not made: the record does not encode (a string field not UTF-8); never retried, logged at warn once a player", pl.Unencodable.Load},
		{"player_records_repaired_total", "player records written with their player's text that is not UTF-8 replaced (U+FFFD): a placement's or a leaving player's last checkpoint, which must not be left out; logged at warn once a player", pl.Repaired.Load},
		{"checkpoints_total", "player checkpoints written: each online player's about once a second in its zone's checkpoint chunk, and the last as it leaves, a placement's and a handover's to its record", pl.Checkpoints.Load},
		{"checkpoint_chunks_total", "checkpoint chunks written: a slice of a zone's players' periodic checkpoints in one KV write (key c.<zone>.<slice>; 5 slices a zone, each about once a second)", pl.Chunks.Load},
		{"checkpoint_chunk_overflows_total", "checkpoint chunks too large for one message (over 256 KiB: a zone of more than about 20,000 players), written a record a player instead", pl.ChunkOverflows.Load},
		{"player_bucket_scans_total", "reads of the whole players bucket, every player who ever played (a zone taken over from a node that died, or handed over by a node of an older build, restored from its players' records); a handover lists its players, whose records are read one by one", pl.BucketScans.Load},
		{"checkpoint_chunks_unreadable_total", "checkpoint chunks a reader could not decode (a player lookup or a takeover then uses the record's own checkpoint)", pl.ChunksBad.Load},
		{"checkpoints_unchanged_total", "player checkpoints not written: the record already held that state (an idle player; the record this node wrote last, but for its time)", pl.Unchanged.Load},
		{"player_record_fenced_total", "player record writes not made: this node no longer held the zone's lease in time (paused, cut off)", pl.Fenced.Load},
		{"checkpoints_refused_total", "player checkpoints not written: the record names another zone or epoch (the player moved on)", pl.CheckpointsRefused.Load},
		{"commits_refused_total", "cross-process handoff Commits not delivered: the player record could not be written", m.RecordRefused.Load},
		{"commits_held_behind_total", "Joins, Leaves, Teleports and Inputs for a player held until its cross-process Commit's record write was done (delivered after the Commit)", m.HeldBehindCommit.Load},
		{"commits_followed_record_total", "Joins, Leaves, Teleports and Inputs held behind a cross-process Commit whose record write a newer owner refused, sent on to the zone the record names", m.FollowedRecord.Load},
		{"commits_dropped_behind_total", "Joins, Leaves, Teleports and Inputs for a player dropped rather than sent ahead of its cross-process Commit: past the bound (16 a player, 64 Inputs), or behind a record write that failed and was not written within 20 s", m.DroppedBehindCommit.Load},
		{"commits_retried_total", "Cross-process Commits whose record write decided nothing (a KV error, no answer) written again by the receiving node itself, no copy of the Commit having come within a second", m.CommitsRetried.Load},
		{"player_record_fence_waits_total", "player record writes the lease fence stopped that waited for a renewal instead of being dropped (Commits, placements, leaving checkpoints)", pl.FenceWaits.Load},
		{"lease_expiries_judged_total", "other nodes' zone leases this node judged expired: no renewal for the lease TTL while the zones bucket answered, confirmed by its stream leader", func() uint64 { return ls.Stats().Expiries }},
		{"lease_probes_total", "probes of the zones bucket's stream leader answered (one every TTL/12, and one a suspect lease)", func() uint64 { return ls.Stats().Probes }},
		{"lease_probes_unanswered_total", "probes of the zones bucket's stream leader nothing answered (no leader: a NATS election; NATS away): no lease's silence counts meanwhile", func() uint64 { return ls.Stats().Unproved }},
		{"lease_watcher_behind_total", "leases silent to this node's directory watcher for a TTL that the stream leader had renewed (the watcher behind, as after a NATS election): kept, not expired", func() uint64 { return ls.Stats().Behind }},
		{"zones_bucket_expiry_restored_total", "times this node set the zones bucket's expiry back after another node had shortened it (a zoned of an older version, or one with a shorter --lease-ttl, started: logged at warn)", nl.expiryRestored.Load},
		{"lease_watcher_relists_total", "zone directory watchers started again (their updates stopped: a NATS reconnect, a consumer reset)", func() uint64 { return ls.Stats().Relists }},
	}
	for _, c := range counters {
		v := c.v
		if err := reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "ghostwire", Subsystem: "cluster",
			Name: c.name, Help: c.help}, func() float64 { return float64(v()) })); err != nil {
			return fmt.Errorf("cluster metrics: %w", err)
		}
	}
	return reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "ghostwire", Subsystem: "cluster",
		Name: "remote_input_latency_seconds_total", Help: "summed time from a connection to its remote zone's node, over remote_inputs_total (wall clocks)"},
		func() float64 { return float64(m.RemoteInputNanos.Load()) / 1e9 }))
}
