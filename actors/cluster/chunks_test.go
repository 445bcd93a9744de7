package cluster

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// chunkCP is player's checkpoint at epoch, x its position's first axis.
func chunkCP(player uint64, epoch uint32, x float32) handoff.Checkpoint {
	return handoff.Checkpoint{Entity: player, Epoch: handoff.Epoch(epoch), Control: move.ControlState{Pos: [3]float32{x, 0, 0}},
		LastApplied: uint64(x), Health: 900, Name: "p"}
}

func posX(r *pb.PlayerRecord) float32 { return r.GetCheckpoint().GetControl().GetPos().GetX() }

// A chunk's checkpoints reach Record and InZone while the record names
// their zone and epoch, and only then: after a handoff (a newer epoch), a
// leave (OFFLINE) or a new session's join written after the chunk, the
// record's own checkpoint stands.
func TestChunkOverlaysTheRecord(t *testing.T) {
	p, kv := playersFixture(t)
	gw := func(string) string { return "gw1" }
	// Players 21 and 61 share a slice; 4 is in another.
	s21, s4 := ChunkSlice(21), ChunkSlice(4)
	if ChunkSlice(61) != s21 || s4 == s21 {
		t.Fatalf("slices 21→%d, 61→%d, 4→%d: pick other players", s21, ChunkSlice(61), s4)
	}
	for _, id := range []uint64{21, 61, 4} {
		c := chunkCP(id, 1, 1)
		p.Placed(id, "a", 1, true, &c, "gw0")
	}
	waitFor(t, 3*time.Second, "the join records", func() bool {
		return record(t, p, 21) != nil && record(t, p, 61) != nil && record(t, p, 4) != nil
	})
	p.CheckpointChunk("a", s21, []handoff.Checkpoint{chunkCP(21, 1, 50), chunkCP(61, 1, 60)}, gw)
	waitFor(t, 3*time.Second, "the chunk", func() bool { return p.Chunks.Load() == 1 })
	if r := record(t, p, 21); posX(r) != 50 || r.GetGateway() != "gw1" || r.GetZone() != "a" || r.GetEpoch() != 1 {
		t.Fatalf("player 21: %v, want the chunk's checkpoint (x 50, gateway gw1)", r)
	}
	if r := record(t, p, 4); posX(r) != 1 {
		t.Fatalf("player 4 (no chunk of its slice): %v, want its record's x 1", r)
	}
	// The record itself is untouched: the chunk is one write for both.
	if e, err := kv.Get(context.Background(), PlayerKey(61)); err != nil {
		t.Fatal(err)
	} else if r := decodeRecord(t, e.Value()); posX(r) != 1 {
		t.Fatalf("p.61 rewritten: %v", r)
	}
	recs, err := p.InZone(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint64]float32{}
	for _, r := range recs {
		got[r.GetPlayer()] = posX(r)
	}
	if len(got) != 3 || got[21] != 50 || got[61] != 60 || got[4] != 1 {
		t.Fatalf("InZone: %v, want 21→50, 61→60, 4→1", got)
	}
	sameListed(t, p, "a", []uint64{21, 61, 4, 999}, got) // 999: no record

	// 61 is handed to zone b at epoch 2: zone a's chunk no longer counts.
	c := chunkCP(61, 2, 70)
	p.Placed(61, "b", 2, false, &c, "gw2")
	waitFor(t, 3*time.Second, "the handoff", func() bool { return record(t, p, 61).GetZone() == "b" })
	if r := record(t, p, 61); posX(r) != 70 {
		t.Fatalf("player 61 after its handoff: %v, want its own record (x 70)", r)
	}
	// 21 leaves: its last checkpoint stands, not the chunk's.
	last := chunkCP(21, 1, 55)
	p.Checkpoint("a", []handoff.Checkpoint{last}, true, gw)
	waitFor(t, 3*time.Second, "the leave", func() bool {
		return record(t, p, 21).GetState() == pb.PlayerState_PLAYER_STATE_OFFLINE
	})
	if r := record(t, p, 21); posX(r) != 55 {
		t.Fatalf("player 21 after leaving: %v, want x 55", r)
	}
	// 21 comes back in a new session (epochs start again at 1): the old
	// chunk, written before the join, is older than the record.
	again := chunkCP(21, 1, 5)
	p.Placed(21, "a", 1, true, &again, "gw0")
	waitFor(t, 3*time.Second, "the new session", func() bool {
		return record(t, p, 21).GetState() == pb.PlayerState_PLAYER_STATE_ONLINE
	})
	if r := record(t, p, 21); posX(r) != 5 {
		t.Fatalf("player 21's new session: %v, want its join's x 5, not the old chunk's", r)
	}
	recs, err = p.InZone(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	clear(got)
	for _, r := range recs {
		got[r.GetPlayer()] = posX(r)
	}
	if len(got) != 2 || got[21] != 5 || got[4] != 1 {
		t.Fatalf("InZone after the moves: %v, want 21→5, 4→1", got)
	}
	sameListed(t, p, "a", []uint64{21, 61, 4}, got) // 61: in zone b now
}

// sameListed checks that Listed reads what InZone read (want: player →
// x) for a handover that listed players.
func sameListed(t *testing.T, p *Players, zone string, players []uint64, want map[uint64]float32) {
	t.Helper()
	recs, err := p.Listed(context.Background(), zone, players)
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint64]float32{}
	for _, r := range recs {
		got[r.GetPlayer()] = posX(r)
	}
	if !maps.Equal(got, want) {
		t.Fatalf("Listed(%s, %v): %v, want InZone's %v", zone, players, got, want)
	}
}

