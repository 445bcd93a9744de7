package main

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/ghostwire/ghostwire/actors/admin/adminclient"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
)

// A read that reached a hung node (NATS hands a cluster-wide call to one
// node of the queue group, and a stopped process takes it and answers
// nothing) is sent again while --timeout lasts; a mutation is sent once.
// The stand-in "node" swallows the first call of each subject and answers
// the next, as a live node would that NATS picked the second time.
func TestReadsRetryAHungNode(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := startNATS(t)
	defer stopNATS(srv)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var stats, kicks atomic.Int32
	answer := func(n *atomic.Int32, resp proto.Message) nats.MsgHandler {
		return func(m *nats.Msg) {
			if n.Add(1) == 1 {
				return // the hung node
			}
			b, _ := proto.Marshal(resp)
			_ = m.Respond(b)
		}
	}
	for subj, h := range map[string]nats.MsgHandler{
		adminclient.Subject(adminclient.OpStats): answer(&stats, &pb.ClusterStatsResponse{World: "hungworld", Nodes: 2}),
		adminclient.Subject(adminclient.OpKick):  answer(&kicks, &pb.KickPlayerResponse{Node: "n1", Reason: "kicked"}),
	} {
		if _, err := nc.QueueSubscribe(subj, "q", h); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(t.TempDir(), "admin.creds")
	if err := os.WriteFile(creds, []byte("user: admin\npassword: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runWith(t, noEnv, time.Now(), "--nats", srv.ClientURL(), "--creds", creds, "--timeout", "8s", "stats")
	if r.code != 0 || !strings.Contains(r.stdout, "hungworld") || stats.Load() != 2 {
		t.Fatalf("stats after a hung node took the first call: %+v (%d calls)", r, stats.Load())
	}
	r = runWith(t, noEnv, time.Now(), "--nats", srv.ClientURL(), "--creds", creds, "--timeout", "4s", "kick", "7")
	if r.code != 1 || kicks.Load() != 1 {
		t.Fatalf("kick after a hung node took it: %+v (%d calls), want one call and a timeout", r, kicks.Load())
	}
}
