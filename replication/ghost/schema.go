package ghost

import (
	"fmt"
	"math"
	"math/bits"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// MaxNameLen is the longest Name in bytes.
const MaxNameLen = 31

// Name is a short string held by value, so State stays a fixed-size value
// without pointers (tables copy states per tick; a string header would make
// every copy a GC-visible pointer). The zero Name is the empty name.
type Name struct {
	n uint8
	b [MaxNameLen]byte
}

// MakeName returns s as a Name; longer than MaxNameLen bytes is ErrNameTooLong,
// not UTF-8 is ErrNameNotUTF8 (the wire's strings are UTF-8: a client rejects
// a packet carrying one that is not, and a player record holding it would not
// decode).
func MakeName(s string) (Name, error) {
	var n Name
	if len(s) > MaxNameLen {
		return n, ErrNameTooLong
	}
	if !utf8.ValidString(s) {
		return n, ErrNameNotUTF8
	}
	n.n = uint8(copy(n.b[:], s))
	return n, nil
}

// MustName is MakeName for constants in tests and class tables; it panics on a
// name longer than MaxNameLen (a programming error, never wire input).
func MustName(s string) Name {
	n, err := MakeName(s)
	if err != nil {
		panic("ghost: MustName: " + err.Error())
	}
	return n
}

// NameFromBytes is MakeName for a byte slice (no allocation).
func NameFromBytes(b []byte) (Name, error) {
	var n Name
	if len(b) > MaxNameLen {
		return n, ErrNameTooLong
	}
	n.n = uint8(copy(n.b[:], b))
	return n, nil
}

// AppendTo appends the name's bytes to dst.
func (n *Name) AppendTo(dst []byte) []byte { return append(dst, n.b[:n.n]...) }

// String returns the name as a string (allocates).
func (n Name) String() string { return string(n.b[:n.n]) }

// Len is the name's length in bytes.
func (n Name) Len() int { return int(n.n) }

// State is the replicated state of one entity. One struct serves every class:
// a class's field groups say which fields it replicates and how; fields a
// class does not replicate stay zero on the client. It is a fixed-size value
// with no pointers, so the table and the mirror copy it without allocating.
type State struct {
	Pos    [3]float64 // metres, inside the Registry's Bounds
	Vel    [3]float64 // metres per second
	Yaw    float64    // radians, any finite value (wrapped to [−π, π) on the wire)
	Health int32
	Flags  uint32
	Name   Name
	Extra  [4]uint32 // game-defined small integers
}

// Bounds is the world box positions are quantized in, at Precision metres per
// step (checklist BS-7: fixed point relative to the world). The default
// 4 km × 4 km × 512 m at 1 cm costs 19+16+19 bits absolute (x, height y, z).
type Bounds struct {
	Min, Max  [3]float64
	Precision float64
}

// DefaultBounds is a 4 km × 4 km ground plane (x, z) with 512 m of height (y,
// up — the convention of move.Walk and the zones) centred on the origin at 1 cm.
func DefaultBounds() Bounds {
	return Bounds{Min: [3]float64{-2000, -256, -2000}, Max: [3]float64{2000, 256, 2000}, Precision: 0.01}
}

// maxAxisSteps bounds an axis's code so window arithmetic stays in int64 and
// an absolute coordinate fits 31 bits.
const maxAxisSteps = 1<<31 - 1

// Validate reports whether b describes a usable, finite box.
func (b Bounds) Validate() error {
	if !(b.Precision > 0) || math.IsInf(b.Precision, 0) {
		return fmt.Errorf("%w: bounds precision %v", ErrConfig, b.Precision)
	}
	for a := range 3 {
		lo, hi := b.Min[a], b.Max[a]
		if math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) || !(lo < hi) {
			return fmt.Errorf("%w: bounds axis %d [%v, %v]", ErrConfig, a, lo, hi)
		}
		if steps := (hi - lo) / b.Precision; steps > maxAxisSteps {
			return fmt.Errorf("%w: bounds axis %d has %.0f steps (max %d)", ErrConfig, a, steps, maxAxisSteps)
		}
	}
	return nil
}

// quant quantizes positions: code = round((v − min)·(1/precision)) per
// axis, in [0, lim]; value = min + code·precision. Codes are what the wire
// carries and what the table diffs, so a sub-centimetre wobble never dirties
// a ghost. Only the server quantizes, so the multiply by a reciprocal (not a
// division) only has to agree with itself.
type quant struct {
	min  [3]float64
	prec float64
	inv  float64
	lim  [3]uint32
	bits [3]uint
	// What packing needs of bits, worked out once: each axis's shift in
	// a packed position (posPool.sh's) and the masks of axes 0 and 1
	// (pair1run's, a load each instead of a table lookup a record).
	sh   [3]uint8
	mask [2]uint32
}

