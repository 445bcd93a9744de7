package pbconv

import (
	"errors"
	"fmt"
	"math"
	"time"

	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// Bounds on decoded lists.
const (
	MaxMoves    = 4096  // moves in one handoff message or input
	MaxInterest = 65536 // interest ids in one snapshot
	MaxReplicas = 1 << 20
	MaxEntries  = 1 << 16 // view entries
)

// Errors a FieldError wraps.
var (
	ErrMissing   = errors.New("missing")
	ErrRange     = errors.New("out of range")
	ErrTooMany   = errors.New("too many elements")
	ErrNotFinite = errors.New("not finite")
	ErrUnknown   = errors.New("unknown class")
)

// FieldError says which field of a decoded message is bad.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return fmt.Sprintf("pbconv: %s: %v", e.Field, e.Err) }
func (e *FieldError) Unwrap() error { return e.Err }

func bad(field string, err error) error { return &FieldError{Field: field, Err: err} }

// MoveToProto converts a move.
func MoveToProto(m move.Move) *pb.Move {
	return &pb.Move{Seq: m.Seq, Dt: uint32(m.Dt), Forward: int32(m.Forward), Strafe: int32(m.Strafe),
		Yaw: uint32(m.Yaw), Pitch: int32(m.Pitch), Buttons: uint32(m.Buttons), Crc: m.CRC, HasCrc: m.HasCRC}
}

// MovesToProtoInto is MovesToProto into dst's messages, reusing them
// (more made as needed; those past len(ms) kept in dst's capacity). It
// encodes as MovesToProto's would. dst is the caller's, to fill again
// once nothing reads it (encoded).
func MovesToProtoInto(dst []*pb.Move, ms []move.Move) []*pb.Move {
	dst = dst[:cap(dst)]
	for i, m := range ms {
		if i == len(dst) {
			dst = append(dst, nil)
			dst = dst[:cap(dst)]
		}
		if dst[i] == nil {
			dst[i] = new(pb.Move)
		}
		*dst[i] = pb.Move{Seq: m.Seq, Dt: uint32(m.Dt), Forward: int32(m.Forward), Strafe: int32(m.Strafe),
			Yaw: uint32(m.Yaw), Pitch: int32(m.Pitch), Buttons: uint32(m.Buttons), Crc: m.CRC, HasCrc: m.HasCRC}
	}
	return dst[:len(ms)]
}

// MoveFromProto converts and validates a move.
func MoveFromProto(p *pb.Move) (move.Move, error) {
	if p == nil {
		return move.Move{}, bad("move", ErrMissing)
	}
	switch {
	case p.Dt > math.MaxUint8:
		return move.Move{}, bad("move.dt", ErrRange)
	case p.Forward < -move.AxisMax || p.Forward > move.AxisMax:
		return move.Move{}, bad("move.forward", ErrRange)
	case p.Strafe < -move.AxisMax || p.Strafe > move.AxisMax:
		return move.Move{}, bad("move.strafe", ErrRange)
	case p.Yaw > math.MaxUint16:
		return move.Move{}, bad("move.yaw", ErrRange)
	case p.Pitch < math.MinInt16 || p.Pitch > math.MaxInt16:
		return move.Move{}, bad("move.pitch", ErrRange)
	case p.Buttons > math.MaxUint16:
		return move.Move{}, bad("move.buttons", ErrRange)
	}
	m := move.Move{Seq: p.Seq, Dt: uint8(p.Dt), Forward: int8(p.Forward), Strafe: int8(p.Strafe),
		Yaw: uint16(p.Yaw), Pitch: int16(p.Pitch), Buttons: uint16(p.Buttons), CRC: p.Crc, HasCRC: p.HasCrc}
	if err := m.Validate(); err != nil {
		return move.Move{}, bad("move", err)
	}
	return m, nil
}

// MovesToProto converts a move list (nil for none).
func MovesToProto(ms []move.Move) []*pb.Move {
	if len(ms) == 0 {
		return nil
	}
	out := make([]*pb.Move, len(ms))
	// The messages in one array, not an allocation each: a handoff's
	// Forward carries every move queued behind it.
	msgs := make([]pb.Move, len(ms))
	for i, m := range ms {
		msgs[i] = pb.Move{Seq: m.Seq, Dt: uint32(m.Dt), Forward: int32(m.Forward), Strafe: int32(m.Strafe),
			Yaw: uint32(m.Yaw), Pitch: int32(m.Pitch), Buttons: uint32(m.Buttons), Crc: m.CRC, HasCrc: m.HasCRC}
		out[i] = &msgs[i]
	}
	return out
}

// MovesFromProto converts and validates a move list.
func MovesFromProto(ps []*pb.Move) ([]move.Move, error) {
	if len(ps) > MaxMoves {
		return nil, bad("moves", ErrTooMany)
	}
	if len(ps) == 0 {
		return nil, nil
	}
	out, err := MovesFromProtoInto(make([]move.Move, 0, len(ps)), ps)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// MovesFromProtoInto is MovesFromProto appending to dst (its moves, with
// dst's room: a remote input's decoded straight into its pooled Input's
// Moves, not into a list of its own and copied). On an error dst's length
// is as given and what follows it is not to be read.
func MovesFromProtoInto(dst []move.Move, ps []*pb.Move) ([]move.Move, error) {
	if len(ps) > MaxMoves {
		return dst, bad("moves", ErrTooMany)
	}
	n := len(dst)
	for _, p := range ps {
		m, err := MoveFromProto(p)
		if err != nil {
			return dst[:n], err
		}
		dst = append(dst, m)
	}
	return dst, nil
}

func vec(v [3]float32) *pb.Vec3 { return &pb.Vec3{X: v[0], Y: v[1], Z: v[2]} }

func vecFrom(p *pb.Vec3) [3]float32 {
	if p == nil {
		return [3]float32{}
	}
	return [3]float32{p.X, p.Y, p.Z}
}

// ControlToProto converts a control state.
func ControlToProto(s move.ControlState) *pb.ControlState {
	c := &pb.ControlState{Pos: vec(s.Pos), Vel: vec(s.Vel), Yaw: s.Yaw}
	if s.PayloadLen > 0 {
		c.Payload = append([]byte(nil), s.Payload[:min(int(s.PayloadLen), move.MaxPayload)]...)
	}
	return c
}

// ControlToProtoInto is ControlToProto into c, reusing its vectors and
// payload (c nil: a new one). It encodes as ControlToProto's would. c is
// the caller's, to reuse once nothing reads it (encoded).
func ControlToProtoInto(c *pb.ControlState, s move.ControlState) *pb.ControlState {
	if c == nil || c.Pos == nil || c.Vel == nil {
		return ControlToProto(s)
	}
	c.Pos.X, c.Pos.Y, c.Pos.Z = s.Pos[0], s.Pos[1], s.Pos[2]
	c.Vel.X, c.Vel.Y, c.Vel.Z = s.Vel[0], s.Vel[1], s.Vel[2]
	c.Yaw = s.Yaw
	c.Payload = append(c.Payload[:0], s.Payload[:min(int(s.PayloadLen), move.MaxPayload)]...)
	return c
}

// ControlFromProto converts and validates a control state (nil is the zero
// state).
func ControlFromProto(p *pb.ControlState) (move.ControlState, error) {
	var s move.ControlState
	if p == nil {
		return s, nil
	}
	if len(p.Payload) > move.MaxPayload {
		return s, bad("control.payload", ErrTooMany)
	}
	s.Pos, s.Vel, s.Yaw = vecFrom(p.Pos), vecFrom(p.Vel), p.Yaw
	s.PayloadLen = uint8(copy(s.Payload[:], p.Payload))
	if err := s.Validate(); err != nil {
		return move.ControlState{}, bad("control", err)
	}
	return s, nil
}

func extraFrom(field string, p []uint32) ([4]uint32, error) {
	var e [4]uint32
	if len(p) > 4 {
		return e, bad(field, ErrTooMany)
	}
	copy(e[:], p)
	return e, nil
}

func nameFrom(field, s string) (ghost.Name, error) {
	n, err := ghost.MakeName(s)
	if err != nil {
		return ghost.Name{}, bad(field, err)
	}
	return n, nil
}

// snapshotMsgs is a snapshot's messages, allocated together
// (SnapshotToProto): every Offer and Commit carries one.
type snapshotMsgs struct {
	s        pb.EntitySnapshot
	c        pb.ControlState
	pos, vel pb.Vec3
}

// SnapshotToProto converts a handoff snapshot.
func SnapshotToProto(s *handoff.Snapshot) *pb.EntitySnapshot {
	if s == nil {
		return nil
	}
	x := new(snapshotMsgs)
	x.c.Pos, x.c.Vel = &x.pos, &x.vel
	p := &x.s
	*p = pb.EntitySnapshot{
		Entity: s.Entity, Kind: uint32(s.Kind), Control: ControlToProtoInto(&x.c, s.Control), LastApplied: s.LastApplied,
		Health: s.Health, Flags: s.Flags, Name: s.Name, Extra: s.Extra[:],
		Heading: s.Heading, Speed: s.Speed, TurnIn: s.TurnIn, Conn: s.Conn,
	}
	p.EventGen, p.EventLast = FenceToProto(&s.Events)
	if s.Rng != [2]uint64{} {
		p.Rng = s.Rng[:]
	}
	if len(s.Interest) > 0 {
		p.Interest = append([]uint64(nil), s.Interest...)
	}
	return p
}

// SnapshotFromProto converts and validates a snapshot.
func SnapshotFromProto(p *pb.EntitySnapshot) (*handoff.Snapshot, error) {
	if p == nil {
		return nil, bad("state", ErrMissing)
	}
	switch {
	case p.Kind > math.MaxUint8:
		return nil, bad("state.kind", ErrRange)
	case len(p.Rng) > 2:
		return nil, bad("state.rng", ErrTooMany)
	case len(p.Interest) > MaxInterest:
		return nil, bad("state.interest", ErrTooMany)
	case len(p.EventLast) > handoff.EventLanes:
		return nil, bad("state.event_last", ErrTooMany)
	case len(p.Name) > ghost.MaxNameLen:
		return nil, bad("state.name", ErrRange)
	case !finite32(p.Heading) || !finite32(p.Speed):
		return nil, bad("state.heading", ErrNotFinite)
	}
	ctl, err := ControlFromProto(p.Control)
	if err != nil {
		return nil, err
	}
	extra, err := extraFrom("state.extra", p.Extra)
	if err != nil {
		return nil, err
	}
	s := &handoff.Snapshot{
		Entity: p.Entity, Kind: uint8(p.Kind), Control: ctl, LastApplied: p.LastApplied,
		Health: p.Health, Flags: p.Flags, Name: p.Name, Extra: extra,
		Heading: p.Heading, Speed: p.Speed, TurnIn: p.TurnIn, Conn: p.Conn,
	}
	copy(s.Rng[:], p.Rng)
	s.Events = FenceFromProto(p.EventGen, p.EventLast)
	if len(p.Interest) > 0 {
		s.Interest = append([]uint64(nil), p.Interest...)
	}
	return s, nil
}

func finite32(f float32) bool { return !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) }

// HandoffToProto converts a handoff message. The send time travels as
// nanoseconds of the sender's clock.
func HandoffToProto(m *handoff.Msg) *pb.HandoffMessage {
	p := new(pb.HandoffMessage)
	HandoffToProtoInto(p, m)
	return p
}

// HandoffToProtoInto is HandoffToProto into p (the caller's, allocated
// with the messages that carry it: cluster's zone proxy makes an item's
// four messages at once).
func HandoffToProtoInto(p *pb.HandoffMessage, m *handoff.Msg) {
	*p = pb.HandoffMessage{
		Kind: pb.HandoffKind(m.Kind), Entity: m.Entity, Epoch: uint64(m.Epoch), From: m.From, To: m.To,
		SentNs: int64(m.Sent), Reason: pb.RejectReason(m.Reason), State: SnapshotToProto(m.State), Moves: MovesToProto(m.Moves),
	}
}

// HandoffFromProto converts and validates a handoff message.
func HandoffFromProto(p *pb.HandoffMessage) (handoff.Msg, error) {
	if p == nil {
		return handoff.Msg{}, bad("handoff", ErrMissing)
	}
	if p.Kind < pb.HandoffKind_HANDOFF_KIND_OFFER || p.Kind > pb.HandoffKind_HANDOFF_KIND_ROUTE {
		return handoff.Msg{}, bad("handoff.kind", ErrRange)
	}
	if p.Reason < 0 || p.Reason > pb.RejectReason_REJECT_REASON_MALFORMED {
		return handoff.Msg{}, bad("handoff.reason", ErrRange)
	}
	m := handoff.Msg{
		Kind: handoff.Kind(p.Kind), Entity: p.Entity, Epoch: handoff.Epoch(p.Epoch), From: p.From, To: p.To,
		Sent: time.Duration(p.SentNs), Reason: handoff.Reason(p.Reason),
	}
	if p.State != nil {
		s, err := SnapshotFromProto(p.State)
		if err != nil {
			return handoff.Msg{}, err
		}
		m.State = s
	}
	moves, err := MovesFromProto(p.Moves)
	if err != nil {
		return handoff.Msg{}, err
	}
	m.Moves = moves
	return m, nil
}

// ReplicaBatchToProto converts a border replica batch.
func ReplicaBatchToProto(b *sim.ReplicaBatch) *pb.ReplicaBatch {
	p := &pb.ReplicaBatch{From: b.From, To: b.To, Tick: b.Tick, SentNs: int64(b.Sent)}
	if len(b.Entities) > 0 {
		p.Entities = make([]*pb.Replica, len(b.Entities))
	}
	for i := range b.Entities {
		r := &b.Entities[i]
		p.Entities[i] = &pb.Replica{Id: r.ID, Kind: uint32(r.Kind), Epoch: uint64(r.Epoch), State: ControlToProto(r.State),
			Health: r.Health, Flags: r.Flags, Name: r.Name.String(), Extra: append([]uint32(nil), r.Extra[:]...)}
	}
	return p
}

// ReplicaBatchToProtoInto is ReplicaBatchToProto into p, reusing its
// entities — each Replica, its state's vectors, its extra array and its
// name while unchanged — and keeping those past b's for the next batch:
// a zone sends each neighbour in another process a batch a tick, ≈ 5
// objects a replica made afresh. It encodes as ReplicaBatchToProto's
// would. p is the caller's, to fill again once nothing reads it (encoded);
// scratch is the caller's too (a name's bytes), returned for the next call.
func ReplicaBatchToProtoInto(p *pb.ReplicaBatch, b *sim.ReplicaBatch, scratch []byte) []byte {
	p.From, p.To, p.Tick, p.SentNs = b.From, b.To, b.Tick, int64(b.Sent)
	ents := p.Entities[:cap(p.Entities)]
	for i := range b.Entities {
		r := &b.Entities[i]
		if i == len(ents) {
			ents = append(ents, nil)
			ents = ents[:cap(ents)]
		}
		e := ents[i]
		if e == nil {
			e = new(pb.Replica)
			ents[i] = e
		}
		e.Id, e.Kind, e.Epoch, e.Health, e.Flags = r.ID, uint32(r.Kind), uint64(r.Epoch), r.Health, r.Flags
		e.State = ControlToProtoInto(e.State, r.State)
		e.Extra = append(e.Extra[:0], r.Extra[:]...)
		if scratch = r.Name.AppendTo(scratch[:0]); string(scratch) != e.Name {
			e.Name = string(scratch)
		}
	}
	p.Entities = ents[:len(b.Entities)]
	if len(p.Entities) == 0 && cap(p.Entities) == 0 {
		p.Entities = nil
	}
	return scratch
}

// ReplicaBatchFromProto converts and validates a replica batch.
func ReplicaBatchFromProto(p *pb.ReplicaBatch) (*sim.ReplicaBatch, error) {
	b := new(sim.ReplicaBatch)
	if err := ReplicaBatchFromProtoInto(b, nil, p); err != nil {
		return nil, err
	}
	return b, nil
}

// ReplicaBatchFromProtoInto is ReplicaBatchFromProto into b, its entities
// in ents' array when it is large enough (else a new one): a receiver
// that keeps the array (b.Entities, until its zone is done with the
// batch) decodes the next batch into it. On an error b is unspecified.
func ReplicaBatchFromProtoInto(b *sim.ReplicaBatch, ents []sim.Replica, p *pb.ReplicaBatch) error {
	if p == nil {
		return bad("replicas", ErrMissing)
	}
	if len(p.Entities) > MaxReplicas {
		return bad("replicas.entities", ErrTooMany)
	}
	*b = sim.ReplicaBatch{From: p.From, To: p.To, Tick: p.Tick, Sent: time.Duration(p.SentNs)}
	if n := len(p.Entities); n > 0 {
		if cap(ents) < n {
			ents = make([]sim.Replica, n)
		}
		b.Entities = ents[:n]
	}
	for i, r := range p.Entities {
		if r == nil {
			return bad("replicas.entities", ErrMissing)
		}
		if r.Kind > math.MaxUint8 {
			return bad("replica.kind", ErrRange)
		}
		st, err := ControlFromProto(r.State)
		if err != nil {
			return err
		}
		extra, err := extraFrom("replica.extra", r.Extra)
		if err != nil {
			return err
		}
		name, err := nameFrom("replica.name", r.Name)
		if err != nil {
			return err
		}
		b.Entities[i] = sim.Replica{ID: r.Id, Kind: uint8(r.Kind), Epoch: handoff.Epoch(r.Epoch), State: st,
			Health: r.Health, Flags: r.Flags, Name: name, Extra: extra}
	}
	return nil
}

func vecD(v [3]float64) *pb.Vec3D { return &pb.Vec3D{X: v[0], Y: v[1], Z: v[2]} }

func vecDFrom(field string, p *pb.Vec3D) ([3]float64, error) {
	if p == nil {
		return [3]float64{}, nil
	}
	v := [3]float64{p.X, p.Y, p.Z}
	for _, f := range v {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return v, bad(field, ErrNotFinite)
		}
	}
	return v, nil
}

