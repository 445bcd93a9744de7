package bitstream

import "math"

// Entity updates: an entity's dirty mask and the pose fields it selects,
// written or read inside a record in one call. A ghost update is a mask
// and then, for each set bit, one group of fields; written one call a
// field, the mask is several flags and each group a call of its own, and
// every call re-loads the record's state around a few instructions of
// work. UpdateFormat is the pose part of such a layout, validated once:
// WriteUpdate batches the mask and the selected groups into as few
// accumulator stores as fit, and ReadUpdate decodes them from the words
// it loads, with the same bits and values as the per-field calls
// (TestUpdateMatchesFieldCalls, FuzzRecords).

// The pose groups of an update's mask, in the order they are written.
const (
	UpdatePos uint = 1 << iota // Pose.Pos, through UpdateFormat.Pos (three values)
	UpdateRot                  // Pose.Rot, a quaternion as WriteQuat
	UpdateVel                  // Pose.Vel, through UpdateFormat.Vel (three values)
)

// Pose is the part of an entity update that UpdateFormat encodes: a
// position, a rotation (a unit quaternion) and a velocity.
type Pose struct {
	Pos [3]float64
	Rot [4]float64
	Vel [3]float64
}

// UpdateFormat is the layout of an entity update: its id, an integer in
// [IDMin, IDMax] (as WriteRangedInt), its dirty mask in MaskBits bits
// (1..64; the mask is a uint, so 1..32 on a 32-bit platform), then the
// groups the mask's bits UpdatePos, UpdateRot and UpdateVel select, in
// that order. The mask's higher bits are the caller's own groups, which
// it writes after WriteUpdate (and reads after ReadUpdate). A value: it
// may be copied and shared.
type UpdateFormat struct {
	IDMin, IDMax int64
	MaskBits     uint
	Pos          FixedFormat
	Vel          QuantizedFormat
}

// WriteUpdate writes an update's id, its mask and the pose groups the
// mask selects, exactly as
//
//	rw.WriteRangedInt(id, f.IDMin, f.IDMax)
//	rw.WriteBits(uint64(mask), f.MaskBits)
//	if mask&UpdatePos != 0 { rw.WriteFixed3(&f.Pos, p.Pos[0], p.Pos[1], p.Pos[2]) }
//	if mask&UpdateRot != 0 { rw.WriteQuat(p.Rot) }
//	if mask&UpdateVel != 0 { rw.WriteQuantized3(&f.Vel, p.Vel[0], p.Vel[1], p.Vel[2]) }
//
// would: the same bits, and a refused field (a mask wider than MaskBits, a
// value out of its range, a zero or non-finite rotation) writes nothing
// and is End's error, the other fields written as those calls write them.
func (rw *RecordWriter) WriteUpdate(f *UpdateFormat, id int64, mask uint, p *Pose) {
	// The rotation first: the call's registers are free, so little
	// is kept across it.
	var qc uint64
	good := true
	if mask&UpdateRot != 0 {
		var i int
		var k0, k1, k2 int64
		i, k0, k1, k2, good = quatCodes(&p.Rot, quatM)
		qc = quatPack(i, k0, k1, k2, quatM, QuatBits)
	}
	mb, pn, vn := f.MaskBits, f.Pos.bits, f.Vel.bits
	// The fast path: every selected value accepted, the id at most 32 bits
	// and the mask 31, and each triple one field of at most 63 bits. The
	// codes first, so that nothing is written before every value is known
	// good.
	span, u, ib := uint64(f.IDMax)-uint64(f.IDMin), uint64(id)-uint64(f.IDMin), RangeBits(f.IDMin, f.IDMax)
	ok := good && f.IDMin <= f.IDMax && u <= span && ib <= 32 && mb-1 < 31 && mask>>(mb&63) == 0 && pn-1 < 21 && vn-1 < 21
	var pc, vc uint64
	if mask&UpdatePos != 0 {
		x, y, z := p.Pos[0], p.Pos[1], p.Pos[2]
		ok = ok && f.Pos.in(x) && f.Pos.in(y) && f.Pos.in(z)
		pc = f.Pos.code(x) | f.Pos.code(y)<<(pn&63) | f.Pos.code(z)<<(2*pn&63)
	}
	if mask&UpdateVel != 0 {
		x, y, z := p.Vel[0], p.Vel[1], p.Vel[2]
		ok = ok && f.Vel.in(x) && f.Vel.in(y) && f.Vel.in(z)
		vc = f.Vel.code(x) | f.Vel.code(y)<<(vn&63) | f.Vel.code(z)<<(2*vn&63)
	}
	if !ok {
		rw.writeUpdateSlow(f, id, mask, p)
		return
	}
	// The fields collect in v (w bits) and go to the record when the next
	// would not fit beside them.
	v, w := u|uint64(mask)<<(ib&63), ib+mb
	if mask&UpdatePos != 0 {
		if n := 3 * pn; w+n <= 63 {
			v, w = v|pc<<(w&63), w+n
		} else {
			rw.put(v, w)
			v, w = pc, n
		}
	}
	if mask&UpdateRot != 0 {
		if w+2+3*QuatBits <= 63 {
			v, w = v|qc<<(w&63), w+2+3*QuatBits
		} else {
			rw.put(v, w)
			v, w = qc, 2+3*QuatBits
		}
	}
	if mask&UpdateVel != 0 {
		if n := 3 * vn; w+n <= 63 {
			v, w = v|vc<<(w&63), w+n
		} else {
			rw.put(v, w)
			v, w = vc, n
		}
	}
	rw.put(v, w)
}