func newQuant(b Bounds) quant {
	q := quant{min: b.Min, prec: b.Precision, inv: 1 / b.Precision}
	for a := range 3 {
		q.lim[a] = uint32(math.Round((b.Max[a] - b.Min[a]) / b.Precision))
		q.bits[a] = uint(bits.Len32(q.lim[a]))
	}
	q.sh = [3]uint8{0, uint8(q.bits[0]), uint8(q.bits[0] + q.bits[1])}
	q.mask = [2]uint32{lowBits[q.bits[0]&63], lowBits[q.bits[1]&63]}
	return q
}

// quantize sets c to p's codes and reports whether p lies in the box (and
// is not NaN); c is meaningless when it does not. round(x) ∈ [0, lim]
// exactly when x ∈ (−0.5, lim + 0.5): the test runs on x, before rounding.
func (q *quant) quantize(p *[3]float64, c *[3]uint32) bool {
	ok := true
	for a := range 3 {
		x := (p[a] - q.min[a]) * q.inv
		if !(x > -0.5 && x < float64(q.lim[a])+0.5) {
			ok = false
			continue
		}
		c[a] = uint32(roundHalfAway(x))
	}
	return ok
}

// roundHalfAway is int64(math.Round(x)) for |x| < 2^62: truncate, then step
// away from zero when the dropped fraction is at least a half (x − trunc(x)
// is exact). math.Round twiddles bits instead; GOAMD64=v1 has no rounding
// instruction, and the quantizers and the position predictor call this for
// every ghost of every view and packet.
func roundHalfAway(x float64) int64 {
	// Callers pass products: round x first, or Go fuses the product into
	// x − i below (an FMA on arm64, ppc64, s390x) and the tie test sees
	// the unrounded product while the truncation saw the rounded one.
	x = float64(x)
	i := int64(x)
	f := x - float64(i)
	// The step is 2f truncated: doubling is exact, and 2f in (−2, 2)
	// truncates to 1 exactly when f ≥ ½, to −1 when f ≤ −½, else to 0 —
	// one conversion instead of two comparisons against constants (six
	// instructions fewer a call on amd64).
	return i + int64(f+f)
}

// code quantizes p, which must be inside (SetView checked it).
func (q *quant) code(p *[3]float64) [3]uint32 {
	var c [3]uint32
	q.quantize(p, &c)
	return c
}

func (q *quant) value(c [3]uint32) [3]float64 {
	var p [3]float64
	for a := range 3 {
		p[a] = q.min[a] + float64(float64(c[a])*q.prec) // no FMA: § 6.4 rounds the product
	}
	return p
}

// Group is one field group of a class: fields that change together share one
// bit of the dirty mask and are written together (seed 004 § Ghosts: "group
// states that will be dirty at the same time together"; checklist RP-7).
// Encode and Decode must mirror each other exactly; Decode must return an
// error, never panic, on any input, and must only touch its own fields of s.
// Build groups with the constructors (PositionGroup, YawGroup, …) or by hand;
// do not replace a constructor's Encode: the table writes the yaw, and a
// snapshot's codes of the constructors' other State-only groups, without
// calling it.
type Group struct {
	Name string
	// Encode writes the group's fields of s. It may assume Check(s) passed.
	Encode func(w *bitstream.Writer, s *State) error
	// Decode reads what Encode wrote into s.
	Decode func(r *bitstream.Reader, s *State) error
	// Changed reports whether the group's wire value differs between old and
	// cur (compare encoded values, not raw floats, so noise below the
	// quantization step does not cost bandwidth).
	Changed func(old, cur *State) bool
	// Check, if set, rejects a state Encode cannot carry (SetView calls it).
	Check func(s *State) error

	pos bool     // the built-in position group: coded by the table against the world bounds
	yaw bool     // YawGroup: interpolated by the client
	yc  yawCoder // YawGroup's coder: the table writes yaw without the Encode call
	// code, set by the constructors of groups whose bits are a function of
	// the State alone (yaw, velocity, health, flags, extra), returns what
	// Encode writes as one field of n ≤ runMax bits (ok false: wider, or a
	// value Encode refuses). A snapshot codes such groups once per entity
	// at Seal for every table (snapEnt.gc); updates then append the codes
	// without calling Encode or reading the State. Encode of these groups
	// writes code's field itself, so the two cannot disagree; a group
	// built by hand has no code (replacing a constructor's Encode is not
	// supported, as for YawGroup, which the table writes itself).
	code func(s *State) (v uint64, n uint, ok bool)
	// decode sets the group's fields of s to what code's field v says:
	// the value a client decodes (set with code).
	decode func(v uint64, s *State)
	// slot is 1 + the index in snapEnt.gc of the group's code (0: none):
	// Class.prepare gives the first snapCodes coded groups of a class one
	// each (its first yaw group has snapEnt.yawQ instead).
	slot uint8
	// name: NameGroup, whose Encode reads State.Name alone (a snapshot
	// entry keeps the name, not the State).
	name bool
	// fields is the State fields a constructor's group reads (fPos, …;
	// 0: a group built by hand, any): a snapshot entry whose state
	// changed in none of them keeps the group's code.
	fields uint8
}

