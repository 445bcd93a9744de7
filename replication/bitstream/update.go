package bitstream

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// Entity updates: an entity's id, its dirty mask and the pose fields the
// mask selects, written or read inside a record in one call. A ghost
// update is an id, a mask and then, for each set bit, one group of
// fields; written one call a field, the mask is several flags and each
// group a call of its own, and every call re-loads the record's state and
// re-checks its parameters around a few instructions of work. An
// UpdateFormat is such a layout's pose part, validated once:
// RecordWriter.WriteUpdate batches the id, the mask and the selected
// groups into as few accumulator stores as fit, and RecordReader.ReadUpdate
// decodes them from the words it loads, with the bits, values and errors
// of the per-field calls (TestRecordsMatchFieldCalls, FuzzRecords).

// The pose groups of an update's mask, in the order they are written.
const (
	UpdatePos uint = 1 << iota // Pose.Pos, through the format's position (three values)
	UpdateRot                  // Pose.Rot, a quaternion as WriteQuat
	UpdateVel                  // Pose.Vel, through the format's velocity (three values)
)

// Pose is the part of an entity update that an UpdateFormat encodes: a
// position, a rotation (a unit quaternion) and a velocity.
type Pose struct {
	Pos [3]float64
	Rot [4]float64
	Vel [3]float64
}

// UpdateFormat is the layout of an entity update, made by NewUpdateFormat:
// its id, an integer in [idMin, idMax] (as WriteRangedInt), its dirty mask
// in maskBits bits, then the groups the mask's bits UpdatePos, UpdateRot
// and UpdateVel select, in that order. The mask's higher bits are the
// caller's own groups, which it writes after WriteUpdate (and reads after
// ReadUpdate). A value: it may be copied and shared, and its methods only
// read it. The zero UpdateFormat has an implied id of 0 and a mask of no
// bits, which a write refuses and a read fails on, with ErrWidth (as
// WriteBits and ReadBits of 0 bits).
type UpdateFormat struct {
	idMin  int64
	span   uint64 // idMax − idMin
	idBits uint   // RangeBits(idMin, idMax)
	mask   uint   // the mask's width
	// The writer's fast path tests, each one comparison: wlim is span + 1
	// when that path serves the widths (an id of at most 32 bits and a
	// mask of 31, each triple one field of 1..63 bits), else 0, which no
	// offset is below (the zero format's too); wmask is 2^maskBits, which
	// a mask must be below. (A flag tested beside them cost two loads and
	// a branch an update.) rlim is the reader's: span + 1 when its fast
	// path serves the widths (an id of 32 bits and a mask of 24, which
	// after a run's flag the first word's 56 bits hold, triples of 1..57
	// bits, each a word), else 0, tested on the id's offset it reads
	// first. rmax is the largest update in bits.
	wlim  uint64
	wrlim uint64 // wlim for a run's update: 0 too when the id and the mask are 63 bits
	wmask uint
	rlim  uint64
	rmax  uint
	pos   FixedFormat
	vel   QuantizedFormat
	// The plan, worked out once: the id's and the mask's bits together,
	// each triple's bits (an add of a field, where 3·bits was a load and
	// two address computations a group), and the masks of an id, a mask
	// and a code of each triple (each 2^width − 1).
	headBits, posBits3, velBits3       uint
	idMask, maskMask, posMask, velMask uint64
	// posBare: the position's largest value min + S·precision is at most
	// max, so no value needs ReadFixed's cap (the sum grows with the
	// code); velBare: the velocity's min + L·step is exactly max, so the
	// top code needs no case of its own. Then the reader's fast path
	// computes each value without a comparison.
	posBare, velBare bool
}

