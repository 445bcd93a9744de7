package pbconv

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
)

// FuzzHandoffFromProto: bytes from the network (a NATS subject) decode to a
// valid handoff.Msg or an error, never a panic; a decoded message encodes
// and decodes to itself.
func FuzzHandoffFromProto(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 4 {
		m := randMsg(r)
		data, _ := proto.Marshal(HandoffToProto(&m))
		f.Add(data)
	}
	f.Add([]byte{0x08, 0x2a})
	f.Fuzz(func(t *testing.T, data []byte) {
		var p pb.HandoffMessage
		if proto.Unmarshal(data, &p) != nil {
			return
		}
		m, err := HandoffFromProto(&p)
		if err != nil {
			return
		}
		again, err := proto.Marshal(HandoffToProto(&m))
		if err != nil {
			t.Fatal(err)
		}
		var p2 pb.HandoffMessage
		if err := proto.Unmarshal(again, &p2); err != nil {
			t.Fatal(err)
		}
		m2, err := HandoffFromProto(&p2)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("round trip changed the message:\n%+v\n%+v", m, m2)
		}
	})
}

// FuzzReplicaBatchFromProto: arbitrary bytes never panic the replica decoder.
func FuzzReplicaBatchFromProto(f *testing.F) {
	f.Add([]byte{0x0a, 0x01, 'a', 0x2a, 0x04, 0x08, 0x01, 0x10, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		var p pb.ReplicaBatch
		if proto.Unmarshal(data, &p) != nil {
			return
		}
		b, err := ReplicaBatchFromProto(&p)
		if err != nil {
			return
		}
		b2, err := ReplicaBatchFromProto(ReplicaBatchToProto(b))
		if err != nil || !reflect.DeepEqual(b, b2) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// FuzzViewFromProto: arbitrary bytes never panic the view decoder.
func FuzzViewFromProto(f *testing.F) {
	f.Add([]byte{0x08, 0x07, 0x32, 0x04, 0x08, 0x01, 0x10, 0x01})
	reg := registry(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		var p pb.ViewUpdate
		if proto.Unmarshal(data, &p) != nil {
			return
		}
		_, _ = ViewEntriesFromProto(nil, &p, reg)
	})
}
