package move

import "errors"

// StepFunc advances a control state by one move: the game's movement code,
// run by the client to predict and by the server to decide. It must be
// deterministic to the bit — same inputs, same output bits, on every
// platform — or every CRC mismatches. In Go that means: no map iteration
// order, no clock, no math functions whose results differ across platforms
// (math.Sin and friends may; Walk brings its own sine), and an explicit
// float32(…) or float64(…) conversion around every product that is then
// added, because the compiler may otherwise fuse x*y+z into one FMA
// instruction on some architectures (Go spec, "Arithmetic operators").
// dt is m's duration in seconds (m.Seconds()).
type StepFunc func(s ControlState, m Move, dt float32) ControlState

// Predictor is the client's prediction and reconciliation helper for its
// control object (003_28a462e3d9fd091c.txt ch8 § Client Move Prediction and
// Replay, Listing 8.3; checklist CTL-5). Predict applies each new move to the
// local state at once, so input feels immediate, and adds it to the Stream.
// When an authoritative state arrives (the server's state after move N), Apply
// rewinds to it and replays every move after N still unacknowledged, with the
// same step function; the replayed CRCs replace the stale ones in the Stream,
// so the server sees matching CRCs from then on.
//
// The Predictor keeps the predicted state after every move the Stream still
// holds, so a move the Stream dropped from a full window (the server will
// never apply it) is not replayed either.
//
// Create it with NewPredictor. Not safe for concurrent use; the client's
// game loop owns it.
type Predictor struct {
	s      *Stream
	step   StepFunc
	cur    ControlState
	states [MaxWindow]ControlState // states[seq % MaxWindow]: predicted state after move seq
	acked  uint64                  // newest ack processed
	offset [3]float32
	stats  PredictorStats
}

// NewPredictor returns a Predictor that adds moves to s and simulates them
// with step, starting from initial (the server's first full state replaces it).
func NewPredictor(s *Stream, step StepFunc, initial ControlState) (*Predictor, error) {
	if s == nil || step == nil {
		return nil, errors.New("move: NewPredictor needs a Stream and a StepFunc")
	}
	return &Predictor{s: s, step: step, cur: initial}, nil
}

// Current is the predicted state after the newest move.
func (p *Predictor) Current() ControlState { return p.cur }

// StateAt returns the predicted state after move seq, while the Stream still
// holds that move.
func (p *Predictor) StateAt(seq uint64) (ControlState, bool) {
	if _, ok := p.s.Move(seq); !ok {
		return ControlState{}, false
	}
	return p.states[seq%MaxWindow], true
}

// Offset is how far the last reconciliation moved the predicted position
// (old − new). A renderer may show the player at Current().Pos + a decaying
// fraction of it instead of snapping (CTL-5 smoothing).
func (p *Predictor) Offset() [3]float32 { return p.offset }

// Stats returns the counters.
func (p *Predictor) Stats() PredictorStats { return p.stats }

// Predict numbers m (m.Seq is overwritten with the Stream's next sequence),
// applies it to the current state, stamps the resulting state's CRC on it and
// adds it to the Stream. It returns the new predicted state. Errors:
// ErrInvalidMove (nothing changes).
func (p *Predictor) Predict(m Move) (ControlState, error) {
	m.Seq = p.s.NextSeq()
	if err := m.Validate(); err != nil {
		return p.cur, err
	}
	next := p.step(p.cur, m, m.Seconds())
	m.CRC = next.CRC()
	if err := p.s.Add(m); err != nil {
		return p.cur, err
	}
	p.states[m.Seq%MaxWindow] = next
	p.cur = next
	p.stats.Predicted++
	return next, nil
}

// Apply takes a decoded control section: it acknowledges u.Ack in the Stream
// and, when u carries a state, rewinds to it and replays the moves after
// u.Ack. It reports whether it reconciled. An update whose ack is older than
// one already processed (a reordered packet) is ignored: the moves it would
// need to replay are gone.
func (p *Predictor) Apply(u ControlUpdate) bool {
	if u.Ack < p.acked {
		p.stats.Stale++
		return false
	}
	p.acked = u.Ack
	p.s.Ack(u.Ack)
	if !u.HasState {
		return false
	}
	old := p.cur
	st := u.State
	for seq := p.s.lo + 1; seq <= p.s.last; seq++ {
		m := &p.s.ring[seq%MaxWindow]
		st = p.step(st, *m, m.Seconds())
		m.CRC = st.CRC()
		p.states[seq%MaxWindow] = st
		p.stats.Replayed++
	}
	p.cur = st
	for i := range p.offset {
		p.offset[i] = old.Pos[i] - st.Pos[i]
	}
	p.stats.Reconciled++
	return true
}

// Continue makes p go on from prev: its stream must have been continued
// from prev's (Stream.Continue). p takes prev's predicted state and the
// predicted state after each kept move, so an ack from the next server,
// in the same numbering, reconciles as one from the old would have.
func (p *Predictor) Continue(prev *Predictor) {
	p.cur, p.states, p.acked, p.offset = prev.cur, prev.states, prev.acked, [3]float32{}
}