// NewUpdateFormat validates an update's layout: ErrOutOfRange for idMin >
// idMax, ErrWidth for a maskBits outside 1..64 (1..32 where a uint is 32
// bits). pos and vel are the position's and the velocity's formats.
func NewUpdateFormat(idMin, idMax int64, maskBits uint, pos FixedFormat, vel QuantizedFormat) (UpdateFormat, error) {
	if idMin > idMax {
		return UpdateFormat{}, ErrOutOfRange
	}
	if maskBits-1 >= 64 || maskBits > uint(bitsPerUint) {
		return UpdateFormat{}, ErrWidth
	}
	f := UpdateFormat{idMin: idMin, span: uint64(idMax) - uint64(idMin), idBits: RangeBits(idMin, idMax), mask: maskBits, pos: pos, vel: vel}
	pn, vn := pos.bits, vel.bits
	f.rmax = f.idBits + maskBits + 3*pn + 2 + 3*QuatBits + 3*vn
	if f.idBits <= 32 && maskBits <= 24 && pn-1 < 19 && vn-1 < 19 {
		f.rlim = f.span + 1
	}
	if f.idBits <= 32 && maskBits <= 31 && pn-1 < 21 && vn-1 < 21 {
		f.wlim, f.wmask = f.span+1, 1<<maskBits
		if f.idBits+maskBits <= 62 {
			f.wrlim = f.wlim
		}
	}
	f.headBits, f.posBits3, f.velBits3 = f.idBits+maskBits, 3*pn, 3*vn
	f.idMask, f.maskMask = 1<<(f.idBits&63)-1, 1<<(maskBits&63)-1
	f.posMask, f.velMask = 1<<(pn&63)-1, 1<<(vn&63)-1
	f.posBare = pos.min+float64(float64(int64(pos.steps))*pos.precision) <= pos.max
	f.velBare = math.Float64bits(vel.min+float64(float64(int64(vel.top))*vel.step)) == math.Float64bits(vel.max)
	return f, nil
}

// bitsPerUint is the width of a uint: 32 or 64.
const bitsPerUint = 32 << (^uint(0) >> 63)

// WriteUpdate writes an update's id, its mask and the pose groups the
// mask selects, exactly as
//
//	rw.WriteRangedInt(id, idMin, idMax)
//	rw.WriteBits(uint64(mask), maskBits)
//	if mask&UpdatePos != 0 { rw.WriteFixed3(&pos, p.Pos[0], p.Pos[1], p.Pos[2]) }
//	if mask&UpdateRot != 0 { rw.WriteQuat(p.Rot) }
//	if mask&UpdateVel != 0 { rw.WriteQuantized3(&vel, p.Vel[0], p.Vel[1], p.Vel[2]) }
//
// would with the format's parameters: the same bits, and a refused field
// (an id out of its range, a mask wider than maskBits, a value out of its
// range, a zero or non-finite rotation) writes nothing and is End's error,
// the other fields written as those calls write them.
func (rw *RecordWriter) WriteUpdate(f *UpdateFormat, id int64, mask uint, p *Pose) {
	writeUpdate[noRun](rw, f, id, mask, p)
}

// WriteRunUpdate writes one update of a run, a flag before each update and
// a 0 flag at the run's end (read by ReadRunUpdate), exactly as
//
//	rw.WriteFlag(true)
//	rw.WriteUpdate(f, id, mask, p)
//
// would: the flag is always written, and a refused field of the update
// writes nothing. The run ends with WriteFlag(false). The flag goes into
// the head's field, not a field of its own: as its own field it was a
// load, a store and a test of the record's word between updates, and the
// update's call reloaded that word.
func (rw *RecordWriter) WriteRunUpdate(f *UpdateFormat, id int64, mask uint, p *Pose) {
	writeUpdate[inRun](rw, f, id, mask, p)
}

