package move

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// bitString renders the first n bits of a stream in stream order ('0'/'1').
func bitString(p []byte, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteByte('0' + p[i/8]>>(i%8)&1)
	}
	return b.String()
}

// spec builds an expected bit string straight from the protocol document:
// each field LSB first.
type spec struct{ strings.Builder }

func (s *spec) field(v uint64, n int) *spec {
	for i := 0; i < n; i++ {
		s.WriteByte('0' + byte(v>>i&1))
	}
	return s
}

func (s *spec) flag(b bool) *spec {
	if b {
		return s.field(1, 1)
	}
	return s.field(0, 1)
}

// fullMove appends a move in full: dt 8, forward+127 8, strafe+127 8, yaw 16,
// pitch+16383 15, buttons 16.
func (s *spec) fullMove(m Move) *spec {
	return s.field(uint64(m.Dt), 8).field(uint64(int(m.Forward)+127), 8).field(uint64(int(m.Strafe)+127), 8).
		field(uint64(m.Yaw), 16).field(uint64(int(m.Pitch)+16383), 15).field(uint64(m.Buttons), 16)
}

// streamWith returns a Stream holding moves (Seq assigned from 1 after skip
// acknowledged ones).
func streamWith(t testing.TB, cfg Config, first uint64, moves ...Move) *Stream {
	t.Helper()
	s, err := NewStream(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for s.NextSeq() < first {
		if err := s.Add(Move{Seq: s.NextSeq()}); err != nil {
			t.Fatal(err)
		}
	}
	s.Ack(first - 1)
	for _, m := range moves {
		m.Seq = s.NextSeq()
		if err := s.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func TestSectionBitExact(t *testing.T) {
	a := Move{Dt: 32, Forward: 127, Strafe: -127, Yaw: 0xBEEF, Pitch: -100, Buttons: 0x8001}
	b := a // identical input: 1 bit
	c := a // yaw and buttons change
	c.Yaw, c.Buttons = 0x1234, 0
	c.CRC = 0xDEADBEEF                                                          // the newest move's CRC goes into the header
	d := Move{Dt: 33, Strafe: -127, Yaw: 0x1234, Pitch: 16383, CRC: 0xCAFEF00D} // dt, forward, pitch change
	tests := []struct {
		name  string
		first uint64
		moves []Move
		want  *spec
	}{
		{name: "empty section is one zero bit", first: 1, want: new(spec).flag(false)},
		{name: "one move: header and full move", first: 1, moves: []Move{c},
			want: new(spec).flag(true).field(0, 6).flag(false).field(1, 16).field(0xDEADBEEF, 32).fullMove(c)},
		{name: "same input costs one bit; changes cost 7 bits plus fields", first: 70000, moves: []Move{a, b, c},
			want: new(spec).flag(true).field(2, 6).flag(false).field(70000&0xFFFF, 16).field(0xDEADBEEF, 32).fullMove(a).
				flag(true).
				flag(false).flag(false).flag(false).flag(false).flag(true).field(0x1234, 16).flag(false).flag(true).field(0, 16)},
		{name: "dt, forward and pitch change", first: 5, moves: []Move{c, d},
			want: new(spec).flag(true).field(1, 6).flag(false).field(5, 16).field(0xCAFEF00D, 32).fullMove(c).
				flag(false).flag(true).field(33, 8).flag(true).field(127, 8).flag(false).flag(false).
				flag(true).field(16383+16383, 15).flag(false)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := streamWith(t, Config{}, tc.first, tc.moves...)
			var buf [256]byte
			w := bitstream.NewWriter(buf[:])
			n, err := s.Write(w)
			if err != nil || n != len(tc.moves) {
				t.Fatalf("Write = %d, %v; want %d moves", n, err, len(tc.moves))
			}
			want := tc.want.String()
			if got := bitString(w.Bytes(), w.BitLen()); got != want {
				t.Fatalf("bits\n got %s\nwant %s", got, want)
			}
			// The Applier decodes exactly these moves, the last with its CRC.
			var ap Applier
			ap.Reset(tc.first - 1)
			var got []Move
			if err := ap.Read(bitstream.NewReader(w.Bytes()), func(m Move) { got = append(got, m) }); err != nil {
				t.Fatal(err)
			}
			for i, m := range got {
				want := tc.moves[i]
				want.Seq = tc.first + uint64(i)
				if i == len(got)-1 {
					want.HasCRC = true
				} else {
					want.CRC = 0
				}
				if m != want {
					t.Fatalf("move %d decoded as %+v, want %+v", i, m, want)
				}
			}
			if len(got) != len(tc.moves) {
				t.Fatalf("decoded %d moves, want %d", len(got), len(tc.moves))
			}
		})
	}
}

func TestDeltaCost(t *testing.T) {
	base := Move{Dt: 32, Forward: 127, Yaw: 100}
	tests := []struct {
		name   string
		change func(*Move)
		bits   int
	}{
		{"nothing", func(*Move) {}, 1},
		{"yaw", func(m *Move) { m.Yaw++ }, 1 + 6 + 16},
		{"forward", func(m *Move) { m.Forward = 0 }, 1 + 6 + 8},
		{"pitch", func(m *Move) { m.Pitch = 5 }, 1 + 6 + 15},
		{"dt and buttons", func(m *Move) { m.Dt, m.Buttons = 16, 1 }, 1 + 6 + 8 + 16},
		{"everything", func(m *Move) { *m = Move{Dt: 1, Forward: 1, Strafe: 1, Yaw: 1, Pitch: 1, Buttons: 1} }, maxDeltaBits},
		{"seq and crc do not count", func(m *Move) { m.Seq, m.CRC = 99, 7 }, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := base
			tc.change(&m)
			if got := deltaBits(&base, &m); got != tc.bits {
				t.Fatalf("deltaBits = %d, want %d", got, tc.bits)
			}
			w := bitstream.NewWriter(make([]byte, 64))
			writeDelta(w, &base, &m)
			if w.BitLen() != tc.bits {
				t.Fatalf("writeDelta wrote %d bits, deltaBits says %d", w.BitLen(), tc.bits)
			}
		})
	}
}

func TestReadSectionRejects(t *testing.T) {
	valid := func() *spec {
		return new(spec).flag(true).field(1, 6).flag(false).field(1, 16).field(0, 32).fullMove(Move{Dt: 32})
	}
	tests := []struct {
		name  string
		bits  *spec
		last  uint64 // Applier.Reset
		field string
		err   error
	}{
		{name: "empty input", bits: new(spec), field: "move.present", err: io.ErrUnexpectedEOF},
		{name: "truncated header", bits: new(spec).flag(true).field(3, 6).flag(false).field(1, 10), field: "move.seq", err: io.ErrUnexpectedEOF},
		{name: "forward code 255", bits: new(spec).flag(true).field(0, 6).flag(false).field(1, 16).field(0, 32).field(0, 8).field(255, 8),
			field: "move.forward", err: bitstream.ErrOutOfRange},
		{name: "pitch code 32767", bits: new(spec).flag(true).field(0, 6).flag(false).field(1, 16).field(0, 32).field(0, 8).field(127, 8).field(127, 8).field(0, 16).field(32767, 15),
			field: "move.pitch", err: bitstream.ErrOutOfRange},
		// The same with the whole move there (the two-read path).
		{name: "forward code 255, whole move", bits: new(spec).flag(true).field(0, 6).flag(false).field(1, 16).field(0, 32).field(0, 8).field(255, 8).field(0, 8+16+15+16),
			field: "move.forward", err: bitstream.ErrOutOfRange},
		{name: "strafe code 255, whole move", bits: new(spec).flag(true).field(0, 6).flag(false).field(1, 16).field(0, 32).field(0, 8).field(0, 8).field(255, 8).field(0, 16+15+16),
			field: "move.strafe", err: bitstream.ErrOutOfRange},
		{name: "pitch code 32767, whole move", bits: new(spec).flag(true).field(0, 6).flag(false).field(1, 16).field(0, 32).field(0, 8).field(127, 8).field(127, 8).field(0, 16).field(32767, 15).field(0, 16),
			field: "move.pitch", err: bitstream.ErrOutOfRange},
		{name: "same flag clear but nothing changed", bits: valid().flag(false).field(0, 6), field: "move.same", err: ErrNonCanonical},
		{name: "dt flagged changed to its old value", bits: valid().flag(false).flag(true).field(32, 8), field: "move.dt.changed", err: ErrNonCanonical},
		{name: "buttons flagged changed to their old value", bits: valid().flag(false).field(0, 5).flag(true).field(0, 16), field: "move.buttons.changed", err: ErrNonCanonical},
		{name: "second move missing", bits: valid(), field: "move.same", err: io.ErrUnexpectedEOF},
		{name: "sequence reconstructs to 0", bits: new(spec).flag(true).field(0, 6).flag(false).field(0, 16).field(0, 32).fullMove(Move{}),
			field: "move.seq", err: ErrBadSeq},
		{name: "sequence would be negative", bits: new(spec).flag(true).field(0, 6).flag(false).field(0xFFF0, 16).field(0, 32).fullMove(Move{}),
			last: 5, field: "move.seq", err: ErrBadSeq},
		{name: "long sequence 0", bits: new(spec).flag(true).field(0, 6).flag(true).field(0, 64).field(0, 32).fullMove(Move{}),
			field: "move.seq", err: ErrBadSeq},
		{name: "long sequence beyond 2^62", bits: new(spec).flag(true).field(0, 6).flag(true).field(1<<62+1, 64).field(0, 32).fullMove(Move{}),
			field: "move.seq", err: ErrBadSeq},
		{name: "long sequence far from what was applied", bits: new(spec).flag(true).field(0, 6).flag(true).field(40000, 64).field(0, 32).fullMove(Move{}),
			last: 5, field: "move.seq", err: ErrBadSeq},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bits := tc.bits.String()
			buf := make([]byte, (len(bits)+7)/8)
			for i := range bits {
				buf[i/8] |= (bits[i] - '0') << (i % 8)
			}
			var ap Applier
			ap.Reset(tc.last)
			r := bitstream.NewReader(nil)
			r.ResetBits(buf, len(bits))
			applied := 0
			err := ap.Read(r, func(Move) { applied++ })
			var re *bitstream.ReadError
			if !errors.As(err, &re) || re.Field != tc.field || !errors.Is(err, tc.err) {
				t.Fatalf("Read error %v; want %v at field %s", err, tc.err, tc.field)
			}
			// Either form's sequence starts after present, count and long,
			// whether its header was read in one window or field by field.
			if seqAt := 1 + countBits + 1; tc.err == ErrBadSeq && re.Bit != seqAt {
				t.Fatalf("Read error at bit %d, want %d", re.Bit, seqAt)
			}
			if applied != 0 || ap.LastApplied() != tc.last || ap.Stats().Malformed != 1 {
				t.Fatalf("malformed section applied %d moves, last %d, stats %+v", applied, ap.LastApplied(), ap.Stats())
			}
		})
	}
}