// writeUpdateSlow is WriteUpdate's every other case: the per-field record
// calls, from the update's first bit.
func (rw *RecordWriter) writeUpdateSlow(f *UpdateFormat, id int64, mask uint, p *Pose) {
	rw.WriteRangedInt(id, f.IDMin, f.IDMax)
	rw.WriteBits(uint64(mask), f.MaskBits)
	if mask&UpdatePos != 0 {
		rw.WriteFixed3(&f.Pos, p.Pos[0], p.Pos[1], p.Pos[2])
	}
	if mask&UpdateRot != 0 {
		rw.WriteQuat(p.Rot)
	}
	if mask&UpdateVel != 0 {
		rw.WriteQuantized3(&f.Vel, p.Vel[0], p.Vel[1], p.Vel[2])
	}
}

// ReadUpdate reads an update written by WriteUpdate with the same format
// and returns its id and mask, exactly as
//
//	id := rr.ReadRangedInt(f.IDMin, f.IDMax)
//	mask := uint(rr.ReadBits(f.MaskBits))
//	if mask&UpdatePos != 0 { p.Pos[0], p.Pos[1], p.Pos[2] = rr.ReadFixed3(&f.Pos) }
//	if mask&UpdateRot != 0 { p.Rot = rr.ReadQuat() }
//	if mask&UpdateVel != 0 { p.Vel[0], p.Vel[1], p.Vel[2] = rr.ReadQuantized3(&f.Vel) }
//
// would: the same values (the groups the mask does not select are left as
// they are), and the same failure at the same bit. The mask's bits above
// the pose groups are the caller's to act on.
func (rr *RecordReader) ReadUpdate(f *UpdateFormat, p *Pose) (id int64, mask uint) {
	mb, pn, vn, at := f.MaskBits, f.Pos.bits, f.Vel.bits, rr.bit
	span, ib := uint64(f.IDMax)-uint64(f.IDMin), RangeBits(f.IDMin, f.IDMax)
	// The fast path: an id of up to 32 bits and a mask of up to 25,
	// triples of up to 57, and the largest update the format allows
	// inside the stream, so no field tests the end; each group is one
	// word the field starts in.
	if f.IDMin <= f.IDMax && ib <= 32 && mb-1 < 25 && pn-1 < 19 && vn-1 < 19 && at+ib+mb+3*pn+2+3*QuatBits+3*vn <= rr.limit {
		head := rr.word(at)
		u := head & (1<<ib - 1)
		if u > span {
			return rr.readUpdateSlow(f, p)
		}
		mask = uint(head >> (ib & 63) & (1<<mb - 1))
		b := at + ib + mb
		if mask&UpdatePos != 0 {
			x, y, z := codes3(rr.word(b), pn)
			if x > f.Pos.steps || y > f.Pos.steps || z > f.Pos.steps {
				return rr.readUpdateSlow(f, p)
			}
			p.Pos[0], p.Pos[1], p.Pos[2] = f.Pos.value(x), f.Pos.value(y), f.Pos.value(z)
			b += 3 * pn
		}
		if mask&UpdateRot != 0 {
			// quatFill with its constants, inline: the call would keep
			// the update's state across it in memory.
			c := rr.word(b)
			k0, k1, k2 := quatUnpack(c, quatM, QuatBits)
			s := k0*k0 + k1*k1 + k2*k2
			if k0 > quatM || k1 > quatM || k2 > quatM || s+max(k0*k0, k1*k1, k2*k2) >= 2*quatM*quatM { // quatCanonical
				return rr.readUpdateSlow(f, p)
			}
			d := quatStep[QuatBits]
			i := c & 3
			o := &quatOthers[i]
			p.Rot[o[0]&3] = float64(k0) * d
			p.Rot[o[1]&3] = float64(k1) * d
			p.Rot[o[2]&3] = float64(k2) * d
			p.Rot[i] = math.Sqrt(float64(2*quatM*quatM-s)) * d
			b += 2 + 3*QuatBits
		}
		if mask&UpdateVel != 0 {
			x, y, z := codes3(rr.word(b), vn)
			p.Vel[0], p.Vel[1], p.Vel[2] = f.Vel.value(x), f.Vel.value(y), f.Vel.value(z)
			b += 3 * vn
		}
		rr.bit = b
		return int64(uint64(f.IDMin) + u), mask
	}
	return rr.readUpdateSlow(f, p)
}

// readUpdateSlow is ReadUpdate's every other case: the per-field record
// calls, from the update's first bit (where the fast path leaves rr.bit).
func (rr *RecordReader) readUpdateSlow(f *UpdateFormat, p *Pose) (id int64, mask uint) {
	id = rr.ReadRangedInt(f.IDMin, f.IDMax)
	mask = uint(rr.ReadBits(f.MaskBits))
	if mask&UpdatePos != 0 {
		p.Pos[0], p.Pos[1], p.Pos[2] = rr.ReadFixed3(&f.Pos)
	}
	if mask&UpdateRot != 0 {
		p.Rot = rr.ReadQuat()
	}
	if mask&UpdateVel != 0 {
		p.Vel[0], p.Vel[1], p.Vel[2] = rr.ReadQuantized3(&f.Vel)
	}
	return id, mask
}