// writeUpdate is WriteUpdate (L noRun) and WriteRunUpdate (L inRun: the
// run's 1 flag first, in the head's field).
func writeUpdate[L noRun | inRun](rw *RecordWriter, f *UpdateFormat, id int64, mask uint, p *Pose) {
	var l L
	lead := uint(unsafe.Sizeof(l))
	// A run's head is its flag too: wrlim serves only heads of 62 bits or
	// fewer, so that with the flag it is one field of at most 63.
	lim := f.wlim
	if lead != 0 {
		lim = f.wrlim
	}
	// The rotation: quatField, inline (too large for the inliner; as a
	// call, every value live across it went to the stack and back — Go's
	// calls keep no register). The same bits: TestQuatFieldMatchesCodes
	// checks quatField, TestRecordsMatchFieldCalls, FuzzRecords and
	// TestWriteUpdateRotationsOffUnit this copy against WriteQuat's.
	// The id as its offset, and the id again from it where the slow path
	// wants it: the id came in CX, which every variable shift below
	// needs, and held live it was moved out of the way for each.
	u := uint64(id) - uint64(f.idMin)
	// Each refusal branches to the per-field path where it is found: a
	// flag of refusals, set and tested group by group, was a SETcc, an
	// AND and a test more each.
	if !(u < lim && mask < f.wmask) {
		rw.writeUpdateSlow(f, int64(uint64(f.idMin)+u), mask, p, lead)
		return
	}
	var qc uint64
	if mask&UpdateRot != 0 {
		q := &p.Rot
		ss := float64(q[0]*q[0]) + float64(q[1]*q[1]) + float64(q[2]*q[2]) + float64(q[3]*q[3])
		const absMask = 1<<63 - 1
		a0, a1 := math.Float64bits(q[0])&absMask, math.Float64bits(q[1])&absMask
		a2, a3 := math.Float64bits(q[2])&absMask, math.Float64bits(q[3])&absMask
		i01, m01 := uint(0), a0
		if a1 > a0 {
			i01, m01 = 1, a1
		}
		i23, m23 := uint(2), a2
		if a3 > a2 {
			i23, m23 = 3, a3
		}
		i := i01
		if m23 > m01 {
			i = i23
		}
		// quatField's two tests of ss, the common case first: within
		// 2^-40 of 1 (where ss − 1 is exact, so this is |ss − 1| ≤ 2^-40)
		// ss is finite and positive, so a unit rotation takes one test,
		// and no flag of a refusal is held across the groups. Outside
		// it, a zero or non-finite ss is the per-field path's refusal.
		t := quatScale
		if !(ss >= 1-0x1p-40 && ss <= 1+0x1p-40) {
			if !(ss > 0 && ss <= math.MaxFloat64) {
				rw.writeUpdateSlow(f, int64(uint64(f.idMin)+u), mask, p, lead)
				return
			}
			t /= math.Sqrt(ss)
		}
		// Copysign(t, q[i]): t > 0, so only q[i]'s sign bit to set
		// (Copysign clears t's first).
		t = math.Float64frombits(math.Float64bits(t) | math.Float64bits(q[i&3])&(1<<63))
		o := &quatOthers[i&3]
		// roundAway, written out: its three inlined calls left three
		// inlining marks, one-byte NOPs, on a line of no instruction of
		// its own. The products rounded first, as roundAway rounds them,
		// so that no sum fuses with them.
		x0, x1, x2 := float64(q[o[0]&3]*t), float64(q[o[1]&3]*t), float64(q[o[2]&3]*t)
		k0 := int64(x0 + math.Copysign(0.5, x0))
		k1 := int64(x1 + math.Copysign(0.5, x1))
		k2 := int64(x2 + math.Copysign(0.5, x2))
		// A rotation whose rounded codes are not canonical (rare: its
		// largest component within a code of another's) takes the
		// per-field path, whose WriteQuat moves them toward zero: a call
		// here would keep every value live across it on the stack.
		qc = uint64(i) | uint64(k0+quatM)<<2 | uint64(k1+quatM)<<(2+QuatBits) | uint64(k2+quatM)<<(2+2*QuatBits)
		if s := k0*k0 + k1*k1 + k2*k2; s+max(k0*k0, k1*k1, k2*k2) >= 2*quatM*quatM {
			rw.writeUpdateSlow(f, int64(uint64(f.idMin)+u), mask, p, lead)
			return
		}
	}
	if pos := rw.pos; pos+updateWindow <= uint(len(rw.buf)) {
		// Away from the buffer's end: the record's word in locals, each
		// group put into it, full words stored into a window the one test
		// above bounds (an update fills at most four). The window from
		// its pointer: pos is a byte of the stream, nowhere near the top
		// of a uint, so pos+updateWindow does not wrap and the test is
		// the whole bound; sliced, the compiler tested that it did not
		// wrap too, and the values around the test were moved for it
		// (178 instructions of BenchmarkPacketRoundTrip's 73 updates).
		// Each group is put as it is coded: the record's own word, fill
		// and position are stored only at the end, so a refusal on the
		// way leaves the record as it was for the per-field path (the
		// bytes stored past its end are not the stream's). The format's
		// widths are loaded where they are used, not held: held across
		// the groups they went to the stack and back.
		win := (*[updateWindow]byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(rw.buf)), pos))
		acc, fill, off := winPut(win, rw.acc, rw.fill, 0, uint64(lead)|(u|uint64(mask)<<(f.idBits&63))<<lead, f.headBits+lead)
		if mask&UpdatePos != 0 {
			pn := f.pos.bits
			x, y, z := p.Pos[0], p.Pos[1], p.Pos[2]
			// The format's in, written out (as in the velocity's): the
			// three inlined calls left an inlining mark, a one-byte NOP,
			// on a line of no instruction of its own.
			lo, hi := f.pos.min, f.pos.max
			if !(x >= lo && x <= hi && y >= lo && y <= hi && z >= lo && z <= hi) {
				rw.writeUpdateSlow(f, int64(uint64(f.idMin)+u), mask, p, lead)
				return
			}
			pc := (f.pos.code(z)<<(pn&63)|f.pos.code(y))<<(pn&63) | f.pos.code(x)
			acc, fill, off = winPut(win, acc, fill, off, pc, f.posBits3)
		}
		if mask&UpdateRot != 0 {
			acc, fill, off = winPut(win, acc, fill, off, qc, 2+3*QuatBits)
		}
		if mask&UpdateVel != 0 {
			vn := f.vel.bits
			x, y, z := p.Vel[0], p.Vel[1], p.Vel[2]
			lo, hi := f.vel.min, f.vel.max
			if !(x >= lo && x <= hi && y >= lo && y <= hi && z >= lo && z <= hi) {
				rw.writeUpdateSlow(f, int64(uint64(f.idMin)+u), mask, p, lead)
				return
			}
			vc := (f.vel.code(z)<<(vn&63)|f.vel.code(y))<<(vn&63) | f.vel.code(x)
			acc, fill, off = winPut(win, acc, fill, off, vc, f.velBits3)
		}
		rw.acc, rw.fill, rw.pos = acc, fill, pos+off
		return
	}
	// Near the buffer's end (an update a packet, at most): the per-field
	// record calls.
	rw.writeUpdateSlow(f, int64(uint64(f.idMin)+u), mask, p, lead)
}

