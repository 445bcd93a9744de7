package cluster

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/ghostwire/ghostwire/actors/msg"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// A zone's Output crosses to a connection on another node with its event
// fence (msg.Output.Applied), through the wire form: the client there hears
// the events applied with their echoes, as one on the zone's node does. An
// Output without a fence stays without one; an event out of range refuses
// the batch.
func TestOutputCrossesWithItsFence(t *testing.T) {
	for _, fence := range []handoff.EventFence{{}, {Gen: 0xabc, Last: [handoff.EventLanes]uint64{7, 0, 3}}} {
		in := msg.NewOutput()
		in.Player, in.Epoch, in.ConnTag, in.Applied = 42, 5, 9, fence
		in.Add(event.Ordered, 2, 0, []byte("echo"))
		wire, err := proto.Marshal(outputToProto(in))
		in.Release()
		if err != nil {
			t.Fatal(err)
		}
		var o pb.EventsOut
		if err := proto.Unmarshal(wire, &o); err != nil {
			t.Fatal(err)
		}
		out, err := outputFromProto(&o)
		if err != nil {
			t.Fatal(err)
		}
		if out.Applied != fence || out.Player != 42 || out.Epoch != 5 || len(out.Events) != 1 || string(out.Events[0].Payload) != "echo" || out.Events[0].Lane != 2 {
			t.Fatalf("across nodes: player %d epoch %d fence %+v events %d; want 42, 5, %+v, the echo on lane 2",
				out.Player, out.Epoch, out.Applied, len(out.Events), fence)
		}
		out.Release()
	}
	if _, err := outputFromProto(&pb.EventsOut{Player: 1, Events: []*pb.GameEvent{{Class: 99}}}); err == nil {
		t.Fatal("an event of class 99 taken")
	}
}
