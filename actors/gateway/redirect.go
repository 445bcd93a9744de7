package gateway

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/ghostwire/ghostwire/actors/conn"
	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/handshake"
)

// RedirectTokenExpiry is the life of the connect token a Redirect carries:
// long enough for a client to reconnect across a lossy link, short enough
// that a leaked one is soon worthless (it opens one session anyway).
const RedirectTokenExpiry = 30 * time.Second

// redirectRequest asks the gateway actor to redirect every connection; it
// answers with the number redirected.
type redirectRequest struct{ targets []netip.AddrPort }

// RedirectAll moves every client of this gateway to the gateways at
// targets (other nodes of the cluster, sharing the token key), spread
// round-robin: each verified connection gets a fresh connect token for its
// player (same user data and timeout, the target alone listed, expiring
// after RedirectTokenExpiry) and sends the client a Redirect
// (docs/protocol.md §7.19); a connection still proving its address is
// closed (ServerShutdown: its client retries with a new token). From then
// on a new client is taken under a cookie and, once verified, redirected
// too (passOn: another node's drain sent it here). RedirectAll
// returns once every connection has ended — acknowledged, or closed after
// the session's RedirectTimeout — or when ctx ends; it reports how many
// connections it redirected. Call Close afterwards.
func (g *Gateway) RedirectAll(ctx context.Context, targets []netip.AddrPort) (int, error) {
	if len(targets) == 0 {
		return 0, fmt.Errorf("%w: RedirectAll without targets", ErrConfig)
	}
	for _, t := range targets {
		if !t.IsValid() || t.Port() == 0 || t.Addr().IsUnspecified() {
			return 0, fmt.Errorf("%w: redirect target %v", ErrConfig, t)
		}
	}
	timeout := time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(d), time.Millisecond)
	}
	res, err := msg.Await(g.sys.Root.RequestFuture(g.pid, &redirectRequest{targets: slices.Clone(targets)}, timeout))
	if err != nil {
		return 0, fmt.Errorf("gateway redirect: %w", err)
	}
	n, _ := res.(int)
	select {
	case <-g.drained:
		return n, nil
	case <-ctx.Done():
		return n, fmt.Errorf("gateway redirect: %d connections left: %w", g.st.conns.Load(), ctx.Err())
	}
}

// redirectAll sends each verified connection its Redirect and closes the
// unverified ones; the gateway drains from here on. Clients that arrive
// while it drains (redirected here by a node drained at the same moment)
// are taken and passed on to the same targets once verified (passOn).
func (r *router) redirectAll(ctx sender, targets []netip.AddrPort) int {
	r.draining = true
	r.redirectTo = targets
	// A stable order (by player) spreads the players evenly and
	// reproducibly over the targets.
	rts := make([]*route, 0, r.byID.len())
	for rt := range r.byID.all() {
		rts = append(rts, rt)
	}
	slices.SortFunc(rts, func(a, b *route) int {
		switch {
		case a.player < b.player:
			return -1
		case a.player > b.player:
			return 1
		}
		return 0
	})
	n := 0
	for _, rt := range rts {
		if !rt.verified() {
			ctx.Send(r.pidOf(rt), &conn.Shutdown{Reason: handshake.ReasonServerShutdown})
			continue
		}
		if r.redirect(ctx, rt) {
			n++
		}
	}
	r.log.Info("redirecting clients", "conns", n, "targets", len(targets))
	r.checkDrained()
	return n
}

// passOn redirects a connection verified while the gateway redirects
// (redirectAll): a client sent here by another node's drain a moment
// before this one began. Refused instead (Denied(ServerFull)), its
// client had to go back to its login backend.
func (r *router) passOn(ctx sender, rt *route) {
	if r.redirect(ctx, rt) {
		r.st.passedOn.Add(1)
	}
}

// redirect sends rt a Redirect to the next of the targets with a fresh
// token for its player; a token that cannot be minted closes it instead.
func (r *router) redirect(ctx sender, rt *route) bool {
	wall, rnd := r.cfg.Wall, r.cfg.Rand
	if wall == nil {
		wall = time.Now
	}
	if rnd == nil {
		rnd = crand.Reader
	}
	to := r.redirectTo[r.redirected%len(r.redirectTo)]
	timeout := rt.timeout()
	if timeout <= 0 {
		timeout = handshake.MaxTimeout
	}
	tok, err := handshake.IssueToken(r.cfg.Key, handshake.TokenParams{
		PlayerID: rt.player, ProtocolID: r.cfg.ProtocolID, Expiry: RedirectTokenExpiry, Timeout: timeout,
		ServerAddrs: []netip.AddrPort{to}, UserData: rt.userData(),
	}, wall(), rnd)
	if err != nil {
		r.log.Error("redirect token not minted; disconnecting", "player", rt.player, "err", err)
		ctx.Send(r.pidOf(rt), &conn.Shutdown{Reason: handshake.ReasonServerShutdown})
		return false
	}
	ctx.Send(r.pidOf(rt), &conn.Redirect{To: to, Token: tok})
	r.st.redirects.Add(1)
	r.redirected++
	return true
}
