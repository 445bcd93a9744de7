package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/ghostwire/ghostwire/replication/ghost"
)

// Views between processes travel packed: one byte blob per ConnBatch
// (ConnBatch.packed_views) holding every view of the batch, each one a
// delta against the previous view of the same player on the same stream.
// A crowded zone's views are most of the cluster's bytes and, as protobuf
// messages with one object per entry and field, most of its CPU and
// garbage; packed, encoding and decoding allocate nothing and an entry
// whose state did not change costs two bytes. docs/cluster.md specifies
// the layout.
//
// Fencing against loss: every view names its stream (one per player per
// sending link, never reused), its sequence number and the sequence it is
// relative to (0: a keyframe, relative to nothing). A receiver applies a
// delta only on top of exactly that view; anything else is dropped and
// counted (Metrics.ViewGaps) until the next keyframe, which the sender
// sends every keyframeEvery views and first on every stream.

// Field bits of a packed entry.
const (
	pfClass   = 1 << iota // uvarint class wire id
	pfPrio                // float32 bits, 4 bytes little endian
	pfPos                 // 3 × float64 bits, 8 bytes each
	pfVel                 // 3 × float64 bits
	pfYaw                 // float64 bits
	pfHealth              // zigzag varint
	pfFlags               // uvarint
	pfName                // length byte, then the bytes
	pfExtra               // 4 × uvarint
	pfChanged             // uvarint ChangedMask
	pfAll     = 1<<iota - 1
)

var zeroEntry ghost.ViewEntry

// keyframeEvery bounds how long a receiver that lost a view waits: about a
// second of 20 Hz ticks.
const keyframeEvery = 20

// Packed-view decoding limits and errors.
var (
	errPackTruncated = errors.New("packed view truncated")
	errPackRange     = errors.New("packed view value out of range")
)

// viewEnc is a link's per-player encoder state: the last view it sent.
type viewEnc struct {
	stream uint64
	seq    uint64
	base   []ghost.ViewEntry
	idx    map[uint64]int32 // entity → position in base
}

// appendView appends one view to dst as a delta against the previous one
// (or a keyframe) and makes entries the new base.
func (e *viewEnc) appendView(dst []byte, player, tick uint64, serverNs int64, epoch uint64, entries []ghost.ViewEntry) []byte {
	key := e.seq%keyframeEvery == 0
	baseSeq := e.seq
	if key {
		baseSeq = 0
	}
	e.seq++
	dst = binary.AppendUvarint(dst, player)
	dst = binary.AppendUvarint(dst, tick)
	dst = binary.AppendVarint(dst, serverNs)
	dst = binary.AppendUvarint(dst, epoch)
	dst = binary.AppendUvarint(dst, e.stream)
	dst = binary.AppendUvarint(dst, e.seq)
	dst = binary.AppendUvarint(dst, baseSeq)
	dst = binary.AppendUvarint(dst, uint64(len(entries)))
	// The entries go after a length, so a receiver that cannot apply this
	// view skips it; they are encoded in place and the length slotted in
	// front (one move of the body, no scratch buffer).
	mark := len(dst)
	if e.idx == nil {
		e.idx = make(map[uint64]int32, len(entries))
	}
	for i := range entries {
		n := &entries[i]
		var old *ghost.ViewEntry
		if !key {
			if k, ok := e.idx[n.Entity]; ok {
				old = &e.base[k]
			}
		}
		if old == nil {
			dst = binary.AppendUvarint(dst, 0)
			dst = binary.AppendUvarint(dst, n.Entity)
			dst = appendFields(dst, n, fieldsOf(n, &zeroEntry), true)
			continue
		}
		dst = binary.AppendUvarint(dst, uint64(e.idx[n.Entity])+1)
		dst = appendFields(dst, n, fieldsOf(n, old), false)
	}
	var lb [binary.MaxVarintLen64]byte
	ln := binary.PutUvarint(lb[:], uint64(len(dst)-mark))
	dst = append(dst, lb[:ln]...)
	copy(dst[mark+ln:], dst[mark:len(dst)-ln])
	copy(dst[mark:], lb[:ln])
	clear(e.idx)
	e.base = append(e.base[:0], entries...)
	for i := range e.base {
		e.idx[e.base[i].Entity] = int32(i)
	}
	return dst
}

