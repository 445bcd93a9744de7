package move

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

func randState(rng *rand.Rand) ControlState {
	var s ControlState
	for i := range 3 {
		s.Pos[i] = float32(rng.NormFloat64() * 1000)
		s.Vel[i] = float32(rng.NormFloat64() * 10)
	}
	s.Yaw = float32(rng.Float64() * 2 * math.Pi)
	s.PayloadLen = uint8(rng.IntN(MaxPayload + 1))
	for i := range int(s.PayloadLen) {
		s.Payload[i] = byte(rng.Uint32())
	}
	return s
}

func TestControlRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 5))
	st := randState(rng)
	tests := []struct {
		name   string
		ack    uint64
		newest uint64
		state  *ControlState
		bits   int
	}{
		{name: "ack only", ack: 41, newest: 45, bits: 17},
		{name: "nothing applied yet", ack: 0, newest: 3, bits: 17},
		{name: "ack across the 16-bit wrap", ack: 65530, newest: 65540, bits: 17},
		{name: "ack far behind newest", ack: 70000, newest: 70000 + 65535, bits: 17},
		{name: "full state", ack: 9, newest: 12, state: &st, bits: 17 + 229 + 8*int(st.PayloadLen)},
		{name: "full state, empty payload", ack: 1 << 40, newest: 1<<40 + 1, state: &ControlState{Pos: [3]float32{float32(math.Copysign(0, -1)), 1, 2}}, bits: 17 + 229},
		{name: "full state, full payload", ack: 2, newest: 2, state: &ControlState{PayloadLen: MaxPayload, Payload: [MaxPayload]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}}, bits: 17 + 229 + 128},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := bitstream.NewWriter(make([]byte, 128))
			if err := WriteControl(w, tc.ack, tc.state); err != nil {
				t.Fatal(err)
			}
			if w.BitLen() != tc.bits {
				t.Fatalf("wrote %d bits, want %d", w.BitLen(), tc.bits)
			}
			r := bitstream.NewReader(nil)
			r.ResetBits(w.Bytes(), w.BitLen())
			u, err := ReadControl(r, tc.newest)
			if err != nil {
				t.Fatal(err)
			}
			if u.Ack != tc.ack || u.HasState != (tc.state != nil) || r.Remaining() != 0 {
				t.Fatalf("decoded %+v (remaining %d), want ack %d state %v", u, r.Remaining(), tc.ack, tc.state != nil)
			}
			if tc.state != nil && (u.State != *tc.state || u.State.CRC() != tc.state.CRC()) {
				t.Fatalf("state decoded as %+v, want %+v", u.State, *tc.state)
			}
		})
	}
}

func TestReadControlRejects(t *testing.T) {
	floats := func(f float32) *spec {
		s := new(spec).field(5, 16).flag(true)
		for i := 0; i < 6; i++ {
			s.field(0, 32)
		}
		return s.field(uint64(math.Float32bits(f)), 32)
	}
	tests := []struct {
		name   string
		bits   *spec
		newest uint64
		field  string
		err    error
	}{
		{"empty", new(spec), 10, "control.ack", io.ErrUnexpectedEOF},
		{"ack of an unsent move", new(spec).field(11, 16).flag(false), 10, "control.ack", ErrBadAck},
		{"ack before any move", new(spec).field(1, 16).flag(false), 0, "control.ack", ErrBadAck},
		{"flag missing", new(spec).field(5, 16), 10, "control.state", io.ErrUnexpectedEOF},
		{"NaN yaw", floats(float32(math.NaN())), 10, "control.yaw", ErrInvalidState},
		{"infinite x", new(spec).field(5, 16).flag(true).field(uint64(math.Float32bits(float32(math.Inf(1)))), 32), 10, "control.pos.x", ErrInvalidState},
		{"payload length 17", floats(1).field(17, 5), 10, "control.payload.len", bitstream.ErrOutOfRange},
		{"payload cut short", floats(1).field(3, 5).field(0, 16), 10, "control.payload", io.ErrUnexpectedEOF},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bits := tc.bits.String()
			buf := make([]byte, (len(bits)+7)/8)
			for i := range bits {
				buf[i/8] |= (bits[i] - '0') << (i % 8)
			}
			r := bitstream.NewReader(nil)
			r.ResetBits(buf, len(bits))
			_, err := ReadControl(r, tc.newest)
			var re *bitstream.ReadError
			if !errors.As(err, &re) || re.Field != tc.field || !errors.Is(err, tc.err) {
				t.Fatalf("ReadControl error %v; want %v at %s", err, tc.err, tc.field)
			}
		})
	}
}

