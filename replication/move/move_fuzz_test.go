package move

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// sectionBytes builds a valid section for the seed corpora.
func sectionBytes(first uint64, moves ...Move) []byte {
	s, _ := NewStream(Config{Window: MaxWindow})
	for s.NextSeq() < first {
		s.Add(Move{Seq: s.NextSeq()})
	}
	s.Ack(first - 1)
	for _, m := range moves {
		m.Seq = s.NextSeq()
		s.Add(m)
	}
	w := bitstream.NewWriter(make([]byte, 1200))
	s.Write(w)
	return w.Bytes()
}

// reencode writes decoded moves back as a section.
func reencode(buf *[MaxWindow]Move, n int, first uint64, long bool) (*bitstream.Writer, error) {
	w := bitstream.NewWriter(make([]byte, (MaxSectionBits+7)/8))
	if n == 0 {
		return w, w.WriteFlag(false)
	}
	var ring [MaxWindow]Move
	for i := range n {
		ring[(first+uint64(i))%MaxWindow] = buf[i]
	}
	ring[(first+uint64(n)-1)%MaxWindow].CRC = buf[n-1].CRC
	writeSection(w, &ring, first, n, long)
	return w, w.Err()
}

// sameBits reports whether the first n bits of a and b agree.
func sameBits(a, b []byte, n int) bool {
	for i := 0; i < n; i++ {
		if a[i/8]>>(i%8)&1 != b[i/8]>>(i%8)&1 {
			return false
		}
	}
	return true
}

// FuzzMoveSection feeds arbitrary bytes to Applier.Read in an arbitrary
// state: never a panic; on success the moves are applied once, in order, after
// last, and they are exactly the section's moves after last (as a full
// decode reads them, the newest with its CRC: Read stores only those, the
// redundant ones are decoded in place); on failure nothing is applied; and a
// decoded section re-encodes to exactly the bits it was read from (only
// canonical encodings are accepted).
func FuzzMoveSection(f *testing.F) {
	f.Add([]byte{}, uint64(0))
	f.Add([]byte{0}, uint64(7))
	f.Add(sectionBytes(1, Move{Dt: 32, Forward: 127}, Move{Dt: 32, Forward: 127}, Move{Dt: 32, Yaw: 9}), uint64(0))
	f.Add(sectionBytes(70000, Move{Dt: 32, Buttons: 3, CRC: 5}, Move{Dt: 33, Pitch: -1}), uint64(69990))
	f.Add(sectionBytes(3, Move{}, Move{Strafe: -127}), uint64(4))
	// Partly applied: two redundant copies, then two new moves.
	f.Add(sectionBytes(5, Move{Dt: 32, Yaw: 1}, Move{Dt: 32, Yaw: 2}, Move{Dt: 32, Yaw: 2, Buttons: 1}, Move{Dt: 31, Forward: -5}), uint64(6))
	f.Add(sectionBytes(5, Move{Dt: 32, Yaw: 1}, Move{Dt: 32, Yaw: 2}, Move{Dt: 32, Yaw: 3}), uint64(6))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, uint64(1<<40))
	f.Fuzz(func(t *testing.T, data []byte, last uint64) {
		var ap Applier
		ap.Reset(last)
		prev := last
		applied := 0
		var got []Move
		err := ap.Read(bitstream.NewReader(data), func(m Move) {
			if m.Seq <= prev {
				t.Fatalf("move %d applied after %d", m.Seq, prev)
			}
			if err := m.Validate(); err != nil {
				t.Fatalf("applied an invalid move %+v", m)
			}
			prev = m.Seq
			applied++
			got = append(got, m)
		})
		if err != nil {
			var re *bitstream.ReadError
			if !errors.As(err, &re) {
				t.Fatalf("error %v is not a *bitstream.ReadError", err)
			}
			if applied != 0 || ap.LastApplied() != last {
				t.Fatalf("failed Read applied %d moves, last %d → %d", applied, last, ap.LastApplied())
			}
			return
		}
		if ap.LastApplied() != prev {
			t.Fatalf("LastApplied %d, last applied move %d", ap.LastApplied(), prev)
		}
		// Decode again, re-encode, compare bit for bit.
		r := bitstream.NewReader(data)
		var buf [MaxWindow]Move
		n, first, err := readSection(r, &buf, last+1, 0)
		if err != nil {
			t.Fatalf("readSection failed where Read succeeded: %v", err)
		}
		var want []Move
		for _, m := range buf[:n] {
			if m.Seq > last {
				want = append(want, m)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("applied %d moves, the section holds %d after %d", len(got), len(want), last)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("applied move %d = %+v, the section's is %+v", i, got[i], want[i])
			}
		}
		w, err := reencode(&buf, n, first, n > 0 && data[0]&1 != 0 && data[(1+countBits)/8]>>((1+countBits)%8)&1 != 0)
		if err != nil {
			t.Fatal(err)
		}
		if w.BitLen() != r.Pos() || !sameBits(w.Bytes(), data, r.Pos()) {
			t.Fatalf("re-encoding differs: read %d bits, wrote %d", r.Pos(), w.BitLen())
		}
	})
}