// fieldEncoder is the Encode of a group with a code: the field in one
// write, or fallback (a wider field, a refused value).
func fieldEncoder(code func(*State) (uint64, uint, bool), fallback func(*bitstream.Writer, *State) error) func(*bitstream.Writer, *State) error {
	return func(w *bitstream.Writer, s *State) error {
		if v, n, ok := code(s); ok {
			if n == 0 {
				return nil // a HealthGroup of one value
			}
			return w.WriteBits(v, n)
		}
		return fallback(w, s)
	}
}

// PositionGroup replicates State.Pos quantized to the Registry's Bounds. In a
// create it is absolute (19+16+19 bits for the default bounds); in an update
// it sends only the low bits the client needs to recover the value from
// whatever position it currently holds (docs/protocol.md §6), about
// 25 bits for an entity running on flat ground. At most one per class.
func PositionGroup() Group { return Group{Name: "pos", pos: true, fields: fPos} }

// yawCoder maps an angle to one of 2^bits codes around the circle (−π ≡ π):
// round(y·2^bits/2π) modulo 2^bits (two's complement wraps negative angles).
type yawCoder struct {
	scale float64 // 2^bits / 2π
	mask  uint64
	bits  uint
}

func newYawCoder(nbits uint) yawCoder {
	return yawCoder{scale: float64(uint64(1)<<nbits) / (2 * math.Pi), mask: uint64(1)<<nbits - 1, bits: nbits}
}

func (c *yawCoder) code(y float64) uint64 {
	if !(math.Abs(y) < 1e9) { // keep the int64 conversion exact (Check rejects NaN, ±Inf)
		return c.wideCode(y)
	}
	return uint64(roundHalfAway(y*c.scale)) & c.mask
}

// wideCode is the rare path of code, kept out of line so code inlines.
func (c *yawCoder) wideCode(y float64) uint64 {
	return uint64(roundHalfAway(math.Remainder(y, 2*math.Pi)*c.scale)) & c.mask
}

func (c *yawCoder) value(v uint64) float64 {
	y := float64(v) / c.scale
	if y >= math.Pi {
		y -= 2 * math.Pi
	}
	return y
}

// YawGroup replicates State.Yaw in nbits (1..16) bits around the circle; the
// client sees it in [−π, π). 10 bits is 0.35°.
func YawGroup(nbits uint) Group {
	if nbits < 1 || nbits > 16 {
		nbits = 10
	}
	yc := newYawCoder(nbits)
	return Group{
		Name:   "yaw",
		fields: fYaw,
		yaw:    true,
		yc:     yc,
		code:   func(s *State) (uint64, uint, bool) { return yc.code(s.Yaw), yc.bits, true },
		decode: func(v uint64, s *State) { s.Yaw = yc.value(v) },
		Encode: func(w *bitstream.Writer, s *State) error {
			return w.WriteBits(yc.code(s.Yaw), yc.bits)
		},
		Decode: func(r *bitstream.Reader, s *State) error {
			c, err := r.ReadBits(yc.bits, "ghost.yaw")
			if err != nil {
				return err
			}
			s.Yaw = yc.value(c)
			return nil
		},
		Changed: func(old, cur *State) bool { return old.Yaw != cur.Yaw && yc.code(old.Yaw) != yc.code(cur.Yaw) },
		Check: func(s *State) error {
			if math.IsNaN(s.Yaw) || math.IsInf(s.Yaw, 0) {
				return fmt.Errorf("%w: yaw %v", ErrBadState, s.Yaw)
			}
			return nil
		},
	}
}

