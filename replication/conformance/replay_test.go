package conformance

import (
	"encoding/json"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/move"
)

// load reads docs/vectors/name and decodes its vectors into v.
func load(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "vectors", name))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Vectors json.RawMessage `json:"vectors"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(d.Vectors, v); err != nil {
		t.Fatal(err)
	}
}

// same compares two values by their JSON form (what the files hold).
func same(t *testing.T, what string, got, want any) {
	t.Helper()
	g, err1 := json.Marshal(got)
	w, err2 := json.Marshal(want)
	if err1 != nil || err2 != nil {
		t.Fatalf("%s: %v %v", what, err1, err2)
	}
	if string(g) != string(w) {
		t.Errorf("%s:\n got %s\nwant %s", what, g, w)
	}
}

func TestBitstreamReplay(t *testing.T) {
	var v struct {
		Encode []bsCase `json:"encode"`
		Reject []bsCase `json:"reject"`
	}
	load(t, "bitstream.json", &v)
	if len(v.Encode) < 30 || len(v.Reject) < 10 {
		t.Fatalf("%d encode and %d reject cases", len(v.Encode), len(v.Reject))
	}
	for _, c := range v.Encode {
		t.Run(c.Name, func(t *testing.T) {
			var buf [256]byte
			w := bitstream.NewWriter(buf[:])
			for _, o := range c.Ops {
				if err := writeOp(w, o); err != nil {
					t.Fatal(err)
				}
			}
			if w.BitLen() != c.Bits || hx(w.Bytes()) != c.Hex {
				t.Fatalf("wrote %d bits %s, want %d bits %s", w.BitLen(), hx(w.Bytes()), c.Bits, c.Hex)
			}
			r := bitstream.NewReader(nil)
			r.ResetBits(mustHex(c.Hex), c.Bits)
			for _, o := range c.Ops {
				d, err := readOp(r, o)
				if err != nil {
					t.Fatal(err)
				}
				if d != nil {
					same(t, "decoded", d, o["decoded"])
				}
			}
			if r.Remaining() != 0 {
				t.Fatalf("%d bits left after the ops", r.Remaining())
			}
		})
	}
	for _, c := range v.Reject {
		t.Run("reject/"+c.Name, func(t *testing.T) {
			r := bitstream.NewReader(nil)
			r.ResetBits(mustHex(c.Hex), c.Bits)
			for _, o := range c.Ops {
				if _, err := readOp(r, o); err != nil {
					return
				}
			}
			t.Fatalf("read %s without an error (%s)", c.Hex, c.Error)
		})
	}
}

func TestNotifyReplay(t *testing.T) {
	var v []nScenario
	load(t, "notify.json", &v)
	var dropped, reordered bool
	for _, sc := range v {
		t.Run(sc.Name, func(t *testing.T) {
			got, err := runNotify(sc.Steps)
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				same(t, sc.Name, got[i], sc.Steps[i])
				for _, f := range got[i].Fates {
					dropped = dropped || !f.Delivered
				}
				reordered = reordered || got[i].Result == "stale" || got[i].Result == "duplicate"
			}
		})
	}
	if !dropped || !reordered {
		t.Errorf("the scenarios show no dropped fate (%v) or no rejected packet (%v)", dropped, reordered)
	}
}

func TestEventReplay(t *testing.T) {
	var v []eScenario
	load(t, "event.json", &v)
	for _, sc := range v {
		t.Run(sc.Name, func(t *testing.T) {
			got, err := runEvents(sc.Steps)
			if err != nil {
				t.Fatal(err)
			}
			same(t, sc.Name, got, sc.Steps)
		})
	}
}

func TestGhostReplay(t *testing.T) {
	var v []gScenario
	load(t, "ghost.json", &v)
	for _, sc := range v {
		t.Run(sc.Name, func(t *testing.T) {
			got, err := runGhosts(sc.Steps)
			if err != nil {
				t.Fatal(err)
			}
			same(t, sc.Name, got, sc.Steps)
		})
	}
}

func TestMoveReplay(t *testing.T) {
	var v struct {
		CRC      []crcCase     `json:"crc"`
		Sections []sectionCase `json:"sections"`
		Control  []controlCase `json:"control"`
	}
	load(t, "move.json", &v)
	for _, c := range v.CRC {
		s, err := parseState(c.State)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CRC(); got != crc32.ChecksumIEEE(mustHex(c.State)) || hex32(got) != c.CRC {
			t.Errorf("%s: CRC %08x, crc32 of the bytes %08x, want %s", c.Name, got, crc32.ChecksumIEEE(mustHex(c.State)), c.CRC)
		}
	}
	for _, c := range v.Sections {
		got := c
		if err := decodeSection(&got); err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		same(t, c.Name, got, c)
	}
	for _, c := range v.Control {
		if c.Error != "" {
			if err := checkControlReject(c); err != nil {
				t.Error(err)
			}
			continue
		}
		ack, _ := parseU64(c.Ack)
		var st *move.ControlState
		if c.State != "" {
			s, err := parseState(c.State)
			if err != nil {
				t.Fatal(err)
			}
			st = &s
		}
		var buf [64]byte
		w := bitstream.NewWriter(buf[:])
		if err := move.WriteControl(w, ack, st); err != nil {
			t.Fatal(err)
		}
		if w.BitLen() != c.Bits || hx(w.Bytes()) != c.Hex {
			t.Errorf("%s: wrote %d bits %s, want %d bits %s", c.Name, w.BitLen(), hx(w.Bytes()), c.Bits, c.Hex)
		}
		newest, _ := parseU64(c.Newest)
		r := bitstream.NewReader(nil)
		r.ResetBits(mustHex(c.Hex), c.Bits)
		u, err := move.ReadControl(r, newest)
		if err != nil || u64(u.Ack) != c.Decoded || u.HasState != (st != nil) || (st != nil && stateHex(u.State) != c.State) {
			t.Errorf("%s: read %+v, %v", c.Name, u, err)
		}
	}
}

func hex32(v uint32) string { return fmt.Sprintf("%08x", v) }

// TestWalkReplay runs every Walk vector through move.Walk and through the
// transliteration of § 5.8 (spec_walk.go).
func TestWalkReplay(t *testing.T) {
	var v struct {
		Sincos []sincosCase `json:"sincos"`
		Runs   []walkRun    `json:"runs"`
	}
	load(t, "walk.json", &v)
	for _, c := range v.Sincos {
		s, co := specSincos(uint16(c.Yaw))
		if hex64(s) != c.Sin64 || hex64(co) != c.Cos64 || f32bits(float32(s)) != c.Sin || f32bits(float32(co)) != c.Cos {
			t.Errorf("sincos(%d): %s %s, want %s %s", c.Yaw, hex64(s), hex64(co), c.Sin64, c.Cos64)
		}
	}
	steps := 0
	for _, r := range v.Runs {
		st, err := parseState(r.Initial)
		if err != nil {
			t.Fatal(err)
		}
		sp := st
		for i, s := range r.Steps {
			m := s.Move.move()
			if f32bits(m.Seconds()) != s.Dt {
				t.Fatalf("%s step %d: dt %s, want %s", r.Name, i, f32bits(m.Seconds()), s.Dt)
			}
			st = move.Walk(st, m, m.Seconds())
			sp = specWalk(sp, m)
			if stateHex(st) != s.State || hex32(st.CRC()) != s.CRC {
				t.Fatalf("%s step %d: move.Walk gives %s (crc %08x), want %s (crc %s)", r.Name, i, stateHex(st), st.CRC(), s.State, s.CRC)
			}
			if stateHex(sp) != s.State {
				t.Fatalf("%s step %d: § 5.8 as written gives %s, want %s", r.Name, i, stateHex(sp), s.State)
			}
			steps++
		}
	}
	if steps < 300 {
		t.Fatalf("only %d Walk steps in the vectors", steps)
	}
}

func hex64(f float64) string { return fmt.Sprintf("%016x", math.Float64bits(f)) }

// TestSpecWalkIsWalk checks § 5.8's pseudo-code against move.Walk beyond
// the vectors: every heading, then random states and moves (sticks, dt,
// jumps, airborne and landing states), bit for bit.
func TestSpecWalkIsWalk(t *testing.T) {
	var st move.ControlState
	for y := range 1 << 16 {
		m := move.Move{Dt: 32, Forward: 127, Strafe: -50, Yaw: uint16(y)}
		a, b := move.Walk(st, m, m.Seconds()), specWalk(st, m)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("yaw %d: Walk %+v, § 5.8 %+v", y, a, b)
		}
	}
	x := uint64(99)
	for i := range 200000 {
		r := splitmix(&x)
		if i%1000 == 0 {
			st = move.ControlState{Pos: [3]float32{float32(int32(r)) / 1e6, float32(r>>32&0xff) / 64, 0}, Vel: [3]float32{float32(int8(r>>40)) / 16, float32(int8(r>>48)) / 16, float32(int8(r>>56)) / 16}}
		}
		m := move.Move{Dt: uint8(1 + r>>8%255), Forward: int8(int(r%255) - 127), Strafe: int8(int(r>>16%255) - 127), Yaw: uint16(r >> 24), Buttons: uint16(r>>44) & 1}
		a, b := move.Walk(st, m, m.Seconds()), specWalk(st, m)
		if math.Float32bits(a.Pos[0]) != math.Float32bits(b.Pos[0]) || !reflect.DeepEqual(stateHex(a), stateHex(b)) {
			t.Fatalf("step %d: Walk %s, § 5.8 %s", i, stateHex(a), stateHex(b))
		}
		st = a
	}
}
