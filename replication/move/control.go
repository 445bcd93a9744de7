package move

import (
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/internal/intern"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// ControlWriter is the server's policy for the control-object section of one
// connection's packets (seed 004 § Hifi Updates and CRC slides, checklist
// CTL-4): every packet acknowledges the newest applied move; the full-precision
// state goes out only when
//
//   - nothing was sent yet (the client learns its spawn state),
//   - the client's CRC for a move differs from the server's state after that
//     move (Check) — e.g. a collision the client had not predicted,
//   - a full state was lost (OnFate reports its packet dropped),
//   - Force was called (a teleport: no need to wait for the CRC round trip),
//   - or ControlConfig.Period elapsed since the last one (a safety net for
//     what a CRC cannot see).
//
// After a correction (any full state but a routine refresh) is sent, mismatch
// reports are held — counted, not answered — until that packet's fate is
// known: the client predicted those moves before it could have applied the
// correction, so answering each would send one correction per packet in
// flight. A dropped correction is resent. A delivered one has made the client
// rewind, replay and report matching CRCs, so a mismatch after it is a new
// divergence and gets a new correction. Without fates, ControlConfig.HoldTimeout
// ends the hold; held reports are never acted on later, because a client that
// is still off says so again in its next packet.
//
//	idle ──mismatch / Force / fate dropped──▶ due ──Write──▶ holding(pkt)
//	holding ──OnFate(pkt) delivered, or HoldTimeout──▶ idle
//	holding ──OnFate(pkt) dropped──▶ due
//
// Create it with NewControlWriter. Not safe for concurrent use; the
// connection actor owns it.
type ControlWriter struct {
	cfg *ControlConfig // interned (controlConfigs): shared, never written
	// lastFull is when the newest full state went; while holding, also
	// when the hold began (HoldTimeout): every full state sent while
	// holding, or that opens a hold, (re)starts it, so the two times were
	// one value in two fields.
	lastFull time.Duration
	holdPkt  uint64

	n ctlCounts

	// The flags together in one word. 64 bytes in all, every counter
	// included (80 with the hold's start and Full kept apart; the 96 class with the
	// config copied in and Initial counted apart from anyFull).
	initial bool // nothing sent yet
	need    bool // a correction is due (mismatch or dropped full state)
	forced  bool
	anyFull bool
	holding bool
}

// NewControlWriter returns a ControlWriter whose first section carries the
// full state.
func NewControlWriter(cfg ControlConfig) (*ControlWriter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &ControlWriter{cfg: controlConfigs.Get(cfg), initial: true}, nil
}

// controlConfigs interns the ControlConfigs of ControlWriters: a server's
// connections share one (bounded: intern.Max values, then private copies).
var controlConfigs intern.Table[ControlConfig]

// Stats returns the counters.
func (c *ControlWriter) Stats() ControlStats {
	n := &c.n
	st := ControlStats{
		Sections: uint64(n.Sections), Periodic: uint64(n.Periodic), Checks: uint64(n.Checks),
		Corrections: uint64(n.Corrections), Forced: uint64(n.Forced), Mismatches: uint64(n.Mismatches),
		Held: uint64(n.Held), Deferred: uint64(n.Deferred),
	}
	if c.anyFull {
		st.Initial = 1
	}
	st.Full = st.Initial + st.Forced + st.Corrections + st.Periodic
	return st
}

// ctlCounts are the counters of ControlStats, in 32 bits: they wrap only
// after 2^32 packets, over two years of a connection at 60 packets a
// second. Initial is not kept: it is 1 once the first full state went
// (anyFull), which is always counted as the initial one, and 0 before.
// Neither is Full: every full state sent is counted as exactly one of
// Initial, Forced, Corrections and Periodic (Write).
//
// Corrections and their causes were counted apart, made on the first
// (24 bytes, 8 of pointer here): in cmd/capacity nearly every connection
// of a loaded node makes them (zones throttle moves, and a throttled
// move's CRC mismatches), so they cost 24 B and an allocation a player.
// In 32 bits all eight fit where the three common ones and the pointer
// were: the writer stays at 64 bytes.
type ctlCounts struct {
	Sections, Periodic, Checks                      uint32
	Corrections, Forced, Mismatches, Held, Deferred uint32
}

// Pending reports whether the next Write will carry the full state for a
// reason other than the periodic refresh.
func (c *ControlWriter) Pending() bool { return c.initial || c.need || c.forced }

// Check compares the client's CRC carried by m (m.HasCRC; other moves are
// ignored) with after, the server's control state right after applying m.
// It returns false on a mismatch, which schedules a correction unless a full
// state is in flight. Call it from the Applier's apply callback, or wherever
// the game actually simulates m.
func (c *ControlWriter) Check(m Move, after *ControlState) bool {
	if !m.HasCRC {
		return true
	}
	c.n.Checks++
	if m.CRC == after.CRC() {
		return true
	}
	c.n.Mismatches++
	if c.holding {
		c.n.Held++
	} else {
		c.need = true
	}
	return false
}

// Force makes the next Write carry the full state, with no CRC round trip:
// for changes the server knows the client cannot predict (teleport, respawn).
func (c *ControlWriter) Force() { c.forced = true }

// FatesIdle reports whether OnFate would change nothing: no full state is
// held in flight. It turns false only in Write (a full state that opens or
// restarts a hold) and true in OnFate, AckOnly and Write (a hold's end), so
// a caller that mirrors it after each Write and OnFate, and skips OnFate
// while the mirror is true, passes every fate that matters: a connection
// without a correction in flight (nearly all of them, nearly always) is
// then not read for the fates of its every datagram.
func (c *ControlWriter) FatesIdle() bool { return !c.holding }

// OnFate takes the notify layer's verdict on packets this connection sent
// (pass every fate; others are ignored). A dropped full state is resent; a
// delivered one ends the hold.
func (c *ControlWriter) OnFate(f notify.Fate) {
	if !c.holding || f.Seq < c.holdPkt {
		return
	}
	// Fates come in send order, so a later sequence means the held one's
	// fate was missed; treat it as lost, the safe side.
	delivered := f.Delivered && f.Seq == c.holdPkt
	c.holding = false
	if !delivered {
		c.need = true
	}
}

// AckOnlyBits is the width of the section AckOnly returns: the ack and the
// state flag, absent.
const AckOnlyBits = controlBaseBits

// AckOnly is Write for a caller that writes an ack-only section itself,
// fused with the fields around it (a server's usual packet): when the
// policy sends no state at now it counts the section as Write does and
// returns its AckOnlyBits bits (least significant first, Write's bits for
// a nil state); otherwise it returns false and the caller calls Write. The
// caller checks the room first: AckOnly has no writer to check it on.
func (c *ControlWriter) AckOnly(now time.Duration, ack uint64) (uint64, bool) {
	if c.holding && c.cfg.HoldTimeout > 0 && now-c.lastFull >= c.cfg.HoldTimeout {
		c.holding = false // as Write: no fate came
	}
	if c.initial || c.need || c.forced || c.cfg.Period > 0 && c.anyFull && now-c.lastFull >= c.cfg.Period {
		return 0, false
	}
	c.n.Sections++
	return ack & (1<<ackBits - 1), true
}

// Write writes the control section of packet pkt (the notify sequence its
// header got; 0 if fates are not wired) at time now: ack, the newest move
// that state s reflects (Applier.LastApplied when the game applies moves
// inside the apply callback), and, when the policy says so, s itself. It
// reports whether the state went out.
//
// Budget: if the state does not fit w.Remaining(), the section goes without
// it and the state stays due (Stats.Deferred); if not even the 17-bit
// section fits, Write returns bitstream.ErrOverflow and writes nothing.
// ErrInvalidState: s is nil or has a NaN or infinite component (a server
// bug); nothing is written then.
func (c *ControlWriter) Write(w *bitstream.Writer, pkt uint64, now time.Duration, ack uint64, s *ControlState) (bool, error) {
	if c.holding && c.cfg.HoldTimeout > 0 && now-c.lastFull >= c.cfg.HoldTimeout {
		// No fate came. Held reports are not acted on: if the client is
		// still off, its next report says so.
		c.holding = false
	}
	due := c.initial || c.need || c.forced
	periodic := !due && c.cfg.Period > 0 && c.anyFull && now-c.lastFull >= c.cfg.Period
	full := due || periodic
	if full {
		if s == nil {
			return false, ErrInvalidState
		}
		if err := s.Validate(); err != nil {
			return false, err
		}
	}
	deferred := full && controlBaseBits+stateBits(s) > w.Remaining()
	if full && !deferred {
		if err := writeControl(w, ack, s); err != nil { // validated above
			return false, err
		}
	} else {
		if err := writeControl(w, ack, nil); err != nil {
			return false, err
		}
		c.n.Sections++
		if deferred {
			c.n.Deferred++
		}
		return false, nil
	}
	c.n.Sections++
	switch { // one of them counts it as Full (Stats)
	case c.initial: // counted by anyFull (Stats)
	case c.forced:
		c.n.Forced++
	case c.need:
		c.n.Corrections++
	default:
		c.n.Periodic++
	}
	// A refresh that corrects nothing opens no hold: holding would only delay
	// the answer to a divergence that happens while it is in flight.
	if !periodic || c.holding {
		c.holding, c.holdPkt = true, pkt // from now (lastFull)
	}
	c.initial, c.need, c.forced = false, false, false
	c.anyFull, c.lastFull = true, now
	return true, nil
}
