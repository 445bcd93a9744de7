package gateway

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/ghostwire/ghostwire/actors/msg"
)

// Session is one verified connection as the gateway sees it: for the admin
// API's player views and kicks.
type Session struct {
	Player uint64
	PID    *actor.PID // the connection actor (msg.Kick, conn.StatsRequest)
	Addr   netip.AddrPort
	Since  time.Time // when the handshake completed (wall clock)
}

// sessionsRequest asks the gateway actor for its verified connections.
type sessionsRequest struct{}

// Sessions lists the verified connections, by player id, waiting at most
// timeout for the gateway actor. Safe for concurrent use; not from inside
// an actor.
func (g *Gateway) Sessions(timeout time.Duration) ([]Session, error) {
	res, err := msg.Await(g.sys.Root.RequestFuture(g.pid, &sessionsRequest{}, timeout))
	if err != nil {
		return nil, fmt.Errorf("gateway sessions: %w", err)
	}
	ss, ok := res.([]Session)
	if !ok {
		return nil, fmt.Errorf("gateway sessions: unexpected reply %T", res)
	}
	return ss, nil
}

func (r *router) sessions() []Session {
	// The routes keep no address (route): the address table has them.
	addrs := make(map[*route]netip.AddrPort, len(r.byPlayer))
	for ap, rt := range r.byAddr.all() { // this actor writes byAddr: it reads it without mu
		addrs[rt] = ap
	}
	out := make([]Session, 0, len(r.byPlayer))
	for _, rt := range r.byPlayer {
		out = append(out, Session{Player: rt.player, PID: r.pidOf(rt), Addr: addrs[rt], Since: time.Unix(0, rt.since)})
	}
	slices.SortFunc(out, func(a, b Session) int {
		switch {
		case a.Player < b.Player:
			return -1
		case a.Player > b.Player:
			return 1
		}
		return 0
	})
	return out
}