// fieldsOf returns the bits of the fields where n differs from old.
func fieldsOf(n, old *ghost.ViewEntry) uint64 {
	var m uint64
	if n.Class != old.Class {
		m |= pfClass
	}
	if math.Float32bits(n.Priority) != math.Float32bits(old.Priority) {
		m |= pfPrio
	}
	s, o := &n.State, &old.State
	if s.Pos != o.Pos {
		m |= pfPos
	}
	if s.Vel != o.Vel {
		m |= pfVel
	}
	if math.Float64bits(s.Yaw) != math.Float64bits(o.Yaw) {
		m |= pfYaw
	}
	if s.Health != o.Health {
		m |= pfHealth
	}
	if s.Flags != o.Flags {
		m |= pfFlags
	}
	if s.Name != o.Name {
		m |= pfName
	}
	if s.Extra != o.Extra {
		m |= pfExtra
	}
	if n.ChangedMask != old.ChangedMask {
		m |= pfChanged
	}
	return m
}

func appendFields(dst []byte, n *ghost.ViewEntry, m uint64, fresh bool) []byte {
	if fresh {
		m |= pfClass // a new entry always names its class
	}
	dst = binary.AppendUvarint(dst, m)
	if m&pfClass != 0 {
		var id uint64
		if n.Class != nil {
			id = uint64(n.Class.ID)
		}
		dst = binary.AppendUvarint(dst, id)
	}
	if m&pfPrio != 0 {
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(n.Priority))
	}
	s := &n.State
	if m&pfPos != 0 {
		for _, v := range s.Pos {
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
		}
	}
	if m&pfVel != 0 {
		for _, v := range s.Vel {
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
		}
	}
	if m&pfYaw != 0 {
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(s.Yaw))
	}
	if m&pfHealth != 0 {
		dst = binary.AppendVarint(dst, int64(s.Health))
	}
	if m&pfFlags != 0 {
		dst = binary.AppendUvarint(dst, uint64(s.Flags))
	}
	if m&pfName != 0 {
		dst = append(dst, byte(s.Name.Len()))
		dst = s.Name.AppendTo(dst)
	}
	if m&pfExtra != 0 {
		for _, v := range s.Extra {
			dst = binary.AppendUvarint(dst, uint64(v))
		}
	}
	if m&pfChanged != 0 {
		dst = binary.AppendUvarint(dst, n.ChangedMask)
	}
	return dst
}

// packedHeader is one view's header in a packed blob.
type packedHeader struct {
	player, tick   uint64
	serverNs       int64
	epoch          uint64
	stream, seq    uint64
	baseSeq, count uint64
	body           int // bytes of the entries that follow
}

// packReader reads a packed blob; every read checks bounds.
type packReader struct {
	b   []byte
	off int
	err error
}

func (r *packReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *packReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.fail(errPackTruncated)
		return 0
	}
	r.off += n
	return v
}

func (r *packReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b[r.off:])
	if n <= 0 {
		r.fail(errPackTruncated)
		return 0
	}
	r.off += n
	return v
}

