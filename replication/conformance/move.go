package conformance

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/move"
)

// mv is a move's wire fields.
type mv struct {
	Dt      int `json:"dt"`
	Forward int `json:"forward"`
	Strafe  int `json:"strafe"`
	Yaw     int `json:"yaw"`
	Pitch   int `json:"pitch"`
	Buttons int `json:"buttons"`
}

func (m mv) move() move.Move {
	return move.Move{Dt: uint8(m.Dt), Forward: int8(m.Forward), Strafe: int8(m.Strafe), Yaw: uint16(m.Yaw), Pitch: int16(m.Pitch), Buttons: uint16(m.Buttons)}
}

func mvOf(m move.Move) mv {
	return mv{int(m.Dt), int(m.Forward), int(m.Strafe), int(m.Yaw), int(m.Pitch), int(m.Buttons)}
}

// stateHex is the control state's canonical bytes (the CRC input, § 5.3).
func stateHex(s move.ControlState) string { return hx(stateBytes(s)) }

// stateBytes builds the CRC input from the spec's table, independently of
// ControlState.CRC.
func stateBytes(s move.ControlState) []byte {
	var b []byte
	for _, f := range [7]float32{s.Pos[0], s.Pos[1], s.Pos[2], s.Vel[0], s.Vel[1], s.Vel[2], s.Yaw} {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	b = append(b, s.PayloadLen)
	return append(b, s.Payload[:s.PayloadLen]...)
}

func parseState(h string) (move.ControlState, error) {
	b, err := hexBytes(h)
	if err != nil {
		return move.ControlState{}, err
	}
	if len(b) < 29 || len(b) != 29+int(b[28]) || b[28] > move.MaxPayload {
		return move.ControlState{}, fmt.Errorf("state %q: bad length", h)
	}
	var s move.ControlState
	f := func(i int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])) }
	s.Pos = [3]float32{f(0), f(1), f(2)}
	s.Vel = [3]float32{f(3), f(4), f(5)}
	s.Yaw = f(6)
	s.PayloadLen = b[28]
	copy(s.Payload[:], b[29:])
	return s, nil
}

type crcCase struct {
	Name  string `json:"name"`
	State string `json:"state"`
	CRC   string `json:"crc"`
}

type sectionCase struct {
	Name        string   `json:"name"`
	FirstSeq    string   `json:"first_seq"`
	Moves       []mv     `json:"moves"`
	CRC         string   `json:"crc"`
	Bits        int      `json:"bits"`
	Hex         string   `json:"hex"`
	LastApplied string   `json:"last_applied"`
	Applied     []string `json:"applied"`
	Lost        int      `json:"lost"`
}

type controlCase struct {
	Name    string `json:"name"`
	Ack     string `json:"ack,omitempty"`
	State   string `json:"state,omitempty"`
	Newest  string `json:"newest"`
	Bits    int    `json:"bits"`
	Hex     string `json:"hex"`
	Decoded string `json:"decoded_ack,omitempty"`
	Error   string `json:"error,omitempty"`
}

var moveSchema = []Field{
	{"state (everywhere)", "a control state as its canonical bytes (§ 5.3): pos.x pos.y pos.z vel.x vel.y vel.z yaw as binary32 little-endian, then payload_len (1 byte), then the payload; exactly the CRC input"},
	{"vectors.crc[]", "state → crc: CRC-32/IEEE of the state bytes, as 8 hex digits (the number, not its bytes)"},
	{"vectors.sections[]", "move sections (§ 5.2): moves first_seq, first_seq+1, … with crc (the client's CRC after the newest) encode to bits/hex; a server whose newest applied move is last_applied decodes them and applies the moves `applied`, counting `lost` moves as lost for good"},
	{"vectors.sections[].moves[]", "dt (1/960 s), forward and strafe (−127…127), yaw (0…65535), pitch (−16383…16383), buttons, as in § 5.1"},
	{"vectors.control[]", "control sections (§ 5.4): ack and optional state encode to bits/hex; a client whose newest sent move is `newest` decodes ack `decoded_ack`. With `error`: a reader must reject hex"},
}

