package main

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/ghostwire/ghostwire/actors/cluster/natstest"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
)

// kvEntry is a KV entry as a watcher delivers it.
type kvEntry struct {
	key string
	val []byte
	rev uint64
	op  jetstream.KeyValueOp
}

func (e kvEntry) Bucket() string                  { return bucketPlayers }
func (e kvEntry) Key() string                     { return e.key }
func (e kvEntry) Value() []byte                   { return e.val }
func (e kvEntry) Revision() uint64                { return e.rev }
func (e kvEntry) Created() time.Time              { return time.Unix(1, 0) }
func (e kvEntry) Delta() uint64                   { return 0 }
func (e kvEntry) Operation() jetstream.KeyValueOp { return e.op }

// A checkpoint chunk is one Write a record — its player, zone, node,
// epoch and last applied move, at the chunk's revision — and a chunk that
// does not decode, or an empty one, one Write that names no player.
func TestDecodeChunk(t *testing.T) {
	c := &pb.CheckpointChunk{Zone: "x1z0", Node: "n2", Slice: 3, Records: []*pb.PlayerRecord{
		{Player: 7, Zone: "x1z0", Epoch: 4, Checkpoint: &pb.EntitySnapshot{Entity: 7, LastApplied: 90}},
		{Player: 8, Zone: "x1z0", Epoch: 5},
	}}
	val, err := proto.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	ws := decodeChunk(kvEntry{key: "c.x1z0.3", val: val, rev: 12, op: jetstream.KeyValuePut})
	want := []Write{
		{Bucket: bucketPlayers, Key: "c:p.7", Rev: 12, Created: time.Unix(1, 0), Node: "n2", Zone: "x1z0", Epoch: 4, Player: 7, Checkpoint: true, LastApplied: 90, Chunk: true},
		{Bucket: bucketPlayers, Key: "c:p.8", Rev: 12, Created: time.Unix(1, 0), Node: "n2", Zone: "x1z0", Epoch: 5, Player: 8, Chunk: true},
	}
	if len(ws) != len(want) {
		t.Fatalf("%d writes, want %d: %+v", len(ws), len(want), ws)
	}
	for i := range want {
		if ws[i] != want[i] {
			t.Fatalf("write %d: %+v, want %+v", i, ws[i], want[i])
		}
	}
	empty, _ := proto.Marshal(&pb.CheckpointChunk{Zone: "x1z0", Node: "n2"})
	for name, e := range map[string]kvEntry{
		"garbage": {key: "c.x1z0.3", val: []byte{0xff, 0xff}, rev: 13, op: jetstream.KeyValuePut},
		"deleted": {key: "c.x1z0.3", rev: 14, op: jetstream.KeyValueDelete},
		"empty":   {key: "c.x1z0.3", val: empty, rev: 15, op: jetstream.KeyValuePut},
	} {
		ws := decodeChunk(e)
		if len(ws) != 1 || ws[0].Player != 0 || !ws[0].Chunk || ws[0].Rev != e.rev {
			t.Fatalf("%s: %+v, want one write naming no player", name, ws)
		}
		if name == "empty" && (ws[0].Zone != "x1z0" || ws[0].Node != "n2") {
			t.Fatalf("an empty chunk: %+v, want its zone and node (a write the audit checks)", ws[0])
		}
	}
}

// fakeWatcher delivers the entries it is given, then ends.
type fakeWatcher struct{ ch chan jetstream.KeyValueEntry }

func (w fakeWatcher) Updates() <-chan jetstream.KeyValueEntry { return w.ch }
func (w fakeWatcher) Stop() error                             { return nil }

