package move

import (
	"errors"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// ctlOp is one step of a ControlWriter script.
type ctlOp struct {
	at       time.Duration
	op       string // "write", "match", "mismatch", "delivered", "dropped", "force"
	pkt      uint64 // write: packet number; fates: the packet
	wantFull bool   // write: whether the state must go out
}

func TestControlWriterPolicy(t *testing.T) {
	cfg := ControlConfig{Period: time.Second, HoldTimeout: 500 * ms}
	tests := []struct {
		name   string
		cfg    ControlConfig
		script []ctlOp
		stats  ControlStats
	}{
		{name: "first section carries the state, then only acks", cfg: cfg, script: []ctlOp{
			{at: 0, op: "write", pkt: 1, wantFull: true},
			{at: 50 * ms, op: "write", pkt: 2},
			{at: 60 * ms, op: "match"},
			{at: 100 * ms, op: "write", pkt: 3},
		}, stats: ControlStats{Sections: 3, Full: 1, Initial: 1, Checks: 1}},
		{name: "mismatch → correction; reports held until its fate", cfg: cfg, script: []ctlOp{
			{at: 0, op: "write", pkt: 1, wantFull: true},
			{at: 10 * ms, op: "delivered", pkt: 1},
			{at: 20 * ms, op: "mismatch"},
			{at: 50 * ms, op: "write", pkt: 2, wantFull: true},
			{at: 60 * ms, op: "mismatch"}, // predicted before the client saw packet 2: held
			{at: 100 * ms, op: "write", pkt: 3},
			{at: 150 * ms, op: "delivered", pkt: 2},
			{at: 160 * ms, op: "write", pkt: 4},
			{at: 170 * ms, op: "mismatch"}, // a new divergence
			{at: 200 * ms, op: "write", pkt: 5, wantFull: true},
		}, stats: ControlStats{Sections: 5, Full: 3, Initial: 1, Corrections: 2, Checks: 3, Mismatches: 3, Held: 1}},
		{name: "a dropped correction is resent", cfg: cfg, script: []ctlOp{
			{at: 0, op: "write", pkt: 1, wantFull: true},
			{at: 40 * ms, op: "dropped", pkt: 1},
			{at: 50 * ms, op: "write", pkt: 2, wantFull: true},
			{at: 100 * ms, op: "write", pkt: 3},
			{at: 140 * ms, op: "delivered", pkt: 2},
			{at: 150 * ms, op: "write", pkt: 4},
		}, stats: ControlStats{Sections: 4, Full: 2, Initial: 1, Corrections: 1}},
		{name: "a missed fate counts as dropped", cfg: cfg, script: []ctlOp{
			{at: 0, op: "write", pkt: 7, wantFull: true},
			{at: 40 * ms, op: "delivered", pkt: 6}, // older: ignored
			{at: 45 * ms, op: "write", pkt: 8},
			{at: 50 * ms, op: "delivered", pkt: 8}, // 7's fate skipped
			{at: 60 * ms, op: "write", pkt: 9, wantFull: true},
		}, stats: ControlStats{Sections: 3, Full: 2, Initial: 1, Corrections: 1}},
		{name: "hold ends after HoldTimeout without fates; held reports are not replayed", cfg: cfg, script: []ctlOp{
			{at: 0, op: "write", wantFull: true},
			{at: 100 * ms, op: "mismatch"},
			{at: 450 * ms, op: "write"},
			{at: 500 * ms, op: "write"},
			{at: 510 * ms, op: "mismatch"},
			{at: 550 * ms, op: "write", wantFull: true},
		}, stats: ControlStats{Sections: 4, Full: 2, Initial: 1, Corrections: 1, Checks: 2, Mismatches: 2, Held: 1}},
		{name: "zero HoldTimeout waits for the fate", cfg: ControlConfig{}, script: []ctlOp{
			{at: 0, op: "write", pkt: 1, wantFull: true},
			{at: time.Hour, op: "mismatch"},
			{at: time.Hour, op: "write", pkt: 2},
			{at: time.Hour, op: "dropped", pkt: 1},
			{at: time.Hour, op: "write", pkt: 3, wantFull: true},
		}, stats: ControlStats{Sections: 3, Full: 2, Initial: 1, Corrections: 1, Checks: 1, Mismatches: 1, Held: 1}},
		{name: "periodic refresh, which opens no hold", cfg: cfg, script: []ctlOp{
			{at: 0, op: "write", pkt: 1, wantFull: true},
			{at: 20 * ms, op: "delivered", pkt: 1},
			{at: 999 * ms, op: "write", pkt: 2},
			{at: 1000 * ms, op: "write", pkt: 3, wantFull: true},
			{at: 1010 * ms, op: "mismatch"}, // not held: answered at once
			{at: 1050 * ms, op: "write", pkt: 4, wantFull: true},
			{at: 1100 * ms, op: "write", pkt: 5},
			{at: 2049 * ms, op: "write", pkt: 6},
			{at: 2050 * ms, op: "write", pkt: 7, wantFull: true},
		}, stats: ControlStats{Sections: 7, Full: 4, Initial: 1, Corrections: 1, Periodic: 2, Checks: 1, Mismatches: 1}},
		{name: "no refresh with Period 0", cfg: ControlConfig{}, script: []ctlOp{
			{at: 0, op: "write", pkt: 1, wantFull: true},
			{at: time.Hour, op: "write", pkt: 2},
		}, stats: ControlStats{Sections: 2, Full: 1, Initial: 1}},
		{name: "Force skips the CRC round trip and the hold", cfg: cfg, script: []ctlOp{
			{at: 0, op: "write", pkt: 1, wantFull: true},
			{at: 10 * ms, op: "force"},
			{at: 50 * ms, op: "write", pkt: 2, wantFull: true},
		}, stats: ControlStats{Sections: 2, Full: 2, Initial: 1, Forced: 1}},
	}
	// Each script runs twice: with Write alone, and with AckOnly first and
	// Write only when it declines (a server's usual packet): the same
	// sections, bit for bit, and the same counts.
	for _, tc := range tests {
		for _, fused := range []bool{false, true} {
			name := tc.name
			if fused {
				name += " (AckOnly first)"
			}
			t.Run(name, func(t *testing.T) {
				c, err := NewControlWriter(tc.cfg)
				if err != nil {
					t.Fatal(err)
				}
				state := ControlState{Pos: [3]float32{1, 2, 3}}
				for i, op := range tc.script {
					switch op.op {
					case "write":
						w := bitstream.NewWriter(make([]byte, 64))
						var full bool
						if fused {
							if v, ok := c.AckOnly(op.at, 10); ok {
								err = w.WriteBits(v, AckOnlyBits)
							}
						}
						if w.BitLen() == 0 {
							full, err = c.Write(w, op.pkt, op.at, 10, &state)
						}
						if err != nil {
							t.Fatalf("step %d: %v", i, err)
						}
						if full != op.wantFull {
							t.Fatalf("step %d (t=%v): full = %v, want %v", i, op.at, full, op.wantFull)
						}
						u, err := ReadControl(bitstream.NewReader(w.Bytes()), 12)
						if err != nil || u.Ack != 10 || u.HasState != full || (full && u.State != state) {
							t.Fatalf("step %d: decoded %+v, %v", i, u, err)
						}
					case "match", "mismatch":
						crc := state.CRC()
						if op.op == "mismatch" {
							crc++
						}
						if got := c.Check(Move{Seq: 10, CRC: crc, HasCRC: true}, &state); got != (op.op == "match") {
							t.Fatalf("step %d: Check = %v", i, got)
						}
					case "delivered", "dropped":
						c.OnFate(notify.Fate{Seq: op.pkt, Delivered: op.op == "delivered"})
					case "force":
						c.Force()
					}
				}
				if got := c.Stats(); got != tc.stats {
					t.Fatalf("stats\n got %+v\nwant %+v", got, tc.stats)
				}
			})
		}
	}
}

func TestControlWriterIgnoresMovesWithoutCRC(t *testing.T) {
	c, _ := NewControlWriter(DefaultControlConfig())
	if !c.Check(Move{CRC: 123}, &ControlState{}) || c.Stats().Checks != 0 {
		t.Fatal("a move without HasCRC was compared")
	}
}

// TestControlWriterLayout: a ControlWriter stays in the 64-byte size class
// (80 with the hold's start apart from lastFull and Full counted apart
// from its causes; 96 with its config copied in and Initial counted apart
// from anyFull), an Applier in 48 bytes (56 with Malformed and Lost in it).
func TestControlWriterLayout(t *testing.T) {
	if n := unsafe.Sizeof(ControlWriter{}); n > 64 {
		t.Errorf("ControlWriter is %d bytes, over the 64-byte size class", n)
	}
	if n := unsafe.Sizeof(Applier{}); n > 48 {
		t.Errorf("Applier is %d bytes, over 48", n)
	}
}

// TestControlWriterBudget: a deferred state waits for room, counted; the
// first full state to go is the Initial one (0 before it).
func TestControlWriterBudget(t *testing.T) {
	c, _ := NewControlWriter(DefaultControlConfig())
	state := ControlState{PayloadLen: 4, Payload: [MaxPayload]byte{1, 2, 3, 4}}
	// Room for the ack but not the state: ack only, state still due.
	w := bitstream.NewWriter(make([]byte, 8))
	full, err := c.Write(w, 1, 0, 3, &state)
	if err != nil || full || w.BitLen() != controlBaseBits || !c.Pending() || c.Stats().Deferred != 1 || c.Stats().Initial != 0 {
		t.Fatalf("small budget: full %v err %v bits %d pending %v stats %+v", full, err, w.BitLen(), c.Pending(), c.Stats())
	}
	// No room at all: error, nothing written.
	w = bitstream.NewWriter(make([]byte, 2))
	if _, err := c.Write(w, 2, 0, 3, &state); !errors.Is(err, bitstream.ErrOverflow) || w.BitLen() != 0 || c.Stats().Sections != 1 || c.Stats().Deferred != 1 {
		t.Fatalf("tiny budget: err %v, %d bits, stats %+v", err, w.BitLen(), c.Stats())
	}
	// Enough room: the deferred state goes out.
	w = bitstream.NewWriter(make([]byte, 64))
	if full, err := c.Write(w, 3, 0, 3, &state); !full || err != nil || c.Stats().Initial != 1 {
		t.Fatalf("full budget: full %v err %v stats %+v", full, err, c.Stats())
	}
	// A broken state is refused, not sent.
	c.Force()
	bad := ControlState{Yaw: float32(nan())}
	if _, err := c.Write(bitstream.NewWriter(make([]byte, 64)), 4, 0, 3, &bad); !errors.Is(err, ErrInvalidState) {
		t.Fatalf("NaN state: %v", err)
	}
	if _, err := c.Write(bitstream.NewWriter(make([]byte, 64)), 4, 0, 3, nil); !errors.Is(err, ErrInvalidState) {
		t.Fatalf("nil state: %v", err)
	}
	if _, err := NewControlWriter(ControlConfig{Period: -1}); err == nil {
		t.Fatal("NewControlWriter accepted a negative period")
	}
}

// TestControlWriterCorrectedFootprint: a ControlWriter that sent a
// correction keeps its 64 bytes, its counters in them (88 B with the
// corrections' counters made apart on the first, 104 with the writer at
// 80; it kept a whole ControlStats, 80 more, when nearly every server
// connection makes them).
// A size check, not a timing one.
func TestControlWriterCorrectedFootprint(t *testing.T) {
	// 20,000 writers: a few KB of the runtime's own heap moving in the
	// window (a timer, a pool) is then a fraction of a byte a writer, not
	// the 2 B over the bound it read once under -race at 2,000.
	const n = 20000
	keep := make([]*ControlWriter, n)
	state := ControlState{}
	buf := make([]byte, 64)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range keep {
		c, err := NewControlWriter(DefaultControlConfig())
		if err != nil {
			t.Fatal(err)
		}
		for pkt := uint64(1); pkt <= 2; pkt++ { // the initial state, then a forced one
			if pkt == 2 {
				c.Force()
			}
			if _, err := c.Write(bitstream.NewWriter(buf), pkt, 0, 0, &state); err != nil {
				t.Fatal(err)
			}
		}
		keep[i] = c
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	if st := keep[0].Stats(); st.Forced != 1 {
		t.Fatalf("stats %+v, want one forced state", st)
	}
	per := int64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("ControlWriter after a correction: %d B", per)
	if per > 64 {
		t.Fatalf("a corrected ControlWriter keeps %d B, want ≤ 64", per)
	}
}

// TestMoveSize keeps a Move at 24 bytes: in wire order (Dt, Forward and
// Strafe before Yaw; Buttons before CRC) its padding made it 32, and a
// zone holds room for a few of every player's moves (handoff.MoveQueue)
// besides the connections' batches (msg.Input).
func TestMoveSize(t *testing.T) {
	if n := unsafe.Sizeof(Move{}); n > 24 {
		t.Errorf("Move is %d bytes, want ≤ 24", n)
	}
}
