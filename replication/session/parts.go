package session

// parts are a Server's flags that stand for its event Sender and its
// ControlWriter in the next-deadline question (NextDeadline,
// NextDeadlineFor): whether either has something to send. Each is kept
// where the object changes — every change to them goes through the Server
// (a send, SetControl, ForceControl, a fate, a data packet's write), which
// has the object in the cache then — so the pump after a datagram, which
// asks for the next deadline and most often sends nothing, reads a flag in
// the Server's line instead of two objects that left the cache since the
// connection's previous send (≈ 1 miss each a datagram at 1,000 players).
// Poll still asks the objects (hasContent): it builds from them.
type parts uint8

const (
	// tickSent: a packet that carried a tick left (at lastTick).
	tickSent parts = 1 << iota
	// partEvents: the Sender has events to send or redundant copies to
	// repeat (HasPending, HasRedundant).
	partEvents
	// partControl: the ControlWriter has a state to send (Pending).
	partControl
)

// syncEvents sets partEvents from the Sender after a change to it. A
// Server's Sender never holds a staggered send (it offers none), the one
// part of HasPending that depends on the time: any time gives its answer.
func (s *Server) syncEvents() {
	if s.e.evs.HasPending(maxDuration) || s.e.evs.HasRedundant() {
		s.parts |= partEvents
	} else {
		s.parts &^= partEvents
	}
}

// syncControl sets partControl from the ControlWriter after a change to it.
func (s *Server) syncControl() {
	if s.cw.Pending() {
		s.parts |= partControl
	} else {
		s.parts &^= partControl
	}
}

// contentSoon is hasContent from the parts' flags: the same answer
// (TestPartsFollowTheirObjects), without reading the Sender or the
// ControlWriter.
func (s *Server) contentSoon() bool {
	return s.parts&partEvents != 0 || s.ev.reportNew() ||
		(s.hasControl && (s.parts&partControl != 0 || !s.ctlSentAny || uint32(s.ctlApplied) != s.ctlSent || s.ackOwed))
}
