package move

import (
	"testing"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// TestSteadyStateAllocatesNothing: the per-packet and per-move paths of both
// ends allocate nothing.
func TestSteadyStateAllocatesNothing(t *testing.T) {
	s, p := newTestPredictor(t, 32)
	gen := newInputGen(1)
	for range 32 {
		p.Predict(gen.next(32))
	}
	var buf [1200]byte
	var w bitstream.Writer
	var r bitstream.Reader
	w.Reset(buf[:])
	s.Write(&w)
	pkt := append([]byte(nil), w.Bytes()...)
	var ap Applier
	cw, _ := NewControlWriter(DefaultControlConfig())
	var server ControlState
	apply := func(m Move) {
		server = Walk(server, m, m.Seconds())
		cw.Check(m, &server)
	}
	var ctl [64]byte
	seq := uint64(0)
	tests := []struct {
		name string
		fn   func()
	}{
		{"Stream.Write of 32 moves", func() { w.Reset(buf[:]); s.Write(&w) }},
		{"Applier.Read of 32 moves", func() { ap.Reset(0); r.Reset(pkt); ap.Read(&r, apply) }},
		{"Predictor.Predict", func() { s.Ack(s.Newest() - 31); p.Predict(gen.next(32)) }},
		{"Predictor.Apply with replay", func() {
			p.Apply(ControlUpdate{Ack: s.Newest() - 20, HasState: true, State: server})
			p.Predict(gen.next(32))
		}},
		{"ControlWriter.Write and OnFate", func() {
			seq++
			w.Reset(ctl[:])
			cw.Force()
			cw.Write(&w, seq, 0, 1, &server)
			cw.OnFate(notify.Fate{Seq: seq, Delivered: true})
		}},
		{"ReadControl", func() { r.Reset(ctl[:]); ReadControl(&r, 5) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if a := testing.AllocsPerRun(100, tc.fn); a != 0 {
				t.Fatalf("%v allocs per call, want 0", a)
			}
		})
	}
}
