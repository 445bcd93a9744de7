package session

// ForgetControlIdle marks s's ControlWriter as holding a full state
// (numCtlHeld), so the fates of its next Receive all go through the
// writer, as before the mirror.
func ForgetControlIdle(s *Server) { s.ev.set(numCtlHeld, true) }

// StaleControlIdle clears s's mirror of its ControlWriter's hold, as a
// Server that failed to refresh it after a Write would have it.
func StaleControlIdle(s *Server) { s.ev.set(numCtlHeld, false) }

// ControlHeld reports whether s mirrors its ControlWriter as holding a
// full state (numCtlHeld).
func ControlHeld(s *Server) bool { return s.ev.is(numCtlHeld) }
