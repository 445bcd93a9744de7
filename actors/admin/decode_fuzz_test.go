package admin

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/ghostwire/ghostwire/actors/admin/adminclient"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
)

var ops = []string{adminclient.OpNodes, adminclient.OpZones, adminclient.OpPlayers, adminclient.OpPlayer,
	adminclient.OpMove, adminclient.OpKick, adminclient.OpDrain, adminclient.OpStats, adminclient.OpMoveZone}

func mustMarshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// Admin requests are untrusted bytes: whatever arrives, Decode returns a
// checked request or an ErrBadRequest, never panics; a request it accepts
// re-encodes to one it accepts equally (round trip).
func FuzzDecode(f *testing.F) {
	f.Add(uint8(0), []byte{})
	f.Add(uint8(2), mustMarshal(&pb.ListPlayersRequest{Zone: "x0z0", Node: "n1", Limit: 10}))
	f.Add(uint8(3), mustMarshal(&pb.GetPlayerRequest{Player: 42}))
	f.Add(uint8(4), mustMarshal(&pb.MovePlayerRequest{Player: 42, Zone: "x1z0", Position: &pb.Vec3{X: 250, Z: -300}, Caller: "ops@host"}))
	f.Add(uint8(5), mustMarshal(&pb.KickPlayerRequest{Player: 42, Reason: "server shutdown"}))
	f.Add(uint8(6), mustMarshal(&pb.DrainRequest{Node: "n2", DeadlineMs: 5000}))
	f.Add(uint8(6), mustMarshal(&pb.DrainRequest{Node: "n2", Last: true}))
	f.Add(uint8(8), mustMarshal(&pb.MoveZoneRequest{Zone: "x1z0", ToNode: "n3", Caller: "ops@host"}))
	f.Add(uint8(4), []byte("\x08\x2a\x1a\x0f\x0d\x00\x00\xc0\x7f")) // a NaN position
	f.Add(uint8(1), []byte("garbage \xff\xfe"))
	f.Fuzz(func(t *testing.T, op uint8, b []byte) {
		name := ops[int(op)%len(ops)]
		m, err := Decode(name, b)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("%s: error %v does not wrap ErrBadRequest", name, err)
			}
			return
		}
		again, err := Decode(name, mustMarshal(m))
		if err != nil {
			t.Fatalf("%s: accepted %v, refused its re-encoding: %v", name, m, err)
		}
		if !proto.Equal(m, again) {
			t.Fatalf("%s: round trip changed %v to %v", name, m, again)
		}
	})
}

func TestDecodeRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, op string
		b        []byte
		want     string
	}{
		{"garbage", adminclient.OpPlayer, []byte{0xff, 0xff, 0xff}, "not a GetPlayerRequest"},
		{"player 0", adminclient.OpPlayer, nil, "player: want a player id"},
		{"move without target", adminclient.OpMove, mustMarshal(&pb.MovePlayerRequest{Player: 1}), "want a zone, a position or both"},
		{"bad zone id", adminclient.OpMove, mustMarshal(&pb.MovePlayerRequest{Player: 1, Zone: "x0z0.>"}), `zone "x0z0.>"`},
		{"bad node filter", adminclient.OpPlayers, mustMarshal(&pb.ListPlayersRequest{Node: "a b"}), `node "a b"`},
		{"drain without node", adminclient.OpDrain, nil, "node: want a node id"},
		{"long reason", adminclient.OpKick, mustMarshal(&pb.KickPlayerRequest{Player: 1, Reason: string(make([]byte, 300))}), "reason: 300 bytes"},
		{"huge request", adminclient.OpNodes, make([]byte, 5000), "5000 bytes"},
		{"unknown op", "frob", nil, `unknown operation "frob"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.op, tc.b)
			if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode: %v, want ErrBadRequest saying %q", err, tc.want)
			}
		})
	}
}

func TestKickReason(t *testing.T) {
	for _, tc := range []struct {
		in, reason, note string
	}{
		{"", "kicked", ""},
		{"server shutdown", "server shutdown", ""},
		{"Duplicate_Session", "duplicate session", ""},
		{"abusive chat", "kicked", "abusive chat"},
		{"wrong version", "kicked", "wrong version"}, // a denial reason is no Disconnect reason
	} {
		r, note := KickReason(tc.in)
		if r.String() != tc.reason || note != tc.note {
			t.Errorf("KickReason(%q) = %v, %q; want %s, %q", tc.in, r, note, tc.reason, tc.note)
		}
	}
}