func (r *packReader) fixed(n int) []byte {
	if r.err != nil {
		return nil
	}
	if len(r.b)-r.off < n {
		r.fail(errPackTruncated)
		return nil
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p
}

func (r *packReader) f64() float64 {
	p := r.fixed(8)
	if p == nil {
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(p))
	if math.IsNaN(v) || math.IsInf(v, 0) {
		r.fail(fmt.Errorf("%w: non-finite float", errPackRange))
		return 0
	}
	return v
}

func (r *packReader) u32() uint32 {
	v := r.uvarint()
	if v > math.MaxUint32 {
		r.fail(errPackRange)
		return 0
	}
	return uint32(v)
}

func (r *packReader) header() packedHeader {
	h := packedHeader{player: r.uvarint(), tick: r.uvarint(), serverNs: r.varint(), epoch: r.uvarint(),
		stream: r.uvarint(), seq: r.uvarint(), baseSeq: r.uvarint(), count: r.uvarint()}
	body := r.uvarint()
	if r.err != nil {
		return h
	}
	// Every entry takes at least two bytes: a count or length the rest of
	// the blob cannot hold is garbage, refused before anything is sized by it.
	if body > uint64(len(r.b)-r.off) || h.count > maxViewEntries || h.count*2 > body {
		r.fail(fmt.Errorf("%w: %d entries in %d bytes", errPackRange, h.count, body))
		return h
	}
	h.body = int(body)
	return h
}

// maxViewEntries bounds one view's entries (as pbconv.MaxEntries).
const maxViewEntries = 1 << 16

// entries decodes h.count entries onto dst (truncated first), resolving
// references against base; reg resolves class ids.
func (r *packReader) entries(dst, base []ghost.ViewEntry, n uint64, reg *ghost.Registry) []ghost.ViewEntry {
	dst = dst[:0]
	for i := uint64(0); i < n && r.err == nil; i++ {
		var e ghost.ViewEntry
		ref := r.uvarint()
		switch {
		case ref == 0:
			e.Entity = r.uvarint()
		case ref <= uint64(len(base)):
			e = base[ref-1]
		default:
			r.fail(fmt.Errorf("%w: reference %d past a base of %d", errPackRange, ref, len(base)))
			return dst
		}
		m := r.uvarint()
		if m&^pfAll != 0 {
			r.fail(fmt.Errorf("%w: field bits %#x", errPackRange, m))
			return dst
		}
		if ref == 0 && m&pfClass == 0 {
			r.fail(fmt.Errorf("%w: new entry without a class", errPackRange))
			return dst
		}
		r.fields(&e, m, reg)
		dst = append(dst, e)
	}
	return dst
}

func (r *packReader) fields(e *ghost.ViewEntry, m uint64, reg *ghost.Registry) {
	if m&pfClass != 0 {
		id := r.uvarint()
		if r.err != nil {
			return
		}
		cls, ok := reg.Lookup(uint16(id))
		if id > ghost.MaxClassID || !ok {
			r.fail(fmt.Errorf("%w: unknown class %d", errPackRange, id))
			return
		}
		e.Class = cls
	}
	if m&pfPrio != 0 {
		if p := r.fixed(4); p != nil {
			v := math.Float32frombits(binary.LittleEndian.Uint32(p))
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				r.fail(fmt.Errorf("%w: non-finite priority", errPackRange))
			}
			e.Priority = v
		}
	}
	s := &e.State
	if m&pfPos != 0 {
		s.Pos = [3]float64{r.f64(), r.f64(), r.f64()}
	}
	if m&pfVel != 0 {
		s.Vel = [3]float64{r.f64(), r.f64(), r.f64()}
	}
	if m&pfYaw != 0 {
		s.Yaw = r.f64()
	}
	if m&pfHealth != 0 {
		v := r.varint()
		if v < math.MinInt32 || v > math.MaxInt32 {
			r.fail(errPackRange)
		}
		s.Health = int32(v)
	}
	if m&pfFlags != 0 {
		s.Flags = r.u32()
	}
	if m&pfName != 0 {
		if p := r.fixed(1); p != nil {
			name, err := ghost.NameFromBytes(r.fixed(int(p[0])))
			if err != nil {
				r.fail(fmt.Errorf("%w: %v", errPackRange, err))
			}
			s.Name = name
		}
	}
	if m&pfExtra != 0 {
		s.Extra = [4]uint32{r.u32(), r.u32(), r.u32(), r.u32()}
	}
	if m&pfChanged != 0 {
		e.ChangedMask = r.uvarint()
	}
}

// viewBase is a receiver's per-player decoder state: the last view applied
// from one sender's stream.
type viewBase struct {
	from        string
	stream, seq uint64
	cur, next   []ghost.ViewEntry
}