// updateWindow is the bytes an update's fast paths address from the byte
// its first bit is in: an update on the writer's fast path is at most
// 32+31+3·21+47+3·21 = 236 bits, so with up to 63 bits already in the
// record's word it fills at most four words (299 bits), stored at offsets
// 0, 8, 16 and 24; a reader's last group starts within 7+32+25+57+47 =
// 168 bits, in byte 21 at most, and its word ends by byte 29.
const updateWindow = 32

// winPut is RecordWriter.put on a record word held in locals: acc holds
// fill bits (0..63), off is the bytes already stored into win. It puts
// the n bits of v (1 ≤ n ≤ 63, v below 2^n) and stores the word when it
// fills. off is 0, 8, 16 or 24 before a store (four words at most), so
// off&24 is off and the store needs no bounds check.
func winPut(win *[updateWindow]byte, acc uint64, fill, off uint, v uint64, n uint) (uint64, uint, uint) {
	acc |= v << (fill & 63)
	if fill += n; fill >= 64 {
		binary.LittleEndian.PutUint64(win[off&24:], acc)
		off += 8
		fill -= 64
		acc = v >> ((n - fill) & 63) // n − fill = 64 − the old fill ∈ [1, 63]
	}
	return acc, fill, off
}

// writeUpdateSlow is WriteUpdate's every other case: the per-field record
// calls.
func (rw *RecordWriter) writeUpdateSlow(f *UpdateFormat, id int64, mask uint, p *Pose, lead uint) {
	if lead != 0 { // a run's flag
		rw.WriteFlag(true)
	}
	rw.WriteRangedInt(id, f.idMin, int64(uint64(f.idMin)+f.span))
	rw.WriteBits(uint64(mask), f.mask)
	if mask&UpdatePos != 0 {
		rw.WriteFixed3(&f.pos, p.Pos[0], p.Pos[1], p.Pos[2])
	}
	if mask&UpdateRot != 0 {
		rw.WriteQuat(p.Rot)
	}
	if mask&UpdateVel != 0 {
		rw.WriteQuantized3(&f.vel, p.Vel[0], p.Vel[1], p.Vel[2])
	}
}

// ReadUpdate reads an update written by WriteUpdate with the same format
// and returns its id and mask, exactly as
//
//	id := rr.ReadRangedInt(idMin, idMax)
//	mask := uint(rr.ReadBits(maskBits))
//	if mask&UpdatePos != 0 { p.Pos[0], p.Pos[1], p.Pos[2] = rr.ReadFixed3(&pos) }
//	if mask&UpdateRot != 0 { p.Rot = rr.ReadQuat() }
//	if mask&UpdateVel != 0 { p.Vel[0], p.Vel[1], p.Vel[2] = rr.ReadQuantized3(&vel) }
//
// would with the format's parameters: the same values (the groups the
// mask does not select are left as they are), and the same failure at the
// same bit. The mask's bits above the pose groups are the caller's to act
// on.
func (rr *RecordReader) ReadUpdate(f *UpdateFormat, p *Pose) (id int64, mask uint) {
	id, mask, _ = readUpdate[noRun](rr, f, p)
	return id, mask
}

