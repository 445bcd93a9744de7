package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/proto/pbconv"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// A periodic checkpoint whose record is the one this node wrote last but
// for its time (an idle player) is not written again — counted in
// Unchanged, not in Checkpoints, the KV's revision where it was — and the
// record still holds that state. Anything else is written: a checkpoint
// that changed, a leaving player's (the record goes offline), one that is
// waited for (a handover's: its compare-and-set confirms the record is
// still this zone's), the first after a placement. Pipelined (as a node
// writes them) and written alone. On a real nats-server's KV.
func TestUnchangedCheckpointIsNotRewritten(t *testing.T) {
	for _, pipelined := range []bool{true, false} {
		name := "alone"
		if pipelined {
			name = "pipelined"
		}
		t.Run(name, func(t *testing.T) {
			nc := natsServer(t)
			js, _ := jetstream.New(nc)
			kv := &countingKV{KeyValue: playersBucket(t, js)}
			p := NewPlayers(kv, "n1", nil)
			t.Cleanup(p.Close)
			if pipelined {
				if err := p.Pipeline(context.Background(), nc); err != nil {
					t.Fatal(err)
				}
			}
			gw := func(string) string { return "gw" }
			rev := func() uint64 {
				e, err := kv.KeyValue.Get(context.Background(), PlayerKey(7))
				if err != nil {
					t.Fatal(err)
				}
				return e.Revision()
			}
			// periodic queues cp as a zone's second's checkpoint and waits
			// until it was written or found unchanged.
			periodic := func(cp handoff.Checkpoint) {
				t.Helper()
				n := p.Checkpoints.Load() + p.Unchanged.Load()
				p.Checkpoint("z", []handoff.Checkpoint{cp}, false, gw)
				waitFor(t, 5*time.Second, "the checkpoint", func() bool { return p.Checkpoints.Load()+p.Unchanged.Load() > n })
			}
			cp := handoff.Checkpoint{Entity: 7, Epoch: 1, Name: "bot-7", Conn: "c7", LastApplied: 40, Health: 900,
				Control: move.ControlState{Pos: [3]float32{10, 0, 20}}}
			p.Joined(7, "z", 1)
			waitFor(t, 5*time.Second, "the join", func() bool { return p.Written.Load() == 1 })

			periodic(cp) // the first after the placement: written
			if u := p.Unchanged.Load(); u != 0 {
				t.Fatalf("the first checkpoint after the join was taken as unchanged (%d)", u)
			}
			r0 := rev()
			for i := range 3 { // idle: the same state, at later times
				time.Sleep(2 * time.Millisecond) // a new updated_unix_ms, not an assertion
				periodic(cp)
				if u := p.Unchanged.Load(); u != uint64(i+1) {
					t.Fatalf("idle checkpoint %d: Unchanged %d, want %d", i+1, u, i+1)
				}
			}
			if r := rev(); r != r0 || p.Checkpoints.Load() != 1 {
				t.Fatalf("idle checkpoints rewrote the record: revision %d → %d, %d checkpoints written", r0, r, p.Checkpoints.Load())
			}
			if got := record(t, p, 7).GetCheckpoint(); got.GetLastApplied() != 40 || got.GetHealth() != 900 {
				t.Fatalf("the record's checkpoint %v, want the idle player's state", got)
			}

			cp.Health = 899 // any field: written
			periodic(cp)
			if r := rev(); r == r0 || p.Checkpoints.Load() != 2 || record(t, p, 7).GetCheckpoint().GetHealth() != 899 {
				t.Fatalf("a changed checkpoint was not written (revision %d, was %d)", r, r0)
			}
			r1 := rev()
			if err := p.CheckpointSync(context.Background(), "z", []handoff.Checkpoint{cp}, gw); err != nil {
				t.Fatal(err)
			}
			if r := rev(); r == r1 || p.Unchanged.Load() != 3 {
				t.Fatalf("a handover's checkpoint, unchanged, was not written (revision %d, was %d)", r, r1)
			}
			n := p.Checkpoints.Load()
			p.Checkpoint("z", []handoff.Checkpoint{cp}, true, gw)
			waitFor(t, 5*time.Second, "the leaving checkpoint", func() bool { return p.Checkpoints.Load() > n })
			if rec := record(t, p, 7); rec.GetState() != pb.PlayerState_PLAYER_STATE_OFFLINE || p.Unchanged.Load() != 3 {
				t.Fatalf("a leaving player's checkpoint, its state unchanged, left the record %v (Unchanged %d)", rec.GetState(), p.Unchanged.Load())
			}
		})
	}
}

