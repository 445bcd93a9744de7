package conn

import (
	"net/netip"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/session"
)

// Messages a connection sends its gateway (the parent that spawned it).

// Verified: the client proved its address (first authenticated packet). The
// gateway consumes the connection's token (it admits nothing more; the
// gateway's route keeps which) and supersedes an older connection of the
// same player.
type Verified struct {
	PID    *actor.PID
	ID     handshake.ConnID
	Player uint64
}

// Moved: a packet authenticated from a new address (NAT rebinding); the
// gateway routes short-form packets from To to this connection from now on.
type Moved struct {
	ID       handshake.ConnID
	From, To netip.AddrPort
}

// Closed: the session is done (Disconnect copies sent, or closed by the
// peer or a timeout). The gateway forgets the routes, consumes the token and
// stops the connection.
type Closed struct {
	PID *actor.PID
	ID  handshake.ConnID
	// Addr is the client's address as the connection last knew it: the
	// Grant's, or the To of its last Moved. The gateway files its route
	// under it and keeps no copy of its own.
	Addr     netip.AddrPort
	Player   uint64
	Reason   handshake.Reason
	Verified bool
	Stats    session.ServerStats
}

// Messages a connection takes from its gateway.

// Shutdown starts a graceful close with Reason (a disconnect reason:
// ServerShutdown when the node stops, Duplicate when the player connected
// again, Kicked).
type Shutdown struct {
	Reason handshake.Reason
}

// Redirect moves the client to another gateway (a node draining): the
// session sends a Redirect naming To with Token (a fresh connect token for
// the same player, listing To) until the client acknowledges it, then
// closes with handshake.ReasonRedirected; an older client, or one that does
// not answer within the session's RedirectTimeout, is closed with
// ServerShutdown. docs/protocol.md §7.19.
type Redirect struct {
	To    netip.AddrPort
	Token []byte
}

// StatsRequest asks a connection for a snapshot of its session's stats; it
// responds with a *Stats (RequestFuture from tests or a non-actor
// goroutine).
type StatsRequest struct{}

// Stats answers a StatsRequest: the session's stats (zero before the
// client proved its address) and the client's address now. The address is
// the connection's because only it always knows: the gateway's address
// table files one connection an address, so clients that share a socket
// (the long form, as botswarm's bots do) share one entry there.
type Stats struct {
	Session session.ServerStats
	Addr    netip.AddrPort
}