func moveDoc() (doc, error) {
	var crcs []crcCase
	addCRC := func(name string, s move.ControlState) {
		c := crc32.ChecksumIEEE(stateBytes(s))
		if c != s.CRC() {
			panic("conformance: ControlState.CRC disagrees with crc32 of the spec's bytes")
		}
		crcs = append(crcs, crcCase{name, stateHex(s), fmt.Sprintf("%08x", c)})
	}
	addCRC("the zero state: what a client predicts from before its spawn state", move.ControlState{})
	addCRC("the worked example of § 5.7", move.ControlState{Pos: [3]float32{1, 0, 2}, Vel: [3]float32{0, 0, 7}, Yaw: 1.5})
	addCRC("negative zero differs from +0", move.ControlState{Pos: [3]float32{float32(math.Copysign(0, -1)), 0, 0}})
	full := move.ControlState{Pos: [3]float32{-812.25, 0.5, 999.875}, Vel: [3]float32{-6.9999995, 1.25, 0.001}, Yaw: -3.1415927, PayloadLen: 16}
	for i := range full.Payload {
		full.Payload[i] = byte(0xf0 + i)
	}
	addCRC("full payload", full)
	addCRC("a spawn state", move.ControlState{Pos: [3]float32{-437.125, 0, 612.0625}})

	sections, err := moveSections()
	if err != nil {
		return doc{}, err
	}
	controls, err := controlSections()
	if err != nil {
		return doc{}, err
	}
	return doc{
		Description: "Moves and the control object: CRCs of control states, move sections (delta coding, 16-bit sequence reconstruction across the wrap, redundant and lost moves) and control sections (ack reconstruction, full states, rejects).",
		Spec:        "docs/protocol.md § 5.1–5.5",
		Schema:      moveSchema,
		Vectors:     map[string]any{"crc": crcs, "sections": sections, "control": controls},
	}, nil
}

