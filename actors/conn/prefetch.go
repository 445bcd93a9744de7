package conn

import (
	"unsafe"

	"github.com/ghostwire/ghostwire/actors/msg"
)

// A received datagram reads ≈ 22 cache lines of its connection's state —
// the Conn, its session.Server, the handshake session, notify, the event
// sender and receiver, the control writer, the datagram — and on a server
// with a thousand connections each one is a miss: by a player's next
// packet its state has left the cache. Read in turn, through pointers,
// they cost a memory latency each. The shard handles a round's datagrams
// one after the other and knows the next ones, so it asks for their lines
// ahead (prefetchRange), in three steps, each reading only pointers whose
// lines were asked for a datagram before: three datagrams ahead the
// Conn's hot lines; two ahead, through the Conn, the Server's lines and
// the datagram's; one ahead, through the Server, the objects it points to
// (session.Server.PartSpans). None of it changes what is computed: a
// prefetch is a hint.
const (
	warmConnAhead   = 3
	warmServerAhead = 2
	warmPartsAhead  = 1
)

// connHotBytes is the Conn's per-datagram part (TestConnLayout).
const connHotBytes = 160

// warmStart asks for the hot lines of the Conns of work[i+1:i+warmConnAhead]
// before the round's events from work[i] on are handled: warmAhead's first
// steps reach only the third datagram on.
func (s *shard) warmStart(i int) {
	for j := i + 1; j < min(i+warmConnAhead, len(s.work)); j++ {
		if _, ok := s.work[j].m.(*msg.Datagram); ok {
			prefetchRange(uintptr(unsafe.Pointer(s.work[j].c)), connHotBytes)
		}
	}
}

// warmAhead asks for the lines the datagrams after work[k] will read, each
// at its step (see above). Only datagrams: the other events are few.
func (s *shard) warmAhead(k int) {
	w := s.work
	if j := k + warmConnAhead; j < len(w) {
		if _, ok := w[j].m.(*msg.Datagram); ok {
			prefetchRange(uintptr(unsafe.Pointer(w[j].c)), connHotBytes)
		}
	}
	if j := k + warmServerAhead; j < len(w) {
		if d, ok := w[j].m.(*msg.Datagram); ok {
			if srv := w[j].c.srv; srv != nil {
				p, n := srv.HotSpan()
				prefetchRange(p, n)
			}
			prefetchRange(uintptr(unsafe.Pointer(d)), unsafe.Sizeof(*d))
			if len(d.Buf) > 0 {
				prefetchRange(uintptr(unsafe.Pointer(&d.Buf[0])), uintptr(min(d.N, len(d.Buf))))
			}
		}
	}
	if j := k + warmPartsAhead; j < len(w) {
		if _, ok := w[j].m.(*msg.Datagram); ok {
			if srv := w[j].c.srv; srv != nil {
				for _, sp := range srv.PartSpans() {
					if sp.P != 0 {
						prefetchRange(sp.P, sp.N)
					}
				}
			}
		}
	}
}
