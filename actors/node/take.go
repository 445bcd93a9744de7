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

// encodeTake is the take request of a handover of zone id with its NPCs,
// placed by an operator or not (pb.ZoneTake.placed). Without the NPCs
// when they would make it larger than max bytes (the connection's largest
// message): the target then spawns the zone's share afresh. Such a
// request is the zone id alone, as an older node reads it, unless it must
// carry the operator's placement.
func encodeTake(id string, npcs []sim.NPCState, placed bool, max int) []byte {
	m := &pb.ZoneTake{Zone: id, Npcs: make([]*pb.EntitySnapshot, len(npcs)), NpcEpochs: make([]uint64, len(npcs)), Placed: placed}
	for i := range npcs {
		m.Npcs[i] = pbconv.SnapshotToProto(&npcs[i].Snap)
		m.NpcEpochs[i] = uint64(npcs[i].Epoch)
	}
	b, err := proto.MarshalOptions{}.MarshalAppend([]byte{takeMark}, m)
	if err == nil && len(b) <= max {
		return b
	}
	if placed {
		b, err = proto.MarshalOptions{}.MarshalAppend([]byte{takeMark}, &pb.ZoneTake{Zone: id, Placed: true, NpcsAfresh: true})
		if err == nil && len(b) <= max {
			return b
		}
	}
	return []byte(id)
}

var errBadTake = errors.New("take request")

// decodeTake reads a take request: the zone id, its NPCs when the
// request carries them (npcs is then not nil, even if empty: every NPC
// had walked out of the zone), and whether an operator placed the zone.
// A request from another node is trusted as far as NATS authenticated it,
// but a malformed one is refused, never a panic: every snapshot is
// checked as a handoff's (pbconv).
func decodeTake(data []byte) (id string, npcs []sim.NPCState, placed bool, err error) {
	if len(data) == 0 || data[0] != takeMark {
		return string(data), nil, false, nil
	}
	var m pb.ZoneTake
	if err := proto.Unmarshal(data[1:], &m); err != nil {
		return "", nil, false, fmt.Errorf("%w: %w", errBadTake, err)
	}
	if len(m.GetNpcEpochs()) != len(m.GetNpcs()) {
		return "", nil, false, fmt.Errorf("%w: %d NPCs with %d epochs", errBadTake, len(m.GetNpcs()), len(m.GetNpcEpochs()))
	}
	if m.GetNpcsAfresh() {
		if len(m.GetNpcs()) > 0 {
			return "", nil, false, fmt.Errorf("%w: %d NPCs listed and the NPCs to be spawned afresh", errBadTake, len(m.GetNpcs()))
		}
		return m.GetZone(), nil, m.GetPlaced(), nil
	}
	npcs = make([]sim.NPCState, len(m.GetNpcs()))
	for i, p := range m.GetNpcs() {
		s, err := pbconv.SnapshotFromProto(p)
		if err != nil {
			return "", nil, false, fmt.Errorf("%w: NPC %d: %w", errBadTake, i, err)
		}
		npcs[i] = sim.NPCState{Snap: *s, Epoch: handoff.Epoch(m.GetNpcEpochs()[i])}
	}
	return m.GetZone(), npcs, m.GetPlaced(), nil
}
