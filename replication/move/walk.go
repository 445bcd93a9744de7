package move

import "math"

// Walker parameters, shared by client and server (changing one is a protocol
// change: every CRC would mismatch between old and new builds).
const (
	WalkSpeed = 7.0  // m/s, the speed limit on the ground plane (a brisk run; the crowd benchmark's top speed)
	WalkAccel = 40.0 // m/s², how fast the velocity turns towards the wished one
	JumpSpeed = 5.0  // m/s, vertical speed of a jump
	Gravity   = 20.0 // m/s²
	// ButtonJump is the Buttons bit Walk jumps on (only while on the ground).
	ButtonJump uint16 = 1 << 0
)

// Walk is the default StepFunc: a kinematic walker on the plane Y = 0. The
// sticks give a wished velocity in the heading's frame (forward along Yaw,
// strafe to its right), its length clamped to 1 and scaled to WalkSpeed; the
// horizontal velocity moves towards it by at most WalkAccel·dt, so the speed
// never exceeds WalkSpeed. ButtonJump on the ground starts a jump; gravity
// pulls back to Y = 0. The state's Yaw becomes the move's heading. The
// payload is carried through unchanged.
//
// Walk is deterministic to the bit across platforms: only IEEE-754
// float32/float64 +, −, ×, ÷ and square root (all correctly rounded), an
// explicit conversion after every product that is added (no FMA fusion), and
// its own sine (sincos) instead of math.Sincos. Tests, the zone server and the
// bots use it.
func Walk(s ControlState, m Move, dt float32) ControlState {
	sin, cos := sincos(m.Yaw)
	f := float32(m.Forward) / AxisMax
	r := float32(m.Strafe) / AxisMax
	// Forward is (sin, cos) on X/Z; right is (cos, −sin): +X when facing +Z.
	wx := float32(f*sin) + float32(r*cos)
	wz := float32(f*cos) - float32(r*sin)
	if n2 := float32(wx*wx) + float32(wz*wz); n2 > 1 {
		n := sqrt32(n2)
		wx, wz = wx/n, wz/n
	}
	dx := float32(wx*WalkSpeed) - s.Vel[0]
	dz := float32(wz*WalkSpeed) - s.Vel[2]
	maxDv := float32(WalkAccel * dt)
	if d2 := float32(dx*dx) + float32(dz*dz); d2 > float32(maxDv*maxDv) {
		k := maxDv / sqrt32(d2)
		dx, dz = float32(dx*k), float32(dz*k)
	}
	s.Vel[0] += dx
	s.Vel[2] += dz

	onGround := s.Pos[1] <= 0
	switch {
	case onGround && m.Buttons&ButtonJump != 0:
		s.Vel[1] = JumpSpeed
	case onGround:
		s.Vel[1] = 0
	default:
		s.Vel[1] -= float32(Gravity * dt)
	}
	s.Pos[0] += float32(s.Vel[0] * dt)
	s.Pos[1] += float32(s.Vel[1] * dt)
	s.Pos[2] += float32(s.Vel[2] * dt)
	if s.Pos[1] < 0 {
		s.Pos[1], s.Vel[1] = 0, 0
	}
	s.Yaw = float32(float64(m.Yaw) * (2 * math.Pi / 65536))
	return s
}

// sqrt32 is the correctly rounded float32 square root: the float64 root of a
// float32 is exact enough that rounding it to float32 is correct (53 ≥ 2·24+2).
func sqrt32(x float32) float32 { return float32(math.Sqrt(float64(x))) }

// sincos returns sin and cos of the heading yaw·2π/65536. It is bit-identical
// on every platform, unlike math.Sincos, whose pure-Go code may be compiled
// with fused multiply-adds on some architectures and not on others. The angle
// is reduced exactly in integers to a quadrant and to [0, π/4], where Taylor
// polynomials of degree 13/14 evaluated in float64 (every product rounded
// explicitly) are accurate to ~1e-15, far below float32's resolution.
func sincos(yaw uint16) (sin, cos float32) {
	s, c := sincos64(yaw)
	return float32(s), float32(c)
}

// sincos64 is sincos before the rounding to float32 (docs/protocol.md § 5.8;
// its float64 results are pinned by TestSincosPolynomialsRoundEveryOperation).
func sincos64(yaw uint16) (sin, cos float64) {
	const unit = 2 * math.Pi / 65536
	q := yaw >> 14    // quadrant
	i := yaw & 0x3FFF // angle within the quadrant, 0..16383 units
	var s, c float64  // sin and cos of the angle within the quadrant
	if i <= 0x2000 {
		// Rounded explicitly: sinPoly ends with x + x·p, and without the
		// conversion Go fuses this product into that sum (an FMA on arm64 and
		// GOAMD64=v3), which changes the float64 result's last bit.
		x := float64(float64(i) * unit)
		s, c = sinPoly(x), cosPoly(x)
	} else { // sin(π/2 − y) = cos y
		y := float64(float64(0x4000-i) * unit)
		s, c = cosPoly(y), sinPoly(y)
	}
	switch q { // rotate by q quarter turns: (sin, cos)(θ + π/2) = (cos θ, −sin θ)
	case 1:
		s, c = c, -s
	case 2:
		s, c = -s, -c
	case 3:
		s, c = -c, s
	}
	return s, c
}

// sinPoly is sin x for |x| ≤ π/4: x − x³/3! + … − x¹³/13!… in Horner form.
func sinPoly(x float64) float64 {
	z := float64(x * x)
	p := 1.0 / 6227020800 // 1/13!
	p = float64(p*z) - 1.0/39916800
	p = float64(p*z) + 1.0/362880
	p = float64(p*z) - 1.0/5040
	p = float64(p*z) + 1.0/120
	p = float64(p*z) - 1.0/6
	p = float64(p * z)
	return x + float64(x*p)
}

// cosPoly is cos x for |x| ≤ π/4: 1 − x²/2! + … + x¹⁴/14! terms in Horner form.
func cosPoly(x float64) float64 {
	z := float64(x * x)
	p := -1.0 / 87178291200 // −1/14!
	p = float64(p*z) + 1.0/479001600
	p = float64(p*z) - 1.0/3628800
	p = float64(p*z) + 1.0/40320
	p = float64(p*z) - 1.0/720
	p = float64(p*z) + 1.0/24
	p = float64(p*z) - 0.5
	return 1 + float64(z*p)
}
