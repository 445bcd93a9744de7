package conformance

import (
	"fmt"
	"math"

	"github.com/ghostwire/ghostwire/replication/move"
)

type sincosCase struct {
	Yaw   int    `json:"yaw"`
	Sin64 string `json:"sin_f64bits"`
	Cos64 string `json:"cos_f64bits"`
	Sin   string `json:"sin"`
	Cos   string `json:"cos"`
}

type walkStep struct {
	Move  mv     `json:"move"`
	Dt    string `json:"dt"`
	State string `json:"state"`
	CRC   string `json:"crc"`
}

type walkRun struct {
	Name    string     `json:"name"`
	Initial string     `json:"initial"`
	Steps   []walkStep `json:"steps"`
}

var walkSchema = []Field{
	{"vectors.sincos[]", "the heading's sine and cosine as § 5.8's sincos computes them: sin_f64bits/cos_f64bits are the binary64 results before the final rounding (16 hex digits of the bit pattern), sin/cos the binary32 results (f32bits)"},
	{"vectors.runs[]", "Walk runs: start from `initial`, apply each step's move in order; after each step your state must equal `state` byte for byte and its CRC `crc`"},
	{"vectors.runs[].initial, steps[].state", "control states as canonical bytes (§ 5.3): 7 binary32 little-endian (pos x y z, vel x y z, yaw), payload_len, payload"},
	{"vectors.runs[].steps[].move", "the move's wire fields (§ 5.1); only dt, forward, strafe, yaw and buttons bit 0 matter to Walk"},
	{"vectors.runs[].steps[].dt", "the step's dt in seconds, f32(move.dt) / 960, as f32bits"},
}

func walkDoc() (doc, error) {
	var sc []sincosCase
	yaws := []int{0, 1, 2, 100, 4096, 8191, 8192, 8193, 12000, 16383, 16384, 16385, 24576, 32767, 32768, 32769, 40000, 49151, 49152, 49153, 57344, 65535}
	x := uint64(7)
	for range 18 {
		yaws = append(yaws, int(splitmix(&x)%65536))
	}
	for _, y := range yaws {
		s64, c64 := specSincos(uint16(y))
		sc = append(sc, sincosCase{y, fmt.Sprintf("%016x", math.Float64bits(s64)), fmt.Sprintf("%016x", math.Float64bits(c64)), f32bits(float32(s64)), f32bits(float32(c64))})
	}

	var runs []walkRun
	var st move.ControlState
	run := func(name string, n int, input func(i int) mv) {
		r := walkRun{Name: name, Initial: stateHex(st)}
		for i := range n {
			m := input(i)
			mm := m.move()
			st = move.Walk(st, mm, mm.Seconds())
			r.Steps = append(r.Steps, walkStep{Move: m, Dt: f32bits(mm.Seconds()), State: stateHex(st), CRC: fmt.Sprintf("%08x", st.CRC())})
		}
		runs = append(runs, r)
	}
	run("from rest: full stick forward facing +Z, 30 Hz (reaches 7 m/s in 175 ms)", 20, func(int) mv { return mv{Dt: 32, Forward: 127} })
	run("turning while running: the heading turns 300 units (1.65°) per move", 60, func(i int) mv { return mv{Dt: 32, Forward: 127, Yaw: (300 * (i + 1)) % 65536} })
	run("strafing right, then left, facing 45°", 30, func(i int) mv {
		s := 127
		if i >= 15 {
			s = -127
		}
		return mv{Dt: 32, Strafe: s, Yaw: 8192}
	})
	run("diagonal stick at the speed cap: clamped to 7 m/s", 25, func(int) mv { return mv{Dt: 32, Forward: 127, Strafe: 127, Yaw: 40000} })
	run("braking: sticks released", 15, func(int) mv { return mv{Dt: 32, Yaw: 40000} })
	run("jumping: the button held on the ground, through the air, landing", 40, func(i int) mv {
		b := 0
		if i < 3 || (i >= 20 && i < 22) {
			b = 1
		}
		return mv{Dt: 32, Forward: 90, Yaw: 20000, Buttons: b}
	})
	run("half sticks and varied dt from 1 to 255", 50, func(i int) mv {
		return mv{Dt: 1 + (i*53)%255, Forward: -64 + i, Strafe: 63 - 2*i, Yaw: (i * 4099) % 65536, Pitch: i * 100}
	})
	x = 42
	run("pseudo-random input (splitmix64 seed 42)", 120, func(i int) mv {
		r := splitmix(&x)
		return mv{Dt: int(16 + r>>16%32), Forward: int(r%255) - 127, Strafe: int(r>>8%255) - 127, Yaw: int(r >> 24 % 65536), Buttons: int(r>>40) & 1}
	})
	return doc{
		Description: "The step function Walk (§ 5.8), bit for bit: sine/cosine of headings, and runs of consecutive steps from rest — accelerating, turning, strafing, the diagonal clamp at the speed cap, braking, jumping and landing, every dt, random input. A client whose CRCs must match the server's reproduces every state exactly.",
		Spec:        "docs/protocol.md § 5.8",
		Schema:      walkSchema,
		Vectors:     map[string]any{"sincos": sc, "runs": runs},
	}, nil
}

// splitmix is SplitMix64: a self-contained generator no library change can alter.
func splitmix(x *uint64) uint64 {
	*x += 0x9e3779b97f4a7c15
	z := *x
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
