package move

import (
	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/internal/freelist"
)

// Applier is the server half of a move stream, one per connection: it decodes
// move sections and hands each move to the game exactly once, in sequence
// order. Redundant copies (every packet repeats the unacknowledged moves) and
// moves from reordered or duplicated packets are skipped by sequence, like
// the book's AddMoveIfNew (003_28a462e3d9fd091c.txt ch8 Listing 8.1, checklist
// CTL-3) but by sequence number instead of float timestamp.
//
// A section always starts at the client's oldest unacknowledged move, which is
// never later than LastApplied()+1 unless the client dropped moves from its
// full window. So a section that starts beyond LastApplied()+1 proves the
// moves in between are lost for good: they are counted (Stats.Lost) and the
// stream continues after them.
//
// The zero Applier is ready to use (nothing applied yet; the first move is
// sequence 1). Not safe for concurrent use; the connection actor owns it.
type Applier struct {
	last  uint64
	stats ApplierStats
}

// decodeBufs: Read's decode buffers (2 KB each), as many as Reads ever ran
// at once instead of one per connection.
var decodeBufs freelist.List[[MaxWindow]Move]

// Reset restarts the Applier as if moves up to lastApplied had been applied,
// e.g. when another server takes over a connection's moves (zone handoff)
// and must continue exactly where the previous owner stopped.
func (a *Applier) Reset(lastApplied uint64) {
	a.last = lastApplied
}

// LastApplied is the sequence of the newest move applied (0: none). The
// server acknowledges it in its control section once the state it sends
// reflects that move.
func (a *Applier) LastApplied() uint64 { return a.last }

// Stats returns the counters.
func (a *Applier) Stats() ApplierStats { return a.stats }

// Read decodes one move section and calls apply for each move not applied
// before, in order (apply may be nil to only advance). The newest move of the section has HasCRC set and carries
// the client's CRC of its predicted state after that move: apply it, then pass
// it with the resulting state to ControlWriter.Check.
//
// The whole section is decoded and validated before the first apply, so a
// malformed section (a *bitstream.ReadError wrapping io.ErrUnexpectedEOF,
// bitstream.ErrOutOfRange, ErrNonCanonical or ErrBadSeq) applies nothing and
// changes no state except Stats.Malformed; the rest of the packet is then
// unreadable. Read never panics and never allocates.
func (a *Applier) Read(r *bitstream.Reader, apply func(Move)) error {
	buf := decodeBufs.Get()
	defer decodeBufs.Put(buf)
	return a.ReadInto(r, buf, apply)
}

// ReadInto is Read decoding into buf, the caller's scratch (its contents
// on entry do not matter; on return they are garbage): for a caller that
// already borrowed scratch for the packet, so a datagram takes one trip
// to a shared free list, not two.
func (a *Applier) ReadInto(r *bitstream.Reader, buf *[MaxWindow]Move, apply func(Move)) error {
	n, first, err := readSection(r, buf, a.last+1)
	if err != nil {
		a.stats.Malformed++
		return err
	}
	a.stats.Sections++
	for i := 0; i < n; i++ {
		seq := first + uint64(i)
		if seq <= a.last {
			a.stats.Duplicates++
			continue
		}
		if seq > a.last+1 {
			a.stats.Lost += seq - a.last - 1
		}
		a.last = seq
		a.stats.Applied++
		a.stats.Ticks += uint64(buf[i].Dt)
		if apply != nil {
			apply(buf[i])
		}
	}
	return nil
}
