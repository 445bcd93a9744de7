package gateway_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/gateway"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/session"
)

// RedirectAll sends every client to the other gateways, round-robin, with a
// token that opens a session there for the same player — once.
func TestRedirectAllMovesClientsToOtherGateways(t *testing.T) {
	defer verifyNoLeaks(t)()
	a := newRig(t, nil)
	b := newRig(t, func(c *gateway.Config) { c.Key = a.key })
	c := newRig(t, func(c *gateway.Config) { c.Key = a.key })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 6
	var done []<-chan error
	for i := range n {
		tc := newClient(t, uint64(i+1), a.token(t, uint64(i+1)), a.gw.PublicAddr(), a.start, nil, uint64(i+1))
		done = append(done, start(ctx, tc, nil))
	}
	eventually(t, 10*time.Second, "clients verified", func() bool { return a.gw.Stats().Verified == n })
	if _, err := a.gw.RedirectAll(ctx, nil); !errors.Is(err, gateway.ErrConfig) {
		t.Fatalf("no targets: %v", err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	moved, err := a.gw.RedirectAll(rctx, []netip.AddrPort{b.gw.PublicAddr(), c.gw.PublicAddr()})
	rcancel()
	if err != nil || moved != n {
		t.Fatalf("RedirectAll: %d, %v", moved, err)
	}
	per := map[netip.AddrPort]int{}
	var toks []*session.RedirectError
	for i, d := range done {
		var re *session.RedirectError
		if err := wait(t, "client", d); !errors.As(err, &re) {
			t.Fatalf("client %d: %v, want a redirect", i+1, err)
		}
		per[re.Server]++
		toks = append(toks, re)
	}
	if per[b.gw.PublicAddr()] != n/2 || per[c.gw.PublicAddr()] != n/2 {
		t.Fatalf("targets %v, want %d each", per, n/2)
	}
	s := a.gw.Stats()
	if s.Redirects != n || s.Closed[handshake.ReasonRedirected] != n {
		t.Fatalf("redirects %d, closed redirected %d (closed %v)", s.Redirects, s.Closed[handshake.ReasonRedirected], s.Closed)
	}
	if s.Conns != 0 {
		t.Fatalf("%d connections left after RedirectAll", s.Conns)
	}
	// The redirecting gateway keeps no one new: a client that arrives now
	// (sent here by another node's drain a moment before this one began)
	// is taken, under a cookie, and passed on to a target. It used to be
	// refused, and its client had to go back to its login backend.
	late := newClient(t, 99, a.token(t, 99), a.gw.PublicAddr(), a.start, nil, 99)
	var lre *session.RedirectError
	if err := wait(t, "late client", start(ctx, late, nil)); !errors.As(err, &lre) || (lre.Server != b.gw.PublicAddr() && lre.Server != c.gw.PublicAddr()) {
		t.Fatalf("late client: %v, want a redirect to b or c", err)
	}
	if s := a.gw.Stats(); s.PassedOn != 1 || s.Redirects != n+1 {
		t.Fatalf("late client: passed on %d, redirects %d; want 1, %d", s.PassedOn, s.Redirects, n+1)
	}
	eventually(t, 5*time.Second, "the late client's connection closed", func() bool { return a.gw.Stats().Conns == 0 })
	var de *session.DeniedError
	// Each token opens a session at its target, as the same player.
	re := toks[0]
	tgt := b
	if re.Server == c.gw.PublicAddr() {
		tgt = c
	}
	follow := newClient(t, 1, re.Token, re.Server, tgt.start, nil, 50)
	fdone := start(ctx, follow, sendThen([]string{"x"}, closeWhenEchoed(1)))
	if err := wait(t, "follower", fdone); err != nil {
		t.Fatalf("following the redirect: %v", err)
	}
	if sess := tgt.gw.Stats().Verified; sess != 1 {
		t.Fatalf("target verified %d", sess)
	}
	// Single use: the same token again is refused.
	again := newClient(t, 1, re.Token, re.Server, tgt.start, nil, 51)
	if err := wait(t, "replay", start(ctx, again, nil)); !errors.As(err, &de) || de.Reason != handshake.ReasonTokenUsed {
		t.Fatalf("token used twice: %v, want Denied(TokenUsed)", err)
	}
	a.close(t)
	b.close(t)
	c.close(t)
}
