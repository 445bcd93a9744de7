package move

import (
	"fmt"
	"testing"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/netsim"
)

// fullStream returns a Stream holding 32 unacknowledged moves of typical
// input (running, turning in bursts, the odd jump).
func fullStream(tb testing.TB) *Stream { return streamOf(tb, 32) }

// sectionOf returns the move section a Stream of n unacknowledged moves
// writes (what the read benchmarks decode).
func sectionOf(tb testing.TB, n int) []byte {
	w := bitstream.NewWriter(make([]byte, 1200))
	streamOf(tb, n).Write(w)
	return w.Bytes()
}

// streamOf returns a Stream holding n unacknowledged moves of typical input.
func streamOf(tb testing.TB, n int) *Stream {
	s, err := NewStream(DefaultConfig())
	if err != nil {
		tb.Fatal(err)
	}
	gen := newInputGen(7)
	for range n {
		m := gen.next(32)
		m.Seq, m.CRC = s.NextSeq(), 0x12345678
		if err := s.Add(m); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

// BenchmarkMoveWrite32 writes a section of 32 unacknowledged moves.
func BenchmarkMoveWrite32(b *testing.B) {
	s := fullStream(b)
	var buf [1200]byte
	var w bitstream.Writer
	b.ReportAllocs()
	for b.Loop() {
		w.Reset(buf[:])
		if n, err := s.Write(&w); n != 32 || err != nil {
			b.Fatal(n, err)
		}
	}
	b.ReportMetric(float64(w.BitLen()), "bits/section")
}

// BenchmarkMoveRead32 decodes a section of 32 moves and applies all of them.
func BenchmarkMoveRead32(b *testing.B) {
	pkt := sectionOf(b, 32)
	var (
		ap  Applier
		r   bitstream.Reader
		sum uint64
	)
	apply := func(m Move) { sum += uint64(m.Yaw) }
	b.ReportAllocs()
	for b.Loop() {
		ap.Reset(0)
		r.Reset(pkt)
		if err := ap.Read(&r, apply); err != nil {
			b.Fatal(err)
		}
	}
	if ap.LastApplied() != 32 || sum == 0 {
		b.Fatal("moves not applied")
	}
}

// BenchmarkMoveStreamTypical runs a 30 Hz client against a server for 60 s
// of virtual time, 20 packets/s each way, 50 ms one-way latency, and reports
// the average size of the move section (client → server) and of the control
// section (server → client) per packet. The harness's bookkeeping allocates;
// the package does not (TestSteadyStateAllocatesNothing).
func BenchmarkMoveStreamTypical(b *testing.B) {
	for _, loss := range []float64{0, 0.2} {
		b.Run(fmt.Sprintf("loss=%g", loss), func(b *testing.B) {
			link := func(seed uint64) netsim.Config {
				return netsim.Config{Loss: loss, Latency: 50 * ms, Seed: seed}
			}
			var res simResult
			b.ReportAllocs()
			for b.Loop() {
				res = runSim(b, simConfig{up: link(1), down: link(2), control: DefaultControlConfig(),
					moves: 60 * 30, seed: 3})
			}
			b.ReportMetric(float64(res.upBits)/float64(res.upPkts), "move-bits/pkt")
			b.ReportMetric(float64(res.stream.MovesWritten)/float64(res.stream.Sections), "moves/pkt")
			b.ReportMetric(float64(res.downBits)/float64(res.downPkts), "ctl-bits/pkt")
			b.ReportMetric(float64(res.upBits)/float64(res.upPkts)*20/1000, "move-kbps")
		})
	}
}

// BenchmarkMoveReadRedundant decodes the section a server usually gets: one
// new move after the client's unacknowledged ones (3 here: an ack a zone
// tick or two behind at 30 Hz input), the redundant copies checked and
// skipped, the new one applied.
func BenchmarkMoveReadRedundant(b *testing.B) {
	pkt := sectionOf(b, 4)
	var (
		ap      Applier
		r       bitstream.Reader
		scratch [MaxWindow]Move
		sum     uint64
	)
	apply := func(m Move) { sum += uint64(m.Yaw) + 1 }
	b.ReportAllocs()
	for b.Loop() {
		ap.Reset(3)
		// As a server reads a payload: 8 bytes readable past it
		// (session's resetPayload), so reads near its end stay on the
		// reader's fast path.
		r.ResetBits(pkt[:len(pkt)+8], 8*len(pkt)) // sectionOf leaves the room
		if err := ap.ReadInto(&r, &scratch, apply); err != nil {
			b.Fatal(err)
		}
	}
	if ap.LastApplied() != 4 || sum == 0 || ap.Stats().Duplicates == 0 {
		b.Fatal("the new move not applied, or no copy skipped")
	}
}

// BenchmarkControlStateCRC is one ControlState.CRC of a walking player's
// state (no payload, what move.Walk keeps): a server takes one a player a
// zone tick, a bot's predictor one a replayed move.
func BenchmarkControlStateCRC(b *testing.B) {
	var st [16]ControlState
	for i := range st {
		st[i] = Walk(ControlState{Pos: [3]float32{float32(i) * 3.5, 0, -20}}, Move{Dt: 32, Forward: 127, Yaw: uint16(i * 700)}, 1/30.0)
	}
	var sum uint32
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		sum += st[i&15].CRC()
		i++
	}
	if sum == 1 {
		b.Log(sum)
	}
}