func decodeRecord(t *testing.T, v []byte) *pb.PlayerRecord {
	t.Helper()
	var r pb.PlayerRecord
	if err := proto.Unmarshal(v, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// A chunk is what proto.Marshal makes of the CheckpointChunk, and its
// records are the ones a periodic checkpoint writes to p.<id>.
func TestChunkEncodesAsMarshal(t *testing.T) {
	p := &Players{node: "n1"}
	j := &chunkJob{zone: "x1z0", slice: 7, taken: 1_800_000_000_000, cps: []handoff.Checkpoint{chunkCP(7, 3, 12), chunkCP(27, 4, 13)},
		gateways: []string{"g1", ""}}
	val, _, n := p.encodeChunk(nil, nil, j)
	if n != 2 {
		t.Fatalf("%d records, want 2", n)
	}
	var c pb.CheckpointChunk
	if err := proto.Unmarshal(val, &c); err != nil {
		t.Fatal(err)
	}
	if c.GetZone() != "x1z0" || c.GetNode() != "n1" || c.GetSlice() != 7 || c.GetWrittenUnixMs() != 1_800_000_000_000 || len(c.GetRecords()) != 2 {
		t.Fatalf("chunk %v", &c)
	}
	again, err := proto.MarshalOptions{Deterministic: true}.Marshal(&c)
	if err != nil || string(again) != string(val) {
		t.Fatalf("the chunk's bytes differ from proto.Marshal's (%v):\n%x\n%x", err, val, again)
	}
	r := c.GetRecords()[1]
	if r.GetPlayer() != 27 || r.GetEpoch() != 4 || r.GetZone() != "x1z0" || r.GetState() != pb.PlayerState_PLAYER_STATE_ONLINE ||
		posX(r) != 13 || r.GetUpdatedUnixMs() != c.GetWrittenUnixMs() {
		t.Fatalf("record %v", r)
	}
}

// A record whose text is not UTF-8 is left out of its chunk, counted; the
// others go in.
func TestChunkLeavesOutUnencodableRecords(t *testing.T) {
	p := &Players{node: "n1", log: slog.New(slog.DiscardHandler)}
	bad := chunkCP(2, 1, 1)
	bad.Name = "\xff"
	j := &chunkJob{zone: "a", slice: 2, cps: []handoff.Checkpoint{chunkCP(22, 1, 1), bad}, gateways: []string{"", ""}}
	val, _, n := p.encodeChunk(nil, nil, j)
	var c pb.CheckpointChunk
	if err := proto.Unmarshal(val, &c); err != nil {
		t.Fatal(err)
	}
	if n != 1 || len(c.GetRecords()) != 1 || c.GetRecords()[0].GetPlayer() != 22 || p.Unencodable.Load() != 1 {
		t.Fatalf("%d records (%v), unencodable %d: want player 22 alone, 1", n, c.GetRecords(), p.Unencodable.Load())
	}
}

// A fenced zone's chunk is not written; an empty slice is written once
// (to clear the records of players who left it), not every period.
func TestChunkFencedAndEmpty(t *testing.T) {
	p, kv := playersFixture(t)
	fenced := true
	p.valid = func(zone string) bool { return !(fenced && zone == "a") }
	gw := func(string) string { return "" }
	p.CheckpointChunk("a", 0, []handoff.Checkpoint{chunkCP(20, 1, 1)}, gw)
	waitFor(t, 3*time.Second, "the fence", func() bool { return p.Fenced.Load() == 1 })
	if _, err := kv.Get(context.Background(), ChunkKey("a", 0)); err != jetstream.ErrKeyNotFound {
		t.Fatalf("a fenced chunk was written (%v)", err)
	}
	fenced = false // (the writer read it before: the fence's count is its answer)
	p.CheckpointChunk("a", 0, []handoff.Checkpoint{chunkCP(20, 1, 1)}, gw)
	for range 3 {
		p.CheckpointChunk("a", 0, nil, gw)
	}
	p.CheckpointChunk("a", 5, []handoff.Checkpoint{chunkCP(25, 1, 1)}, gw) // after the empty ones: the writer is done with them
	waitFor(t, 3*time.Second, "slice 5's chunk", func() bool {
		_, err := kv.Get(context.Background(), ChunkKey("a", 5))
		return err == nil
	})
	if n := p.Chunks.Load(); n != 3 {
		t.Fatalf("%d chunks written, want 3: slice 0 with its player, slice 0 empty once, slice 5", n)
	}
	e, err := kv.Get(context.Background(), ChunkKey("a", 0))
	if err != nil {
		t.Fatal(err)
	}
	var c pb.CheckpointChunk
	if err := proto.Unmarshal(e.Value(), &c); err != nil || len(c.GetRecords()) != 0 {
		t.Fatalf("slice 0 after its empty chunks: %v (%v), want no record", &c, err)
	}
	if p.Checkpoints.Load() != 2 {
		t.Fatalf("%d checkpoints counted, want 2", p.Checkpoints.Load())
	}
}

// Chunk keys are not player records: InZone of zone "a" neither decodes
// them as records nor takes zone "a.b"'s chunk for its own.
func TestChunkKeysOfAnotherZone(t *testing.T) {
	p, _ := playersFixture(t)
	gw := func(string) string { return "" }
	c := chunkCP(40, 1, 1)
	p.Placed(40, "a", 1, true, &c, "")
	waitFor(t, 3*time.Second, "the join", func() bool { return record(t, p, 40) != nil })
	// Zone "a.b"'s slice 0 has key c.a.b.0, under zone "a"'s prefix c.a.
	p.CheckpointChunk("a.b", 0, []handoff.Checkpoint{chunkCP(40, 1, 99)}, gw)
	waitFor(t, 3*time.Second, "the chunk", func() bool { return p.Chunks.Load() == 1 })
	if !strings.HasPrefix(ChunkKey("a.b", 0), "c.a.") {
		t.Fatal("the keys no longer share the prefix: the test tests nothing")
	}
	recs, err := p.InZone(context.Background(), "a")
	if err != nil || len(recs) != 1 || posX(recs[0]) != 1 {
		t.Fatalf("InZone(a) = %v (%v), want player 40 at x 1", recs, err)
	}
}

// Zones asked for together (a node taking a dead node's zones) share one
// read of the whole bucket, each getting its own players with their
// chunks; a zone asked for after that read began gets a read of its own.
// Before, each zone read every record, ten zones ten times at once.
func TestInZoneReadsTheBucketOnceForZonesAskedTogether(t *testing.T) {
	p, _ := playersFixture(t)
	gw := func(string) string { return "gw1" }
	zones := []string{"a", "b", "c"}
	for i, z := range zones {
		for j := range 3 {
			id := uint64(10*i + j + 1)
			c := chunkCP(id, 1, 1)
			p.Placed(id, z, 1, true, &c, "gw0")
		}
	}
	waitFor(t, 3*time.Second, "the join records", func() bool { return record(t, p, 23) != nil })
	p.CheckpointChunk("b", ChunkSlice(11), []handoff.Checkpoint{chunkCP(11, 1, 50)}, gw)
	waitFor(t, 3*time.Second, "the chunk", func() bool { return p.Chunks.Load() == 1 })

	scans := p.BucketScans.Load()
	hold := make(chan struct{})
	p.scanHold = hold // the read starts once all three asked, however slow the host
	got := make([]map[uint64]float32, len(zones))
	var wg sync.WaitGroup
	for i, z := range zones {
		wg.Add(1)
		go func() {
			defer wg.Done()
			recs, err := p.InZone(context.Background(), z)
			if err != nil {
				t.Error(err)
			}
			got[i] = map[uint64]float32{}
			for _, r := range recs {
				got[i][r.GetPlayer()] = posX(r)
			}
		}()
	}
	waitFor(t, 5*time.Second, "three zones asked for", func() bool {
		p.scanMu.Lock()
		defer p.scanMu.Unlock()
		return p.scanNext != nil && len(p.scanNext.zones) == len(zones)
	})
	close(hold)
	wg.Wait()
	want := []map[uint64]float32{{1: 1, 2: 1, 3: 1}, {11: 50, 12: 1, 13: 1}, {21: 1, 22: 1, 23: 1}}
	for i := range zones {
		if !maps.Equal(got[i], want[i]) {
			t.Fatalf("InZone(%s) = %v, want %v", zones[i], got[i], want[i])
		}
	}
	if n := p.BucketScans.Load() - scans; n != 1 {
		t.Fatalf("three zones asked for together read the bucket %d times, want once", n)
	}
	if recs, err := p.InZone(context.Background(), "c"); err != nil || len(recs) != 3 || p.BucketScans.Load()-scans != 2 {
		t.Fatalf("a zone asked for later: %d records (%v), %d reads in all; want 3 and a read of its own", len(recs), err, p.BucketScans.Load()-scans)
	}
}

// overlay takes a chunk's record only for the record's own stay: online,
// the same player, zone and epoch, a checkpoint, and newer.
func TestOverlayRules(t *testing.T) {
	cp := &pb.EntitySnapshot{Entity: 9}
	rec := &pb.PlayerRecord{Player: 9, Zone: "a", Epoch: 2, State: pb.PlayerState_PLAYER_STATE_ONLINE, UpdatedUnixMs: 100, Checkpoint: cp}
	good := func() *pb.PlayerRecord {
		return &pb.PlayerRecord{Player: 9, Zone: "a", Epoch: 2, State: pb.PlayerState_PLAYER_STATE_ONLINE, UpdatedUnixMs: 200,
			Checkpoint: &pb.EntitySnapshot{Entity: 9, LastApplied: 1}}
	}
	if overlay(rec, good()) == rec {
		t.Fatal("a newer checkpoint of the same stay was not taken")
	}
	for name, change := range map[string]func(r, c *pb.PlayerRecord){
		"no chunk record":     nil,
		"record offline":      func(r, c *pb.PlayerRecord) { r.State = pb.PlayerState_PLAYER_STATE_OFFLINE },
		"record in a handoff": func(r, c *pb.PlayerRecord) { r.State = pb.PlayerState_PLAYER_STATE_HANDOFF },
		"another player":      func(r, c *pb.PlayerRecord) { c.Player = 10 },
		"another zone":        func(r, c *pb.PlayerRecord) { c.Zone = "b" },
		"an older epoch":      func(r, c *pb.PlayerRecord) { c.Epoch = 1 },
		"a newer epoch":       func(r, c *pb.PlayerRecord) { c.Epoch = 3 },
		"no checkpoint":       func(r, c *pb.PlayerRecord) { c.Checkpoint = nil },
		"as old":              func(r, c *pb.PlayerRecord) { c.UpdatedUnixMs = 100 },
		"older":               func(r, c *pb.PlayerRecord) { c.UpdatedUnixMs = 50 },
	} {
		r := proto.Clone(rec).(*pb.PlayerRecord)
		var c *pb.PlayerRecord
		if change != nil {
			c = good()
			change(r, c)
		}
		if got := overlay(r, c); got != r {
			t.Errorf("%s: the chunk's record was taken", name)
		}
	}
}

// Lookups of players of one chunk within the cache's time share one read
// of it (a relook storm after a crash reads each chunk a few times a
// second, not once a player); a lookup after that reads it again and sees
// the newer chunk. The time is set, not waited for: no clock in the test.
func TestChunkReadsShared(t *testing.T) {
	p, _ := playersFixture(t)
	gw := func(string) string { return "" }
	s := ChunkSlice(21)
	for _, id := range []uint64{21, 61} {
		c := chunkCP(id, 1, 1)
		p.Placed(id, "a", 1, true, &c, "")
	}
	waitFor(t, 3*time.Second, "the join records", func() bool { return record(t, p, 21) != nil && record(t, p, 61) != nil })
	p.CheckpointChunk("a", s, []handoff.Checkpoint{chunkCP(21, 1, 50), chunkCP(61, 1, 60)}, gw)
	waitFor(t, 3*time.Second, "the chunk", func() bool { return p.Chunks.Load() == 1 })
	reads := p.ChunkReads.Load()
	p.chunkTTL = time.Hour // however slow the host: the two lookups fall within it
	a, b := record(t, p, 21), record(t, p, 61)
	if posX(a) != 50 || posX(b) != 60 || p.ChunkReads.Load() != reads+1 {
		t.Fatalf("x %g and %g (want 50, 60), %d chunk reads for two lookups (want 1)", posX(a), posX(b), p.ChunkReads.Load()-reads)
	}
	p.CheckpointChunk("a", s, []handoff.Checkpoint{chunkCP(21, 1, 80), chunkCP(61, 1, 90)}, gw)
	waitFor(t, 3*time.Second, "the next chunk", func() bool { return p.Chunks.Load() == 2 })
	if a := record(t, p, 21); posX(a) != 50 || p.ChunkReads.Load() != reads+1 {
		t.Fatalf("within the cache's time: x %g (want the cached 50), %d chunk reads (want 1)", posX(a), p.ChunkReads.Load()-reads)
	}
	p.chunkTTL = time.Nanosecond // the cached chunk is past its time
	if a := record(t, p, 21); posX(a) != 80 || p.ChunkReads.Load() != reads+2 {
		t.Fatalf("after the cache's time: x %g (want 80), %d chunk reads (want 2)", posX(a), p.ChunkReads.Load()-reads)
	}
}

// Chunks of another slice count in one bucket (a node of a build before
// five slices, twenty a zone, in the cluster during a rolling update):
// Record looks only in this count's slice, where a chunk without the
// player leaves the record's own checkpoint; InZone reads every chunk of
// the zone and keeps each player's newest; neither ever takes a chunk
// record older than the player's record.
func TestChunksOfAnotherSliceCount(t *testing.T) {
	p, kv := playersFixture(t)
	ctx := context.Background()
	p.chunkTTL = time.Nanosecond // every lookup reads the KV
	c := chunkCP(21, 1, 1)
	p.Placed(21, "a", 1, true, &c, "gw0")
	waitFor(t, 3*time.Second, "the join record", func() bool { return record(t, p, 21) != nil })
	rec := record(t, p, 21)
	other := ChunkKey("a", ChunkSlices+8) // a slice only the other count has
	own := ChunkKey("a", ChunkSlice(21))
	put := func(key string, player uint64, x float32, at int64) {
		t.Helper()
		r := proto.Clone(rec).(*pb.PlayerRecord)
		r.Player, r.Checkpoint.Control.Pos.X, r.UpdatedUnixMs = player, x, at
		val, err := proto.Marshal(&pb.CheckpointChunk{Zone: "a", Node: "n0", Records: []*pb.PlayerRecord{r}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(ctx, key, val); err != nil {
			t.Fatal(err)
		}
	}
	inZone := func() float32 {
		t.Helper()
		recs, err := p.InZone(ctx, "a")
		if err != nil || len(recs) != 1 || recs[0].GetPlayer() != 21 {
			t.Fatalf("InZone: %v, %v", recs, err)
		}
		return posX(recs[0])
	}
	at := rec.GetUpdatedUnixMs()
	// The other count's chunk from before the record (the zone's last
	// owner of the older build, before the handover wrote the record), and
	// this count's slice holding another player only.
	put(other, 21, 99, at-1000)
	put(own, 61, 98, at+500)
	if r, z := posX(record(t, p, 21)), inZone(); r != 1 || z != 1 {
		t.Fatalf("Record x %g, InZone x %g: want the record's 1 for both", r, z)
	}
	// The other count's chunk newer than the record (its owner is of the
	// older build): the newest checkpoint of the stay for InZone; Record,
	// which does not look there, keeps the record's.
	put(other, 21, 70, at+1000)
	if r, z := posX(record(t, p, 21)), inZone(); r != 1 || z != 70 {
		t.Fatalf("Record x %g, InZone x %g: want 1 and 70", r, z)
	}
	// This count's chunk newer still: both take it, even with the other
	// count's chunk written after it (but taken before).
	put(own, 21, 50, at+2000)
	put(other, 21, 60, at+1500)
	if r, z := posX(record(t, p, 21)), inZone(); r != 50 || z != 50 {
		t.Fatalf("Record x %g, InZone x %g: want 50 for both", r, z)
	}
}

// The chunks Record caches are bounded in bytes as well as in count:
// past the bound the cache starts again, a value read again replaces its
// old one's bytes, and the cache never holds more than the bound.
func TestChunkCacheBoundedInBytes(t *testing.T) {
	p, kv := playersFixture(t)
	ctx := context.Background()
	const size = 10 << 10
	p.chunkCap = 3 * size // three values fit, the fourth starts it again
	p.chunkTTL = time.Nanosecond
	for k := range 5 {
		if _, err := kv.Put(ctx, ChunkKey("a", k), bytes.Repeat([]byte{byte(k)}, size)); err != nil {
			t.Fatal(err)
		}
	}
	cached := func() (int, int) {
		p.chunkMu.Lock()
		defer p.chunkMu.Unlock()
		sum := 0
		for _, c := range p.chunkCache {
			sum += len(c.val)
		}
		if sum != p.chunkBytes {
			t.Fatalf("the cache holds %d bytes but counts %d", sum, p.chunkBytes)
		}
		return len(p.chunkCache), sum
	}
	for i, want := range []int{1, 2, 3, 1, 2} {
		val, err := p.readChunk(ctx, ChunkKey("a", i))
		if err != nil || len(val) != size || val[0] != byte(i) {
			t.Fatalf("chunk %d: %d bytes, %v", i, len(val), err)
		}
		if n, b := cached(); n != want || b > p.chunkCap {
			t.Fatalf("after chunk %d: %d chunks, %d bytes cached; want %d chunks, at most %d bytes", i, n, b, want, p.chunkCap)
		}
	}
	// Read again past its time: the new value replaces the old one's bytes.
	if _, err := p.readChunk(ctx, ChunkKey("a", 4)); err != nil {
		t.Fatal(err)
	}
	if n, b := cached(); n != 2 || b != 2*size {
		t.Fatalf("a chunk read again: %d chunks, %d bytes cached; want 2 and %d", n, b, 2*size)
	}
}

// A slice too large for one message (over maxChunkBytes) is written a
// record a player instead, and no chunk is stored.
func TestChunkOverflowWritesRecords(t *testing.T) {
	p, kv := playersFixture(t)
	cps := make([]handoff.Checkpoint, 0, 3000)
	for i := range uint64(3000) {
		c := chunkCP(1000+i*ChunkSlices, 1, 1) // one slice's players, no record each
		c.Name = strings.Repeat("n", 100)      // ≈ 170 bytes a record: 3,000 are over 256 KiB
		cps = append(cps, c)
	}
	p.CheckpointChunk("a", 0, cps, func(string) string { return "" })
	// Each player's checkpoint goes its own way: refused (it has no record
	// to hold it), or dropped where its writer's bounded queue is full.
	waitFor(t, 30*time.Second, "the players' own writes", func() bool { return p.CheckpointsRefused.Load()+p.Dropped.Load() == 3000 })
	if p.ChunkOverflows.Load() != 1 || p.Chunks.Load() != 0 {
		t.Fatalf("overflows %d, chunks %d: want 1 and 0", p.ChunkOverflows.Load(), p.Chunks.Load())
	}
	if _, err := kv.Get(context.Background(), ChunkKey("a", 0)); err != jetstream.ErrKeyNotFound {
		t.Fatalf("an oversized chunk was stored (%v)", err)
	}
}

// BenchmarkCheckpointChunks (informative): BenchmarkCheckpointRecords's
// node — 1,000 players over four zones, each checkpointed once a second,
// the zones ticking every 50 ms — with the periodic checkpoints in chunks,
// as actors/node writes them since the forty-fifth capacity pass: every
// ChunkSlices-th of a second (every fourth 50 ms tick at 5) each zone
// writes one slice's chunk (CheckpointChunk). An op is one such second; cpu-µs/checkpoint is the process's CPU (writer, client and
// server) per checkpoint, less what the same time idle costs, to set
// beside BenchmarkCheckpointRecords's.
func BenchmarkCheckpointChunks(b *testing.B) {
	p, _ := pipelinedPlayers(b)
	const players, zones, gap = 1000, 4, time.Second / ChunkSlices
	// bySlice[z][k]: zone z's players of slice k.
	var bySlice [zones][ChunkSlices][]handoff.Checkpoint
	for i := range players {
		id := uint64(i + 1)
		z := i % zones
		bySlice[z][ChunkSlice(id)] = append(bySlice[z][ChunkSlice(id)], benchCheckpoint(id))
	}
	gw := func(string) string { return "zoned-1" }
	idle0 := processCPU()
	for range ChunkSlices {
		time.Sleep(gap)
	}
	idle := processCPU() - idle0
	b.ResetTimer()
	cpu0 := processCPU()
	for range b.N {
		for k := range ChunkSlices {
			for z := range zones {
				p.CheckpointChunk(fmt.Sprintf("x%dz0", z), k, bySlice[z][k], gw)
			}
			time.Sleep(gap)
		}
	}
	want := uint64(b.N * ChunkSlices * zones)
	waitFor(b, 10*time.Second, "every chunk", func() bool { return p.Chunks.Load() >= want })
	cpu := processCPU() - cpu0 - time.Duration(b.N)*idle
	b.StopTimer()
	if p.Checkpoints.Load() != uint64(b.N*players) || p.Errors.Load()+p.Dropped.Load() != 0 {
		b.Fatalf("%d checkpoints written of %d; %d errors, %d dropped", p.Checkpoints.Load(), b.N*players, p.Errors.Load(), p.Dropped.Load())
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N*players), "cpu-µs/checkpoint")
}

// A chunk write that passed the fence just before its node was paused
// does not land over the chunk the zone's new owner wrote meanwhile: it is
// written over the revision its node wrote last, which moved on, and its
// node's lease is no longer valid by then (make chaos: 3 records of a
// zone claimed 1.9 s earlier, written by the paused node as it woke).
// Once the zone is back (the lease valid again), the chunk is written.
func TestChunkOfAPausedOwnerDoesNotLandOverTheNewOwners(t *testing.T) {
	p, kv := playersFixture(t)
	gw := func(string) string { return "" }
	p.CheckpointChunk("a", 0, []handoff.Checkpoint{chunkCP(20, 1, 1)}, gw)
	waitFor(t, 3*time.Second, "the first chunk", func() bool { return p.Chunks.Load() == 1 })
	// The zone's new owner writes the chunk.
	newer := []byte("the new owner's chunk")
	if _, err := kv.Put(context.Background(), ChunkKey("a", 0), newer); err != nil {
		t.Fatal(err)
	}
	// The old owner's next write passes the fence, then its node pauses:
	// by the time it writes, its lease is no longer valid.
	var looks atomic.Int32
	p.valid = func(string) bool { return looks.Add(1) == 1 }
	p.CheckpointChunk("a", 0, []handoff.Checkpoint{chunkCP(20, 1, 2)}, gw)
	waitFor(t, 3*time.Second, "the fence", func() bool { return p.Fenced.Load() == 1 })
	if e, err := kv.Get(context.Background(), ChunkKey("a", 0)); err != nil || string(e.Value()) != string(newer) {
		t.Fatalf("the new owner's chunk was written over by the old owner's (%v)", err)
	}
	// The zone comes back to this node: its chunk is written again.
	p.valid = func(string) bool { return true }
	p.CheckpointChunk("a", 0, []handoff.Checkpoint{chunkCP(20, 2, 3)}, gw)
	waitFor(t, 3*time.Second, "the chunk of the zone back here", func() bool { return p.Chunks.Load() == 2 })
	if e, err := kv.Get(context.Background(), ChunkKey("a", 0)); err != nil || string(e.Value()) == string(newer) {
		t.Fatalf("the chunk of a zone back on this node was not written (%v)", err)
	}
}
