package move

import (
	"encoding/binary"
	"math"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// MaxPayload is the size of ControlState.Payload.
const MaxPayload = 16

// Wire widths of the control section.
const (
	ackBits        = 16
	floatBits      = 32
	payloadLenBits = 5 // RangeBits(0, MaxPayload)
	// controlBaseBits is a control section without state: ack and the flag.
	controlBaseBits = ackBits + 1
	// stateBaseBits is the full state with an empty payload: 7 floats and the length.
	stateBaseBits = 7*floatBits + payloadLenBits
	// MaxControlBits is the largest control section.
	MaxControlBits = controlBaseBits + stateBaseBits + 8*MaxPayload
)

// ControlState is the state of the object a connection controls, at full
// precision: what client and server both simulate from moves, what the CRC
// covers, and what a correction carries (seed 004 § Hifi Updates: "full
// precision, complete state updates"). Payload carries up to MaxPayload bytes
// the game's step function needs besides position, velocity and heading
// (stamina, a jump timer, a stance); bytes past PayloadLen must be zero, so ==
// compares states exactly.
//
// The zero ControlState is valid: at the origin, at rest, facing +Z.
type ControlState struct {
	Pos        [3]float32 // metres; Y is up
	Vel        [3]float32 // metres per second
	Yaw        float32    // heading in radians
	PayloadLen uint8
	Payload    [MaxPayload]byte
}

// Validate reports ErrInvalidState for a NaN or infinite component, a
// PayloadLen above MaxPayload or non-zero bytes past PayloadLen.
//
// It runs for every full state a connection sends: the floats are tested
// by their exponent bits (all ones: NaN or ±Inf) and the payload's tail as
// two words with the first PayloadLen bytes masked off, no branch per byte
// (≈ 220 instructions a call before, most of them in the byte loop).
func (s *ControlState) Validate() error {
	const exp = 0x7f800000 // a float32's exponent bits
	// Unrolled, as in CRC: ranging over an array of the seven floats copied the array first.
	special := func(f float32) uint32 {
		b := math.Float32bits(f) & exp
		return (b ^ exp) - 1 // ≥ 2³¹ only when b == exp
	}
	sp := special(s.Pos[0]) | special(s.Pos[1]) | special(s.Pos[2]) |
		special(s.Vel[0]) | special(s.Vel[1]) | special(s.Vel[2]) | special(s.Yaw)
	if sp>>31 != 0 || s.PayloadLen > MaxPayload {
		return ErrInvalidState
	}
	n := uint(s.PayloadLen)
	lo := binary.LittleEndian.Uint64(s.Payload[0:8]) &^ lowBytes(n)
	hi := binary.LittleEndian.Uint64(s.Payload[8:16]) &^ lowBytes(max(n, 8)-8)
	if lo|hi != 0 {
		return ErrInvalidState
	}
	return nil
}

// lowBytes is a mask of the k ≤ 8 low bytes of a word (Go defines a shift
// by 64 as 0, so k = 8 gives every bit).
func lowBytes(k uint) uint64 { return uint64(1)<<(8*k) - 1 }

// Validate reads the payload as two words: this fails to compile when
// MaxPayload is not 16.
var _ = [1]struct{}{}[MaxPayload-16]

// writeControl writes the floats as four 56-bit fields: this fails to
// compile when they are not 224 bits.
var _ = [1]struct{}{}[7*floatBits-4*56]

// CRC is the CRC-32 (IEEE 802.3, the same value as hash/crc32.ChecksumIEEE)
// of the state's canonical bytes: the seven float32 bit patterns (Pos, Vel,
// Yaw) little-endian, then PayloadLen, then the first PayloadLen payload
// bytes. It covers the exact bits, so it only matches when client and server
// simulated bit-identical states (seed 004: the client sends a CRC of its
// control object; the server answers only when it differs from its own copy).
// A PayloadLen above MaxPayload is treated as MaxPayload. It does not
// allocate (hash/crc32 would: its slice escapes through a function variable).
func (s ControlState) CRC() uint32 {
	// Unrolled: ranging over an array of the seven floats copied the array first (≈ 55 of a
	// call's ≈ 260 instructions; a server checks one CRC per zone tick and
	// player).
	c := crcWord(^uint32(0), math.Float32bits(s.Pos[0]))
	c = crcWord(c, math.Float32bits(s.Pos[1]))
	c = crcWord(c, math.Float32bits(s.Pos[2]))
	c = crcWord(c, math.Float32bits(s.Vel[0]))
	c = crcWord(c, math.Float32bits(s.Vel[1]))
	c = crcWord(c, math.Float32bits(s.Vel[2]))
	c = crcWord(c, math.Float32bits(s.Yaw))
	n := min(s.PayloadLen, MaxPayload)
	c = crcByte(c, n)
	for _, b := range s.Payload[:n] {
		c = crcByte(c, b)
	}
	return ^c
}

// crcByte feeds one byte to a reflected CRC-32 (polynomial 0xEDB88320),
// crcWord four (little-endian) at once by slicing-by-4, from tables built
// once. (A 16-entry table declared in crcByte, four bits per step, made a
// CRC cost 335 ns — a few percent of a bot's CPU in botswarm, whose
// predictor replays and re-CRCs its unacknowledged moves on every full
// state; now ≈ 70 ns.)
func crcByte(c uint32, b byte) uint32 {
	return c>>8 ^ crcTab[0][byte(c)^b]
}

func crcWord(c, v uint32) uint32 {
	c ^= v
	return crcTab[3][byte(c)] ^ crcTab[2][byte(c>>8)] ^ crcTab[1][byte(c>>16)] ^ crcTab[0][c>>24]
}

var crcTab = func() (t [4][256]uint32) {
	for i := range t[0] {
		c := uint32(i)
		for range 8 {
			if c&1 != 0 {
				c = c>>1 ^ 0xEDB88320
			} else {
				c >>= 1
			}
		}
		t[0][i] = c
	}
	for k := 1; k < 4; k++ {
		for i := range t[k] {
			c := t[k-1][i]
			t[k][i] = c>>8 ^ t[0][byte(c)]
		}
	}
	return t
}()

// stateBits is the size of s on the wire.
func stateBits(s *ControlState) int { return stateBaseBits + 8*int(s.PayloadLen) }

// ControlUpdate is one decoded control section.
type ControlUpdate struct {
	// Ack is the newest move the server applied (0: none yet); the client
	// releases moves ≤ Ack.
	Ack uint64
	// HasState reports that State is present: the server's authoritative
	// state right after applying move Ack (and whatever else the server
	// simulated since, e.g. a collision).
	HasState bool
	State    ControlState
}

// WriteControl writes a control section: the low 16 bits of ack, a flag, and
// when s is not nil the full state. It is atomic: on error nothing is written
// and w is unchanged (its sticky Err included). Errors: ErrInvalidState,
// bitstream.ErrOverflow.
func WriteControl(w *bitstream.Writer, ack uint64, s *ControlState) error {
	if s != nil {
		if err := s.Validate(); err != nil {
			return err
		}
	}
	return writeControl(w, ack, s)
}

// writeControl is WriteControl for a state already validated (or nil).
func writeControl(w *bitstream.Writer, ack uint64, s *ControlState) error {
	n := controlBaseBits
	if s != nil {
		n += stateBits(s)
	}
	if n > w.Remaining() {
		return bitstream.ErrOverflow
	}
	// The ack and the state flag are one 17-bit field (the same bits, least
	// significant first), and every field takes WriteBits's inlined fast
	// path (TryWriteBits, WriteBits when it cannot): a full state's seven
	// calls were ≈ 45 instructions each.
	head := ack & (1<<ackBits - 1)
	if s != nil {
		head |= 1 << ackBits
	}
	if !w.TryWriteBits(head, ackBits+1) {
		w.WriteBits(head, ackBits+1)
	}
	if s != nil {
		// The seven 32-bit floats are 224 bits written least significant
		// first: the same bits as four 56-bit fields, four writes instead
		// of seven, cut from the float bits with shifts (they went through
		// a byte array and back: ≈ 60 instructions of moves).
		f := func(x float32) uint64 { return uint64(math.Float32bits(x)) }
		const m56 = 1<<56 - 1
		for _, v := range [4]uint64{
			(f(s.Pos[0]) | f(s.Pos[1])<<32) & m56,
			(f(s.Pos[1])>>24 | f(s.Pos[2])<<8 | f(s.Vel[0])<<40) & m56,
			(f(s.Vel[0])>>16 | f(s.Vel[1])<<16 | f(s.Vel[2])<<48) & m56,
			f(s.Vel[2])>>8 | f(s.Yaw)<<24,
		} {
			if !w.TryWriteBits(v, 56) {
				w.WriteBits(v, 56)
			}
		}
		if !w.TryWriteBits(uint64(s.PayloadLen), payloadLenBits) {
			w.WriteBits(uint64(s.PayloadLen), payloadLenBits)
		}
		if s.PayloadLen > 0 {
			w.WriteBytes(s.Payload[:s.PayloadLen])
		}
	}
	return nil
}

// ReadControl decodes a control section. newest is the newest move the client
// has sent (Stream.Newest): the ack is reconstructed as the latest sequence ≤
// newest with the same low 16 bits. Errors (wrapped in a *bitstream.ReadError
// naming the field): io.ErrUnexpectedEOF, ErrBadAck (it would acknowledge a
// move never sent), bitstream.ErrOutOfRange (PayloadLen > MaxPayload),
// ErrInvalidState (a NaN or infinite float). Never panics, never allocates.
func ReadControl(r *bitstream.Reader, newest uint64) (ControlUpdate, error) {
	var u ControlUpdate
	at := r.Pos()
	low, err := r.ReadBits(ackBits, "control.ack")
	if err != nil {
		return u, err
	}
	back := uint64(uint16(newest) - uint16(low))
	if back > newest {
		return u, &bitstream.ReadError{Field: "control.ack", Bit: at, Err: ErrBadAck}
	}
	u.Ack = newest - back
	if u.HasState, err = r.ReadFlag("control.state"); err != nil || !u.HasState {
		return u, err
	}
	s := &u.State
	for i, f := range [7]*float32{&s.Pos[0], &s.Pos[1], &s.Pos[2], &s.Vel[0], &s.Vel[1], &s.Vel[2], &s.Yaw} {
		if *f, err = readFloat(r, i); err != nil {
			return u, err
		}
	}
	l, err := r.ReadRangedInt(0, MaxPayload, "control.payload.len")
	if err != nil {
		return u, err
	}
	s.PayloadLen = uint8(l)
	if err := r.ReadBytes(s.Payload[:l], "control.payload"); err != nil {
		return u, err
	}
	return u, nil
}

// readFloat reads the i-th state float (wire order), refusing NaN and ±Inf.
func readFloat(r *bitstream.Reader, i int) (float32, error) {
	field := stateField(i)
	at := r.Pos()
	v, err := r.ReadBits(floatBits, field)
	if err != nil {
		return 0, err
	}
	f := math.Float32frombits(uint32(v))
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return 0, &bitstream.ReadError{Field: field, Bit: at, Err: ErrInvalidState}
	}
	return f, nil
}

func stateField(i int) string {
	switch i {
	case 0:
		return "control.pos.x"
	case 1:
		return "control.pos.y"
	case 2:
		return "control.pos.z"
	case 3:
		return "control.vel.x"
	case 4:
		return "control.vel.y"
	case 5:
		return "control.vel.z"
	}
	return "control.yaw"
}
