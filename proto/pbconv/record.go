package pbconv

import (
	"errors"
	"math"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

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
// caller's buffer: the bytes proto.Marshal makes of the record
// CheckpointToProto makes (TestRecordEncoderMatchesMarshal,
// FuzzRecordEncoderMatchesMarshal), written field by field with
// protowire — no proto objects, no reflection over the message's fields
// (protobuf's generic marshal was ≈ 7.8 k instructions of a record, a
// tenth of a checkpoint's client and server CPU). A node writes one a
// player a second. The zero RecordEncoder is ready to use; it holds no
// state (the type stays for its callers).
type RecordEncoder struct{}

// errInvalidUTF8 is Append's error for a string field that is not valid
// UTF-8 (proto3 strings must be; proto.Marshal refuses them too, and the
// record would not decode).
var errInvalidUTF8 = errors.New("pbconv: player record: string field contains invalid UTF-8")

// PlayerRecord's, EntitySnapshot's, ControlState's and Vec3's field
// numbers (proto/ghostwire/v1).
const (
	recPlayer, recZone, recState, recEpoch, recNode, recConn, recCheckpoint, recUpdated, recGateway = 1, 2, 3, 4, 5, 6, 7, 8, 9

	snapEntity, snapControl, snapLastApplied, snapHealth, snapFlags, snapName, snapExtra = 1, 3, 4, 5, 6, 7, 8
	snapConn, snapEventGen, snapEventLast                                                = 13, 15, 16

	ctlPos, ctlVel, ctlYaw, ctlPayload = 1, 2, 3, 4
)

// Append appends the encoding of the record h with c (when not nil) as its
// checkpoint. It keeps no reference to h, c or the result. A string that
// is not valid UTF-8 is encoded all the same and reported, as
// proto.Marshal does.
func (e *RecordEncoder) Append(b []byte, h *RecordHead, c *handoff.Checkpoint) ([]byte, error) {
	var err error
	b = appendVarintField(b, recPlayer, h.Player)
	b = appendStringField(b, recZone, h.Zone, &err)
	b = appendVarintField(b, recState, uint64(h.State))
	b = appendVarintField(b, recEpoch, h.Epoch)
	b = appendStringField(b, recNode, h.Node, &err)
	b = appendStringField(b, recConn, h.Conn, &err)
	if c != nil {
		b = appendTag(b, recCheckpoint, protowire.BytesType)
		at := len(b)
		b = append(b, 0)
		b = appendCheckpoint(b, c, &err)
		b = closeLen(b, at)
	}
	b = appendVarintField(b, recUpdated, uint64(h.UpdatedUnixMs))
	b = appendStringField(b, recGateway, h.Gateway, &err)
	return b, err
}

// appendCheckpoint appends the EntitySnapshot CheckpointToProto makes of c.
func appendCheckpoint(b []byte, c *handoff.Checkpoint, err *error) []byte {
	b = appendVarintField(b, snapEntity, c.Entity)
	b = appendTag(b, snapControl, protowire.BytesType)
	at := len(b)
	b = append(b, 0)
	b = appendControl(b, &c.Control)
	b = closeLen(b, at)
	b = appendVarintField(b, snapLastApplied, c.LastApplied)
	b = appendVarintField(b, snapHealth, uint64(int64(c.Health))) // int32: sign-extended
	b = appendVarintField(b, snapFlags, uint64(c.Flags))
	b = appendStringField(b, snapName, c.Name, err)
	// extra: packed, its 4 values always sent (a non-empty repeated field).
	n := 0
	for _, v := range c.Extra {
		n += protowire.SizeVarint(uint64(v))
	}
	b = appendTag(b, snapExtra, protowire.BytesType)
	b = appendVarint(b, uint64(n))
	for _, v := range c.Extra {
		b = appendVarint(b, uint64(v))
	}
	b = appendStringField(b, snapConn, c.Conn, err)
	b = appendVarintField(b, snapEventGen, c.Events.Gen)
	lanes := len(c.Events.Last)
	for lanes > 0 && c.Events.Last[lanes-1] == 0 {
		lanes--
	}
	if lanes > 0 {
		n = 0
		for _, v := range c.Events.Last[:lanes] {
			n += protowire.SizeVarint(v)
		}
		b = appendTag(b, snapEventLast, protowire.BytesType)
		b = appendVarint(b, uint64(n))
		for _, v := range c.Events.Last[:lanes] {
			b = appendVarint(b, v)
		}
	}
	return b
}

// appendControl appends the ControlState ControlToProto makes of c: both
// vectors always (set messages, even when empty), the payload clamped to
// move.MaxPayload.
func appendControl(b []byte, c *move.ControlState) []byte {
	b = appendVec3(b, ctlPos, &c.Pos)
	b = appendVec3(b, ctlVel, &c.Vel)
	b = appendFloatField(b, ctlYaw, c.Yaw)
	if n := min(int(c.PayloadLen), move.MaxPayload); n > 0 {
		b = appendTag(b, ctlPayload, protowire.BytesType)
		b = append(b, byte(n)) // at most move.MaxPayload
		b = append(b, c.Payload[:n]...)
	}
	return b
}

// appendVec3 appends a Vec3 field: at most 3 × 5 bytes, so its length is
// one byte.
func appendVec3(b []byte, num protowire.Number, v *[3]float32) []byte {
	b = appendTag(b, num, protowire.BytesType)
	at := len(b)
	b = append(b, 0)
	b = appendFloatField(b, 1, v[0])
	b = appendFloatField(b, 2, v[1])
	b = appendFloatField(b, 3, v[2])
	b[at] = byte(len(b) - at - 1)
	return b
}

// appendVarintField appends a proto3 scalar varint field (omitted at 0).
func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = appendTag(b, num, protowire.VarintType)
	return appendVarint(b, v)
}

