package move

import (
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// Stream is the client half of a move stream: it numbers the moves the game
// samples, keeps every one the server has not acknowledged (up to
// Config.Window), and writes them all into every packet, delta-coded, so a
// lost packet costs nothing: the next one carries the same moves again.
// Seed: 004_4e2ce9d4ddec9dee.txt § Hifi Updates ("the client packs the N most
// recent moves into the packets"); 003_28a462e3d9fd091c.txt ch8 Listing 8.2
// (release on the server's echo of the last processed move, checklist
// CTL-2/D-14; without the E-5 off-by-one: the count field covers every move
// sent).
//
// Moves leave the stream when Ack reports the server applied them. A caller
// that samples through Due never overflows the window (Due holds input while
// it is full); one that Adds regardless drops the oldest (counted in
// Stats.Dropped: the server will see a gap and count the move lost).
//
// The zero Stream is ready to use with DefaultConfig. Not safe for concurrent
// use; the client's connection owner holds it.
type Stream struct {
	cfg  Config
	ring [MaxWindow]Move // ring[seq % MaxWindow]
	lo   uint64          // every move ≤ lo is acknowledged or dropped; lo+1 is the oldest kept
	last uint64          // newest sequence added; 0 before the first

	// Sampling clock (Due).
	clockOn bool
	next    time.Duration // time of the next sample
	rem     uint64        // fractional nanoseconds of next, in 1/InputRate ns

	// long: the sections carry their first move's whole sequence (a
	// continued stream, until the new server has one: UseShortSeq).
	long bool

	stats StreamStats
}

// NewStream returns an empty Stream; cfg zero fields take their defaults.
func NewStream(cfg Config) (*Stream, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Stream{cfg: cfg}, nil
}

// Config returns the configuration in use, defaults filled in.
func (s *Stream) Config() Config { return s.cfg.withDefaults() }

// NextSeq is the sequence number the next move must carry.
func (s *Stream) NextSeq() uint64 { return s.last + 1 }

// Newest is the sequence of the newest move added (0 before the first). It
// is the reference ReadControl needs to reconstruct the server's ack.
func (s *Stream) Newest() uint64 { return s.last }

// Acked is the highest sequence the server acknowledged via Ack.
func (s *Stream) Acked() uint64 { return s.stats.LastAck }

// Len is the number of moves kept (unacknowledged, not dropped).
func (s *Stream) Len() int { return int(s.last - s.lo) }

// Oldest is the sequence of the oldest move kept; Len() == 0 means none.
func (s *Stream) Oldest() uint64 { return s.lo + 1 }

// Move returns the kept move with sequence seq.
func (s *Stream) Move(seq uint64) (Move, bool) {
	if seq <= s.lo || seq > s.last {
		return Move{}, false
	}
	return s.ring[seq%MaxWindow], true
}

// Stats returns the counters.
func (s *Stream) Stats() StreamStats { return s.stats }

// Due reports whether the next input sample is due at now and, if so,
// consumes it; call it in a loop each frame and sample one move per true:
//
//	for s.Due(now) { pred.Predict(move.Move{Dt: cfg.Dt(), Forward: …}) }
//
// The first call starts the clock. Samples are spaced exactly 1/InputRate s
// apart (no drift). After a stall longer than Window samples, the missed
// samples beyond the last Window are skipped and counted (Stats.Skipped): a
// client frozen for seconds must not flood the server with stale input it
// would only drop from the window anyway.
//
// While the window is full (the server has acknowledged nothing for Window
// samples: a zone failing over, an outage), Due holds input: the due samples
// pass unsampled and are counted (Stats.Held), so the player stands still
// rather than losing the oldest moves it already predicted. This is Torque's
// rule (the client makes no new move while its move list is full). Input
// resumes as soon as an ack frees room.
func (s *Stream) Due(now time.Duration) bool {
	cfg := s.cfg.withDefaults()
	if !s.clockOn {
		s.clockOn, s.next, s.rem = true, now, 0
	}
	if now < s.next {
		return false
	}
	period := time.Second / time.Duration(cfg.InputRate) // floor; exact enough to bound a burst
	if s.Len() >= cfg.Window {
		n := uint64((now-s.next)/period) + 1
		s.advance(n, cfg.InputRate)
		s.stats.Held += n
		return false
	}
	if behind := uint64((now - s.next) / period); behind >= uint64(cfg.Window) {
		skip := behind + 1 - uint64(cfg.Window)
		s.advance(skip, cfg.InputRate)
		s.stats.Skipped += skip
	}
	s.advance(1, cfg.InputRate)
	return true
}

// NextSample is the time of the next input sample Due will hand out; ok is
// false until Due first ran. The client's send slot follows it (session: a
// packet leaves with each new move).
func (s *Stream) NextSample() (next time.Duration, ok bool) {
	return s.next, s.clockOn
}

// advance moves the sampling clock n samples on, carrying the fraction of a
// nanosecond so that sample k is at exactly start + ⌊k·10⁹/InputRate⌋ ns.
func (s *Stream) advance(n uint64, rate int) {
	r := uint64(rate)
	q, f := uint64(time.Second)/r, uint64(time.Second)%r
	frac := s.rem + n*f
	s.next += time.Duration(n*q + frac/r)
	s.rem = frac % r
}

// Add appends m, which must carry Seq == NextSeq() and valid fields. When the
// window is full the oldest kept move is dropped (Stats.Dropped). Errors:
// ErrSequence, ErrInvalidMove; nothing is added then.
func (s *Stream) Add(m Move) error {
	if m.Seq != s.last+1 {
		return ErrSequence
	}
	if err := m.Validate(); err != nil {
		return err
	}
	if s.last-s.lo >= uint64(s.cfg.withDefaults().Window) {
		s.lo++
		s.stats.Dropped++
	}
	m.HasCRC = false
	s.ring[m.Seq%MaxWindow] = m
	s.last = m.Seq
	s.stats.Added++
	return nil
}

// Ack releases every move ≤ seq: the server reported it applied them (the ack
// of a control section, ControlUpdate.Ack). Acks are monotonic: an older ack
// (a reordered packet) changes nothing. An ack beyond Newest is clamped.
func (s *Stream) Ack(seq uint64) {
	if seq > s.last {
		seq = s.last
	}
	if seq > s.stats.LastAck {
		s.stats.LastAck = seq
	}
	if seq > s.lo {
		s.stats.Acked += seq - s.lo
		s.lo = seq
	}
}

// Write writes the move section: every kept move, oldest first, the first in
// full and each later one delta-coded against its predecessor, plus the CRC
// of the newest one written. It returns how many moves it wrote.
//
// Budget: the section never exceeds w.Remaining(). If the moves do not all
// fit, Write sends the oldest ones that do (a prefix) and leaves the rest for
// the next packet. It keeps the oldest, not the newest, because the server
// applies moves strictly in order: a newer move without its predecessors is
// useless to it until they arrive, while the oldest are applied at once.
// With no room for even one move it writes the 1-bit empty section; with no
// room at all it returns bitstream.ErrOverflow and writes nothing.
func (s *Stream) Write(w *bitstream.Writer) (int, error) {
	budget := w.Remaining()
	n := s.last - s.lo
	bits := sectionHeaderBits + fullMoveBits
	if s.long {
		bits += longBits - seqBits
	}
	if n == 0 || bits > budget {
		if err := w.WriteFlag(false); err != nil {
			return 0, err
		}
		s.stats.Sections++
		s.stats.Bits++
		if n > 0 {
			s.stats.Truncated++
		}
		return 0, nil
	}
	first := s.lo + 1
	k := uint64(1)
	for ; k < n; k++ {
		d := deltaBits(&s.ring[(first+k-1)%MaxWindow], &s.ring[(first+k)%MaxWindow])
		if bits+d > budget {
			s.stats.Truncated++
			break
		}
		bits += d
	}
	writeSection(w, &s.ring, first, int(k), s.long)
	s.stats.Sections++
	s.stats.MovesWritten += k
	s.stats.Bits += uint64(bits)
	return int(k), nil
}

// Continue makes s go on from prev's numbering: the moves prev still keeps
// (unacknowledged), its newest sequence and its sampling clock. A client
// that follows a Redirect to another server continues its move stream so
// the moves the old server never acknowledged go again and the server
// drops the ones it already applied: none lost, none applied twice. The
// counters start afresh (LastAck excepted); the Config stays s's. Call it
// before s takes any move.
func (s *Stream) Continue(prev *Stream) {
	cfg := s.cfg
	*s = *prev
	s.cfg = cfg
	s.stats = StreamStats{LastAck: prev.stats.LastAck}
	// The new server reconstructs a short sequence around what it has
	// applied, nothing yet: past 32,767 moves (18 minutes at 30 Hz) it
	// could not. So the sections carry the whole sequence until it has one.
	s.long = s.last > 0
	if win := uint64(cfg.withDefaults().Window); s.last-s.lo > win {
		s.lo = s.last - win // a smaller window keeps the newest
	}
}

// LongSeq reports whether the sections carry their first move's whole
// sequence (a continued stream whose new server has not had one yet).
func (s *Stream) LongSeq() bool { return s.long }

// UseShortSeq goes back to the short sequence: a packet with a long-form
// section reached the server, which reconstructs later ones around it.
func (s *Stream) UseShortSeq() { s.long = false }
