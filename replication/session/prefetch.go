package session

import (
	"unsafe"

	"github.com/ghostwire/ghostwire/replication/prefetch"
)

// PrefetchServer asks the CPU for the Server's lines, ahead of a pump or
// a datagram a while later; PrefetchParts then (a turn later: it reads
// those lines) for the objects it points to that every packet reads: the
// crypto session, the notify state and the ControlWriter. Hints: neither
// waits.
func (s *Server) PrefetchServer() {
	prefetch.Lines(unsafe.Pointer(s), unsafe.Sizeof(*s))
}

// PrefetchParts: see PrefetchServer.
func (s *Server) PrefetchParts() {
	if sess := s.e.sess; sess != nil {
		prefetch.Lines(unsafe.Pointer(sess), min(unsafe.Sizeof(*sess), 256))
	}
	if nc := s.e.nc; nc != nil {
		prefetch.Lines(unsafe.Pointer(nc), min(unsafe.Sizeof(*nc), 256))
	}
	// The ControlWriter's one line: a pump's hasContent and a data
	// packet's control section read it first (1.8 % of a loaded node's
	// samples, those two reads).
	if cw := s.cw; cw != nil {
		prefetch.Lines(unsafe.Pointer(cw), unsafe.Sizeof(*cw))
	}
}

// PrefetchSealKey asks for the sending AEAD's key, a turn after
// PrefetchParts (it reads the crypto session's line), ahead of a packet's
// seal (handshake.Session.PrefetchSealKey says why).
func (s *Server) PrefetchSealKey() {
	if sess := s.e.sess; sess != nil {
		sess.PrefetchSealKey()
	}
}