// velCode is round((clamp(v, −max, max) + max) ÷ (2·max) × l), each
// operation rounded as docs/protocol.md writes it (Check rejects NaN).
func velCode(v, max float64, l uint64) uint64 {
	if v < -max {
		v = -max
	} else if v > max {
		v = max
	}
	return uint64(roundHalfAway((v + max) / (2 * max) * float64(l)))
}

// VelGroup replicates State.Vel, each component clamped to [−max, max] m/s
// and quantized to nbits (2..20) bits.
func VelGroup(max float64, nbits uint) Group {
	if nbits < 2 || nbits > 20 {
		nbits = 12
	}
	if !(max > 0) || math.IsInf(max, 0) {
		max = 32
	}
	l := uint64(1)<<nbits - 1
	field := func(s *State) uint64 {
		return velCode(s.Vel[0], max, l) | velCode(s.Vel[1], max, l)<<nbits | velCode(s.Vel[2], max, l)<<(2*nbits)
	}
	g := Group{
		Name:   "vel",
		fields: fVel,
		Encode: func(w *bitstream.Writer, s *State) error {
			return w.WriteBits(field(s), 3*nbits)
		},
		Decode: func(r *bitstream.Reader, s *State) error {
			v, err := r.ReadBits(3*nbits, "ghost.vel")
			if err != nil {
				return err
			}
			for a := range 3 {
				s.Vel[a] = float64(float64(v>>(uint(a)*nbits)&l)/float64(l)*(2*max)) - max // no FMA
			}
			return nil
		},
		Changed: func(old, cur *State) bool {
			if old.Vel == cur.Vel {
				return false
			}
			for a := range 3 {
				if velCode(old.Vel[a], max, l) != velCode(cur.Vel[a], max, l) {
					return true
				}
			}
			return false
		},
		Check: func(s *State) error {
			for _, v := range s.Vel {
				if math.IsNaN(v) {
					return fmt.Errorf("%w: velocity NaN", ErrBadState)
				}
			}
			return nil
		},
	}
	if 3*nbits <= runMax { // 19 and 20 bits an axis go by Encode
		g.code = func(s *State) (uint64, uint, bool) { return field(s), 3 * nbits, true }
		g.decode = func(v uint64, s *State) {
			for a := range 3 {
				s.Vel[a] = float64(float64(v>>(uint(a)*nbits)&l)/float64(l)*(2*max)) - max // Decode's
			}
		}
	}
	return g
}

// HealthGroup replicates State.Health as a ranged int in [min, max].
func HealthGroup(min, max int32) Group {
	n := bitstream.RangeBits(int64(min), int64(max)) // ≤ 32
	code := func(s *State) (uint64, uint, bool) {
		// WriteRangedInt's field: v − min in n bits.
		return uint64(int64(s.Health)) - uint64(int64(min)), n, s.Health >= min && s.Health <= max
	}
	return Group{
		Name:   "health",
		fields: fHealth,
		code:   code,
		decode: func(v uint64, s *State) { s.Health = int32(int64(v + uint64(int64(min)))) },
		Encode: fieldEncoder(code, func(w *bitstream.Writer, s *State) error {
			return w.WriteRangedInt(int64(s.Health), int64(min), int64(max)) // refused: out of range
		}),
		Decode: func(r *bitstream.Reader, s *State) error {
			v, err := r.ReadRangedInt(int64(min), int64(max), "ghost.health")
			if err != nil {
				return err
			}
			s.Health = int32(v)
			return nil
		},
		Changed: func(old, cur *State) bool { return old.Health != cur.Health },
		Check: func(s *State) error {
			if s.Health < min || s.Health > max {
				return fmt.Errorf("%w: health %d outside [%d, %d]", ErrBadState, s.Health, min, max)
			}
			return nil
		},
	}
}

// NameGroup replicates State.Name through t, a string table both ends hold
// with the same strings in the same slots (built in, e.g. NPC kind names): a
// hit costs 1 + log2(slots) bits, anything else goes as a literal (checklist
// BS-11). t may be nil (always literal).
func NameGroup(t *bitstream.StringTable) Group {
	return Group{
		Name:   "name",
		name:   true,
		fields: fName,
		Encode: func(w *bitstream.Writer, s *State) error {
			return w.WriteTableString(t, string(s.Name.b[:s.Name.n]), MaxNameLen)
		},
		Decode: func(r *bitstream.Reader, s *State) error {
			b, err := r.ReadTableStringBytes(t, s.Name.b[:0], MaxNameLen, "ghost.name")
			if err != nil {
				return err
			}
			s.Name.n = uint8(len(b))
			return nil
		},
		Changed: func(old, cur *State) bool { return old.Name != cur.Name },
	}
}

