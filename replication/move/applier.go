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
	last uint64
	// The counters every connection counts; Malformed and Lost (0 on a
	// healthy connection) live in rare, made by the first of them: 16 bytes
	// of every Applier otherwise.
	sections, applied, duplicates, ticks uint64
	rare                                 *applierRare
}

// applierRare holds the counters that stay 0 on a healthy connection.
type applierRare struct{ malformed, lost uint64 }

func (a *Applier) rareStats() *applierRare {
	if a.rare == nil {
		a.rare = new(applierRare)
	}
	return a.rare
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

// Duplicates is Stats().Duplicates, without building the whole Stats: a
// server reads it around every section (a packet that repeated only moves
// already applied means its ack was lost).
func (a *Applier) Duplicates() uint64 { return a.duplicates }

// Stats returns the counters.
func (a *Applier) Stats() ApplierStats {
	st := ApplierStats{Sections: a.sections, Applied: a.applied, Duplicates: a.duplicates, Ticks: a.ticks}
	if a.rare != nil {
		st.Malformed, st.Lost = a.rare.malformed, a.rare.lost
	}
	return st
}

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
	moves, err := a.ReadNew(r, buf)
	if apply != nil {
		for i := range moves {
			apply(moves[i])
		}
	}
	return err
}

// ReadNew is ReadInto for a caller that applies the moves itself: it
// returns the moves not applied before, in order, in buf (valid until
// buf's next use), and counts them applied (LastApplied is the last of
// them). A server's hand-off to the game was a call through apply and its
// wrapper a move; the caller's loop makes none. Same errors as Read.
func (a *Applier) ReadNew(r *bitstream.Reader, buf *[MaxWindow]Move) ([]Move, error) {
	// Only the moves after a.last are kept in buf (from buf[0]): the
	// section's redundant copies are checked but not stored.
	n, first, err := readSection(r, buf, a.last+1, a.last+1)
	if err != nil {
		a.rareStats().malformed++
		return nil, err
	}
	a.sections++
	if n == 0 {
		return nil, nil
	}
	dup := skipped(n, first, a.last+1)
	a.duplicates += uint64(dup)
	if first+uint64(dup) > a.last+1 {
		a.rareStats().lost += first + uint64(dup) - a.last - 1
	}
	moves := buf[:n-dup]
	if len(moves) == 0 {
		return nil, nil
	}
	for i := range moves {
		a.ticks += uint64(moves[i].Dt)
	}
	a.applied += uint64(len(moves))
	a.last = moves[len(moves)-1].Seq
	return moves, nil
}
