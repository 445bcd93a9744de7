package session

import (
	"unsafe"

	"github.com/ghostwire/ghostwire/replication/prefetch"
)

// PrefetchServer asks the CPU for the Server's lines, ahead of a pump or
// a datagram a while later; PrefetchParts then (a turn later: it reads
// those lines) for the objects it points to that every packet reads: the
// crypto session, the notify state, the ControlWriter and the ghost
// packets' and fates' rings' heads. Hints: neither waits.
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
	// The ghost packets in flight, whose head an ack's fates read
	// (processFates), and the ghost fates waiting, which a pump pops
	// (PopGhostFates): each a miss a datagram or a pump on a loaded node
	// (0.8 % of its samples each at 2,000 players).
	if r := &s.ghostPkts; r.size > 0 && int(r.head) < len(r.buf) {
		prefetch.Lines(unsafe.Pointer(&r.buf[r.head]), unsafe.Sizeof(r.buf[0]))
	}
	if f := s.ghostFates; len(f) > 0 {
		prefetch.Lines(unsafe.Pointer(unsafe.SliceData(f)), min(uintptr(len(f))*unsafe.Sizeof(f[0]), 128))
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
