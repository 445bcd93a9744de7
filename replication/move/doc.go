// Package move carries a player's input to the server and the server's
// verdict back: move streams, the control-object CRC check, and client-side
// prediction with reconciliation (Torque's "Hifi updates", seed
// 004_4e2ce9d4ddec9dee.txt; 003_28a462e3d9fd091c.txt ch8; checklist §9
// CTL-1…CTL-5).
//
// # Client → server: the move stream
//
// The client samples its input at a fixed rate (default 30 Hz) into Moves
// numbered 1, 2, 3, … A Stream keeps every move the server has not
// acknowledged (up to 32) and every packet carries all of them, oldest first,
// the first in full (71 bits) and each later one as a delta against its
// predecessor (1 bit when the input did not change), plus the CRC of the
// client's predicted state after the newest one. A lost packet therefore
// loses nothing: the next one repeats its moves. The server's Applier applies
// each move exactly once, in order, skipping the copies it has seen.
//
// # Server → client: the control section
//
// Each server packet acknowledges the newest applied move (16 bits + 1). The
// ControlWriter adds the full-precision ControlState only when the client's
// CRC disagrees with the server's state after that move, when a full state was
// lost, on Force, at start, and once per Period. The client's Predictor then
// rewinds to that state and replays the moves the server has not applied yet.
// With a deterministic StepFunc (Walk is one) nothing but real surprises
// (collisions, teleports) ever causes a correction.
//
// # Walkthrough
//
//	// Client
//	s, _ := move.NewStream(move.DefaultConfig())
//	pred, _ := move.NewPredictor(s, move.Walk, move.ControlState{})
//	for s.Due(now) { // every frame
//		pred.Predict(move.Move{Dt: s.Config().Dt(), Forward: move.Axis(stickY), Yaw: move.YawFromRadians(look)})
//	}
//	n, err := s.Write(&w)                      // into each outgoing packet
//	u, err := move.ReadControl(&r, s.Newest()) // from each incoming packet
//	pred.Apply(u)                              // ack, and rewind+replay if u.HasState
//
//	// Server, per connection
//	var ap move.Applier
//	cw, _ := move.NewControlWriter(move.DefaultControlConfig())
//	err := ap.Read(&r, func(m move.Move) {
//		state = move.Walk(state, m, m.Seconds()) // validate speed etc. here
//		cw.Check(m, &state)                      // compares the CRC the newest move carries
//	})
//	cw.OnFate(f)                                          // for each notify fate
//	full, err := cw.Write(&w, pktSeq, now, ap.LastApplied(), &state)
//
// docs/protocol.md (fragment docs/protocol.md §5) specifies both
// sections bit by bit. Everything here is pure: no clock (time is passed in),
// no goroutines, no allocation per packet.
package move
