package pbconv

import (
	"google.golang.org/protobuf/proto"

	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// RecordHead is a player record's fields other than its checkpoint.
type RecordHead struct {
	Player        uint64
	Zone          string
	State         pb.PlayerState
	Epoch         uint64
	Node          string
	Conn          string
	UpdatedUnixMs int64
	Gateway       string
}

// RecordEncoder encodes player records with their checkpoint into the
// caller's buffer, as proto.Marshal encodes the record CheckpointToProto
// makes (the same bytes: TestRecordEncoderMatchesMarshal), without the
// proto objects and the buffer a record: a node writes one a player a
// second. The zero RecordEncoder is ready to use. Not safe for concurrent
// use; each record writer keeps its own.
type RecordEncoder struct {
	rec      pb.PlayerRecord
	snap     pb.EntitySnapshot
	ctl      pb.ControlState
	pos, vel pb.Vec3
	extra    [4]uint32
	last     [handoff.EventLanes]uint64
	payload  [move.MaxPayload]byte
}

// Append appends the encoding of the record h with c (when not nil) as its
// checkpoint. It keeps no reference to h, c or the result.
func (e *RecordEncoder) Append(b []byte, h *RecordHead, c *handoff.Checkpoint) ([]byte, error) {
	r := &e.rec
	r.Player, r.Zone, r.State, r.Epoch = h.Player, h.Zone, h.State, h.Epoch
	r.Node, r.Conn, r.UpdatedUnixMs, r.Gateway = h.Node, h.Conn, h.UpdatedUnixMs, h.Gateway
	r.Checkpoint = nil
	if c != nil {
		r.Checkpoint = e.checkpoint(c)
	}
	b, err := proto.MarshalOptions{}.MarshalAppend(b, r)
	// Let go of the caller's strings and the checkpoint's slices.
	r.Zone, r.Node, r.Conn, r.Gateway, r.Checkpoint = "", "", "", "", nil
	e.snap.Name, e.snap.Conn = "", ""
	return b, err
}

// checkpoint fills the reused snapshot as CheckpointToProto makes it.
func (e *RecordEncoder) checkpoint(c *handoff.Checkpoint) *pb.EntitySnapshot {
	s, ctl := &e.snap, &e.ctl
	e.pos.X, e.pos.Y, e.pos.Z = c.Control.Pos[0], c.Control.Pos[1], c.Control.Pos[2]
	e.vel.X, e.vel.Y, e.vel.Z = c.Control.Vel[0], c.Control.Vel[1], c.Control.Vel[2]
	ctl.Pos, ctl.Vel, ctl.Yaw, ctl.Payload = &e.pos, &e.vel, c.Control.Yaw, nil
	if n := min(int(c.Control.PayloadLen), move.MaxPayload); n > 0 {
		ctl.Payload = e.payload[:copy(e.payload[:], c.Control.Payload[:n])]
	}
	s.Entity, s.Control, s.LastApplied = c.Entity, ctl, c.LastApplied
	s.Health, s.Flags, s.Name, s.Conn = c.Health, c.Flags, c.Name, c.Conn
	e.extra = c.Extra
	s.Extra = e.extra[:]
	n := len(c.Events.Last)
	for n > 0 && c.Events.Last[n-1] == 0 {
		n--
	}
	s.EventGen, s.EventLast = c.Events.Gen, nil
	if n > 0 {
		e.last = c.Events.Last
		s.EventLast = e.last[:n]
	}
	return s
}