// GhostStateToProto converts a replicated entity state.
func GhostStateToProto(s *ghost.State) *pb.GhostState {
	return &pb.GhostState{Pos: vecD(s.Pos), Vel: vecD(s.Vel), Yaw: s.Yaw, Health: s.Health, Flags: s.Flags,
		Name: s.Name.String(), Extra: append([]uint32(nil), s.Extra[:]...)}
}

// GhostStateFromProto converts and validates a replicated entity state.
func GhostStateFromProto(p *pb.GhostState) (ghost.State, error) {
	var s ghost.State
	if p == nil {
		return s, nil
	}
	var err error
	if s.Pos, err = vecDFrom("state.pos", p.Pos); err != nil {
		return s, err
	}
	if s.Vel, err = vecDFrom("state.vel", p.Vel); err != nil {
		return s, err
	}
	if math.IsNaN(p.Yaw) || math.IsInf(p.Yaw, 0) {
		return s, bad("state.yaw", ErrNotFinite)
	}
	s.Yaw, s.Health, s.Flags = p.Yaw, p.Health, p.Flags
	if s.Name, err = nameFrom("state.name", p.Name); err != nil {
		return s, err
	}
	if s.Extra, err = extraFrom("state.extra", p.Extra); err != nil {
		return s, err
	}
	return s, nil
}

