package notify

import (
	"unsafe"

	"github.com/ghostwire/ghostwire/replication/prefetch"
)

// PrefetchAccept asks the CPU for what AcceptHeader(h) will read beyond
// the Conn itself: the word of the receive ring that notes h's sequence,
// and the records of ours that its ack resolves (the one it names newest
// and the oldest still pending: a few in flight, one or two lines). Both
// rings are allocations of their own that a loaded node's next packet
// finds in memory. Call it between ReadHeaderInto and AcceptHeader, ahead
// of the payload's decryption, which hides the wait. A hint: it changes
// nothing, and reads only in-range elements whatever h holds.
func (c *Conn) PrefetchAccept(h *Header) {
	if len(c.rxBits) > 0 {
		prefetch.Lines(unsafe.Pointer(&c.rxBits[(h.Seq&c.rxMask())>>6]), 8)
	}
	if h.hasAck && len(c.recs) > 0 {
		m := c.recMask()
		prefetch.Lines(unsafe.Pointer(&c.recs[h.ackL&m]), unsafe.Sizeof(record{}))
		prefetch.Lines(unsafe.Pointer(&c.recs[uint64(c.firstPendingLo)&m]), unsafe.Sizeof(record{}))
	}
}
