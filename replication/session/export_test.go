package session

import (
	"flag"
	"time"

	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
)

// genSeeds regenerates the committed fuzz seed corpora:
//
//	go test ./replication/session -run GenerateFuzzSeeds -gen-seeds
var genSeeds = flag.Bool("gen-seeds", false, "rewrite testdata/fuzz seed corpora")

// GenSeeds reports whether -gen-seeds was given (for the external tests).
func GenSeeds() bool { return *genSeeds }

// ContinueMovesFrom makes c continue the move stream s with its predictor
// p, as ContinueMoves does from another Client's (tests build a long
// stream without a connection).
func ContinueMovesFrom(c *Client, s *move.Stream, p *move.Predictor) {
	c.stream.Continue(s)
	c.pred.Continue(p)
}

// MovesLong reports whether c's move sections carry whole sequences.
func MovesLong(c *Client) bool { return c.stream.LongSeq() }

// ScratchSeq is the sequence number of the last header sc's receive
// buffers decoded (0: they were never used).
func ScratchSeq(sc *Scratch) uint64 { return sc.rx.h.Seq }

// NextDeadlineForRef is NextDeadlineFor as it was written before its
// connected case was folded in: NextDeadline, or, while a connected
// session's ghosts are pending, NextDeadline's case for content (the
// timeout, the keepalive and the data slot: Poll holds an owed ack with
// the ghosts), whatever the ghosts (checkDeadlines holds the method to it).
func NextDeadlineForRef(s *Server, now time.Duration, ghosts GhostWriter) time.Duration {
	if ghosts != nil && s.e.sess.State() == handshake.StateConnected && s.e.discLeft == 0 && !s.redirecting && ghosts.Pending() {
		return min(s.e.lastRecv+s.e.lim.timeout, s.e.lastSend+s.e.lim.keepAlive, s.dataSlot(now))
	}
	return s.NextDeadline(now)
}

// EmptyEvents returns what s counts of its client's empty event sections
// (readEvents): those not yet handed to its Receiver, how many sections
// on it reckons the Receiver's next idle trim, and the Receiver's own
// reckoning (event.Receiver.TrimIn), which has not seen the first.
// HasReceiver reports whether s made its event Receiver (at its
// client's first event).
func HasReceiver(s *Server) bool { return s.e.evr != nil }

// EmptyEventsHeld is EmptyEvents without the Receiver's reckoning (none
// before the client's first event).
func EmptyEventsHeld(s *Server) (quiet, until, _ int) {
	return int(s.ev.empty.quiet), int(s.ev.empty.until), 0
}

func EmptyEvents(s *Server) (quiet, until, trimIn int) {
	return int(s.ev.empty.quiet), int(s.ev.empty.until), s.e.evr.TrimIn()
}

// ForgetEventsIdle clears what s knows of its event Sender's idleness
// (numEvsIdle), so the fates of its next Receive all go through the
// Sender, as before delivered fates skipped an idle one.
func ForgetEventsIdle(s *Server) { s.ev.set(numEvsIdle, false) }

// EventsIdle reports whether s holds its Sender idle (numEvsIdle).
func EventsIdle(s *Server) bool { return s.ev.is(numEvsIdle) }

// SessionStates returns the State s keeps of its handshake Session
// (endpoint.state) and the Session's own.
func SessionStates(s *Server) (kept, own handshake.State) { return s.e.state, s.e.sess.State() }