// ViewToProto converts a player's view (one zone tick) into a ViewUpdate.
func ViewToProto(player uint64, zone string, tick uint64, now time.Duration, epoch handoff.Epoch, entries []ghost.ViewEntry) *pb.ViewUpdate {
	v := &pb.ViewUpdate{Player: player, Zone: zone, Tick: tick, ServerTimeNs: int64(now), Epoch: uint64(epoch)}
	if len(entries) > 0 {
		v.Entries = make([]*pb.ViewEntry, len(entries))
	}
	for i := range entries {
		e := &entries[i]
		v.Entries[i] = &pb.ViewEntry{Entity: e.Entity, ClassId: uint32(e.Class.ID), Priority: e.Priority,
			State: GhostStateToProto(&e.State), ChangedMask: e.ChangedMask}
	}
	return v
}

// ViewEntriesFromProto appends a ViewUpdate's entries to dst, looking each
// class up in reg (an unknown class id is an error: the peers disagree on
// the schema).
func ViewEntriesFromProto(dst []ghost.ViewEntry, p *pb.ViewUpdate, reg *ghost.Registry) ([]ghost.ViewEntry, error) {
	if p == nil {
		return dst, bad("view", ErrMissing)
	}
	if len(p.Entries) > MaxEntries {
		return dst, bad("view.entries", ErrTooMany)
	}
	for _, e := range p.Entries {
		if e == nil {
			return dst, bad("view.entries", ErrMissing)
		}
		if e.ClassId > ghost.MaxClassID {
			return dst, bad("view.class_id", ErrRange)
		}
		cls, ok := reg.Lookup(uint16(e.ClassId))
		if !ok {
			return dst, bad("view.class_id", ErrUnknown)
		}
		if !finite32(e.Priority) {
			return dst, bad("view.priority", ErrNotFinite)
		}
		st, err := GhostStateFromProto(e.State)
		if err != nil {
			return dst, err
		}
		dst = append(dst, ghost.ViewEntry{Entity: e.Entity, Class: cls, Priority: e.Priority, State: st, ChangedMask: e.ChangedMask})
	}
	return dst, nil
}