// FlagsGroup replicates the low nbits (1..32) bits of State.Flags.
func FlagsGroup(nbits uint) Group {
	if nbits < 1 || nbits > 32 {
		nbits = 32
	}
	code := func(s *State) (uint64, uint, bool) { return uint64(s.Flags), nbits, uint64(s.Flags)>>nbits == 0 }
	return Group{
		Name:   "flags",
		fields: fFlags,
		code:   code,
		decode: func(v uint64, s *State) { s.Flags = uint32(v) },
		Encode: fieldEncoder(code, func(w *bitstream.Writer, s *State) error {
			return w.WriteBits(uint64(s.Flags), nbits) // refused: wider than nbits
		}),
		Decode: func(r *bitstream.Reader, s *State) error {
			v, err := r.ReadBits(nbits, "ghost.flags")
			s.Flags = uint32(v)
			return err
		},
		Changed: func(old, cur *State) bool { return old.Flags != cur.Flags },
		Check: func(s *State) error {
			if uint64(s.Flags)>>nbits != 0 {
				return fmt.Errorf("%w: flags %#x wider than %d bits", ErrBadState, s.Flags, nbits)
			}
			return nil
		},
	}
}

// ExtraGroup replicates State.Extra[0:n] (n in 1..4), each as an Elias-gamma
// code of v+1, so small values are cheap (0 is one bit).
func ExtraGroup(n int) Group {
	n = max(1, min(n, len(State{}.Extra)))
	// The n codes as one field when they fit the writer's 56-bit fast
	// path (a player's move sequence and small counters do): the same
	// bits as a WriteGamma each, one write instead of n (every update of
	// a player ghost carries its move sequence).
	code := func(s *State) (uint64, uint, bool) { return gammaField(s.Extra[:n]) }
	return Group{
		Name:   "extra",
		fields: fExtra,
		code:   code,
		decode: func(v uint64, s *State) {
			var l uint
			for i := range n { // gammaField's codes, first value first
				z := uint(bits.TrailingZeros64(v >> l))
				x := 1<<z | v>>(l+z+1)&(1<<z-1)
				s.Extra[i] = uint32(x - 1)
				l += 2*z + 1
			}
		},
		Encode: fieldEncoder(code, func(w *bitstream.Writer, s *State) error {
			return writeGammas(w, s.Extra[:n])
		}),
		Decode: func(r *bitstream.Reader, s *State) error {
			if extrasInWindow(r, s, n) { // extra_read.go: the codes from one window
				return nil
			}
			return readExtrasPlain(r, s, n)
		},
		Changed: func(old, cur *State) bool { return old.Extra != cur.Extra },
	}
}

// gammaField is the gamma codes of each of vs + 1 as one field of l ≤
// runMax bits (ok false: wider).
func gammaField(vs []uint32) (c uint64, l uint, ok bool) {
	for _, x := range vs {
		v := uint64(x) + 1
		z := uint(bits.Len64(v)) - 1
		if l+2*z+1 > runMax {
			return 0, 0, false
		}
		c |= (1<<z | (v&^(1<<z))<<(z+1)) << l
		l += 2*z + 1
	}
	return c, l, true
}

// writeGammas writes each of vs + 1 as a gamma code, all or nothing.
func writeGammas(w *bitstream.Writer, vs []uint32) error {
	at := w.BitLen()
	for _, x := range vs {
		if err := w.WriteGamma(uint64(x) + 1); err != nil {
			w.Truncate(at) // keep the group atomic
			return err
		}
	}
	return nil
}

// MaxGroups is the most field groups a class may have (one uint64 dirty mask).
const MaxGroups = 64

// MaxClassID is the largest class wire id.
const MaxClassID = 1<<16 - 1