// movesFrom turns fuzz bytes into valid moves, 10 bytes each.
func movesFrom(data []byte) []Move {
	var ms []Move
	for len(data) >= 10 && len(ms) < 2*MaxWindow {
		d := data[:10]
		data = data[10:]
		m := Move{Dt: d[0], Forward: int8(d[1]), Strafe: int8(d[2]),
			Yaw: uint16(d[3]) | uint16(d[4])<<8, Buttons: uint16(d[5]) | uint16(d[6])<<8,
			Pitch: int16(int(uint16(d[7])|uint16(d[8])<<8)%(2*PitchMax+1) - PitchMax),
			CRC:   uint32(d[9]) * 0x01010101}
		m.Forward = max(m.Forward, -AxisMax)
		m.Strafe = max(m.Strafe, -AxisMax)
		if d[9]&1 == 1 && len(ms) > 0 { // repeat the previous input: exercises the 1-bit path
			m = ms[len(ms)-1]
			m.CRC = uint32(d[9])
		}
		ms = append(ms, m)
	}
	return ms
}

// FuzzMoveRoundTrip: moves written by a Stream under any budget decode to
// exactly the oldest kept moves that fit, never exceed the budget, and
// re-encode to the same bits.
func FuzzMoveRoundTrip(f *testing.F) {
	f.Add([]byte("\x20\x7f\x00\x10\x00\x00\x00\x00\x00\x02\x20\x7f\x00\x10\x00\x00\x00\x00\x00\x01"), uint16(1200*8), uint64(1), uint8(0), uint8(32))
	f.Add(bytes.Repeat([]byte("\x20\x7f\x81\xff\xff\x01\x80\xff\x7f\x06"), 40), uint16(300), uint64(65530), uint8(3), uint8(64))
	f.Add(bytes.Repeat([]byte("\x00\x80\x80\x00\x00\x00\x00\x00\x00\x00"), 8), uint16(126), uint64(1<<33), uint8(0), uint8(4))
	f.Fuzz(func(t *testing.T, data []byte, budget uint16, first uint64, acked uint8, window uint8) {
		ms := movesFrom(data)
		if first == 0 || first > 1<<62 {
			first = 1
		}
		s, err := NewStream(Config{InputRate: 30, Window: 1 + int(window)%MaxWindow})
		if err != nil {
			t.Fatal(err)
		}
		s.last, s.lo, s.stats.LastAck = first-1, first-1, first-1 // start mid-connection
		for _, m := range ms {
			m.Seq = s.NextSeq()
			if err := s.Add(m); err != nil {
				t.Fatalf("Add(%+v): %v", m, err)
			}
		}
		s.Ack(s.lo + uint64(acked)%uint64(s.Len()+1))
		var buf [1200]byte
		w := bitstream.NewWriter(buf[:min(len(buf), (int(budget)+7)/8)])
		for w.Remaining() > int(budget) {
			w.WriteFlag(false)
		}
		start := w.BitLen()
		n, err := s.Write(w)
		if err != nil {
			if !errors.Is(err, bitstream.ErrOverflow) || w.Remaining() != 0 || w.BitLen() != start {
				t.Fatalf("Write: %v with %d bits left", err, w.Remaining())
			}
			return
		}
		if used := w.BitLen() - start; used > int(budget) {
			t.Fatalf("section of %d bits exceeds the %d-bit budget", used, budget)
		}
		if n > s.Len() {
			t.Fatalf("wrote %d of %d moves", n, s.Len())
		}
		r := bitstream.NewReader(w.Bytes())
		for range start {
			r.ReadFlag("pad")
		}
		var ap Applier
		ap.Reset(s.Oldest() - 1)
		var got []Move
		if err := ap.Read(r, func(m Move) { got = append(got, m) }); err != nil {
			t.Fatalf("Read of a written section: %v", err)
		}
		if len(got) != n {
			t.Fatalf("decoded %d moves, wrote %d", len(got), n)
		}
		for i, m := range got {
			want, ok := s.Move(s.Oldest() + uint64(i))
			if !ok || m.Seq != want.Seq || !sameInput(&m, &want) || m.HasCRC != (i == n-1) || (m.HasCRC && m.CRC != want.CRC) {
				t.Fatalf("move %d decoded as %+v, want %+v", i, m, want)
			}
		}
		var dec [MaxWindow]Move
		copy(dec[:], got)
		w2, err := reencode(&dec, n, s.Oldest(), s.LongSeq())
		if err != nil {
			t.Fatal(err)
		}
		if w2.BitLen() != w.BitLen()-start {
			t.Fatalf("re-encoded %d bits, original %d", w2.BitLen(), w.BitLen()-start)
		}
		orig := bitstream.NewReader(w.Bytes())
		for range start {
			orig.ReadFlag("pad")
		}
		again := bitstream.NewReader(w2.Bytes())
		for i := 0; i < w2.BitLen(); i++ {
			a, _ := orig.ReadFlag("a")
			b, _ := again.ReadFlag("b")
			if a != b {
				t.Fatalf("re-encoding differs at bit %d", i)
			}
		}
	})
}