// The revisions a watcher skips above the stream's last at its start are
// counted missed (the buckets keep one revision a key: a skipped one was
// replaced before the recorder saw it); gaps below it are history from
// before the recorder started, not counted.
func TestRecorderCountsWhatItMissed(t *testing.T) {
	r := &Recorder{seen: map[string]uint64{}, owners: map[string]Write{}, upTo: map[string]uint64{},
		from: map[string]uint64{bucketPlayers: 9}, missed: map[string]uint64{}}
	w := fakeWatcher{ch: make(chan jetstream.KeyValueEntry, 8)}
	for _, rev := range []uint64{4, 8, 12, 13, 16} {
		w.ch <- kvEntry{key: "p.7", rev: rev, op: jetstream.KeyValueDelete}
	}
	close(w.ch)
	r.run(bucketPlayers, w)
	if got := r.Missed()[bucketPlayers]; got != 4 {
		t.Fatalf("missed %d revisions, want 4 (10, 11, 14 and 15)", got)
	}
	if r.upTo[bucketPlayers] != 16 || len(r.Writes()) != 5 {
		t.Fatalf("up to %d with %d writes; want 16, 5", r.upTo[bucketPlayers], len(r.Writes()))
	}
}

// Against a real nats-server: CaughtUp returns once the recorder has every
// revision both buckets' streams hold; a watcher whose updates end is
// followed by a new one from the next revision, missing nothing; with NATS
// gone, CaughtUp is an error within its bound.
func TestRecorderCaughtUp(t *testing.T) {
	srv := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kvs := map[string]jetstream.KeyValue{}
	for _, b := range []string{bucketZones, bucketPlayers} {
		if kvs[b], err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: b, History: 1}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := StartRecorder(ctx, srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Keys of their own, so that no revision is replaced before a slow
	// consumer delivers it; the deletion once the puts are in, likewise.
	for i := range 5 {
		if _, err := kvs[bucketZones].PutString(ctx, fmt.Sprint("z", i), "lease"); err != nil {
			t.Fatal(err)
		}
		if _, err := kvs[bucketPlayers].PutString(ctx, fmt.Sprint("p.", i), "record"); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.CaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	if err := kvs[bucketZones].Delete(ctx, "z4"); err != nil {
		t.Fatal(err)
	}
	if err := r.CaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	// Each bucket's writes in its own order (the two watchers' arrivals
	// interleave as they may).
	var zoneRevs []uint64
	puts, dels := 0, 0
	for _, w := range r.Writes() {
		if w.Bucket == bucketZones {
			zoneRevs = append(zoneRevs, w.Rev)
		}
		if w.Deleted {
			dels++
			if w.Bucket != bucketZones || w.Rev != 6 {
				t.Fatalf("deletion %+v, want the lease's at revision 6", w)
			}
		} else {
			puts++
		}
	}
	if puts != 10 || dels != 1 || !slices.Equal(zoneRevs, []uint64{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("caught up with %d puts, %d deletions, lease revisions %v; want 10, 1, 1…6", puts, dels, zoneRevs)
	}
	if m := r.Missed(); m[bucketZones] != 0 || m[bucketPlayers] != 0 {
		t.Fatalf("missed %v with every revision delivered", m)
	}
	// A watcher whose updates end (stopped here, as after a reconnect) is
	// followed by a new one from the next revision: nothing is missed.
	r.mu.Lock()
	old := r.cur[bucketZones]
	r.mu.Unlock()
	_ = old.Stop()
	for i := range 3 {
		if _, err := kvs[bucketZones].PutString(ctx, fmt.Sprint("z", i), "lease"); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.CaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	again := r.cur[bucketZones] != old
	r.mu.Unlock()
	if !again || r.Missed()[bucketZones] != 0 || len(r.Writes()) != 14 {
		t.Fatalf("after a watcher's end: a new watcher %v, missed %v, %d writes; want true, 0, 14", again, r.Missed(), len(r.Writes()))
	}

	// With NATS gone, CaughtUp is an error, not a wait past its bound.
	srv.Shutdown()
	srv.WaitForShutdown()
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	defer cancelShort()
	if err := r.CaughtUp(short); err == nil {
		t.Fatal("CaughtUp with NATS gone: no error")
	}
}
