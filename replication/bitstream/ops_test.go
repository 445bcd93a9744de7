package bitstream

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
)

// The op model drives the property test and both fuzz targets: a generator
// turns an entropy source into a sequence of typed writes (each a value plus
// the parameters of its encoding), writeOp/readOp apply one op to a Writer or
// Reader, and checkOp says whether a decoded value is what the written one may
// turn into.

type opKind uint8

const (
	opBits opKind = iota
	opFlag
	opRanged
	opBytes
	opQuant
	opFixed
	opSigned
	opUnit
	opFloat32
	opVec
	opQuat
	opString
	opTable
	opGamma
	numOpKinds
)

var opNames = [numOpKinds]string{"bits", "flag", "ranged", "bytes", "quant", "fixed", "signed", "unit", "float32", "vec", "quat", "string", "table", "gamma"}

func (k opKind) String() string {
	if k < numOpKinds {
		return opNames[k]
	}
	return fmt.Sprintf("op(%d)", uint8(k))
}

type op struct {
	kind       opKind
	n          uint    // width / bits per component
	u          uint64  // bits, gamma
	b          bool    // flag
	i, lo, hi  int64   // ranged
	f          float64 // quant, fixed, signed, unit
	fmin, fmax float64
	prec       float64
	f32        float32
	v          [3]float64
	q          [4]float64
	s          string // string, table
	raw        []byte // bytes
	maxLen     int
}

func (o op) String() string {
	switch o.kind {
	case opBits:
		return fmt.Sprintf("bits(%#x,%d)", o.u, o.n)
	case opFlag:
		return fmt.Sprintf("flag(%v)", o.b)
	case opRanged:
		return fmt.Sprintf("ranged(%d in [%d,%d])", o.i, o.lo, o.hi)
	case opBytes:
		return fmt.Sprintf("bytes(%x)", o.raw)
	case opQuant:
		return fmt.Sprintf("quant(%v in [%v,%v] %d bits)", o.f, o.fmin, o.fmax, o.n)
	case opFixed:
		return fmt.Sprintf("fixed(%v in [%v,%v] @%v)", o.f, o.fmin, o.fmax, o.prec)
	case opSigned, opUnit:
		return fmt.Sprintf("%v(%v, %d bits)", o.kind, o.f, o.n)
	case opFloat32:
		return fmt.Sprintf("float32(%v)", o.f32)
	case opVec:
		return fmt.Sprintf("vec(%v, %d bits)", o.v, o.n)
	case opQuat:
		return fmt.Sprintf("quat(%v, %d bits)", o.q, o.n)
	case opString, opTable:
		return fmt.Sprintf("%v(%q, max %d)", o.kind, o.s, o.maxLen)
	case opGamma:
		return fmt.Sprintf("gamma(%d)", o.u)
	}
	return o.kind.String()
}

// entropy yields 64-bit words: from a seeded PCG in property tests, from the
// fuzzer's bytes in fuzz targets (zeros once they run out).
type entropy interface{ u64() uint64 }

type rngEntropy struct{ r *rand.Rand }

func (e rngEntropy) u64() uint64 { return e.r.Uint64() }

type byteEntropy struct{ p []byte }