// FuzzControlSection feeds arbitrary bytes to ReadControl: never a panic; on
// success the ack is not beyond newest, the state is valid, and re-encoding
// gives the same bits.
func FuzzControlSection(f *testing.F) {
	ctl := func(ack uint64, s *ControlState) []byte {
		w := bitstream.NewWriter(make([]byte, 64))
		WriteControl(w, ack, s)
		return w.Bytes()
	}
	f.Add([]byte{}, uint64(0))
	f.Add(ctl(5, nil), uint64(9))
	f.Add(ctl(65540, &ControlState{Pos: [3]float32{1, 2, 3}, Yaw: 0.5, PayloadLen: 3, Payload: [MaxPayload]byte{1, 2, 3}}), uint64(65541))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, uint64(3))
	f.Fuzz(func(t *testing.T, data []byte, newest uint64) {
		r := bitstream.NewReader(data)
		u, err := ReadControl(r, newest)
		if err != nil {
			var re *bitstream.ReadError
			if !errors.As(err, &re) {
				t.Fatalf("error %v is not a *bitstream.ReadError", err)
			}
			return
		}
		if u.Ack > newest || newest-u.Ack > 0xFFFF {
			t.Fatalf("ack %d reconstructed outside (newest−65536, newest = %d]", u.Ack, newest)
		}
		var st *ControlState
		if u.HasState {
			if err := u.State.Validate(); err != nil {
				t.Fatalf("decoded an invalid state %+v", u.State)
			}
			st = &u.State
		}
		w := bitstream.NewWriter(make([]byte, 64))
		if err := WriteControl(w, u.Ack, st); err != nil {
			t.Fatal(err)
		}
		if w.BitLen() != r.Pos() || !sameBits(w.Bytes(), data, r.Pos()) {
			t.Fatalf("re-encoding differs: read %d bits, wrote %d", r.Pos(), w.BitLen())
		}
	})
}