// recordSum sums a record but for its time: two encodings that differ in
// updated_unix_ms alone sum the same; a change in any other field, the
// gateway after the time too, changes the sum; a record that does not end
// as the encoder ends one sums to 0 (never unchanged).
func TestRecordSumLeavesOutTheTimeOnly(t *testing.T) {
	p := NewPlayers(nil, "n1", nil)
	t.Cleanup(p.Close)
	cp := handoff.Checkpoint{Entity: 7, Epoch: 1, Name: "bot-7", Conn: "c7", LastApplied: 40, Health: 900,
		Control: move.ControlState{Pos: [3]float32{10, 0, 20}}}
	head := pbconv.RecordHead{Player: 7, Zone: "z", State: pb.PlayerState_PLAYER_STATE_ONLINE, Epoch: 1, Node: "n1",
		UpdatedUnixMs: 1_795_900_000_123, Gateway: "gw"}
	sum := func(h pbconv.RecordHead, c handoff.Checkpoint) uint64 {
		var enc pbconv.RecordEncoder
		b, err := enc.Append(nil, &h, &c)
		if err != nil {
			t.Fatal(err)
		}
		return p.recordSum(b, h.UpdatedUnixMs, h.Gateway)
	}
	base := sum(head, cp)
	if base == 0 {
		t.Fatal("a record's sum is 0 (unknown)")
	}
	later := head
	later.UpdatedUnixMs = 1 << 45 // a longer varint too
	if s := sum(later, cp); s != base {
		t.Errorf("the sum changed with the time alone: %x, %x", s, base)
	}
	for name, h := range map[string]func(*pbconv.RecordHead, *handoff.Checkpoint){
		"gateway":      func(h *pbconv.RecordHead, c *handoff.Checkpoint) { h.Gateway = "gx" },
		"no gateway":   func(h *pbconv.RecordHead, c *handoff.Checkpoint) { h.Gateway = "" },
		"state":        func(h *pbconv.RecordHead, c *handoff.Checkpoint) { h.State = pb.PlayerState_PLAYER_STATE_OFFLINE },
		"node":         func(h *pbconv.RecordHead, c *handoff.Checkpoint) { h.Node = "n2" },
		"position":     func(h *pbconv.RecordHead, c *handoff.Checkpoint) { c.Control.Pos[2] = 20.5 },
		"last applied": func(h *pbconv.RecordHead, c *handoff.Checkpoint) { c.LastApplied++ },
		"events":       func(h *pbconv.RecordHead, c *handoff.Checkpoint) { c.Events.Last[1] = 3 },
	} {
		hh, cc := head, cp
		h(&hh, &cc)
		if s := sum(hh, cc); s == base || s == 0 {
			t.Errorf("%s changed: sum %x, unchanged record's %x", name, s, base)
		}
	}
	var enc pbconv.RecordEncoder
	b, _ := enc.Append(nil, &head, &cp)
	if s := p.recordSum(b[:len(b)-3], head.UpdatedUnixMs, head.Gateway); s != 0 {
		t.Errorf("a record cut short sums to %x, want 0", s)
	}
}

// BenchmarkRecordSum: the sum of a load-test bot's checkpoint record
// (benchCheckpoint: ≈ 160 B), taken of every pipelined checkpoint to tell
// an unchanged one.
func BenchmarkRecordSum(b *testing.B) {
	p := NewPlayers(nil, "zoned-1", nil)
	b.Cleanup(p.Close)
	cp := benchCheckpoint(7)
	h := pbconv.RecordHead{Player: 7, Zone: "x0z0", State: pb.PlayerState_PLAYER_STATE_ONLINE, Epoch: 3, Node: "zoned-1",
		UpdatedUnixMs: time.Now().UnixMilli(), Gateway: "zoned-1"}
	var enc pbconv.RecordEncoder
	rec, err := enc.Append(nil, &h, &cp)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var s uint64
	for b.Loop() {
		s += p.recordSum(rec, h.UpdatedUnixMs, h.Gateway)
	}
	if s == 0 {
		b.Fatal("no sums")
	}
	b.ReportMetric(float64(len(rec)), "record-B")
}
