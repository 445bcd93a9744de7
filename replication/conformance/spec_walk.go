package conformance

import (
	"math"

	"github.com/ghostwire/ghostwire/replication/move"
)

// This file transliterates docs/protocol.md § 5.8 line by line, written
// from the spec, not from walk.go: the tests check that it and move.Walk
// agree to the bit, so the spec's pseudo-code is proven to be the step the
// server runs. Every f32/f64 operation is its own statement or wrapped in
// an explicit conversion, so Go never fuses a multiply and an add.

const (
	specUnit = 0x1.921fb54442d18p-14
	s13      = 0x1.6124613a86d09p-33
	s11      = 0x1.ae64567f544e4p-26
	s9       = 0x1.71de3a556c734p-19
	s7       = 0x1.a01a01a01a01ap-13
	s5       = 0x1.1111111111111p-07
	s3       = 0x1.5555555555555p-03
	c14      = 0x1.93974a8c07c9dp-37
	c12      = 0x1.1eed8eff8d898p-29
	c10      = 0x1.27e4fb7789f5cp-22
	c8       = 0x1.a01a01a01a01ap-16
	c6       = 0x1.6c16c16c16c17p-10
	c4       = 0x1.5555555555555p-05
)

func specSinPoly(x float64) float64 {
	z := float64(x * x)
	p := float64(s13)
	p = float64(p * z)
	p = p - s11
	p = float64(p * z)
	p = p + s9
	p = float64(p * z)
	p = p - s7
	p = float64(p * z)
	p = p + s5
	p = float64(p * z)
	p = p - s3
	p = float64(p * z)
	t := float64(x * p)
	return x + t
}

func specCosPoly(x float64) float64 {
	z := float64(x * x)
	p := float64(-c14)
	p = float64(p * z)
	p = p + c12
	p = float64(p * z)
	p = p - c10
	p = float64(p * z)
	p = p + c8
	p = float64(p * z)
	p = p - c6
	p = float64(p * z)
	p = p + c4
	p = float64(p * z)
	p = p - 0.5
	t := float64(z * p)
	return 1 + t
}

// specSincos returns § 5.8's s and c before the final rounding to f32.
func specSincos(yaw uint16) (float64, float64) {
	q := yaw >> 14
	i := yaw & 0x3FFF
	var s, c float64
	if i <= 0x2000 {
		x := float64(float64(i) * specUnit)
		s, c = specSinPoly(x), specCosPoly(x)
	} else {
		y := float64(float64(0x4000-i) * specUnit)
		s, c = specCosPoly(y), specSinPoly(y)
	}
	switch q {
	case 1:
		s, c = c, -s
	case 2:
		s, c = -s, -c
	case 3:
		s, c = -c, s
	}
	return s, c
}

func specSqrt32(x float32) float32 { return float32(math.Sqrt(float64(x))) }

// specWalk is § 5.8's Walk.
func specWalk(st move.ControlState, m move.Move) move.ControlState {
	dt := float32(m.Dt)
	dt = dt / 960
	s64, c64 := specSincos(m.Yaw)
	sin, cos := float32(s64), float32(c64)
	f := float32(m.Forward)
	f = f / 127
	r := float32(m.Strafe)
	r = r / 127
	a := float32(f * sin)
	b := float32(r * cos)
	wx := a + b
	a = float32(f * cos)
	b = float32(r * sin)
	wz := a - b
	a = float32(wx * wx)
	b = float32(wz * wz)
	n2 := a + b
	if n2 > 1 {
		n := specSqrt32(n2)
		wx = wx / n
		wz = wz / n
	}
	a = float32(wx * 7)
	dx := a - st.Vel[0]
	a = float32(wz * 7)
	dz := a - st.Vel[2]
	maxDv := float32(40 * dt)
	a = float32(dx * dx)
	b = float32(dz * dz)
	d2 := a + b
	m2 := float32(maxDv * maxDv)
	if d2 > m2 {
		k := maxDv / specSqrt32(d2)
		dx = float32(dx * k)
		dz = float32(dz * k)
	}
	st.Vel[0] = st.Vel[0] + dx
	st.Vel[2] = st.Vel[2] + dz
	onGround := st.Pos[1] <= 0
	switch {
	case onGround && m.Buttons&1 != 0:
		st.Vel[1] = 5
	case onGround:
		st.Vel[1] = 0
	default:
		a = float32(20 * dt)
		st.Vel[1] = st.Vel[1] - a
	}
	a = float32(st.Vel[0] * dt)
	st.Pos[0] = st.Pos[0] + a
	a = float32(st.Vel[1] * dt)
	st.Pos[1] = st.Pos[1] + a
	a = float32(st.Vel[2] * dt)
	st.Pos[2] = st.Pos[2] + a
	if st.Pos[1] < 0 {
		st.Pos[1] = 0
		st.Vel[1] = 0
	}
	st.Yaw = float32(float64(float64(m.Yaw) * specUnit))
	return st
}
