package cluster

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/proto/pbconv"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// Checkpoint chunks: a zone's periodic checkpoints, a slice of its players
// to one KV write (key c.<zone>.<slice>), instead of one write a player.
// A nats-server stores a KV write for ≈ 22 µs of CPU whatever its size
// (the forty-fifth capacity pass: 6.7 % of a 2,000-player node went to the
// players' 2,000 writes a second), and the writes a cluster's KV takes
// grow with the players; chunked, they grow with the zones (ChunkSlices a
// zone a second).
//
// Only the periodic checkpoints go in chunks. Placements, Commits,
// restores, a leaving player's last checkpoint and a handover's final ones
// are written to p.<id> as before, by compare-and-set: the record stays the
// authority on where a player is. A chunk's record counts only while
// p.<id> is ONLINE and names the chunk record's zone at its epoch, and
// only when it is newer (overlay): a stale chunk — a player who moved on,
// left, or came back in a new session — is never taken. Chunks are written
// by the zone's owner while its lease holds (the fence): the records in
// them are fenced on read by their epoch. A node writes a chunk over the
// revision it wrote last (compare-and-set), so that a write which passed
// the fence just before the node was paused (SIGSTOP) does not land over
// the new owner's chunk when it wakes: make chaos's audit caught one such
// write, 3 records of a zone claimed by another node 1.9 s earlier
// (TestChaosShort, CI 2026-12-07).

// ChunkSlices is how many chunks a zone's periodic checkpoints are split
// into (player p's go in ChunkSlice(p)): a zone that ticks at 20 Hz and
// checkpoints each player once a second writes one chunk every fourth
// tick; a reader looking one player up reads one chunk. 5, not the 20 (one
// a tick) it was: a KV write costs the node ≈ 200 µs of CPU with its
// wake-ups, client and server (BenchmarkCheckpointChunks: 19–27 cpu-µs a
// checkpoint at 20, 6.1–7.0 at 5, 1.6–2.4 at 1), while fewer slices hold
// more players each, and a slice over maxChunkBytes (≈ 1,400 players) is
// written a record a player: 5 keep that past ≈ 7,000 players a zone.
//
// Nodes of two counts in one cluster (a rolling update) stay correct: a
// reader that looks a player up in the other count's slice finds a chunk
// without the player, or one older than the record a handover or a
// takeover wrote (overlay), and takes the record's own checkpoint. A
// takeover (InZone) reads every chunk of the zone and keeps each player's
// newest record.
const ChunkSlices = 5

// ChunkSlice is the slice player's periodic checkpoints go in
// (handoff.CheckpointSlice: the zone takes them by the same).
func ChunkSlice(player uint64) int { return int(handoff.CheckpointSlice(player, ChunkSlices)) }

// ChunkKey is the key of zone's chunk slice in the players bucket.
func ChunkKey(zone string, slice int) string { return "c." + zone + "." + strconv.Itoa(slice) }

// maxChunkBytes bounds a chunk's value: a slice whose records take more
// (≈ 1,400 players of ≈ 180 bytes: a zone of more than ≈ 7,000) is
// written a record a player, as before chunks, rather than stored as one
// message near NATS's 1 MB limit.
const maxChunkBytes = 256 << 10

// chunkQueue bounds the chunks waiting for the writer; a full queue drops
// the chunk (counted in Dropped: the next period's replaces it).
const chunkQueue = 256

// chunkJob is one chunk to write: copies of its checkpoints (the caller's
// slice is reused by the next tick) and each one's gateway.
type chunkJob struct {
	zone  string
	slice int
	// taken: when the checkpoints were taken (Unix ms), the chunk's and
	// its records' time. Not the write's: a chunk written late (a slow
	// KV) must not pass for newer than a record written meanwhile — a
	// leave, a new session's join — which overlay compares it with.
	taken    int64
	cps      []handoff.Checkpoint
	gateways []string
}