// Class is an entity class declared by game code: its wire id, its field
// groups (bit i of every mask is Groups[i]) and how the ghost manager treats
// it. Declare it as a value and Register it before any Table or Mirror uses
// the Registry; do not change it afterwards. Registering fills in derived
// fields, so a Class is not safe to register concurrently.
type Class struct {
	// ID is the class's stable wire id (checklist RP-2: chosen by game code,
	// never derived from build or registration order). 0..MaxClassID.
	ID uint16
	// Name is for logs and errors.
	Name string
	// Groups are the replicated field groups, at most MaxGroups.
	Groups []Group
	// DefaultMask is the set of groups an update most often carries (say,
	// position). An update with exactly this mask costs 1 bit of kind instead
	// of 2 plus a mask of len(Groups) bits. Zero means the position group (or
	// group 0 when the class has none).
	DefaultMask uint64
	// Weight multiplies the zone's priority for entities of this class
	// (players over props). Zero means 1.
	Weight float32
	// MinInterval is the shortest time between two updates of one ghost of
	// this class (checklist SC-8); creates and kills are not limited.
	// [0, MaxInterval] for a Table (NewTable refuses a registry with a
	// class past it).
	MinInterval time.Duration
	// AlwaysInScope ghosts stay on the client when a view omits them (a
	// scoreboard, a team flag); they leave only through Table.Remove.
	AlwaysInScope bool

	all    uint64 // mask of all groups
	posBit uint64 // the position group's bit, 0 if none
	posIdx int    // its index, -1 if none
	yawIdx int    // index of the first YawGroup, -1 if none
	// posYaw is the mask of the position and then the first yaw group
	// (an NPC's usual update: writeRecord's run without the walk of the
	// groups), 0 if the class lacks either or has the yaw first.
	posYaw uint64
	coded  uint64 // the groups with a slot in snapEnt.gc (Group.slot)
	// stateful: a group other than the position, the first yaw group,
	// a coded one and a NameGroup (one its Encode alone writes): a
	// snapshot entry of c keeps its State (Snapshot.xs).
	stateful bool
	// byField[f] is the groups that read field f (fPos is bit 0, …) and
	// anyField those built by hand (they may read any).
	byField  [numFields]uint64
	anyField uint64
	weight   float32
	minMS    int32     // MinInterval in whole ms, rounded up (the table's times are ms)
	reg      *Registry // the first registry c was registered in
	ri       uint16    // c's index in reg.classes
	// wk[i] is how an update writes group i from what the table has at
	// hand (wkPos, wkYaw, wkCoded+slot index; wkOther: the group itself
	// says), and yawBits the first yaw group's width: writeUpdate's
	// dispatch reads a byte a group, not the 100-byte Group.
	wk      [MaxGroups]uint8
	yawBits uint8
	wm      wireMasks // Seal's and SealHeld's compare of wire values
}

// Kinds of Class.wk.
const (
	wkOther = iota // Encode, a second yaw group, or a position sent absolute
	wkPos          // the position group: a window, or absolute (wkOther's way)
	wkYaw          // the first yaw group: Table.latest's yaw code
	wkCoded        // wkCoded+j: the group with snapEnt.gc[j] (Group.slot = j+1)
)

// Registry is the first registry c was registered in (nil: none). A zone
// that is handed classes makes its snapshots of their registry.
func (c *Class) Registry() *Registry { return c.reg }

// NumGroups is len(c.Groups).
func (c *Class) NumGroups() int { return len(c.Groups) }

// AllGroups is the mask with every group of c set.
func (c *Class) AllGroups() uint64 { return c.all }

// GroupBit returns the mask bit of the group named name, 0 if there is none.
func (c *Class) GroupBit(name string) uint64 {
	for i := range c.Groups {
		if c.Groups[i].Name == name {
			return 1 << uint(i)
		}
	}
	return 0
}

