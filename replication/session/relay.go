package session

import (
	"fmt"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// ErrRelaySeq: GhostRelay.Offer got a sequence number not above the last one.
var ErrRelaySeq = fmt.Errorf("session: ghost section sequence not increasing")

// GhostRelay carries ghost sections that another owner packed — a ghost
// manager actor holding the connection's ghost.Table — into this
// connection's packets, and translates the packets' fates back to the
// sequence numbers the table wrote them under. It is the GhostWriter a
// connection actor passes to Server.Poll when the table lives elsewhere.
//
// The ghost manager numbers its sections itself, g = 1, 2, 3, … (its
// Table.Write sequence, not the packet's). Every offered section with records
// gets exactly one fate from PopFates, keyed by g:
//
//   - delivered or dropped with the packet that carried it;
//   - dropped at once when a newer Offer replaced it before it was sent, or
//     when it did not fit the packet's remaining budget.
//
// A section is written at most once; the table re-dirties what a dropped one
// carried, so nothing is resent as is. ghost.Table resolves fates in any
// order (it looks records up by sequence), so the immediate drops may
// overtake older sections still in flight.
//
// The zero GhostRelay is not usable; call NewGhostRelay. Not safe for
// concurrent use; the connection actor owns it.
type GhostRelay struct {
	buf     []byte
	nbits   int
	seq     uint64
	has     bool
	offered bool
	last    uint64
	at      time.Duration // when the pending section was offered

	pkts seqRing[uint64] // packet seqs carrying a section, fate pending
	gs   seqRing[uint64] // the g of each, same order
	out  []notify.Fate   // fates keyed by g, waiting for PopFates; grows on demand
	// maxOut bounds out (2·maxInFlight+1); out starts empty because most
	// relays never hold more than a handful of fates between pops.
	maxOut int
	lost   uint64
}

// NewGhostRelay returns a relay for sections of at most maxBytes bytes
// (≤ MaxPacketSize), with room for maxInFlight sections awaiting their fate
// (notify.Config.MaxInFlight is enough; 0 means notify.DefaultMaxInFlight).
func NewGhostRelay(maxBytes, maxInFlight int) (*GhostRelay, error) {
	if maxBytes < 1 || maxBytes > MaxPacketSize {
		return nil, fmt.Errorf("%w: relay section size %d outside [1, %d]", ErrConfig, maxBytes, MaxPacketSize)
	}
	if maxInFlight == 0 {
		maxInFlight = notify.DefaultMaxInFlight
	}
	if maxInFlight < 1 || maxInFlight > notify.MaxMaxInFlight {
		return nil, fmt.Errorf("%w: relay in-flight bound %d", ErrConfig, maxInFlight)
	}
	r := &GhostRelay{buf: make([]byte, maxBytes), maxOut: 2*maxInFlight + 1}
	return r, nil
}

// maxInFlight is the bound NewGhostRelay was given (maxOut is 2·it+1).
func (r *GhostRelay) maxInFlight() int { return (r.maxOut - 1) / 2 }

// Offer stores (copies) the section the ghost manager packed under sequence
// seq: nbits bits of data, holding records records. A section with no records
// needs no fate and is ignored. An offered section not yet sent is replaced
// and reported dropped. Errors: ErrRelaySeq (seq not above the last offer),
// bitstream.ErrWidth (nbits beyond data or the relay's size).
func (r *GhostRelay) Offer(seq uint64, records int, data []byte, nbits int, now time.Duration) error {
	if r.offered && seq <= r.last {
		return fmt.Errorf("%w: %d after %d", ErrRelaySeq, seq, r.last)
	}
	if nbits < 1 || nbits > 8*len(data) || nbits > 8*len(r.buf) {
		return fmt.Errorf("session: relay section of %d bits: %w", nbits, bitstream.ErrWidth)
	}
	r.offered, r.last = true, seq
	if records <= 0 {
		return nil
	}
	r.dropPending(now)
	copy(r.buf, data[:(nbits+7)/8])
	r.nbits, r.seq, r.has, r.at = nbits, seq, true, now
	return nil
}

// dropPending reports the unsent section dropped.
func (r *GhostRelay) dropPending(now time.Duration) {
	if r.has {
		r.emit(notify.Fate{Seq: r.seq, Delivered: false, SentAt: r.at})
		r.has = false
	}
}

func (r *GhostRelay) emit(f notify.Fate) {
	if len(r.out) == r.maxOut {
		r.lost++ // the owner stopped popping; the bound wins
		return
	}
	r.out = append(r.out, f)
}

// Pending reports whether a section with records waits to be sent.
func (r *GhostRelay) Pending() bool { return r.has }

// PendingBits is the size of the waiting section (0 if none).
func (r *GhostRelay) PendingBits() int {
	if !r.has {
		return 0
	}
	return r.nbits
}

// Write is the GhostWriter side: it writes the waiting section into packet
// pktSeq if it fits (and returns 1, so Server reports the packet's fate), or
// an empty section otherwise.
func (r *GhostRelay) Write(w *bitstream.Writer, pktSeq uint64, now time.Duration) (int, error) {
	if !r.has {
		return 0, w.WriteGamma(1)
	}
	if r.nbits > w.Remaining() || r.pkts.full(r.maxInFlight()) {
		r.dropPending(now)
		return 0, w.WriteGamma(1)
	}
	if err := w.WriteBitsFrom(r.buf, r.nbits); err != nil {
		r.dropPending(now)
		return 0, w.WriteGamma(1)
	}
	r.pkts.push(pktSeq, r.maxInFlight())
	r.gs.push(r.seq, r.maxInFlight())
	r.has = false
	return 1, nil
}

// OnFate takes the fate of a packet from Server.PopGhostFates: one per
// packet, in send order except for deliveries reported early, so the packet
// is looked up (the ring holds the few packets in flight) and the resolved
// ones are released from the old end.
func (r *GhostRelay) OnFate(f notify.Fate) {
	for i := 0; i < r.pkts.len(); i++ {
		v := r.pkts.at(i)
		if v&earlyFate != 0 {
			continue // resolved, waiting for the older ones
		}
		if v > f.Seq {
			break // not a packet of ours
		}
		if v == f.Seq {
			r.emit(notify.Fate{Seq: r.gs.at(i), Delivered: f.Delivered, SentAt: f.SentAt})
			r.pkts.set(i, v|earlyFate)
			break
		}
	}
	for r.pkts.len() > 0 && r.pkts.front()&earlyFate != 0 {
		r.pkts.pop()
		r.gs.pop()
	}
}

// PopFates appends the fates resolved since the last call, keyed by the
// ghost manager's sequence numbers, and returns the extended slice.
func (r *GhostRelay) PopFates(dst []notify.Fate) []notify.Fate {
	dst = append(dst, r.out...)
	r.out = r.out[:0]
	return dst
}

// Lost counts fates discarded because PopFates was not called for so long
// that the bounded queue filled (the table then keeps those records until its
// own in-flight bound stalls it: pop after every Poll).
func (r *GhostRelay) Lost() uint64 { return r.lost }