// CheckpointChunk queues the periodic checkpoints of zone's players in
// slice (every player the zone owns whose ChunkSlice is slice: the chunk
// replaces the slice's previous one) as one write (asynchronously;
// bounded: a full queue drops it, counted, and the next period's replaces
// it). gateway names the node holding each one's connection, as for
// Checkpoint.
func (p *Players) CheckpointChunk(zone string, slice int, cps []handoff.Checkpoint, gateway func(conn string) string) {
	j := &chunkJob{zone: zone, slice: slice, taken: time.Now().UnixMilli(), cps: append([]handoff.Checkpoint(nil), cps...),
		gateways: make([]string, len(cps))}
	for i := range cps {
		j.gateways[i] = gateway(cps[i].Conn)
	}
	select {
	case p.chunks <- j:
	default:
		p.Dropped.Add(1)
	}
}

// chunkWriter writes the queued chunks, one at a time (a zone's
// ChunkSlices a second: one round trip each is far within the period).
func (p *Players) chunkWriter() {
	defer p.wg.Done()
	// empty: the chunks this node last wrote with no record, so an empty
	// slice is written once, not every period (an idle zone writes
	// nothing). A key not in it may hold another node's records: written.
	empty := map[string]bool{}
	// last: the revision of each chunk as this node wrote it last.
	last := map[string]uint64{}
	var scratch, val []byte
	for {
		var j *chunkJob
		select {
		case <-p.stop:
			return
		case j = <-p.chunks:
		}
		key := ChunkKey(j.zone, j.slice)
		if len(j.cps) == 0 && empty[key] {
			continue
		}
		if p.valid != nil && !p.valid(j.zone) {
			p.Fenced.Add(1) // this node lost (or may have lost) the zone's lease
			continue
		}
		var n int
		val, scratch, n = p.encodeChunk(val[:0], scratch, j)
		if len(val) > maxChunkBytes {
			// Too large for one message: a record a player, as before.
			p.ChunkOverflows.Add(1)
			for i := range j.cps {
				p.enqueue(newCheckpointJob(j.zone, &j.cps[i], false, j.gateways[i]))
			}
			delete(empty, key)
			continue
		}
		ctx, cancel := context.WithTimeout(p.life, 2*time.Second)
		rev, err := p.writeChunk(ctx, key, val, j.zone, last)
		cancel()
		if errors.Is(err, errChunkFenced) {
			p.Fenced.Add(1)
			delete(empty, key)
			continue
		}
		if err != nil {
			p.Errors.Add(1)
			delete(empty, key)
			delete(last, key) // it may have landed: the next one is put
			continue
		}
		last[key] = rev
		p.Chunks.Add(1)
		p.Written.Add(1)
		p.Checkpoints.Add(uint64(n))
		if n == 0 {
			empty[key] = true
		} else {
			delete(empty, key)
		}
	}
}

// errChunkFenced: another node wrote the chunk since this one did, and
// this node's lease on the zone is no longer valid.
var errChunkFenced = errors.New("players: chunk written by the zone's new owner")

// writeChunk writes a chunk: over the revision this node wrote last
// (last[key]), or with a plain put when it wrote none (a zone just
// claimed: whatever another node left there is its previous owner's). A
// chunk another node wrote since is written over only while this node's
// lease on the zone is valid now (the zone came back to it); otherwise
// the write is errChunkFenced.
func (p *Players) writeChunk(ctx context.Context, key string, val []byte, zone string, last map[string]uint64) (uint64, error) {
	r, ok := last[key]
	if !ok {
		return p.kv.Put(ctx, key, val)
	}
	rev, err := p.kv.Update(ctx, key, val, r)
	if err == nil || !isWrongSequence(err) {
		return rev, err
	}
	delete(last, key)
	if p.valid != nil && !p.valid(zone) {
		return 0, errChunkFenced
	}
	return p.kv.Put(ctx, key, val)
}

// CheckpointChunk's field numbers (proto/ghostwire/v1/directory.proto).
const (
	chunkZone, chunkNode, chunkSlice, chunkWritten, chunkRecords = 1, 2, 3, 4, 5
)

