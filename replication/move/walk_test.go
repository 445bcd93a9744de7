package move

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestSincos(t *testing.T) {
	for y := 0; y < 1<<16; y++ {
		s, c := sincos(uint16(y))
		ws, wc := math.Sincos(float64(y) * 2 * math.Pi / 65536)
		// float32 rounding is at most 2^-25 for |v| ≤ 1; allow one more ulp.
		if math.Abs(float64(s)-ws) > 0x1p-24 || math.Abs(float64(c)-wc) > 0x1p-24 {
			t.Fatalf("sincos(%d) = %v, %v; math says %v, %v", y, s, c, ws, wc)
		}
	}
	exact := []struct {
		yaw      uint16
		sin, cos float32
	}{{0, 0, 1}, {16384, 1, 0}, {32768, 0, -1}, {49152, -1, 0}}
	for _, e := range exact {
		s, c := sincos(e.yaw)
		if s != e.sin || c != e.cos {
			t.Errorf("sincos(%d) = %v, %v; want exactly %v, %v", e.yaw, s, c, e.sin, e.cos)
		}
	}
}

func TestWalkSpeedLimitAndGround(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	gen := newInputGen(10)
	var s ControlState
	air := 0
	for i := range 20000 {
		m := gen.next(uint8(1 + rng.IntN(64)))
		s = Walk(s, m, m.Seconds())
		if h := math.Hypot(float64(s.Vel[0]), float64(s.Vel[2])); h > WalkSpeed*(1+1e-6) {
			t.Fatalf("step %d: horizontal speed %v exceeds %v", i, h, WalkSpeed)
		}
		if s.Pos[1] < 0 {
			t.Fatalf("step %d: below ground at y=%v", i, s.Pos[1])
		}
		if s.Pos[1] > 0 {
			air++
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if air == 0 {
		t.Fatal("never left the ground: jumps untested")
	}
}

func TestWalkReachesSpeedAlongHeading(t *testing.T) {
	tests := []struct {
		name   string
		m      Move
		dx, dz float64 // direction of travel
		speed  float64
	}{
		{"forward facing +Z", Move{Dt: 32, Forward: 127}, 0, 1, WalkSpeed},
		{"forward facing +X", Move{Dt: 32, Forward: 127, Yaw: 16384}, 1, 0, WalkSpeed},
		{"strafe right facing +Z", Move{Dt: 32, Strafe: 127}, 1, 0, WalkSpeed},
		{"diagonal is clamped, not faster", Move{Dt: 32, Forward: 127, Strafe: 127}, math.Sqrt2 / 2, math.Sqrt2 / 2, WalkSpeed},
		{"half stick, half speed", Move{Dt: 32, Forward: -64, Yaw: 32768}, 0, 1, WalkSpeed * 64 / 127},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s ControlState
			for range 30 { // 1 s: WalkAccel reaches WalkSpeed in 175 ms
				s = Walk(s, tc.m, tc.m.Seconds())
			}
			vx, vz := float64(s.Vel[0]), float64(s.Vel[2])
			if math.Abs(vx-tc.dx*tc.speed) > 1e-4 || math.Abs(vz-tc.dz*tc.speed) > 1e-4 {
				t.Fatalf("velocity (%v, %v), want (%v, %v)", vx, vz, tc.dx*tc.speed, tc.dz*tc.speed)
			}
		})
	}
}

// TestWalkGolden pins Walk's output bits. Every platform must produce this
// CRC (a client on arm64 and a server on amd64 must agree to the bit); if a
// change to Walk alters it, that is a protocol change: clients and servers of
// different builds would disagree on every CRC.
func TestWalkGolden(t *testing.T) {
	x := uint64(42) // splitmix64: a self-contained input sequence that no library change can alter
	next := func() uint64 {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		return z ^ z>>31
	}
	var s ControlState
	var m Move
	for i := range 3000 {
		r := next()
		if i%20 == 0 {
			m.Forward, m.Strafe = int8(int(r%255)-127), int8(int(r>>8%255)-127)
		}
		m.Dt = uint8(16 + r>>16%32)
		m.Yaw += uint16(r >> 24 % 512)
		m.Buttons = uint16(r>>40) & ButtonJump
		s = Walk(s, m, m.Seconds())
	}
	const want uint32 = 0x9d771018
	if got := s.CRC(); got != want {
		t.Fatalf("Walk after 3000 moves: CRC %#08x, want %#08x (state %+v)", got, want, s)
	}
}