// FuzzControlRoundTrip: any state WriteControl accepts decodes to exactly
// itself (bits, including −0 and subnormals); any it refuses writes nothing.
func FuzzControlRoundTrip(f *testing.F) {
	f.Add(uint64(1), uint16(0), float32(1), float32(0), float32(-2.5), float32(7), float32(0), float32(1), float32(3.1), []byte("ab"))
	f.Add(uint64(65536), uint16(65535), float32(math.Copysign(0, -1)), float32(1e-40), float32(3e38), float32(0), float32(0), float32(0), float32(0), []byte{})
	f.Add(uint64(9), uint16(2), float32(math.NaN()), float32(0), float32(0), float32(0), float32(0), float32(0), float32(0), bytes.Repeat([]byte{1}, 20))
	f.Fuzz(func(t *testing.T, ack uint64, ahead uint16, x, y, z, vx, vy, vz, yaw float32, payload []byte) {
		if ack > math.MaxUint64-0xFFFF {
			ack = 0
		}
		s := ControlState{Pos: [3]float32{x, y, z}, Vel: [3]float32{vx, vy, vz}, Yaw: yaw}
		s.PayloadLen = uint8(copy(s.Payload[:], payload))
		w := bitstream.NewWriter(make([]byte, 64))
		if err := WriteControl(w, ack, &s); err != nil {
			if !errors.Is(err, ErrInvalidState) || s.Validate() == nil || w.BitLen() != 0 {
				t.Fatalf("WriteControl(%+v) = %v after %d bits", s, err, w.BitLen())
			}
			return
		}
		u, err := ReadControl(bitstream.NewReader(w.Bytes()), ack+uint64(ahead))
		if err != nil {
			t.Fatal(err)
		}
		if u.Ack != ack || !u.HasState || u.State.CRC() != s.CRC() || u.State != s {
			t.Fatalf("decoded %+v, want ack %d state %+v", u, ack, s)
		}
	})
}

// FuzzDeltaFast: readDelta's one-window path (deltaFast) reads what the
// field-by-field path reads, from arbitrary bits after an arbitrary
// previous move: the same move, the same bits consumed, the same error
// (it hands every delta it cannot take to that path, so an error is
// always that path's). Both readers get 8 bytes of slack past the data, as
// a server's payload has, so the window is taken near the end too.
func FuzzDeltaFast(f *testing.F) {
	f.Add([]byte{0x01}, uint8(32), int8(0), int8(0), uint16(0), int16(0), uint16(0), uint8(0))
	f.Add([]byte{0x00, 0x00}, uint8(32), int8(0), int8(0), uint16(0), int16(0), uint16(0), uint8(3))
	f.Add(sectionBytes(1, Move{Dt: 32, Yaw: 1}, Move{Dt: 32, Yaw: 2}), uint8(32), int8(0), int8(0), uint16(1), int16(0), uint16(0), uint8(64))
	f.Add([]byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, uint8(1), int8(-127), int8(127), uint16(65535), int16(-PitchMax), uint16(65535), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, dt uint8, fwd, str int8, yaw uint16, pitch int16, buttons uint16, skip uint8) {
		ra, rb := twinReaders(data, skip)
		ma := fuzzPrev(dt, fwd, str, yaw, pitch, buttons)
		mb := ma
		ea := readDelta(&ra, &ma)
		eb := readDeltaFields(&rb, &mb)
		if (ea == nil) != (eb == nil) || ea != nil && ea.Error() != eb.Error() {
			t.Fatalf("readDelta: %v; field by field: %v", ea, eb)
		}
		if ea == nil && (ma != mb || ra.Pos() != rb.Pos()) {
			t.Fatalf("readDelta read %+v to bit %d; field by field %+v to bit %d", ma, ra.Pos(), mb, rb.Pos())
		}
	})
}

