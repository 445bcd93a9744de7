package session

import (
	"unsafe"

	"github.com/ghostwire/ghostwire/replication/prefetch"
)

// PrefetchServer asks the CPU for the Server's lines, ahead of a pump or
// a datagram a while later; PrefetchParts then (a turn later: it reads
// those lines) for the objects it points to that every packet reads: the
// crypto session and the notify state. Hints: neither waits.
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
}

// PrefetchSealKey asks for the sending AEAD's key, a turn after
// PrefetchParts (it reads the crypto session's line), ahead of a packet's
// seal (handshake.Session.PrefetchSealKey says why).
func (s *Server) PrefetchSealKey() {
	if sess := s.e.sess; sess != nil {
		sess.PrefetchSealKey()
	}
}