func (e *byteEntropy) u64() uint64 {
	var b [8]byte
	n := copy(b[:], e.p)
	e.p = e.p[n:]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

func (e *byteEntropy) byte() byte {
	if len(e.p) == 0 {
		return 0
	}
	b := e.p[0]
	e.p = e.p[1:]
	return b
}

// Parameter menus: the generator picks from these so ranges stay meaningful.
var (
	quantRanges = [][2]float64{{0, 1}, {-1, 1}, {-2000, 2000}, {-50, 50}, {3, 7.5}, {-1e6, 1e6}, {0, 360}}
	fixedRanges = [][3]float64{{-2000, 2000, 0.1}, {-2000, 2000, 0.01}, {0, 1, 0.01}, {-3, 7, 0.3}, {0, 100, 1}, {-1e6, 1e6, 0.5}, {0, 1, 0.7}, {0, 0.1, 1}}
	maxLens     = []int{0, 1, 3, 5, 64, 127, 128, 255, 1000}
	testStrings = []string{"", "a", "Hey", "Fuzzy", "fireball", "player_spawn", "ghost.class.tank", "ünïcödé"}
)

// newTestTable is the table every op test shares: 16 slots, a few filled.
func newTestTable() *StringTable {
	t := NewStringTable(16)
	for i, s := range []string{"fireball", "Hey", "", "player_spawn", "ghost.class.tank"} {
		if err := t.Set(i*3, s); err != nil {
			panic(err)
		}
	}
	return t
}

// frac maps a word to [0, 1], hitting both ends exactly now and then.
func frac(x uint64) float64 {
	switch x % 16 {
	case 0:
		return 0
	case 1:
		return 1
	}
	return float64(x>>11) / (1 << 53)
}

// genOp makes one op. Nearly all are valid; when invalid is set the values
// are raw (NaN, out of range, bad widths) to exercise the refusals.
func genOp(e entropy, invalid bool) op {
	h := e.u64()
	o := op{kind: opKind(h % uint64(numOpKinds))}
	h >>= 8
	x := e.u64()
	switch o.kind {
	case opBits:
		o.n = uint(h%64) + 1
		o.u = x
		if o.n < 64 {
			o.u &= 1<<o.n - 1
		}
		if invalid {
			o.n = uint(h % 70)
			o.u = x
		}
	case opFlag:
		o.b = x&1 == 1
	case opRanged:
		o.lo = int64(e.u64()) >> (h % 64)
		span := x >> (h >> 6 % 64)
		o.hi = o.lo + int64(span)
		if o.hi < o.lo { // overflowed
			o.hi = math.MaxInt64
		}
		if d := uint64(o.hi - o.lo); d == math.MaxUint64 {
			o.i = int64(e.u64())
		} else {
			o.i = o.lo + int64(e.u64()%(d+1))
		}
		if invalid {
			o.i = int64(e.u64())
		}
	case opBytes:
		o.raw = make([]byte, h%21)
		for i := range o.raw {
			o.raw[i] = byte(e.u64())
		}
	case opQuant:
		r := quantRanges[h%uint64(len(quantRanges))]
		o.fmin, o.fmax, o.n = r[0], r[1], uint(h>>8%32)+1
		o.f = o.fmin + frac(x)*(o.fmax-o.fmin)
		o.f = math.Min(math.Max(o.f, o.fmin), o.fmax)
		if invalid {
			o.f, o.n = math.Float64frombits(x), uint(h>>8%40)
		}
	case opFixed:
		r := fixedRanges[h%uint64(len(fixedRanges))]
		o.fmin, o.fmax, o.prec = r[0], r[1], r[2]
		o.f = math.Min(math.Max(o.fmin+frac(x)*(o.fmax-o.fmin), o.fmin), o.fmax)
		if invalid {
			o.f = math.Float64frombits(x)
		}
	case opSigned:
		o.n = uint(h%31) + 2
		o.f = math.Max(-1, math.Min(1, frac(x)*2-1))
		if invalid {
			o.f, o.n = math.Float64frombits(x), uint(h%40)
		}
	case opUnit:
		o.n = uint(h%32) + 1
		o.f = frac(x)
		if invalid {
			o.f, o.n = math.Float64frombits(x), uint(h%40)
		}
	case opFloat32:
		o.f32 = math.Float32frombits(uint32(x))
		if !invalid && (math.IsNaN(float64(o.f32)) || math.IsInf(float64(o.f32), 0)) {
			o.f32 = float32(x >> 40)
		}
	case opVec:
		o.n = uint(h%31) + 2
		for j := range o.v {
			o.v[j] = float64(int16(x >> (16 * j)))
		}
		if x>>48&3 == 0 { // an axis-aligned direction now and then
			o.v = [3]float64{}
			o.v[x>>50%3] = float64(int64(x>>52&1)*2 - 1)
		}
		if !invalid && o.v == [3]float64{} {
			o.v[2] = -1
		}
		if invalid {
			o.v[0] = math.Float64frombits(e.u64())
		}
	case opQuat:
		o.n = uint(h%15) + 6
		for j := range o.q {
			o.q[j] = float64(int16(x >> (16 * j)))
		}
		if h>>8&7 == 0 { // ties and axes are where smallest-three gets subtle
			o.q = [4]float64{0.5, 0.5, 0.5, 0.5}
			o.q[x%4] = 0.5 - float64(x>>2&1)
		}
		if !invalid && o.q == [4]float64{} {
			o.q[3] = 1
		}
		if invalid {
			o.q[1] = math.Float64frombits(e.u64())
		}
	case opString, opTable:
		o.maxLen = maxLens[h%uint64(len(maxLens))]
		if x&1 == 0 {
			o.s = testStrings[x>>1%uint64(len(testStrings))]
		} else {
			b := make([]byte, x>>8%40)
			for i := range b {
				b[i] = byte(e.u64())
			}
			o.s = string(b)
		}
		if !invalid && len(o.s) > o.maxLen {
			o.s = o.s[:o.maxLen]
		}
	case opGamma:
		o.u = x >> (h % 64)
		if o.u == 0 && !invalid {
			o.u = 1
		}
	}
	return o
}

// writeOp applies o to w.
func writeOp(w *Writer, t *StringTable, o op) error {
	switch o.kind {
	case opBits:
		return w.WriteBits(o.u, o.n)
	case opFlag:
		return w.WriteFlag(o.b)
	case opRanged:
		return w.WriteRangedInt(o.i, o.lo, o.hi)
	case opBytes:
		return w.WriteBytes(o.raw)
	case opQuant:
		return w.WriteQuantized(o.f, o.fmin, o.fmax, o.n)
	case opFixed:
		return w.WriteFixed(o.f, o.fmin, o.fmax, o.prec)
	case opSigned:
		return w.WriteSignedFloat(o.f, o.n)
	case opUnit:
		return w.WriteUnitFloat(o.f, o.n)
	case opFloat32:
		return w.WriteFloat32(o.f32)
	case opVec:
		return w.WriteUnitVector(o.v[0], o.v[1], o.v[2], o.n)
	case opQuat:
		return w.WriteQuatBits(o.q, o.n)
	case opString:
		return w.WriteString(o.s, o.maxLen)
	case opTable:
		return w.WriteTableString(t, o.s, o.maxLen)
	case opGamma:
		return w.WriteGamma(o.u)
	}
	panic("unknown op")
}

// readOp reads the value of an op shaped like o (same kind and parameters)
// and returns it as an op. The field name is the op's kind.
func readOp(r *Reader, t *StringTable, o op) (op, error) {
	got := o
	f := o.kind.String()
	var err error
	switch o.kind {
	case opBits:
		got.u, err = r.ReadBits(o.n, f)
	case opFlag:
		got.b, err = r.ReadFlag(f)
	case opRanged:
		got.i, err = r.ReadRangedInt(o.lo, o.hi, f)
	case opBytes:
		got.raw = make([]byte, len(o.raw))
		err = r.ReadBytes(got.raw, f)
	case opQuant:
		got.f, err = r.ReadQuantized(o.fmin, o.fmax, o.n, f)
	case opFixed:
		got.f, err = r.ReadFixed(o.fmin, o.fmax, o.prec, f)
	case opSigned:
		got.f, err = r.ReadSignedFloat(o.n, f)
	case opUnit:
		got.f, err = r.ReadUnitFloat(o.n, f)
	case opFloat32:
		got.f32, err = r.ReadFloat32(f)
	case opVec:
		got.v[0], got.v[1], got.v[2], err = r.ReadUnitVector(o.n, f)
	case opQuat:
		got.q, err = r.ReadQuatBits(o.n, f)
	case opString:
		got.s, err = r.ReadString(o.maxLen, f)
	case opTable:
		got.s, err = r.ReadTableString(t, o.maxLen, f)
	case opGamma:
		got.u, err = r.ReadGamma(f)
	default:
		panic("unknown op")
	}
	return got, err
}

// checkOp reports how got (decoded) differs from o (written) beyond what the
// encoding allows: exact for lossless kinds, within the documented bound for
// quantized ones.
func checkOp(o, got op) error {
	bad := func(what string, args ...any) error {
		return fmt.Errorf("%v: got %v: %s", o, got, fmt.Sprintf(what, args...))
	}
	switch o.kind {
	case opBits, opGamma:
		if got.u != o.u {
			return bad("value differs")
		}
	case opFlag:
		if got.b != o.b {
			return bad("value differs")
		}
	case opRanged:
		if got.i != o.i {
			return bad("value differs")
		}
	case opBytes:
		if !bytes.Equal(got.raw, o.raw) {
			return bad("value differs")
		}
	case opString, opTable:
		if got.s != o.s {
			return bad("value differs")
		}
	case opFloat32:
		if math.Float32bits(got.f32) != math.Float32bits(o.f32) {
			return bad("value differs")
		}
	case opQuant, opFixed, opSigned, opUnit:
		var bound float64
		switch o.kind {
		case opQuant:
			bound = QuantizedMaxError(o.fmin, o.fmax, o.n)
		case opFixed:
			bound = FixedMaxError(o.fmin, o.fmax, o.prec)
		case opSigned:
			bound = SignedFloatMaxError(o.n)
		case opUnit:
			bound = UnitFloatMaxError(o.n)
		}
		lo, hi := o.fmin, o.fmax
		switch o.kind {
		case opSigned:
			lo, hi = -1, 1
		case opUnit:
			lo, hi = 0, 1
		}
		if !(math.Abs(got.f-o.f) <= bound) {
			return bad("error %g above bound %g", math.Abs(got.f-o.f), bound)
		}
		if !(got.f >= lo && got.f <= hi) {
			return bad("decoded value outside [%v, %v]", lo, hi)
		}
	case opVec:
		var want [3]float64
		normalize(want[:], o.v[:])
		if a := vecAngle(want, got.v); !(a <= UnitVectorMaxAngle(o.n)) {
			return bad("angle %g above bound %g", a, UnitVectorMaxAngle(o.n))
		}
		if l := math.Sqrt(got.v[0]*got.v[0] + got.v[1]*got.v[1] + got.v[2]*got.v[2]); math.Abs(l-1) > 1e-12 {
			return bad("decoded length %v", l)
		}
	case opQuat:
		var want [4]float64
		normalize(want[:], o.q[:])
		if a := QuatAngle(want, got.q); !(a <= QuatMaxAngle(o.n)) {
			return bad("angle %g above bound %g", a, QuatMaxAngle(o.n))
		}
		if l := math.Sqrt(got.q[0]*got.q[0] + got.q[1]*got.q[1] + got.q[2]*got.q[2] + got.q[3]*got.q[3]); math.Abs(l-1) > 1e-12 {
			return bad("decoded length %v", l)
		}
	}
	return nil
}

// normalize writes src/|src| to dst, scaling first so huge components do not
// overflow the reference computation.
func normalize(dst, src []float64) {
	var big float64
	for _, x := range src {
		big = math.Max(big, math.Abs(x))
	}
	var ss float64
	for _, x := range src {
		ss += (x / big) * (x / big)
	}
	n := math.Sqrt(ss)
	for i, x := range src {
		dst[i] = x / big / n
	}
}

// vecAngle is the angle between two unit vectors, accurate when small.
func vecAngle(a, b [3]float64) float64 {
	dx, dy, dz := a[0]-b[0], a[1]-b[1], a[2]-b[2]
	return 2 * math.Asin(math.Min(1, math.Sqrt(dx*dx+dy*dy+dz*dz)/2))
}

// isWriteRefusal reports whether err is one of the errors a write may return.
func isWriteRefusal(err error) bool {
	return errors.Is(err, ErrOverflow) || errors.Is(err, ErrOutOfRange) ||
		errors.Is(err, ErrWidth) || errors.Is(err, ErrTooLong)
}

// paddingZero reports whether the bits of w's last byte beyond BitLen are zero.
func paddingZero(w *Writer) bool {
	b := w.Bytes()
	if off := w.BitLen() & 7; off != 0 {
		return b[len(b)-1]>>off == 0
	}
	return true
}