// ReadRunUpdate reads one update of a run, a flag before each update and
// a 0 flag at the run's end (written as WriteFlag(true) and WriteUpdate,
// then WriteFlag(false)): the flag, and the update when it is 1, exactly
// as
//
//	if !rr.ReadFlag() { return 0, 0, false }
//	id, mask = rr.ReadUpdate(f, p)
//	return id, mask, true
//
// would. A run is read with for { id, mask, more := rr.ReadRunUpdate(f, p);
// if !more { break }; ... }: a failed flag is more == false, a failed
// update's next flag too. The flag is read from the head's word, not as a
// field of its own.
func (rr *RecordReader) ReadRunUpdate(f *UpdateFormat, p *Pose) (id int64, mask uint, more bool) {
	return readUpdate[inRun](rr, f, p)
}

// noRun and inRun instantiate readUpdate for a lone update and for a
// run's: their sizes, 0 and 1, are the run flag's bits, a constant in each
// instantiation (distinct underlying types, so distinct shapes). As a
// parameter the flag was held live across the fast path and spilled:
// BenchmarkPacketRead's 73 updates cost 12,800 instructions in it against
// 11,664 before runs, more than the run saved. Instantiated, the packet's
// read is 19,297 → 18,760 instructions; a lone update's ReadUpdate costs
// ≈ 3 more than before (19,545 with the flag read on its own).
type (
	noRun struct{}
	inRun [1]byte
)

// readUpdate is ReadUpdate (L noRun) and ReadRunUpdate (L inRun: the run's
// flag first, in the head's word).
func readUpdate[L noRun | inRun](rr *RecordReader, f *UpdateFormat, p *Pose) (id int64, mask uint, more bool) {
	var l L
	lead := uint(unsafe.Sizeof(l))
	// The fast path: the widths the format says and its largest update
	// inside the stream, so no field tests the end; each group is one
	// word from the bit it starts at, loaded from a window of the buffer
	// that one test bounds. In the buffer's last updateReadWindow bytes
	// the window is a zero-padded copy of them: every field lies inside
	// the stream, so the padding's bits are masked off.
	at := rr.bit
	if at+f.rmax+lead > rr.limit {
		return rr.readUpdateSlow(f, p, lead)
	}
	i := at >> 3
	var win *[updateReadWindow]byte
	// The copy's case first: laid out the other way, the common case
	// ended in a jump over the copy.
	if i+updateReadWindow > uint(len(rr.buf)) {
		win = new([updateReadWindow]byte) // does not escape: on the stack
		copy(win[:], rr.buf[i:])
	} else {
		win = (*[updateReadWindow]byte)(rr.buf[i : i+updateReadWindow])
	}
	// The head from the window's first word (b < 8, then 8 at most after
	// a run's flag: 56 bits, which rlim's widths fit), and the rotation's
	// codes below, written out: winWord's and quatUnpack's inlined calls
	// left their inlining marks, one-byte NOPs, on lines of no
	// instruction of their own.
	b := at & 7
	w0 := binary.LittleEndian.Uint64(win[:8])
	if w0>>b&1 < uint64(lead) { // a run's flag of 0: its end
		rr.bit = at + 1
		return 0, 0, false
	}
	b += lead
	head := w0 >> (b & 63)
	u := head & f.idMask
	if u >= f.rlim { // out of range, or widths the fast path does not serve
		return rr.readUpdateSlow(f, p, lead)
	}
	mask = uint(head >> (f.idBits & 63) & f.maskMask)
	b += f.headBits
	if mask&UpdatePos != 0 {
		x, y, z := codes3m(winWord(win, b), f.pos.bits, f.posMask)
		if x > f.pos.steps || y > f.pos.steps || z > f.pos.steps {
			return rr.readUpdateSlow(f, p, lead)
		}
		if f.posBare {
			bareValues(&p.Pos, f.pos.min, f.pos.precision, x, y, z)
		} else {
			p.Pos[0], p.Pos[1], p.Pos[2] = f.pos.value(x), f.pos.value(y), f.pos.value(z)
		}
		b += f.posBits3
	}
	if mask&UpdateRot != 0 {
		c := binary.LittleEndian.Uint64(win[(b>>3)&31:]) >> (b & 7)
		const km = 1<<QuatBits - 1
		k0, k1, k2 := int64(c>>2&km)-quatM, int64(c>>(2+QuatBits)&km)-quatM, int64(c>>(2+2*QuatBits)&km)-quatM
		// The values before the canonical test: converted after it, the
		// codes were held across it with the update's first bit and its
		// id, and two went to the stack and back.
		d := quatStep[QuatBits]
		x0, x1, x2 := float64(k0)*d, float64(k1)*d, float64(k2)*d
		s := k0*k0 + k1*k1 + k2*k2
		if s+max(k0*k0, k1*k1, k2*k2) >= 2*quatM*quatM { // quatCanonical (see quatFill)
			return rr.readUpdateSlow(f, p, lead)
		}
		i := c & 3
		o := &quatOthers[i]
		p.Rot[o[0]&3] = x0
		p.Rot[o[1]&3] = x1
		p.Rot[o[2]&3] = x2
		p.Rot[i] = math.Sqrt(float64(2*quatM*quatM-s)) * d
		b += 2 + 3*QuatBits
	}
	if mask&UpdateVel != 0 {
		x, y, z := codes3m(winWord(win, b), f.vel.bits, f.velMask)
		if f.velBare {
			bareValues(&p.Vel, f.vel.min, f.vel.step, x, y, z)
		} else {
			p.Vel[0], p.Vel[1], p.Vel[2] = f.vel.value(x), f.vel.value(y), f.vel.value(z)
		}
		b += f.velBits3
	}
	// The update's first bit from the record again, not held: rr.bit is
	// unchanged until here, and a register the more kept the groups'
	// values off the stack (the bit held was spilled across them).
	rr.bit = rr.bit&^7 + b
	return int64(uint64(f.idMin) + u), mask, true
}

