package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/ghostwire/ghostwire/actors/admin/adminclient"
	"github.com/ghostwire/ghostwire/actors/node"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
)

// Malformed and impossible requests to a real node's admin service, on
// the cluster-wide and the per-node subjects, are answered with a code and
// a reason; the service keeps serving. nats micro discovery sees it.
func TestServiceRefusesBadRequests(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
	cfg := node.DefaultConfig()
	cfg.UDPAddr, cfg.HTTPAddr, cfg.NATSListen = "127.0.0.1:0", "", "127.0.0.1:0"
	cfg.DataDir, cfg.NPCs, cfg.NodeID = t.TempDir(), 4, "solo"
	n, err := node.Start(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop(context.Background())
	u, _ := url.Parse(n.NATSURL())
	u.User = nil
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := adminclient.Connect(ctx, u.String(), filepath.Join(cfg.DataDir, node.AdminCredsFile), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	garbage := []byte{0xff, 0xff, 0xff, 0x01}
	for _, tc := range []struct {
		name, subject string
		data          []byte
		code, want    string
	}{
		{"garbage, cluster", adminclient.Subject(adminclient.OpMove), garbage, adminclient.CodeBadRequest, "not a MovePlayerRequest"},
		{"garbage, per node", adminclient.NodeSubject("solo", adminclient.OpKick), garbage, adminclient.CodeBadRequest, "not a KickPlayerRequest"},
		{"garbage list", adminclient.Subject(adminclient.OpNodes), garbage, adminclient.CodeBadRequest, "not a ListNodesRequest"},
		{"unknown player", adminclient.Subject(adminclient.OpPlayer), mustMarshal(t, &pb.GetPlayerRequest{Player: 77}), adminclient.CodeNotFound, "player 77 is not connected"},
		{"kick unknown player", adminclient.NodeSubject("solo", adminclient.OpKick), mustMarshal(t, &pb.KickPlayerRequest{Player: 77}), adminclient.CodeNotFound, "player 77"},
		{"zone that does not exist", adminclient.Subject(adminclient.OpMove), mustMarshal(t, &pb.MovePlayerRequest{Player: 77, Zone: "x9z9"}), adminclient.CodeNotFound, `zone "x9z9" is not in world`},
		{"position in another zone", adminclient.Subject(adminclient.OpMove), mustMarshal(t, &pb.MovePlayerRequest{Player: 77, Zone: "x0z0", Position: &pb.Vec3{X: 500, Z: 500}}), adminclient.CodeBadRequest, "lies in zone"},
		{"drain sent to another node", adminclient.NodeSubject("solo", adminclient.OpDrain), mustMarshal(t, &pb.DrainRequest{Node: "other"}), adminclient.CodeBadRequest, `drain of node "other"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := c.CallRaw(ctx, tc.subject, tc.data, new(pb.ListNodesResponse))
			var ae *adminclient.Error
			if !errors.As(err, &ae) || ae.Code != tc.code || !strings.Contains(ae.Description, tc.want) {
				t.Fatalf("got %v, want code %s saying %q", err, tc.code, tc.want)
			}
		})
	}
	var nodes pb.ListNodesResponse
	if err := c.Call(ctx, adminclient.Subject(adminclient.OpNodes), &pb.ListNodesRequest{}, &nodes); err != nil || len(nodes.Nodes) != 1 {
		t.Fatalf("the service stopped answering: %v %v", err, &nodes)
	}

	subj, _ := micro.ControlSubject(micro.InfoVerb, adminclient.ServiceName, "")
	msg, err := c.NC.RequestWithContext(ctx, subj, nil)
	if err != nil {
		t.Fatal(err)
	}
	var info micro.Info
	if err := json.Unmarshal(msg.Data, &info); err != nil {
		t.Fatal(err)
	}
	if info.Name != adminclient.ServiceName || len(info.Endpoints) < 8 || info.Metadata["node"] != "solo" {
		t.Fatalf("micro info: %+v", info)
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