// CheckpointToProto converts a player's checkpoint for its record.
func CheckpointToProto(c *handoff.Checkpoint) *pb.EntitySnapshot {
	p := &pb.EntitySnapshot{Entity: c.Entity, Control: ControlToProto(c.Control), LastApplied: c.LastApplied,
		Health: c.Health, Flags: c.Flags, Name: c.Name, Extra: c.Extra[:], Conn: c.Conn}
	p.EventGen, p.EventLast = FenceToProto(&c.Events)
	return p
}

// FenceToProto converts a player's event fence: its generation and the
// lanes up to the last one with an event applied (none: nothing applied).
func FenceToProto(f *handoff.EventFence) (uint64, []uint64) {
	n := len(f.Last)
	for n > 0 && f.Last[n-1] == 0 {
		n--
	}
	if n == 0 {
		return f.Gen, nil
	}
	return f.Gen, append([]uint64(nil), f.Last[:n]...)
}

// FenceFromProto converts an event fence; lanes beyond handoff.EventLanes
// are ignored (SnapshotFromProto refuses them).
func FenceFromProto(gen uint64, last []uint64) handoff.EventFence {
	f := handoff.EventFence{Gen: gen}
	copy(f.Last[:], last)
	return f
}

// CheckpointFromProto converts and validates a record's checkpoint; epoch
// is the record's.
func CheckpointFromProto(p *pb.EntitySnapshot, epoch uint64) (*handoff.Checkpoint, error) {
	s, err := SnapshotFromProto(p)
	if err != nil {
		return nil, err
	}
	return &handoff.Checkpoint{Entity: s.Entity, Epoch: handoff.Epoch(epoch), Control: s.Control, LastApplied: s.LastApplied,
		Health: s.Health, Flags: s.Flags, Name: s.Name, Extra: s.Extra, Conn: s.Conn, Events: s.Events}, nil
}