// encodeChunk appends j's chunk to b: the CheckpointChunk proto.Marshal
// would make, each record the one a periodic checkpoint writes to p.<id>
// (pbconv.RecordEncoder). A record that does not encode (text that is not
// UTF-8) is left out, counted and logged as a periodic checkpoint's is: its
// player's record keeps the last state that encoded. It returns the
// records written.
func (p *Players) encodeChunk(b, scratch []byte, j *chunkJob) (val, scr []byte, n int) {
	now := j.taken
	b = protowire.AppendTag(b, chunkZone, protowire.BytesType)
	b = protowire.AppendString(b, j.zone)
	b = protowire.AppendTag(b, chunkNode, protowire.BytesType)
	b = protowire.AppendString(b, p.node)
	if j.slice != 0 {
		b = protowire.AppendTag(b, chunkSlice, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(j.slice))
	}
	b = protowire.AppendTag(b, chunkWritten, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(now))
	var enc pbconv.RecordEncoder
	for i := range j.cps {
		cp := &j.cps[i]
		h := pbconv.RecordHead{Player: cp.Entity, Zone: j.zone, State: pb.PlayerState_PLAYER_STATE_ONLINE,
			Epoch: uint64(cp.Epoch), Node: p.node, UpdatedUnixMs: now, Gateway: j.gateways[i]}
		var err error
		if scratch, err = enc.Append(scratch[:0], &h, cp); err != nil {
			p.unencodable(&playerJob{player: cp.Entity, zone: j.zone, epoch: uint64(cp.Epoch)}, err)
			continue
		}
		b = protowire.AppendTag(b, chunkRecords, protowire.BytesType)
		b = protowire.AppendBytes(b, scratch)
		n++
	}
	return b, scratch, n
}

// chunkRecord is player's record in the chunk value val, if it has one.
func chunkRecord(val []byte, player uint64) (*pb.PlayerRecord, error) {
	var c pb.CheckpointChunk
	if err := proto.Unmarshal(val, &c); err != nil {
		return nil, err
	}
	for _, r := range c.GetRecords() {
		if r.GetPlayer() == player {
			return r, nil
		}
	}
	return nil, nil
}

// overlay is rec, or cr when cr is a newer checkpoint of rec's stay: rec
// ONLINE, cr naming its player, zone and epoch, with a checkpoint, written
// after rec.
func overlay(rec, cr *pb.PlayerRecord) *pb.PlayerRecord {
	if cr == nil || rec.GetState() != pb.PlayerState_PLAYER_STATE_ONLINE || cr.GetCheckpoint() == nil ||
		cr.GetPlayer() != rec.GetPlayer() || cr.GetZone() != rec.GetZone() || cr.GetEpoch() != rec.GetEpoch() ||
		cr.GetUpdatedUnixMs() <= rec.GetUpdatedUnixMs() {
		return rec
	}
	return cr
}

// withChunk is rec with its zone's chunk taken into account (overlay): the
// player's periodic checkpoint when it is newer than rec's. A chunk that
// does not decode is ignored (rec as it is: its last placement's or
// leave's checkpoint).
func (p *Players) withChunk(ctx context.Context, rec *pb.PlayerRecord) (*pb.PlayerRecord, error) {
	if rec.GetState() != pb.PlayerState_PLAYER_STATE_ONLINE || rec.GetZone() == "" {
		return rec, nil
	}
	val, err := p.readChunk(ctx, ChunkKey(rec.GetZone(), ChunkSlice(rec.GetPlayer())))
	if err != nil {
		return nil, err
	}
	if val == nil {
		return rec, nil
	}
	cr, err := chunkRecord(val, rec.GetPlayer())
	if err != nil {
		p.ChunksBad.Add(1)
		return rec, nil
	}
	return overlay(rec, cr), nil
}

// chunkCacheTTL is how long a chunk read for Record serves the lookups of
// its other players: after a crash every player whose connection is on a
// surviving gateway looks its record up within a few seconds (relooks),
// and each chunk holds a fifth of its zone (≈ 70 KB of a 2,000-player
// zone), so unshared that storm would read ≈ 140 MB from NATS where the
// records alone are 600 KB. A chunk served from here is at most this much
// older than the KV's: within the checkpoint period, the RPO.
const chunkCacheTTL = 250 * time.Millisecond

