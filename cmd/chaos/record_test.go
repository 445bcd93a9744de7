package main

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

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
