package move

import (
	"errors"
	"testing"
)

func newTestPredictor(t *testing.T, window int) (*Stream, *Predictor) {
	t.Helper()
	s, err := NewStream(Config{InputRate: 30, Window: window})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPredictor(s, Walk, ControlState{})
	if err != nil {
		t.Fatal(err)
	}
	return s, p
}

func TestPredictorReconcile(t *testing.T) {
	s, p := newTestPredictor(t, 32)
	moves := []Move{
		{Dt: 32, Forward: 127}, {Dt: 32, Forward: 127, Yaw: 4000}, {Dt: 32, Strafe: 127, Yaw: 4000},
		{Dt: 32, Strafe: -60, Buttons: ButtonJump}, {Dt: 32, Forward: -127, Yaw: 60000},
	}
	for _, m := range moves {
		if _, err := p.Predict(m); err != nil {
			t.Fatal(err)
		}
	}
	before := p.Current()
	// The server says: after move 2 the player was somewhere else (a push).
	auth := ControlState{Pos: [3]float32{10, 0, -4}, Vel: [3]float32{1, 0, 2}, Yaw: 0.5}
	if !p.Apply(ControlUpdate{Ack: 2, HasState: true, State: auth}) {
		t.Fatal("Apply with a state did not reconcile")
	}
	// Expected: moves 3..5 replayed on top of auth.
	want := auth
	for i, m := range moves[2:] {
		want = Walk(want, m, m.Seconds())
		got, ok := p.StateAt(uint64(i + 3))
		if !ok || got != want {
			t.Fatalf("state after move %d = %+v, want %+v", i+3, got, want)
		}
		if sm, _ := s.Move(uint64(i + 3)); sm.CRC != want.CRC() {
			t.Fatalf("stream CRC of move %d not refreshed", i+3)
		}
	}
	if p.Current() != want {
		t.Fatalf("current %+v, want %+v", p.Current(), want)
	}
	if s.Oldest() != 3 || s.Len() != 3 {
		t.Fatalf("stream holds %d moves from %d, want 3 from 3", s.Len(), s.Oldest())
	}
	for i := range 3 {
		if off := p.Offset()[i]; off != before.Pos[i]-want.Pos[i] {
			t.Fatalf("offset[%d] = %v, want %v", i, off, before.Pos[i]-want.Pos[i])
		}
	}
	if st := p.Stats(); st.Predicted != 5 || st.Reconciled != 1 || st.Replayed != 3 {
		t.Fatalf("stats %+v", st)
	}

	// An older update (reordered packet) is ignored.
	if p.Apply(ControlUpdate{Ack: 1, HasState: true, State: ControlState{}}) || p.Current() != want || p.Stats().Stale != 1 {
		t.Fatal("a stale update changed the prediction")
	}
	// An ack without state only releases moves.
	if p.Apply(ControlUpdate{Ack: 4}) || p.Current() != want || s.Oldest() != 5 {
		t.Fatalf("ack-only update: current changed or oldest %d", s.Oldest())
	}
	if _, ok := p.StateAt(4); ok {
		t.Fatal("state of an acknowledged move still available")
	}
}

func TestPredictorSkipsDroppedMoves(t *testing.T) {
	s, p := newTestPredictor(t, 2)
	for i := 0; i < 5; i++ {
		p.Predict(Move{Dt: 32, Forward: 127, Yaw: uint16(1000 * i)})
	}
	// The window kept moves 4 and 5; the server never saw 1..3 and says it
	// applied nothing (ack 0), sending its state.
	auth := ControlState{Pos: [3]float32{3, 0, 3}}
	p.Apply(ControlUpdate{Ack: 0, HasState: true, State: auth})
	want := auth
	for seq := uint64(4); seq <= 5; seq++ {
		m, _ := s.Move(seq)
		want = Walk(want, m, m.Seconds())
	}
	if p.Current() != want || p.Stats().Replayed != 2 {
		t.Fatalf("replayed %d moves to %+v, want 2 moves to %+v", p.Stats().Replayed, p.Current(), want)
	}
}

func TestPredictorRejects(t *testing.T) {
	s, p := newTestPredictor(t, 32)
	if _, err := p.Predict(Move{Forward: -128}); !errors.Is(err, ErrInvalidMove) {
		t.Fatalf("Predict(forward −128) = %v", err)
	}
	if s.Len() != 0 || p.Stats().Predicted != 0 || p.Current() != (ControlState{}) {
		t.Fatal("a refused move changed the predictor")
	}
	if _, err := NewPredictor(nil, Walk, ControlState{}); err == nil {
		t.Fatal("NewPredictor accepted a nil Stream")
	}
	if _, err := NewPredictor(s, nil, ControlState{}); err == nil {
		t.Fatal("NewPredictor accepted a nil StepFunc")
	}
}