// chunkCacheMax and chunkCacheBytes bound the cached chunks: the cache
// starts again empty past either. A chunk of a 1,000-player zone is ≈ 36 KB
// (a fifth of it), so the count bounds a node's usual lookups; the bytes
// bound larger chunks, up to maxChunkBytes from this writer or whatever
// value another stored (NATS's payload limit).
const (
	chunkCacheMax   = 256
	chunkCacheBytes = 8 << 20
)

// cachedChunk is a chunk's value as read at at.
type cachedChunk struct {
	val []byte
	at  time.Time
}

// readChunk is key's chunk value (nil when there is none), from the cache
// when read less than chunkCacheTTL ago. A missing chunk is not cached: it
// costs the KV no value to send, and its zone's first chunk should count at
// once.
func (p *Players) readChunk(ctx context.Context, key string) ([]byte, error) {
	now := time.Now()
	p.chunkMu.Lock()
	c, ok := p.chunkCache[key]
	p.chunkMu.Unlock()
	ttl := chunkCacheTTL
	if p.chunkTTL != 0 {
		ttl = p.chunkTTL
	}
	if ok && now.Sub(c.at) < ttl {
		return c.val, nil
	}
	p.ChunkReads.Add(1)
	e, err := p.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	val := e.Value()
	p.chunkMu.Lock()
	capBytes := chunkCacheBytes
	if p.chunkCap != 0 {
		capBytes = p.chunkCap
	}
	prev := len(p.chunkCache[key].val) // a value this one replaces
	if p.chunkCache == nil || len(p.chunkCache) >= chunkCacheMax || p.chunkBytes-prev+len(val) > capBytes {
		p.chunkCache = make(map[string]cachedChunk)
		p.chunkBytes, prev = 0, 0
	}
	p.chunkCache[key] = cachedChunk{val: val, at: now}
	p.chunkBytes += len(val) - prev
	p.chunkMu.Unlock()
	return val, nil
}

// isChunkKey tells whether key is a chunk's (not a player's record).
func isChunkKey(key string) bool { return strings.HasPrefix(key, "c.") }

// chunkKeyZone is the zone of chunk key (ChunkKey): what lies between
// "c." and the slice.
func chunkKeyZone(key string) string {
	z := strings.TrimPrefix(key, "c.")
	if i := strings.LastIndexByte(z, '.'); i >= 0 {
		return z[:i]
	}
	return ""
}

// overlayChunks is recs, the online records naming zone, each with its
// periodic checkpoint from chunks (values of zone's chunk keys) when that
// is newer (overlay). A chunk of another zone whose key shares the prefix
// (zone "a" and zone "a.b") names its own zone and is skipped.
func (p *Players) overlayChunks(recs []*pb.PlayerRecord, zone string, chunks [][]byte) []*pb.PlayerRecord {
	if len(chunks) == 0 {
		return recs
	}
	newest := map[uint64]*pb.PlayerRecord{}
	for _, v := range chunks {
		var c pb.CheckpointChunk
		if proto.Unmarshal(v, &c) != nil {
			p.ChunksBad.Add(1)
			continue
		}
		if c.GetZone() != zone {
			continue
		}
		for _, r := range c.GetRecords() {
			if o := newest[r.GetPlayer()]; o == nil || r.GetUpdatedUnixMs() > o.GetUpdatedUnixMs() {
				newest[r.GetPlayer()] = r
			}
		}
	}
	for i, rec := range recs {
		recs[i] = overlay(rec, newest[rec.GetPlayer()])
	}
	return recs
}

// withCheckpoints keeps the records of recs that carry a checkpoint (in
// place): a record with none cannot be restored.
func withCheckpoints(recs []*pb.PlayerRecord) []*pb.PlayerRecord {
	out := recs[:0]
	for _, r := range recs {
		if r.GetCheckpoint() != nil {
			out = append(out, r)
		}
	}
	return out
}