func TestWriteControlRefuses(t *testing.T) {
	tests := []struct {
		name  string
		state ControlState
		room  int
		err   error
	}{
		{"NaN velocity", ControlState{Vel: [3]float32{0, float32(math.NaN()), 0}}, 64, ErrInvalidState},
		{"payload length 17", ControlState{PayloadLen: 17}, 64, ErrInvalidState},
		{"garbage past the payload", ControlState{PayloadLen: 1, Payload: [MaxPayload]byte{1, 2}}, 64, ErrInvalidState},
		{"one bit short", ControlState{}, 17 + 229 - 1, bitstream.ErrOverflow},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			buf := make([]byte, 64)
			w := bitstream.NewWriter(buf)
			for w.Remaining() > tc.room {
				w.WriteFlag(true)
			}
			before := w.BitLen()
			if err := WriteControl(w, 1, &tc.state); !errors.Is(err, tc.err) {
				t.Fatalf("WriteControl = %v, want %v", err, tc.err)
			}
			if w.BitLen() != before || w.Err() != nil {
				t.Fatalf("a refused section changed the writer: %d → %d bits, err %v", before, w.BitLen(), w.Err())
			}
		})
	}
}

// TestCRCCoversEveryBit: flipping any single bit of any float or of the
// live payload changes the CRC; bytes past PayloadLen are not covered.
func TestCRCCoversEveryBit(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 7))
	for range 50 {
		s := randState(rng)
		base := s.CRC()
		if s.CRC() != base {
			t.Fatal("CRC is not a function of the state")
		}
		for f := range 7 {
			for bit := range 32 {
				m := s
				ptr := [7]*float32{&m.Pos[0], &m.Pos[1], &m.Pos[2], &m.Vel[0], &m.Vel[1], &m.Vel[2], &m.Yaw}[f]
				*ptr = math.Float32frombits(math.Float32bits(*ptr) ^ 1<<bit)
				if m.CRC() == base {
					t.Fatalf("flipping bit %d of float %d left the CRC unchanged", bit, f)
				}
			}
		}
		for i := range int(s.PayloadLen) {
			m := s
			m.Payload[i] ^= 0x10
			if m.CRC() == base {
				t.Fatalf("changing payload byte %d left the CRC unchanged", i)
			}
		}
		if s.PayloadLen < MaxPayload {
			m := s
			m.PayloadLen++
			if m.CRC() == base {
				t.Fatal("growing the payload by a zero byte left the CRC unchanged")
			}
		}
	}
}

// TestCRCIsCRC32IEEE: CRC equals hash/crc32.ChecksumIEEE over the documented
// canonical bytes, so another language's standard CRC-32 reproduces it.
func TestCRCIsCRC32IEEE(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 11))
	for range 1000 {
		s := randState(rng)
		var b []byte
		for _, f := range [7]float32{s.Pos[0], s.Pos[1], s.Pos[2], s.Vel[0], s.Vel[1], s.Vel[2], s.Yaw} {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
		}
		b = append(b, s.PayloadLen)
		b = append(b, s.Payload[:s.PayloadLen]...)
		if got, want := s.CRC(), crc32.ChecksumIEEE(b); got != want {
			t.Fatalf("CRC = %#08x, crc32.ChecksumIEEE of the canonical bytes = %#08x", got, want)
		}
	}
}

// validateRef is Validate as first written, a component and a byte at a
// time: the reference the word-wise Validate must match.
func validateRef(s *ControlState) error {
	for _, f := range [7]float32{s.Pos[0], s.Pos[1], s.Pos[2], s.Vel[0], s.Vel[1], s.Vel[2], s.Yaw} {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return ErrInvalidState
		}
	}
	if s.PayloadLen > MaxPayload {
		return ErrInvalidState
	}
	for _, b := range s.Payload[s.PayloadLen:] {
		if b != 0 {
			return ErrInvalidState
		}
	}
	return nil
}

// TestValidateMatchesReference: every payload length against a non-zero
// byte at every position, and every float slot against the special and
// the edge values (the largest finite, the smallest subnormal, -0).
func TestValidateMatchesReference(t *testing.T) {
	check := func(s ControlState, what string) {
		t.Helper()
		if got, want := s.Validate(), validateRef(&s); got != want {
			t.Fatalf("%s: Validate = %v, reference %v (%+v)", what, got, want, s)
		}
	}
	for n := 0; n <= MaxPayload+2; n++ {
		for at := -1; at < MaxPayload; at++ {
			var s ControlState
			s.PayloadLen = uint8(n)
			if at >= 0 {
				s.Payload[at] = 0x80 >> (at % 8)
			}
			check(s, fmt.Sprintf("len %d, byte %d set", n, at))
		}
	}
	edge := []float32{0, float32(math.Copysign(0, -1)), 1, -1, math.MaxFloat32, -math.MaxFloat32,
		math.SmallestNonzeroFloat32, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		math.Float32frombits(0x7f800001), math.Float32frombits(0xffc00000), math.Float32frombits(0x7f7fffff)}
	for slot := range 7 {
		for _, f := range edge {
			var s ControlState
			p := [7]*float32{&s.Pos[0], &s.Pos[1], &s.Pos[2], &s.Vel[0], &s.Vel[1], &s.Vel[2], &s.Yaw}
			*p[slot] = f
			check(s, fmt.Sprintf("float %d = %#x", slot, math.Float32bits(f)))
		}
	}
}