// prepare validates c and fills in its derived fields.
func (c *Class) prepare() error {
	n := len(c.Groups)
	if n == 0 || n > MaxGroups {
		return fmt.Errorf("%w: class %q has %d groups (1..%d)", ErrClass, c.Name, n, MaxGroups)
	}
	if math.IsNaN(float64(c.Weight)) || c.Weight < 0 || math.IsInf(float64(c.Weight), 0) {
		return fmt.Errorf("%w: class %q weight %v", ErrClass, c.Name, c.Weight)
	}
	if c.MinInterval < 0 {
		return fmt.Errorf("%w: class %q negative MinInterval", ErrClass, c.Name)
	}
	c.all = ^uint64(0) >> (64 - uint(n))
	c.posIdx, c.posBit, c.yawIdx, c.coded, c.stateful = -1, 0, -1, 0, false
	c.wk, c.yawBits = [MaxGroups]uint8{}, 0
	c.byField, c.anyField = [numFields]uint64{}, 0
	for i := range c.Groups {
		g := &c.Groups[i]
		g.slot = 0
		if g.yaw && c.yawIdx < 0 {
			c.yawIdx = i
			c.wk[i], c.yawBits = wkYaw, uint8(g.yc.bits)
		} else if n := bits.OnesCount64(c.coded); g.code != nil && n < snapCodes {
			g.slot = uint8(n + 1)
			c.coded |= 1 << uint(i)
			c.wk[i] = wkCoded + uint8(n)
		}
		if !g.pos && c.wk[i] == wkOther && !g.name {
			c.stateful = true
		}
		if g.fields == 0 {
			c.anyField |= 1 << uint(i)
		}
		for f := range numFields {
			if g.fields&(1<<f) != 0 {
				c.byField[f] |= 1 << uint(i)
			}
		}
		if g.pos {
			c.wk[i] = wkPos
			if c.posIdx >= 0 {
				return fmt.Errorf("%w: class %q has two position groups", ErrClass, c.Name)
			}
			c.posIdx, c.posBit = i, 1<<uint(i)
			continue
		}
		if g.Encode == nil || g.Decode == nil || g.Changed == nil {
			return fmt.Errorf("%w: class %q group %d (%q) lacks Encode, Decode or Changed", ErrClass, c.Name, i, g.Name)
		}
	}
	c.posYaw = 0
	if c.posBit != 0 && c.yawIdx > c.posIdx {
		c.posYaw = c.posBit | 1<<uint(c.yawIdx)
	}
	if c.DefaultMask == 0 {
		c.DefaultMask = c.posBit
		if c.DefaultMask == 0 {
			c.DefaultMask = 1
		}
	}
	if c.DefaultMask&^c.all != 0 {
		return fmt.Errorf("%w: class %q default mask %#x names missing groups", ErrClass, c.Name, c.DefaultMask)
	}
	c.weight = c.Weight
	if c.weight == 0 {
		c.weight = 1
	}
	c.minMS = msCeil(c.MinInterval)
	c.setWireMasks()
	return nil
}

// Registry holds the classes both ends agree on and the world bounds. Build
// it at startup, Register every class, then hand it to NewTable / NewMirror;
// from then on it is read-only and safe to share between goroutines (every
// connection's Table and Mirror may use one Registry).
type Registry struct {
	bounds Bounds
	q      quant
	byID   map[uint16]*Class
	// classes lists the classes in registration order: a table's ghost
	// record names its class by this index (2 bytes, not an 8-byte
	// pointer), and ri is that index for each class.
	classes []*Class
	ri      map[*Class]uint16
	// slowFates: a table of this registry applies every fate by
	// fateRecords (OnFate): a class past entMaskBits groups (Table.wide)
	// or positions packed past 64 bits (posPool.wide). The registry's,
	// not the Table's: OnFate reads it beside posBits, which every table
	// shares (warm), not on a line of the Table's own (TestTableFateLines).
	slowFates bool
	// posBits[i] is classes[i].posBit (a table's ghosts have i < 256):
	// a delivered record's test of its position bit (usualRun) without
	// the class's pointer and the slice's bounds check.
	posBits   [256]uint64
	maxGroups int
	frozen    atomic.Bool // set by NewTable/NewMirror, which may run on many goroutines at once
}

// NewRegistry returns an empty registry for a world of bounds b.
func NewRegistry(b Bounds) (*Registry, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	q := newQuant(b)
	return &Registry{bounds: b, q: q, byID: make(map[uint16]*Class), ri: make(map[*Class]uint16), slowFates: q.wide()}, nil
}

// Register adds classes. A duplicate wire id is ErrDuplicateClass (RP-2:
// caught at startup, never on the wire); after NewTable or NewMirror used
// the registry, ErrFrozen.
func (r *Registry) Register(cs ...*Class) error {
	if r.frozen.Load() {
		return ErrFrozen
	}
	for _, c := range cs {
		if c == nil {
			return fmt.Errorf("%w: nil class", ErrClass)
		}
		if old, ok := r.byID[c.ID]; ok {
			return fmt.Errorf("%w: %d is %q and %q", ErrDuplicateClass, c.ID, old.Name, c.Name)
		}
		if err := c.prepare(); err != nil {
			return err
		}
		r.byID[c.ID] = c
		// Wire ids are unique within a registry, so its classes number
		// at most 2^16: the index fits 16 bits.
		r.ri[c] = uint16(len(r.classes))
		if c.reg == nil {
			c.reg, c.ri = r, uint16(len(r.classes))
		}
		if i := len(r.classes); i < len(r.posBits) {
			r.posBits[i] = c.posBit
		}
		r.classes = append(r.classes, c)
		r.maxGroups = max(r.maxGroups, len(c.Groups))
		r.slowFates = r.slowFates || r.maxGroups > entMaskBits
	}
	return nil
}

