package pbconv

import (
	"bytes"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

func randCheckpoint(r *rand.Rand) *handoff.Checkpoint {
	c := &handoff.Checkpoint{Entity: r.Uint64() >> r.IntN(64), Epoch: handoff.Epoch(r.IntN(9)), Control: randControl(r),
		LastApplied: r.Uint64() >> r.IntN(64), Health: r.Int32() - r.Int32(), Flags: r.Uint32() >> r.IntN(32),
		Name: []string{"", "p", "walker"}[r.IntN(3)], Conn: []string{"", "conn-1", "nonhost/link-n2"}[r.IntN(3)]}
	for i := range c.Extra {
		if r.IntN(2) == 0 {
			c.Extra[i] = r.Uint32()
		}
	}
	c.Events.Gen = r.Uint64() >> r.IntN(64)
	for i := range r.IntN(handoff.EventLanes + 1) {
		if r.IntN(3) > 0 {
			c.Events.Last[i] = r.Uint64() >> r.IntN(64)
		}
	}
	return c
}

func randHead(r *rand.Rand) RecordHead {
	return RecordHead{Player: r.Uint64() >> r.IntN(64), Zone: []string{"", "x0z0", "x12z3"}[r.IntN(3)],
		State: pb.PlayerState(r.IntN(3)), Epoch: r.Uint64() >> r.IntN(64), Node: []string{"", "n1"}[r.IntN(2)],
		Conn: []string{"", "c"}[r.IntN(2)], UpdatedUnixMs: r.Int64() >> r.IntN(63), Gateway: []string{"", "gw", "n2"}[r.IntN(3)]}
}

// marshalRecord is the record as written before RecordEncoder: proto
// objects made per record and proto.Marshal.
func marshalRecord(h *RecordHead, c *handoff.Checkpoint) []byte {
	rec := &pb.PlayerRecord{Player: h.Player, Zone: h.Zone, State: h.State, Epoch: h.Epoch, Node: h.Node, Conn: h.Conn,
		UpdatedUnixMs: h.UpdatedUnixMs, Gateway: h.Gateway}
	if c != nil {
		rec.Checkpoint = CheckpointToProto(c)
	}
	b, err := proto.Marshal(rec)
	if err != nil {
		panic(err)
	}
	return b
}

// The encoder's bytes are proto.Marshal's of the record CheckpointToProto
// makes, record after record through one encoder and one buffer (a
// field left over from the previous record would show), and they decode
// to the checkpoint.
func TestRecordEncoderMatchesMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var e RecordEncoder
	var buf []byte
	for i := range 2000 {
		h := randHead(r)
		var c *handoff.Checkpoint
		if i%5 != 0 {
			c = randCheckpoint(r)
		}
		want := marshalRecord(&h, c)
		at := len(buf)
		if i%7 == 0 {
			buf, at = buf[:0], 0
		}
		var err error
		buf, err = e.Append(buf, &h, c)
		if err != nil {
			t.Fatal(err)
		}
		if got := buf[at:]; !bytes.Equal(got, want) {
			t.Fatalf("record %d: encoded\n%x\nwant\n%x", i, got, want)
		}
		var rec pb.PlayerRecord
		if err := proto.Unmarshal(buf[at:], &rec); err != nil {
			t.Fatal(err)
		}
		if c == nil {
			if rec.Checkpoint != nil {
				t.Fatalf("record %d: a checkpoint %v from nowhere", i, rec.Checkpoint)
			}
			continue
		}
		got, err := CheckpointFromProto(rec.Checkpoint, rec.Epoch)
		if err != nil {
			t.Fatal(err)
		}
		want2 := *c
		want2.Epoch = handoff.Epoch(rec.Epoch)
		if !reflect.DeepEqual(*got, want2) {
			t.Fatalf("record %d: decoded %+v, want %+v", i, *got, want2)
		}
	}
}

// storedRecord is a checkpoint record as main's writer (proto objects and
// proto.Marshal) stored it on 2026-11-28: a node restarted on an old data
// directory reads it, and the encoder writes the same bytes.
const storedRecord = "089221120478317a32180120072a026e313a570892211a220a0a0d001000441d0000c3c2120a0d0000c03f1d000000c01d0000a03f220309080720e2c005285730053a0677616c6b657242050100ac02006a0f6e6f6e686f73742f6c696e6b2d6e3278038201030b000440fb8eed9fa2344a026e32"

func storedCheckpoint() (RecordHead, *handoff.Checkpoint) {
	h := RecordHead{Player: 4242, Zone: "x1z2", State: pb.PlayerState_PLAYER_STATE_ONLINE, Epoch: 7, Node: "n1",
		UpdatedUnixMs: 1795900000123, Gateway: "n2"}
	c := &handoff.Checkpoint{Entity: 4242, Epoch: 7, Control: move.ControlState{Pos: [3]float32{512.25, 0, -97.5},
		Vel: [3]float32{1.5, 0, -2}, Yaw: 1.25, PayloadLen: 3, Payload: [move.MaxPayload]byte{9, 8, 7}},
		LastApplied: 90210, Health: 87, Flags: 5, Name: "walker", Extra: [4]uint32{1, 0, 300, 0}, Conn: "nonhost/link-n2",
		Events: handoff.EventFence{Gen: 3, Last: [handoff.EventLanes]uint64{11, 0, 4}}}
	return h, c
}

