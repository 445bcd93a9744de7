package admin

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/ghostwire/ghostwire/actors/admin/adminclient"
	"github.com/ghostwire/ghostwire/actors/cluster"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/replication/handshake"
)

// ErrBadRequest wraps every reason a request is refused before it is acted on.
var ErrBadRequest = errors.New("bad request")

// maxRequest bounds a request's size: admin requests are a few dozen bytes.
const maxRequest = 4 << 10

// maxText bounds free-text fields (reason, caller).
const maxText = 256

// newRequest returns an empty request message for op, or nil for an
// unknown op.
func newRequest(op string) proto.Message {
	switch op {
	case adminclient.OpNodes:
		return &pb.ListNodesRequest{}
	case adminclient.OpZones:
		return &pb.ListZonesRequest{}
	case adminclient.OpPlayers:
		return &pb.ListPlayersRequest{}
	case adminclient.OpPlayer:
		return &pb.GetPlayerRequest{}
	case adminclient.OpMove:
		return &pb.MovePlayerRequest{}
	case adminclient.OpKick:
		return &pb.KickPlayerRequest{}
	case adminclient.OpDrain:
		return &pb.DrainRequest{}
	case adminclient.OpStats:
		return &pb.ClusterStatsRequest{}
	case adminclient.OpMoveZone:
		return &pb.MoveZoneRequest{}
	}
	return nil
}

// Decode decodes and checks the request of op. Untrusted bytes: it never
// panics, and every error wraps ErrBadRequest and says which field.
func Decode(op string, b []byte) (proto.Message, error) {
	m := newRequest(op)
	if m == nil {
		return nil, fmt.Errorf("%w: unknown operation %q", ErrBadRequest, op)
	}
	if len(b) > maxRequest {
		return nil, fmt.Errorf("%w: %d bytes (at most %d)", ErrBadRequest, len(b), maxRequest)
	}
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("%w: not a %s: %v", ErrBadRequest, m.ProtoReflect().Descriptor().Name(), err)
	}
	if err := check(m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	return m, nil
}

func checkID(field, s string) error {
	if s != "" && !cluster.ValidID(s) {
		return fmt.Errorf("%s %q: want 1-64 characters from [A-Za-z0-9_-]", field, s)
	}
	return nil
}

func checkText(field, s string) error {
	if len(s) > maxText {
		return fmt.Errorf("%s: %d bytes (at most %d)", field, len(s), maxText)
	}
	return nil
}

func finite(v *pb.Vec3) bool {
	for _, f := range []float32{v.GetX(), v.GetY(), v.GetZ()} {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return false
		}
	}
	return true
}

func check(m proto.Message) error {
	switch m := m.(type) {
	case *pb.ListPlayersRequest:
		return errors.Join(checkID("zone", m.Zone), checkID("node", m.Node))
	case *pb.GetPlayerRequest:
		if m.Player == 0 {
			return errors.New("player: want a player id (not 0)")
		}
	case *pb.MovePlayerRequest:
		if m.Player == 0 {
			return errors.New("player: want a player id (not 0)")
		}
		if m.Zone == "" && m.Position == nil {
			return errors.New("want a zone, a position or both")
		}
		if m.Position != nil && !finite(m.Position) {
			return errors.New("position: not a finite number")
		}
		return errors.Join(checkID("zone", m.Zone), checkText("caller", m.Caller))
	case *pb.KickPlayerRequest:
		if m.Player == 0 {
			return errors.New("player: want a player id (not 0)")
		}
		return errors.Join(checkText("reason", m.Reason), checkText("caller", m.Caller))
	case *pb.MoveZoneRequest:
		if m.Zone == "" || m.ToNode == "" {
			return errors.New("zone, to_node: want a zone id and a node id")
		}
		return errors.Join(checkID("zone", m.Zone), checkID("to_node", m.ToNode), checkText("caller", m.Caller))
	case *pb.DrainRequest:
		if m.Node == "" {
			return errors.New("node: want a node id")
		}
		if m.DeadlineMs < 0 || m.DeadlineMs > 3_600_000 {
			return fmt.Errorf("deadline_ms %d: want 0 to 3600000", m.DeadlineMs)
		}
		return errors.Join(checkID("node", m.Node), checkText("caller", m.Caller))
	}
	return nil
}

// KickReason maps a kick request's reason to the Disconnect reason the
// client receives and the note that is only logged: a disconnect reason's
// name ("kicked", "server shutdown", ...) is sent as that reason; any
// other text is sent as "kicked" and kept as the note.
func KickReason(s string) (handshake.Reason, string) {
	t := strings.TrimSpace(s)
	if t == "" {
		return handshake.ReasonKicked, ""
	}
	for r := handshake.ReasonClientQuit; r.IsDisconnect(); r++ {
		if strings.EqualFold(t, r.String()) || strings.EqualFold(t, strings.ReplaceAll(r.String(), " ", "_")) {
			return r, ""
		}
	}
	return handshake.ReasonKicked, t
}