// index is c's index in r.classes (c must be registered in r).
func (r *Registry) index(c *Class) uint16 {
	if c.reg == r {
		return c.ri
	}
	return r.ri[c]
}

// has reports whether c is registered in r: a class first registered in r
// says so itself, with no map lookup (a snapshot of players and NPCs
// alternates classes, and Seal's look-up of each change by wire id was
// ≈ 9 % of BenchmarkSeal1000).
func (r *Registry) has(c *Class) bool {
	return c.reg == r || r.byID[c.ID] == c
}

// Lookup returns the class with wire id id.
func (r *Registry) Lookup(id uint16) (*Class, bool) {
	c, ok := r.byID[id]
	return c, ok
}

// Bounds returns the world bounds.
func (r *Registry) Bounds() Bounds { return r.bounds }

// PosMaxError is the largest per-axis error of a replicated position: half
// a quantization step (plus binary64 rounding).
func (r *Registry) PosMaxError() float64 { return r.bounds.Precision/2 + r.bounds.Precision*1e-6 }

// QuantizePos returns p as the client will see it (p must be inside the bounds).
func (r *Registry) QuantizePos(p [3]float64) [3]float64 { return r.q.value(r.q.code(&p)) }

// check validates s against c's groups and sets q to its position's codes.
func (r *Registry) check(c *Class, s *State, q *[3]uint32) error {
	if c.posIdx >= 0 && !r.q.quantize(&s.Pos, q) {
		return fmt.Errorf("%w: %s position %v outside the world bounds", ErrBadState, c.Name, s.Pos)
	}
	for i := range c.Groups {
		if ck := c.Groups[i].Check; ck != nil {
			if err := ck(s); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkChanged is check for a state whose fields in diff (fPos, …) alone
// differ, bit for bit, from a state check accepted for c, whose position
// codes are pq; groups is c.groupsOf(diff) (its caller needs it too). The
// position is quantized only if it changed (else its codes are pq's), and
// only the groups that read a field of diff are checked (a group built by
// hand may read any: always; a shipped group's Check reads its own fields
// alone, so it passes again on the same ones). The zone's crowd changes a
// few fields of each entry a tick; check's walk of every group was ≈ 350
// instructions an entry.
func (r *Registry) checkChanged(c *Class, s *State, q, pq *[3]uint32, diff, groups uint64) error {
	if c.posIdx >= 0 {
		if diff&fPos == 0 {
			*q = *pq
		} else if !r.q.quantize(&s.Pos, q) {
			return fmt.Errorf("%w: %s position %v outside the world bounds", ErrBadState, c.Name, s.Pos)
		}
	}
	for m := groups; m != 0; m &= m - 1 {
		if ck := c.Groups[bits.TrailingZeros64(m)].Check; ck != nil {
			if err := ck(s); err != nil {
				return err
			}
		}
	}
	return nil
}

// Wire ids of the shipped classes.
const (
	PlayerClassID uint16 = 1
	NPCClassID    uint16 = 2
)

// PlayerClass returns the shipped player class: position, yaw (10 bits),
// velocity (±32 m/s, 10 bits per axis), health [0, 1000], name, 16 flag
// bits and 4 extra integers. Updates carry position+yaw by default; players
// weigh twice an NPC. names is the string table of known names (may be nil).
func PlayerClass(names *bitstream.StringTable) *Class {
	return &Class{
		ID:   PlayerClassID,
		Name: "player",
		Groups: []Group{
			PositionGroup(),
			YawGroup(10),
			VelGroup(32, 10),
			HealthGroup(0, 1000),
			NameGroup(names),
			FlagsGroup(16),
			ExtraGroup(4),
		},
		DefaultMask: 1<<0 | 1<<1,
		Weight:      2,
	}
}

// NPCClass returns the shipped NPC class: position, yaw (8 bits), health
// [0, 100000], kind name (usually a string-table hit) and 8 flag bits.
// Updates carry position alone by default; at most one update per 50 ms.
// Adding a class is the same few lines: a wire id, the groups, a default mask.
func NPCClass(names *bitstream.StringTable) *Class {
	return &Class{
		ID:   NPCClassID,
		Name: "npc",
		Groups: []Group{
			PositionGroup(),
			YawGroup(8),
			HealthGroup(0, 100000),
			NameGroup(names),
			FlagsGroup(8),
		},
		DefaultMask: 1 << 0,
		Weight:      1,
		MinInterval: 50 * time.Millisecond,
	}
}