// updateReadWindow is the bytes ReadUpdate's fast path loads from the
// byte an update starts in: its groups start in the first 22 (see
// updateWindow), so the index masked to 0..31 is the index, and a word
// from there ends inside the 40.
const updateReadWindow = 40

// bareValues sets dst to lo + code·d for three codes, as the format's
// value does for a code in range where the format needs no cap (posBare,
// velBare): the same float64 steps, so the same bits.
func bareValues(dst *[3]float64, lo, d float64, x, y, z uint64) {
	dst[0] = lo + float64(float64(int64(x))*d)
	dst[1] = lo + float64(float64(int64(y))*d)
	dst[2] = lo + float64(float64(int64(z))*d)
}

// codes3m is codes3 with the codes' mask (2^n − 1) given.
func codes3m(v uint64, n uint, mask uint64) (a, b, c uint64) {
	// Shifted by n twice, not by n and 2n: one shift count, which x86
	// keeps in one register (CL), loaded once.
	b = v >> (n & 63)
	return v & mask, b & mask, b >> (n & 63) & mask
}

// winWord is the window's bits from bit b on (b < 8·22, a group's first
// bit): RecordReader.word with no test.
func winWord(win *[updateReadWindow]byte, b uint) uint64 {
	return binary.LittleEndian.Uint64(win[(b>>3)&31:]) >> (b & 7)
}

// readUpdateSlow is ReadUpdate's every other case: the per-field record
// calls, from the update's first bit (where the fast path leaves rr.bit).
func (rr *RecordReader) readUpdateSlow(f *UpdateFormat, p *Pose, lead uint) (id int64, mask uint, more bool) {
	// A run's flag first: its end (or the stream's) is no update.
	if lead != 0 && !rr.ReadFlag() {
		return 0, 0, false
	}
	id = rr.ReadRangedInt(f.idMin, int64(uint64(f.idMin)+f.span))
	mask = uint(rr.ReadBits(f.mask))
	if mask&UpdatePos != 0 {
		p.Pos[0], p.Pos[1], p.Pos[2] = rr.ReadFixed3(&f.pos)
	}
	if mask&UpdateRot != 0 {
		p.Rot = rr.ReadQuat()
	}
	if mask&UpdateVel != 0 {
		p.Vel[0], p.Vel[1], p.Vel[2] = rr.ReadQuantized3(&f.vel)
	}
	return id, mask, true
}
