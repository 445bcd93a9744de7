package session

import (
	"unsafe"

	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// Where the memory a received datagram reads is, for a caller that handles
// several connections' datagrams in turn and wants the next one's lines on
// their way (a prefetch) while it handles this one: on a server with a
// thousand connections each of those lines is a miss, and read in turn
// through pointers each costs a memory latency. Nothing here reads or
// changes the state: only addresses are computed.

// A Span is n bytes at address P (0: none). An address, not a pointer:
// it keeps nothing alive and is only good as a hint.
type Span struct{ P, N uintptr }

// serverHotBytes is what a received datagram and the pump after it read of
// the Server: all but its last line (TestServerSendOnlyLine).
const serverHotBytes = 6 * 64

// HotSpan is the Server's own bytes a received datagram reads. Its
// pointers are what PartSpans reads: ask for these lines a datagram or
// more before calling that.
func (s *Server) HotSpan() (p, n uintptr) { return uintptr(unsafe.Pointer(s)), serverHotBytes }

// PartSpans are the bytes a received datagram reads of what the Server
// points to: the handshake session (replay window, keys), notify, the
// event sender and receiver, the control writer. It reads the Server's
// first line (HotSpan).
func (s *Server) PartSpans() [5]Span {
	e := &s.e
	return [5]Span{
		{uintptr(unsafe.Pointer(e.sess)), unsafe.Sizeof(handshake.Session{})},
		{uintptr(unsafe.Pointer(e.nc)), unsafe.Sizeof(notify.Conn{})},
		{uintptr(unsafe.Pointer(e.evs)), unsafe.Sizeof(event.Sender{})},
		{uintptr(unsafe.Pointer(e.evr)), 32}, // an empty event section reads its first 32 bytes
		{uintptr(unsafe.Pointer(s.cw)), unsafe.Sizeof(move.ControlWriter{})},
	}
}