func TestNearestSeq(t *testing.T) {
	tests := []struct {
		name      string
		low, ref  uint64
		want      uint64
		wantValid bool
	}{
		{"same", 10, 10, 10, true},
		{"slightly behind", 5, 10, 5, true},
		{"slightly ahead", 40, 10, 40, true},
		{"behind across the 16-bit wrap", 0xFFF0, 65536 + 5, 0xFFF0, true},
		{"ahead across the 16-bit wrap", 3, 0xFFF0, 65536 + 3, true},
		{"farthest behind", (100000 - 32768) & 0xFFFF, 100000, 100000 - 32768, true},
		{"farthest ahead", (100000 + 32767) & 0xFFFF, 100000, 100000 + 32767, true},
		{"below zero", 0xFFFF, 3, 0, false},
		{"past 2^64", 100, ^uint64(0) - 10, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := nearestSeq(tc.low, tc.ref)
			if ok != tc.wantValid || (ok && got != tc.want) {
				t.Fatalf("nearestSeq(%#x, %d) = %d, %v; want %d, %v", tc.low, tc.ref, got, ok, tc.want, tc.wantValid)
			}
		})
	}
}

func TestInputConversions(t *testing.T) {
	axes := []struct {
		in   float64
		want int8
	}{{0, 0}, {1, 127}, {-1, -127}, {2, 127}, {-5, -127}, {0.5, 64}, {-0.5, -64}, {nan(), 0}}
	for _, a := range axes {
		if got := Axis(a.in); got != a.want {
			t.Errorf("Axis(%v) = %d, want %d", a.in, got, a.want)
		}
	}
	yaws := []struct {
		in   float64
		want uint16
	}{{0, 0}, {pi / 2, 16384}, {pi, 32768}, {-pi / 2, 49152}, {2 * pi, 0}, {5 * pi, 32768}, {nan(), 0}}
	for _, y := range yaws {
		if got := YawFromRadians(y.in); got != y.want {
			t.Errorf("YawFromRadians(%v) = %d, want %d", y.in, got, y.want)
		}
	}
	pitches := []struct {
		in   float64
		want int16
	}{{0, 0}, {pi / 4, 8192}, {pi, PitchMax}, {-pi, -PitchMax}, {nan(), 0}}
	for _, p := range pitches {
		if got := PitchFromRadians(p.in); got != p.want {
			t.Errorf("PitchFromRadians(%v) = %d, want %d", p.in, got, p.want)
		}
	}
	if err := (Move{Forward: Axis(-1), Pitch: PitchFromRadians(-pi)}).Validate(); err != nil {
		t.Errorf("converted extremes do not validate: %v", err)
	}
}