func TestRecordEncoderReadsAndWritesStoredRecords(t *testing.T) {
	h, c := storedCheckpoint()
	stored, err := hex.DecodeString(storedRecord)
	if err != nil {
		t.Fatal(err)
	}
	var e RecordEncoder
	got, err := e.Append(nil, &h, c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, stored) {
		t.Fatalf("encoded\n%x\nstored\n%x", got, stored)
	}
	var rec pb.PlayerRecord
	if err := proto.Unmarshal(stored, &rec); err != nil {
		t.Fatal(err)
	}
	back, err := CheckpointFromProto(rec.GetCheckpoint(), rec.GetEpoch())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, c) || rec.GetZone() != h.Zone || rec.GetGateway() != h.Gateway || rec.GetUpdatedUnixMs() != h.UpdatedUnixMs {
		t.Fatalf("stored record read as %+v (%v), want %+v", back, &rec, c)
	}
}

// An encoded record allocates nothing once the buffer has room.
func TestRecordEncoderAllocs(t *testing.T) {
	h, c := storedCheckpoint()
	var e RecordEncoder
	buf := make([]byte, 0, 512)
	if n := testing.AllocsPerRun(100, func() { buf, _ = e.Append(buf[:0], &h, c) }); n != 0 {
		t.Fatalf("%v allocations a record", n)
	}
}

func BenchmarkRecordEncoder(b *testing.B) {
	h, c := storedCheckpoint()
	var e RecordEncoder
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = e.Append(buf[:0], &h, c)
	}
	b.ReportMetric(float64(len(buf)), "B/record")
}

// BenchmarkRecordMarshal is the record as written before RecordEncoder.
func BenchmarkRecordMarshal(b *testing.B) {
	h, c := storedCheckpoint()
	b.ReportAllocs()
	for b.Loop() {
		marshalRecord(&h, c)
	}
}

// A checkpoint longer than 127 bytes takes a two-byte length (the
// encoder moves it up a byte once it knows), and one past 16,383 three.
func TestRecordEncoderLongCheckpoint(t *testing.T) {
	h, c := storedCheckpoint()
	var e RecordEncoder
	for _, n := range []int{100, 110, 127, 128, 200, 16_300, 16_400} {
		c.Name = string(bytes.Repeat([]byte{'w'}, n))
		want := marshalRecord(&h, c)
		got, err := e.Append([]byte("kept"), &h, c)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[4:], want) || string(got[:4]) != "kept" {
			t.Fatalf("name of %d bytes: encoded\n%x\nwant\n%x", n, got, want)
		}
	}
}

// FuzzRecordEncoderMatchesMarshal: any record — floats from any bits (−0,
// NaN), strings of any bytes and length — encodes as proto.Marshal
// encodes it, and a string that is not UTF-8 is reported as Marshal
// reports it.
func FuzzRecordEncoderMatchesMarshal(f *testing.F) {
	f.Add(uint64(4242), "x1z2", uint64(7), "n1", "", "walker", "nonhost/link-n2", uint32(0x80000000), uint32(0x7fc00000), int32(-5), uint8(3), uint64(11), true)
	f.Add(uint64(0), "", uint64(0), "", "gw", "", "", uint32(0), uint32(0), int32(0), uint8(0), uint64(0), false)
	f.Add(uint64(1), "\xff", uint64(1), "n", "g", "\xc3", "c", uint32(1), uint32(2), int32(1), uint8(200), uint64(1<<63), true)
	f.Fuzz(func(t *testing.T, id uint64, zone string, epoch uint64, node, gw, name, conn string,
		fa, fb uint32, health int32, plen uint8, lane uint64, withCP bool) {
		h := RecordHead{Player: id, Zone: zone, State: pb.PlayerState(epoch % 3), Epoch: epoch, Node: node,
			Conn: gw, UpdatedUnixMs: int64(id ^ epoch), Gateway: gw}
		var c *handoff.Checkpoint
		if withCP {
			c = &handoff.Checkpoint{Entity: id, Epoch: handoff.Epoch(epoch), LastApplied: epoch * 3, Health: health,
				Flags: fa, Name: name, Conn: conn, Extra: [4]uint32{fa, 0, fb, uint32(plen)}}
			c.Control.Pos = [3]float32{math.Float32frombits(fa), math.Float32frombits(fb), 0}
			c.Control.Vel = [3]float32{0, math.Float32frombits(fb), math.Float32frombits(fa ^ fb)}
			c.Control.Yaw = math.Float32frombits(fb)
			c.Control.PayloadLen = plen % (move.MaxPayload + 4)
			for i := range c.Control.Payload {
				c.Control.Payload[i] = byte(fa >> (i % 4 * 8))
			}
			c.Events.Gen = lane >> 3
			c.Events.Last[lane%handoff.EventLanes] = lane
		}
		rec := &pb.PlayerRecord{Player: h.Player, Zone: h.Zone, State: h.State, Epoch: h.Epoch, Node: h.Node, Conn: h.Conn,
			UpdatedUnixMs: h.UpdatedUnixMs, Gateway: h.Gateway}
		if c != nil {
			rec.Checkpoint = CheckpointToProto(c)
		}
		want, werr := proto.Marshal(rec)
		var e RecordEncoder
		got, err := e.Append(nil, &h, c)
		if (err == nil) != (werr == nil) {
			t.Fatalf("error %v, proto.Marshal's %v", err, werr)
		}
		if werr == nil && !bytes.Equal(got, want) {
			t.Fatalf("encoded\n%x\nwant\n%x", got, want)
		}
	})
}