// FuzzReadDeltas: readDeltas' shared windows read what k calls of the
// field-by-field path read, from arbitrary bits after an arbitrary
// previous move: the same move, the same bits consumed, the same error
// (a window ends at a delta it cannot take, which that path then reads
// or rejects from its first bit). The readers have a server payload's 8
// bytes of slack.
func FuzzReadDeltas(f *testing.F) {
	f.Add([]byte{0xff}, uint8(32), int8(0), int8(0), uint16(0), int16(0), uint16(0), uint8(0), uint8(5))
	// A section's four deltas after its first move (bit 135: the short
	// header's 56 bits and a full move's 79), two turns sharing a window.
	f.Add(sectionBytes(1, Move{Dt: 32, Yaw: 1}, Move{Dt: 32, Yaw: 2}, Move{Dt: 32, Yaw: 9}, Move{Dt: 32, Yaw: 9}, Move{Dt: 32, Yaw: 400, Forward: 127}),
		uint8(32), int8(0), int8(0), uint16(1), int16(0), uint16(0), uint8(sectionHeaderBits+fullMoveBits), uint8(4))
	f.Add([]byte{0x00, 0x00, 0x01}, uint8(32), int8(0), int8(0), uint16(0), int16(0), uint16(0), uint8(3), uint8(2))
	f.Add([]byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, uint8(1), int8(-127), int8(127), uint16(65535), int16(-PitchMax), uint16(65535), uint8(0), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, dt uint8, fwd, str int8, yaw uint16, pitch int16, buttons uint16, skip, k uint8) {
		k %= MaxWindow
		ra, rb := twinReaders(data, skip)
		ma := fuzzPrev(dt, fwd, str, yaw, pitch, buttons)
		mb := ma
		ea := readDeltas(&ra, &ma, int(k))
		var eb error
		for range k {
			if eb = readDeltaFields(&rb, &mb); eb != nil {
				break
			}
		}
		if (ea == nil) != (eb == nil) || ea != nil && ea.Error() != eb.Error() {
			t.Fatalf("readDeltas(%d): %v; field by field: %v", k, ea, eb)
		}
		if ea == nil && (ma != mb || ra.Pos() != rb.Pos()) {
			t.Fatalf("readDeltas(%d) read %+v to bit %d; field by field %+v to bit %d", k, ma, ra.Pos(), mb, rb.Pos())
		}
	})
}

// fuzzPrev is a fuzz target's previous move from its arguments, clamped to
// what a move can hold.
func fuzzPrev(dt uint8, fwd, str int8, yaw uint16, pitch int16, buttons uint16) Move {
	return Move{Seq: 9, Dt: dt, Forward: max(fwd, -AxisMax), Strafe: max(str, -AxisMax), Yaw: yaw,
		Pitch: min(max(pitch, -PitchMax), PitchMax), Buttons: buttons}
}

// twinReaders are two readers of data (with a server payload's 8 bytes of
// slack after it) at bit skip (at most its end), for a fuzz target to
// read the same bits two ways.
func twinReaders(data []byte, skip uint8) (ra, rb bitstream.Reader) {
	buf := append(append([]byte(nil), data...), make([]byte, 8)...)
	nbits := 8 * len(data)
	at := min(int(skip), nbits)
	ra.ResetBits(buf, nbits)
	rb.ResetBits(buf, nbits)
	if at > 0 {
		ra.ReadBits(uint(at), "skip")
		rb.ReadBits(uint(at), "skip")
	}
	return ra, rb
}
