package node

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/proto/pbconv"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// takeMark begins a take request that carries the zone's NPCs
// (pb.ZoneTake): no zone id begins with it ([A-Za-z0-9_-]), so a request
// that is a zone id alone, an older node's, is told apart.
const takeMark = 0x00

// encodeTake is the take request of a handover of zone id with its NPCs.
// It is the zone id alone when the NPCs would make it larger than max
// bytes (the connection's largest message): the target then spawns the
// zone's share afresh.
func encodeTake(id string, npcs []sim.NPCState, max int) []byte {
	m := &pb.ZoneTake{Zone: id, Npcs: make([]*pb.EntitySnapshot, len(npcs)), NpcEpochs: make([]uint64, len(npcs))}
	for i := range npcs {
		m.Npcs[i] = pbconv.SnapshotToProto(&npcs[i].Snap)
		m.NpcEpochs[i] = uint64(npcs[i].Epoch)
	}
	b, err := proto.MarshalOptions{}.MarshalAppend([]byte{takeMark}, m)
	if err != nil || len(b) > max {
		return []byte(id)
	}
	return b
}

var errBadTake = errors.New("take request")

// decodeTake reads a take request: the zone id, and its NPCs when the
// request carries them (npcs is then not nil, even if empty: every NPC
// had walked out of the zone). A request from another node is trusted as
// far as NATS authenticated it, but a malformed one is refused, never a
// panic: every snapshot is checked as a handoff's (pbconv).
func decodeTake(data []byte) (id string, npcs []sim.NPCState, err error) {
	if len(data) == 0 || data[0] != takeMark {
		return string(data), nil, nil
	}
	var m pb.ZoneTake
	if err := proto.Unmarshal(data[1:], &m); err != nil {
		return "", nil, fmt.Errorf("%w: %w", errBadTake, err)
	}
	if len(m.GetNpcEpochs()) != len(m.GetNpcs()) {
		return "", nil, fmt.Errorf("%w: %d NPCs with %d epochs", errBadTake, len(m.GetNpcs()), len(m.GetNpcEpochs()))
	}
	npcs = make([]sim.NPCState, len(m.GetNpcs()))
	for i, p := range m.GetNpcs() {
		s, err := pbconv.SnapshotFromProto(p)
		if err != nil {
			return "", nil, fmt.Errorf("%w: NPC %d: %w", errBadTake, i, err)
		}
		npcs[i] = sim.NPCState{Snap: *s, Epoch: handoff.Epoch(m.GetNpcEpochs()[i])}
	}
	return m.GetZone(), npcs, nil
}