// appendFloatField appends a proto3 float field, omitted only at +0 (a −0
// is sent, as proto.Marshal does).
func appendFloatField(b []byte, num protowire.Number, v float32) []byte {
	bits := math.Float32bits(v)
	if bits == 0 {
		return b
	}
	b = appendTag(b, num, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, bits)
}

// appendStringField appends a proto3 string field (omitted when empty);
// invalid UTF-8 sets *err.
func appendStringField(b []byte, num protowire.Number, s string, err *error) []byte {
	if s == "" {
		return b
	}
	for i := 0; i < len(s); i++ { // ASCII (every key and name here) is UTF-8
		if s[i] >= utf8.RuneSelf {
			if *err == nil && !utf8.ValidString(s[i:]) {
				*err = errInvalidUTF8
			}
			break
		}
	}
	b = appendTag(b, num, protowire.BytesType)
	b = appendVarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendTag appends a field's key: one byte for fields 1–15, two for
// 16–2,047 (constants here).
func appendTag(b []byte, num protowire.Number, typ protowire.Type) []byte {
	k := uint64(num)<<3 | uint64(typ)
	if k < 0x80 {
		return append(b, byte(k))
	}
	return append(b, byte(k)|0x80, byte(k>>7))
}

// appendVarint is protowire.AppendVarint as a loop the compiler inlines
// (protowire's, a call and a switch on the size, was ≈ 40 instructions a
// value and a record has ≈ 35).
func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// closeLen writes the length of the message that starts after the one
// byte b[at] kept for it; a length past 127 takes more bytes, and the
// message moves up to make room.
func closeLen(b []byte, at int) []byte {
	n := len(b) - at - 1
	if n < 0x80 {
		b[at] = byte(n)
		return b
	}
	k := protowire.SizeVarint(uint64(n))
	for range k - 1 {
		b = append(b, 0)
	}
	copy(b[at+k:], b[at+1:at+1+n])
	appendVarint(b[:at], uint64(n))
	return b
}
