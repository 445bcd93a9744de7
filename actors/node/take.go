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

// takeRequest is a handover's take request: the zone, its NPCs (nil:
// the target spawns the zone's share afresh), whether an operator placed
// it (pb.ZoneTake.placed), and the players the old owner froze in it
// (nil: not listed, the target reads the whole players bucket for them).
type takeRequest struct {
	zone    string
	npcs    []sim.NPCState
	placed  bool
	players []uint64
}

// maxTakePlayers bounds the players a take request lists: a zone with
// more (none does: a slice of its periodic checkpoints goes a record a
// player past ≈ 7,000) is listed as not listed, and its target reads the
// players bucket; a request listing more is refused. It bounds what a
// malformed request makes the target read (a record a listed player).
const maxTakePlayers = 1 << 16

// encodeTake is t's request, at most max bytes (the connection's largest
// message). Too large, it leaves the NPCs out (the target then spawns the
// zone's share afresh), then the players (it reads the bucket for them);
// such a request is the zone id alone, as an older node reads it, unless
// it must carry the operator's placement.
func encodeTake(t takeRequest, max int) []byte {
	if len(t.players) > maxTakePlayers {
		t.players = nil
	}
	m := &pb.ZoneTake{Zone: t.zone, Npcs: make([]*pb.EntitySnapshot, len(t.npcs)), NpcEpochs: make([]uint64, len(t.npcs)),
		Placed: t.placed, NpcsAfresh: t.npcs == nil, Players: t.players, PlayersListed: t.players != nil}
	for i := range t.npcs {
		m.Npcs[i] = pbconv.SnapshotToProto(&t.npcs[i].Snap)
		m.NpcEpochs[i] = uint64(t.npcs[i].Epoch)
	}
	b, err := proto.MarshalOptions{}.MarshalAppend([]byte{takeMark}, m)
	if err == nil && len(b) <= max {
		return b
	}
	if t.players != nil {
		m.Npcs, m.NpcEpochs, m.NpcsAfresh = nil, nil, true
		b, err = proto.MarshalOptions{}.MarshalAppend([]byte{takeMark}, m)
		if err == nil && len(b) <= max {
			return b
		}
	}
	if t.placed {
		b, err = proto.MarshalOptions{}.MarshalAppend([]byte{takeMark}, &pb.ZoneTake{Zone: t.zone, Placed: true, NpcsAfresh: true})
		if err == nil && len(b) <= max {
			return b
		}
	}
	return []byte(t.zone)
}

var errBadTake = errors.New("take request")

// decodeTake reads a take request: the zone id, its NPCs when the
// request carries them (npcs is then not nil, even if empty: every NPC
// had walked out of the zone), whether an operator placed the zone, and
// its players when listed (not nil then, even if empty).
// A request from another node is trusted as far as NATS authenticated it,
// but a malformed one is refused, never a panic: every snapshot is
// checked as a handoff's (pbconv).
func decodeTake(data []byte) (takeRequest, error) {
	if len(data) == 0 || data[0] != takeMark {
		return takeRequest{zone: string(data)}, nil
	}
	var m pb.ZoneTake
	if err := proto.Unmarshal(data[1:], &m); err != nil {
		return takeRequest{}, fmt.Errorf("%w: %w", errBadTake, err)
	}
	if len(m.GetNpcEpochs()) != len(m.GetNpcs()) {
		return takeRequest{}, fmt.Errorf("%w: %d NPCs with %d epochs", errBadTake, len(m.GetNpcs()), len(m.GetNpcEpochs()))
	}
	if len(m.GetPlayers()) > maxTakePlayers {
		return takeRequest{}, fmt.Errorf("%w: %d players listed, more than %d", errBadTake, len(m.GetPlayers()), maxTakePlayers)
	}
	if len(m.GetPlayers()) > 0 && !m.GetPlayersListed() {
		return takeRequest{}, fmt.Errorf("%w: %d players, not marked listed", errBadTake, len(m.GetPlayers()))
	}
	t := takeRequest{zone: m.GetZone(), placed: m.GetPlaced()}
	if m.GetPlayersListed() {
		t.players = append(make([]uint64, 0, len(m.GetPlayers())), m.GetPlayers()...)
	}
	if m.GetNpcsAfresh() {
		if len(m.GetNpcs()) > 0 {
			return takeRequest{}, fmt.Errorf("%w: %d NPCs listed and the NPCs to be spawned afresh", errBadTake, len(m.GetNpcs()))
		}
		return t, nil
	}
	t.npcs = make([]sim.NPCState, len(m.GetNpcs()))
	for i, p := range m.GetNpcs() {
		s, err := pbconv.SnapshotFromProto(p)
		if err != nil {
			return takeRequest{}, fmt.Errorf("%w: NPC %d: %w", errBadTake, i, err)
		}
		t.npcs[i] = sim.NPCState{Snap: *s, Epoch: handoff.Epoch(m.GetNpcEpochs()[i])}
	}
	return t, nil
}
