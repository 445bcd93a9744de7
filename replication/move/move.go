package move

import (
	"math"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// Input ranges. Every Move field is stored in its wire units, so what the
// client predicts with is exactly what the server decodes: there is no
// quantization step that could make the two sides disagree.
const (
	// AxisMax is the full deflection of Forward and Strafe: [−AxisMax, AxisMax].
	AxisMax = 127
	// PitchMax bounds Pitch: [−PitchMax, PitchMax] units of 2π/65536 rad,
	// i.e. ±89.995°.
	PitchMax = 16383
	// DtHz is the unit of Move.Dt: 1/960 s. 960 is divisible by every common
	// input rate (10, 15, 20, 24, 30, 32, 40, 48, 60, 64, 120 Hz…), so a
	// fixed-rate client's move durations are exact and sum to wall time.
	DtHz = 960
)

// Wire widths in bits (docs/protocol.md §5).
const (
	countBits  = 6  // count − 1: 1..64 moves
	seqBits    = 16 // low bits of the first move's sequence
	longBits   = 64 // the first move's whole sequence (a continued stream's first sections)
	crcBits    = 32 // CRC-32 of the predicted state after the last move
	dtBits     = 8
	axisBits   = 8  // RangeBits(−127, 127)
	yawBits    = 16 // full turn in 65536 units
	pitchBits  = 15 // RangeBits(−16383, 16383)
	buttonBits = 16
	nFields    = 6 // dt, forward, strafe, yaw, pitch, buttons

	// sectionHeaderBits is the fixed part of a non-empty section in its
	// short form (present, count, long = 0, seq, crc).
	sectionHeaderBits = 1 + countBits + 1 + seqBits + crcBits
	// fullMoveBits is the first move of a section, every field in full.
	fullMoveBits = dtBits + 2*axisBits + yawBits + pitchBits + buttonBits
	// maxDeltaBits is a delta-coded move with every field changed.
	maxDeltaBits = 1 + nFields + fullMoveBits
	// MaxSectionBits is the largest move section: 64 moves, all fields changing.
	// (The long form's whole sequence adds longBits − seqBits.)
	MaxSectionBits = sectionHeaderBits + longBits - seqBits + fullMoveBits + (MaxWindow-1)*maxDeltaBits
)

// Move is one input sample: what the player asked for during Dt. Its fields
// are in wire units (see the constants above); Axis, YawFromRadians and
// PitchFromRadians convert from game values. The zero Move is valid input
// (no stick, facing +Z, no buttons, zero duration).
//
// Seq numbers moves 1, 2, 3, … per connection (0 is "none"); Stream.Add and
// Predictor.Predict assign it. CRC is the client's CRC of its predicted
// control state after applying this move (ControlState.CRC). On the wire only
// the newest move of each section carries it (seed 004: one CRC per packet);
// the Applier sets HasCRC on that move and leaves CRC zero on the others.
//
// 24 bytes: the fields widest first. In wire order (Dt, the axes, Yaw, …)
// the padding after Strafe and Buttons made it 32, and a zone holds a few
// moves of every player (handoff.MoveQueue keeps room for 4: 128 → 96 B)
// besides the connection's batches: TestMoveSize.
type Move struct {
	Seq     uint64
	CRC     uint32
	Yaw     uint16 // heading, 2π/65536 rad per unit, 0 = +Z, increasing towards +X
	Pitch   int16  // look up/down, 2π/65536 rad per unit, |Pitch| ≤ PitchMax
	Buttons uint16 // bit mask; the game assigns the bits (Walk uses ButtonJump)
	Dt      uint8  // duration in 1/DtHz s (32 at 30 Hz); each move is applied with its own Dt (CTL-3)
	Forward int8   // −127 full back … 127 full forward; −128 is invalid
	Strafe  int8   // −127 full left … 127 full right; −128 is invalid
	HasCRC  bool   // set by the Applier on the move whose CRC came over the wire
}

// Seconds is Dt in seconds, the dt the step function gets.
func (m Move) Seconds() float32 { return float32(m.Dt) / DtHz }

// Validate reports ErrInvalidMove when a field is outside its wire range.
func (m Move) Validate() error {
	if m.Forward < -AxisMax || m.Strafe < -AxisMax || m.Pitch < -PitchMax || m.Pitch > PitchMax {
		return ErrInvalidMove
	}
	return nil
}

// sameInput reports whether two moves carry identical input (Seq and CRC aside).
func sameInput(a, b *Move) bool {
	return a.Dt == b.Dt && a.Forward == b.Forward && a.Strafe == b.Strafe &&
		a.Yaw == b.Yaw && a.Pitch == b.Pitch && a.Buttons == b.Buttons
}

// Axis converts a stick deflection in [−1, 1] to wire units, rounding to the
// nearest and clamping; NaN is 0.
func Axis(v float64) int8 {
	if !(v > -1) { // also catches NaN
		if v != v {
			return 0
		}
		return -AxisMax
	}
	if v >= 1 {
		return AxisMax
	}
	return int8(math.Round(v * AxisMax))
}

// YawFromRadians converts a heading in radians (any value; it wraps) to wire
// units, rounding to the nearest. NaN and ±Inf give 0.
func YawFromRadians(rad float64) uint16 {
	if math.IsNaN(rad) || math.IsInf(rad, 0) {
		return 0
	}
	turns := rad / (2 * math.Pi)
	turns -= math.Floor(turns)
	return uint16(int64(math.Round(turns*65536)) & 0xFFFF)
}

// PitchFromRadians converts a pitch in radians to wire units, clamped to
// ±PitchMax. NaN gives 0.
func PitchFromRadians(rad float64) int16 {
	if math.IsNaN(rad) {
		return 0
	}
	u := math.Round(rad * 65536 / (2 * math.Pi))
	return int16(max(-PitchMax, min(PitchMax, u)))
}

// deltaBits is the size of m delta-coded against p.
func deltaBits(p, m *Move) int {
	if sameInput(p, m) {
		return 1
	}
	n := 1 + nFields
	if m.Dt != p.Dt {
		n += dtBits
	}
	if m.Forward != p.Forward {
		n += axisBits
	}
	if m.Strafe != p.Strafe {
		n += axisBits
	}
	if m.Yaw != p.Yaw {
		n += yawBits
	}
	if m.Pitch != p.Pitch {
		n += pitchBits
	}
	if m.Buttons != p.Buttons {
		n += buttonBits
	}
	return n
}

// Field writers. The caller has checked that everything fits and that the
// move is valid, so the bitstream calls cannot fail.

func putAxis(w *bitstream.Writer, v int8) { w.WriteBits(uint64(int64(v)+AxisMax), axisBits) }
func putPitch(w *bitstream.Writer, v int16) {
	w.WriteBits(uint64(int64(v)+PitchMax), pitchBits)
}

// writeFull writes every input field of m.
func writeFull(w *bitstream.Writer, m *Move) {
	w.WriteBits(uint64(m.Dt), dtBits)
	putAxis(w, m.Forward)
	putAxis(w, m.Strafe)
	w.WriteBits(uint64(m.Yaw), yawBits)
	putPitch(w, m.Pitch)
	w.WriteBits(uint64(m.Buttons), buttonBits)
}

// writeDelta writes m against its predecessor p: a "same" flag, or a changed
// flag per field followed by the fields that changed.
func writeDelta(w *bitstream.Writer, p, m *Move) {
	if sameInput(p, m) {
		w.WriteFlag(true)
		return
	}
	w.WriteFlag(false)
	if w.WriteFlag(m.Dt != p.Dt); m.Dt != p.Dt {
		w.WriteBits(uint64(m.Dt), dtBits)
	}
	if w.WriteFlag(m.Forward != p.Forward); m.Forward != p.Forward {
		putAxis(w, m.Forward)
	}
	if w.WriteFlag(m.Strafe != p.Strafe); m.Strafe != p.Strafe {
		putAxis(w, m.Strafe)
	}
	if w.WriteFlag(m.Yaw != p.Yaw); m.Yaw != p.Yaw {
		w.WriteBits(uint64(m.Yaw), yawBits)
	}
	if w.WriteFlag(m.Pitch != p.Pitch); m.Pitch != p.Pitch {
		putPitch(w, m.Pitch)
	}
	if w.WriteFlag(m.Buttons != p.Buttons); m.Buttons != p.Buttons {
		w.WriteBits(uint64(m.Buttons), buttonBits)
	}
}

// writeSection writes n ≥ 1 moves of ring, starting at sequence first (ring
// is indexed by seq mod MaxWindow). The caller has checked the size.
func writeSection(w *bitstream.Writer, ring *[MaxWindow]Move, first uint64, n int, long bool) {
	const mask = MaxWindow - 1
	w.WriteFlag(true)
	w.WriteBits(uint64(n-1), countBits)
	w.WriteFlag(long)
	if long {
		w.WriteBits(first, longBits)
	} else {
		w.WriteBits(first&(1<<seqBits-1), seqBits)
	}
	w.WriteBits(uint64(ring[(first+uint64(n)-1)&mask].CRC), crcBits)
	prev := &ring[first&mask]
	writeFull(w, prev)
	for i := uint64(1); i < uint64(n); i++ {
		m := &ring[(first+i)&mask]
		writeDelta(w, prev, m)
		prev = m
	}
}

// Field readers.

func readAxis(r *bitstream.Reader, field string) (int8, error) {
	v, err := r.ReadRangedInt(-AxisMax, AxisMax, field)
	return int8(v), err
}

func readPitch(r *bitstream.Reader, field string) (int16, error) {
	v, err := r.ReadRangedInt(-PitchMax, PitchMax, field)
	return int16(v), err
}

// readFull reads every input field into m.
func readFull(r *bitstream.Reader, m *Move) error {
	if r.Remaining() >= fullMoveBits {
		return readFullAtOnce(r, m)
	}
	return readFullFields(r, m)
}

// Where the fields of a full move start, in bits from its first.
const (
	forwardAt = dtBits
	strafeAt  = forwardAt + axisBits
	yawAt     = strafeAt + axisBits
	pitchAt   = yawAt + yawBits
	buttonsAt = pitchAt + pitchBits
)

// readFullAtOnce is readFull for a move known to be in bounds: two reads
// (dt, forward, strafe, yaw; pitch, buttons) instead of six, the same
// checks. A field out of its range fails with the error readFullFields
// gives (field, bit, ErrOutOfRange); the reader is then past the move
// instead of at the field, which no caller reads on (a malformed section
// leaves the rest of the packet unreadable).
func readFullAtOnce(r *bitstream.Reader, m *Move) error {
	at := r.Pos()
	// TryReadBits inlines (ReadBits does not); ReadBits reads or fails
	// where it cannot.
	a, ok := r.TryReadBits(pitchAt)
	if !ok {
		var err error
		if a, err = r.ReadBits(pitchAt, "move.dt"); err != nil {
			return err
		}
	}
	b, ok := r.TryReadBits(fullMoveBits - pitchAt)
	if !ok {
		var err error
		if b, err = r.ReadBits(fullMoveBits-pitchAt, "move.pitch"); err != nil {
			return err
		}
	}
	fwd, str, pitch := a>>forwardAt&(1<<axisBits-1), a>>strafeAt&(1<<axisBits-1), b&(1<<pitchBits-1)
	switch {
	case fwd > 2*AxisMax:
		return &bitstream.ReadError{Field: "move.forward", Bit: at + forwardAt, Err: bitstream.ErrOutOfRange}
	case str > 2*AxisMax:
		return &bitstream.ReadError{Field: "move.strafe", Bit: at + strafeAt, Err: bitstream.ErrOutOfRange}
	case pitch > 2*PitchMax:
		return &bitstream.ReadError{Field: "move.pitch", Bit: at + pitchAt, Err: bitstream.ErrOutOfRange}
	}
	m.Dt = uint8(a)
	m.Forward, m.Strafe = int8(int64(fwd)-AxisMax), int8(int64(str)-AxisMax)
	m.Yaw = uint16(a >> yawAt)
	m.Pitch = int16(int64(pitch) - PitchMax)
	m.Buttons = uint16(b >> pitchBits)
	return nil
}

// readFullFields reads the fields one by one: near the end of the input,
// where a field may be missing and the error names it.
func readFullFields(r *bitstream.Reader, m *Move) error {
	v, err := r.ReadBits(dtBits, "move.dt")
	if err != nil {
		return err
	}
	m.Dt = uint8(v)
	if m.Forward, err = readAxis(r, "move.forward"); err != nil {
		return err
	}
	if m.Strafe, err = readAxis(r, "move.strafe"); err != nil {
		return err
	}
	if v, err = r.ReadBits(yawBits, "move.yaw"); err != nil {
		return err
	}
	m.Yaw = uint16(v)
	if m.Pitch, err = readPitch(r, "move.pitch"); err != nil {
		return err
	}
	if v, err = r.ReadBits(buttonBits, "move.buttons"); err != nil {
		return err
	}
	m.Buttons = uint16(v)
	return nil
}

// changed reads one "changed" flag. A set flag must be followed by a value
// different from the previous move's; the caller checks that with same.
func changed(r *bitstream.Reader, field string) (bool, int, error) {
	at := r.Pos()
	c, err := r.ReadFlag(field)
	return c, at, err
}

func nonCanonical(field string, at int) error {
	return &bitstream.ReadError{Field: field, Bit: at, Err: ErrNonCanonical}
}

// readDelta reads a delta-coded move into m, which holds a copy of the
// previous move on entry. Only the canonical encoding is accepted.
//
// Most deltas are short (the same input: one bit; a turn: 7 flags and a
// yaw), and most of a server's are the redundant copies of moves it
// applied already: they are parsed from one 56-bit window (deltaFast) and
// consumed with one read, instead of a call per flag and per value. A
// delta that does not fit the window, or that is malformed, goes through
// readDeltaFields from the same bit, which reads it or returns its error
// exactly as before.
func readDelta(r *bitstream.Reader, m *Move) error {
	if v, n, ok := r.PeekWindow(); ok && n > 0 {
		if v&1 != 0 { // the same input as the previous move
			r.TryReadBits(1)
			return nil
		}
		if used := deltaFast(v, n, m); used > 0 {
			r.TryReadBits(uint(used))
			return nil
		}
	}
	return readDeltaFields(r, m)
}

// readDeltas reads k deltas into m, each against the one before: the
// redundant copies a section starts with and the first new move, most of
// them a few bits (the same input: one; a turn: 23). They are parsed from
// one window while they fit, consumed with one read, where readDelta took
// a window and a read each. A delta the window cannot take — it runs past
// the window, or breaks a rule — goes through readDeltaFields from its
// first bit, as in readDelta, so the moves, the bits consumed and the
// errors are readDelta's k times over (FuzzReadDeltas). m's Seq is left
// as it was.
func readDeltas(r *bitstream.Reader, m *Move, k int) error {
	for k > 0 {
		used := 0
		if v, n, ok := r.PeekWindow(); ok {
			for k > 0 && used < n {
				if v&1 != 0 { // the same input as the previous move
					v >>= 1
					used++
					k--
					continue
				}
				// A turn (only the yaw changed: the mouse moved, the
				// sticks held), most of the other deltas, without the
				// call: its flags and the yaw in one test.
				if v&turnMask == turnFlags {
					if n-used < turnBits {
						break // past the window: the next one has it whole
					}
					if y := uint16(v >> turnYawAt); y != m.Yaw {
						m.Yaw = y
						v >>= turnBits
						used += turnBits
						k--
						continue
					}
				}
				u := deltaFast(v, n-used, m)
				if u == 0 {
					break
				}
				v >>= uint(u)
				used += u
				k--
			}
		}
		if used > 0 {
			r.TryReadBits(uint(used))
			continue
		}
		if err := readDeltaFields(r, m); err != nil {
			return err
		}
		k--
	}
	return nil
}

// A turn's delta: "same" clear, the changed flags of dt, forward and
// strafe clear, yaw's set and its value, pitch's and buttons' clear.
const (
	turnYawAt = 5
	turnBits  = turnYawAt + yawBits + 2
	turnMask  = 1<<turnYawAt - 1 | 3<<(turnYawAt+yawBits)
	turnFlags = 1 << (turnYawAt - 1)
)

// deltaFast parses a delta (its "same" bit clear) from v, the next n bits,
// into m and returns the bits it used; 0 when the delta runs past n or
// breaks a rule (a value out of range, a "changed" value equal to the
// previous one, nothing changed), leaving m untouched.
//
// The fields are read without a bounds check each: v's bits from n up are
// zero (PeekWindow), and a read past n moves pos past n for good, so the
// one check at the end rejects exactly the deltas a check per field did
// (two a field were a third of a redundant copy's instructions). Values
// read past n are garbage the check discards, and a rule they break
// returns 0 all the same: readDeltaFields then gives the exact error.
func deltaFast(v uint64, n int, m *Move) int {
	c := *m
	pos := uint(1)
	v >>= 1
	var flags uint64 // the "changed" flags read: a delta must set one
	// field reads one "changed" flag and, when set, a k-bit value, from
	// the bottom of v, shifting them out: shifts by a constant, where
	// v >> pos took three instructions for Go's rule on counts past 63.
	field := func(k uint) (uint64, bool) {
		f := v & 1
		v >>= 1
		pos++
		flags |= f
		if f == 0 {
			return 0, false
		}
		x := v & (1<<k - 1)
		v >>= k
		pos += k
		return x, true
	}
	if x, set := field(dtBits); set {
		if uint8(x) == c.Dt {
			return 0
		}
		c.Dt = uint8(x)
	}
	if x, set := field(axisBits); set {
		if x > 2*AxisMax || int8(int64(x)-AxisMax) == c.Forward {
			return 0
		}
		c.Forward = int8(int64(x) - AxisMax)
	}
	if x, set := field(axisBits); set {
		if x > 2*AxisMax || int8(int64(x)-AxisMax) == c.Strafe {
			return 0
		}
		c.Strafe = int8(int64(x) - AxisMax)
	}
	if x, set := field(yawBits); set {
		if uint16(x) == c.Yaw {
			return 0
		}
		c.Yaw = uint16(x)
	}
	if x, set := field(pitchBits); set {
		if x > 2*PitchMax || int16(int64(x)-PitchMax) == c.Pitch {
			return 0
		}
		c.Pitch = int16(int64(x) - PitchMax)
	}
	if x, set := field(buttonBits); set {
		if uint16(x) == c.Buttons {
			return 0
		}
		c.Buttons = uint16(x)
	}
	if flags == 0 || pos > uint(n) {
		return 0
	}
	*m = c
	return int(pos)
}

// readDeltaFields is readDelta field by field, with every error.
func readDeltaFields(r *bitstream.Reader, m *Move) error {
	at := r.Pos()
	same, err := r.ReadFlag("move.same")
	if err != nil || same {
		return err
	}
	anyChanged := false
	c, fat, err := changed(r, "move.dt.changed")
	if err != nil {
		return err
	}
	if c {
		v, err := r.ReadBits(dtBits, "move.dt")
		if err != nil {
			return err
		}
		if uint8(v) == m.Dt {
			return nonCanonical("move.dt.changed", fat)
		}
		m.Dt, anyChanged = uint8(v), true
	}
	if c, fat, err = changed(r, "move.forward.changed"); err != nil {
		return err
	}
	if c {
		v, err := readAxis(r, "move.forward")
		if err != nil {
			return err
		}
		if v == m.Forward {
			return nonCanonical("move.forward.changed", fat)
		}
		m.Forward, anyChanged = v, true
	}
	if c, fat, err = changed(r, "move.strafe.changed"); err != nil {
		return err
	}
	if c {
		v, err := readAxis(r, "move.strafe")
		if err != nil {
			return err
		}
		if v == m.Strafe {
			return nonCanonical("move.strafe.changed", fat)
		}
		m.Strafe, anyChanged = v, true
	}
	if c, fat, err = changed(r, "move.yaw.changed"); err != nil {
		return err
	}
	if c {
		v, err := r.ReadBits(yawBits, "move.yaw")
		if err != nil {
			return err
		}
		if uint16(v) == m.Yaw {
			return nonCanonical("move.yaw.changed", fat)
		}
		m.Yaw, anyChanged = uint16(v), true
	}
	if c, fat, err = changed(r, "move.pitch.changed"); err != nil {
		return err
	}
	if c {
		v, err := readPitch(r, "move.pitch")
		if err != nil {
			return err
		}
		if v == m.Pitch {
			return nonCanonical("move.pitch.changed", fat)
		}
		m.Pitch, anyChanged = v, true
	}
	if c, fat, err = changed(r, "move.buttons.changed"); err != nil {
		return err
	}
	if c {
		v, err := r.ReadBits(buttonBits, "move.buttons")
		if err != nil {
			return err
		}
		if uint16(v) == m.Buttons {
			return nonCanonical("move.buttons.changed", fat)
		}
		m.Buttons, anyChanged = uint16(v), true
	}
	if !anyChanged {
		return nonCanonical("move.same", at)
	}
	return nil
}

// nearestSeq reconstructs a full sequence number from its low 16 bits: the
// value closest to ref (within −32768..+32767).
func nearestSeq(low, ref uint64) (uint64, bool) {
	d := int64(int16(uint16(low) - uint16(ref)))
	if d < 0 {
		if uint64(-d) > ref {
			return 0, false
		}
		return ref - uint64(-d), true
	}
	if ref > math.MaxUint64-MaxWindow-uint64(d) {
		return 0, false
	}
	return ref + uint64(d), true
}

// maxLongSeq bounds a long-form sequence: far beyond any stream (2^62
// moves), and no overflow adding a section's moves.
const maxLongSeq = 1 << 62

// readSection decodes one move section into buf. It returns the number of
// moves (0 for an empty section) and the first one's sequence, reconstructed
// around next (the sequence the receiver expects next). Nothing is applied.
// Every move is decoded and checked, but only those from sequence keep on
// are stored, from buf[0] (keep ≤ first: all of them): the redundant copies
// of moves a receiver applied before (most of a section: one new move and
// the unacknowledged ones again) are decoded in place in buf[0], the
// running base of the next delta, instead of each copied to a slot of its
// own that nobody reads.
func readSection(r *bitstream.Reader, buf *[MaxWindow]Move, next, keep uint64) (n int, first uint64, err error) {
	// A short-form section's header is 56 bits, a window's worth: present,
	// count, long and the sequence and CRC in one read instead of four.
	// Anything else (no section, the long form, fewer bits left) is read
	// field by field below.
	if v, k, ok := r.PeekWindow(); ok && k == sectionHeaderBits && v&1 != 0 && v>>(1+countBits)&1 == 0 {
		at := r.Pos() + 1 + countBits + 1
		r.TryReadBits(sectionHeaderBits)
		n = int(v>>1&(1<<countBits-1)) + 1
		v >>= 1 + countBits + 1
		first, ok = nearestSeq(v&(1<<seqBits-1), next)
		if !ok || first == 0 {
			return 0, 0, &bitstream.ReadError{Field: "move.seq", Bit: at, Err: ErrBadSeq}
		}
		return readMoves(r, buf, n, first, v>>seqBits, skipped(n, first, keep))
	}
	has, err := r.ReadFlag("move.present")
	if err != nil || !has {
		return 0, 0, err
	}
	c, ok := r.TryReadBits(countBits)
	if !ok {
		if c, err = r.ReadBits(countBits, "move.count"); err != nil {
			return 0, 0, err
		}
	}
	n = int(c) + 1
	long, err := r.ReadFlag("move.long")
	if err != nil {
		return 0, 0, err
	}
	at := r.Pos()
	var crc uint64
	if !long && r.Remaining() >= seqBits+crcBits {
		// The short form's sequence and the CRC in one read.
		v, ok := r.TryReadBits(seqBits + crcBits)
		if !ok {
			if v, err = r.ReadBits(seqBits+crcBits, "move.seq"); err != nil {
				return 0, 0, err
			}
		}
		first, ok = nearestSeq(v&(1<<seqBits-1), next)
		if !ok || first == 0 {
			return 0, 0, &bitstream.ReadError{Field: "move.seq", Bit: at, Err: ErrBadSeq}
		}
		crc = v >> seqBits
		return readMoves(r, buf, n, first, crc, skipped(n, first, keep))
	}
	if long {
		// A continued stream on a new connection: the whole sequence,
		// taken as it is by a reader that has applied nothing yet (next
		// 1), held to the short form's window by one that has.
		first, err = r.ReadBits(longBits, "move.seq")
		if err != nil {
			return 0, 0, err
		}
		ok = first <= maxLongSeq && (next == 1 || first+32768 >= next && first <= next+32767)
	} else {
		var low uint64
		if low, err = r.ReadBits(seqBits, "move.seq"); err != nil {
			return 0, 0, err
		}
		first, ok = nearestSeq(low, next)
	}
	if !ok || first == 0 {
		return 0, 0, &bitstream.ReadError{Field: "move.seq", Bit: at, Err: ErrBadSeq}
	}
	if crc, err = r.ReadBits(crcBits, "move.crc"); err != nil {
		return 0, 0, err
	}
	return readMoves(r, buf, n, first, crc, skipped(n, first, keep))
}

// skipped is how many of a section's n moves from first lie below keep.
func skipped(n int, first, keep uint64) int {
	if keep <= first {
		return 0
	}
	return int(min(keep-first, uint64(n)))
}

// readMoves reads a section's n moves, after its header (sequence first,
// the newest move's CRC), into buf: the first skip (≤ n) are decoded in
// buf[0] and overwritten, move skip+j lands in buf[j].
func readMoves(r *bitstream.Reader, buf *[MaxWindow]Move, n int, first, crc uint64, skip int) (int, uint64, error) {
	m := &buf[0]
	if err := readFull(r, m); err != nil {
		return 0, 0, err
	}
	m.CRC, m.HasCRC = 0, false
	i := min(skip, n-1) // up to the first kept move: in place
	if i > 0 {
		if err := readDeltas(r, m, i); err != nil {
			return 0, 0, err
		}
	}
	m.Seq = first + uint64(i)
	for i++; i < n; i++ {
		j := i - skip
		buf[j] = buf[j-1]
		if err := readDelta(r, &buf[j]); err != nil {
			return 0, 0, err
		}
		buf[j].Seq = first + uint64(i)
	}
	if k := n - skip; k > 0 {
		buf[k-1].CRC, buf[k-1].HasCRC = uint32(crc), true
	}
	return n, first, nil
}