func moveSections() ([]sectionCase, error) {
	type spec struct {
		name   string
		first  uint64
		moves  []mv
		crc    uint32
		last   uint64
		window int
	}
	run := mv{32, 127, 0, 16384, 0, 0}
	var eight []mv
	for i := range 8 {
		m := run
		switch i {
		case 2, 3:
			m.Yaw += 40 * i
		case 4:
			m = mv{30, -127, 127, 65535, -16383, 0xffff}
		case 5:
			m = mv{32, -127, 127, 65535, 16383, 0xffff}
		case 6, 7:
			m = mv{32, 0, 0, 0, 0, 1}
		}
		eight = append(eight, m)
	}
	var many []mv
	for i := range 64 {
		many = append(many, mv{32, (i * 37 % 255) - 127, (i * 11 % 255) - 127, i * 1000 % 65536, (i*300)%32767 - 16383, i % 3})
	}
	specs := []spec{
		{"the worked example of § 5.7", 1, []mv{run, run, {32, 127, 0, 16400, 0, 1}}, 0x420b4879, 0, 32},
		{"one move, the first of the connection", 1, []mv{{32, 0, 0, 0, 0, 0}}, 0x1c9c2b2b, 0, 32},
		{"redundant copies: moves already applied are skipped", 1, []mv{run, run, run, run}, 0xdeadbeef, 2, 32},
		{"every delta form, across the 16-bit sequence wrap", 65533, eight, 0x01234567, 65534, 32},
		{"moves lost for good: the section starts after a gap", 65533, eight, 0x89abcdef, 65530, 32},
		{"64 moves, every field changing", 100, many, 0xcafef00d, 99, 64},
	}
	var out []sectionCase
	for _, sp := range specs {
		s, err := move.NewStream(move.Config{Window: sp.window})
		if err != nil {
			return nil, err
		}
		for s.NextSeq() < sp.first {
			if err := s.Add(move.Move{Seq: s.NextSeq(), Dt: 32}); err != nil {
				return nil, err
			}
		}
		s.Ack(sp.first - 1)
		for i, m := range sp.moves {
			mm := m.move()
			mm.Seq = s.NextSeq()
			if i == len(sp.moves)-1 {
				mm.CRC = sp.crc
			}
			if err := s.Add(mm); err != nil {
				return nil, err
			}
		}
		var buf [1200]byte
		w := bitstream.NewWriter(buf[:])
		if n, err := s.Write(w); err != nil || n != len(sp.moves) {
			return nil, fmt.Errorf("%s: wrote %d moves: %v", sp.name, n, err)
		}
		c := sectionCase{Name: sp.name, FirstSeq: u64(sp.first), Moves: sp.moves, CRC: fmt.Sprintf("%08x", sp.crc),
			Bits: w.BitLen(), Hex: hx(w.Bytes()), LastApplied: u64(sp.last)}
		if err := decodeSection(&c); err != nil {
			return nil, fmt.Errorf("%s: %w", sp.name, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// decodeSection fills Applied and Lost from Hex with the reference Applier
// and checks the moves and the CRC it decodes.
func decodeSection(c *sectionCase) error {
	last, err := parseU64(c.LastApplied)
	if err != nil {
		return err
	}
	b, err := hexBytes(c.Hex)
	if err != nil {
		return err
	}
	first, err := parseU64(c.FirstSeq)
	if err != nil {
		return err
	}
	var a move.Applier
	a.Reset(last)
	r := bitstream.NewReader(nil)
	r.ResetBits(b, c.Bits)
	c.Applied = nil
	var bad error
	err = a.Read(r, func(m move.Move) {
		c.Applied = append(c.Applied, u64(m.Seq))
		if want := c.Moves[m.Seq-first]; mvOf(m) != want {
			bad = fmt.Errorf("move %d decoded %+v, want %+v", m.Seq, mvOf(m), want)
		}
		if m.HasCRC && fmt.Sprintf("%08x", m.CRC) != c.CRC {
			bad = fmt.Errorf("crc %08x, want %s", m.CRC, c.CRC)
		}
	})
	if err != nil {
		return err
	}
	c.Lost = int(a.Stats().Lost)
	return bad
}

func controlSections() ([]controlCase, error) {
	sp := func(s move.ControlState) *move.ControlState { return &s }
	pl := move.ControlState{Pos: [3]float32{12.5, 1.25, -7}, Vel: [3]float32{float32(math.Copysign(0, -1)), 5, 0}, Yaw: 0.7853982, PayloadLen: 3, Payload: [16]byte{1, 2, 3}}
	cases := []struct {
		name        string
		ack, newest uint64
		state       *move.ControlState
	}{
		{"the worked example of § 5.7: full state after move 3", 3, 3, sp(move.ControlState{Pos: [3]float32{1, 0, 2}, Vel: [3]float32{0, 0, 7}, Yaw: 1.5})},
		{"ack only, move 70000", 70000, 70000, nil},
		{"ack reconstructed below the client's newest, across the wrap", 65530, 65545, nil},
		{"no move applied yet (ack 0), with the spawn state", 0, 4, sp(move.ControlState{Pos: [3]float32{-437.125, 0, 612.0625}})},
		{"full state with a payload and −0", 41, 45, &pl},
	}
	var out []controlCase
	for _, c := range cases {
		var buf [64]byte
		w := bitstream.NewWriter(buf[:])
		if err := move.WriteControl(w, c.ack, c.state); err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		cc := controlCase{Name: c.name, Ack: u64(c.ack), Newest: u64(c.newest), Bits: w.BitLen(), Hex: hx(w.Bytes())}
		if c.state != nil {
			cc.State = stateHex(*c.state)
		}
		r := bitstream.NewReader(nil)
		r.ResetBits(w.Bytes(), w.BitLen())
		u, err := move.ReadControl(r, c.newest)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		cc.Decoded = u64(u.Ack)
		out = append(out, cc)
	}
	rejects := []controlCase{
		{Name: "acknowledges a move never sent (low bits 7, newest 5)", Newest: "5", Bits: 17, Hex: "070000", Error: "ack beyond newest"},
		{Name: "NaN in the state", Newest: "1", Bits: 246, Hex: "", Error: "NaN or infinity"},
		{Name: "payload_len 17", Newest: "1", Bits: 246, Hex: "", Error: "payload_len > 16"},
	}
	// Build the two state rejects bit by bit: a valid full state, then a
	// NaN pos.x, then payload_len 17.
	for i := 1; i < 3; i++ {
		var buf [64]byte
		w := bitstream.NewWriter(buf[:])
		_ = w.WriteBits(1, 16)
		_ = w.WriteFlag(true)
		for k := range 7 {
			v := uint64(0)
			if i == 1 && k == 0 {
				v = 0x7fc00000
			}
			_ = w.WriteBits(v, 32)
		}
		l := uint64(0)
		if i == 2 {
			l = 17
		}
		_ = w.WriteBits(l, 5)
		rejects[i].Bits, rejects[i].Hex = w.BitLen(), hx(w.Bytes())
	}
	for _, c := range rejects {
		if err := checkControlReject(c); err != nil {
			return nil, err
		}
	}
	return append(out, rejects...), nil
}

func checkControlReject(c controlCase) error {
	newest, err := parseU64(c.Newest)
	if err != nil {
		return err
	}
	b, err := hexBytes(c.Hex)
	if err != nil {
		return err
	}
	r := bitstream.NewReader(nil)
	r.ResetBits(b, c.Bits)
	if _, err := move.ReadControl(r, newest); err == nil {
		return fmt.Errorf("%s: accepted", c.Name)
	}
	return nil
}
