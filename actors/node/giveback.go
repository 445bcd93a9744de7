package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/ghostwire/ghostwire/actors/cluster"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
)

// Give-back: a node with an explicit --zones list takes a listed zone
// back from a node that holds it without listing it — the node a drain
// handed it to, or an auto spare that claimed it while this node was down.
// Before, the restarted node refused to start ("zone x is owned by node
// y"), so a rolling restart of a cluster laid out by --zones lists left
// every drained node down and its zones on the others for good. A zone
// another node lists too is still a configuration error at start.

// giveBackMark begins a give-back request on the owner's give subject: an
// older node reads the request as the asker's node id, which ValidID
// refuses, so it answers "not giving" and keeps the zone.
const giveBackMark = 0x00

func encodeGiveBack(zone, node string) []byte {
	b, _ := proto.MarshalOptions{}.MarshalAppend([]byte{giveBackMark}, &pb.ZoneGiveBack{Zone: zone, Node: node})
	return b
}

var errBadGiveBack = errors.New("give-back request")

func decodeGiveBack(data []byte) (zone, node string, err error) {
	var m pb.ZoneGiveBack
	if len(data) == 0 || data[0] != giveBackMark {
		return "", "", errBadGiveBack
	}
	if err := proto.Unmarshal(data[1:], &m); err != nil {
		return "", "", fmt.Errorf("%w: %w", errBadGiveBack, err)
	}
	if !cluster.ValidID(m.GetZone()) || !cluster.ValidID(m.GetNode()) {
		return "", "", fmt.Errorf("%w: zone %q, node %q", errBadGiveBack, m.GetZone(), m.GetNode())
	}
	return m.GetZone(), m.GetNode(), nil
}

// ownerListing tells a starting node with a --zones list whether zone id,
// which node owner holds, may be asked back once this node runs: yes when
// the owner's directory record says it runs auto or a list without id. A
// record that lists id (two lists name one zone), an older node's record
// (neither field) or none at all keeps the start's refusal.
func ownerListing(ctx context.Context, kvNodes jetstream.KeyValue, id, owner string) (askBack bool, listsIt bool) {
	e, err := kvNodes.Get(ctx, owner)
	if err != nil {
		return false, false
	}
	var rec pb.NodeRecord
	if proto.Unmarshal(e.Value(), &rec) != nil {
		return false, false
	}
	if slices.Contains(rec.GetListed(), id) {
		return false, true
	}
	return rec.GetAuto() || len(rec.GetListed()) > 0, false
}

// onGiveBack hands zone id to node to, whose --zones list names it, unless
// this node lists it too, an operator placed it here, or to's record does
// not say it lists the zone (a stale or forged request).
func (m *membership) onGiveBack(r *nats.Msg, id, to string) {
	if !m.beginGiving() {
		_ = r.Respond([]byte("error: not giving"))
		return
	}
	defer m.endGiving()
	refuse := ""
	m.mu.Lock()
	placed := m.placed[id]
	m.mu.Unlock()
	switch {
	case to == m.node:
		refuse = "asked by itself"
	case !slices.Contains(m.zones.IDs(), id):
		refuse = "zone not run here"
	case slices.Contains(m.want, id):
		refuse = "listed here too"
	case placed:
		refuse = "placed here by an operator"
	}
	if refuse == "" {
		ctx, cancel := context.WithTimeout(context.Background(), m.leases.TTL())
		rec, err := m.kvNodes.Get(ctx, to)
		cancel()
		var nr pb.NodeRecord
		switch {
		case err != nil || proto.Unmarshal(rec.Value(), &nr) != nil:
			refuse = "no record of the asking node"
		case nr.GetDraining() || !slices.Contains(nr.GetListed(), id):
			refuse = "the asking node's record does not list the zone"
		}
	}
	if refuse != "" {
		_ = r.Respond([]byte("error: " + refuse))
		return
	}
	m.give(r, id, to, "give-back", "the node whose --zones lists it")
}

// askBack asks owner to hand listed zone id back to this node (the
// explicit node's loop, for a listed zone another node holds). The answer
// is logged when it differs from the last one for the zone, so a refusal
// that stands (an operator placed the zone there) is logged once, not
// every loop.
func (m *membership) askBack(ctx context.Context, id, owner string) {
	r, err := m.nc.RequestWithContext(ctx, giveSubject(m.world, owner), encodeGiveBack(id, m.node))
	answer := ""
	if err != nil {
		answer = "no answer: " + err.Error()
	} else {
		answer = string(r.Data)
	}
	last, seen := m.askedBack[id]
	if seen && last == owner+" "+answer {
		return
	}
	m.askedBack[id] = owner + " " + answer
	switch {
	case strings.HasPrefix(answer, "ok "):
		m.log.Info("listed zone asked back: coming", "zone", id, "from", owner)
	case err != nil || answer == "error: not giving":
		// Busy (handing another zone over, stopping), slow, or a node of
		// an older build: asked again next loop; said at debug.
		m.log.Debug("listed zone asked back: not now", "zone", id, "from", owner, "answer", answer)
	default:
		m.log.Warn("listed zone asked back: refused", "zone", id, "from", owner, "answer", strings.TrimPrefix(answer, "error: "))
	}
}

// askBackDue reports whether the explicit node's loop may ask for its
// listed zones now: not within two TTLs of losing a lease (a node that
// woke from a pause is still working through its backlog), as for a
// rebalance (mayAsk).
func (m *membership) askBackDue(now time.Time) bool { return m.nc != nil && m.mayAsk(now) }
