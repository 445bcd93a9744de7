package handshake

import (
	"errors"
	"net/netip"
	"testing"
	"time"
)

func TestClientRejectsForeignReplies(t *testing.T) {
	now := testStart.Add(time.Second)
	two := testParams()
	two.ServerAddrs = []netip.AddrPort{testServer, testServer6}
	tok := issue(t, two, now, 1)
	otherTok := issue(t, two, now, 2)

	// Genuine replies for tok from testServer, and replies for otherTok.
	srv := newTestServer(t, 1)
	accepted, _, err := srv.Handle(nil, reqFor(t, tok), testClient, now, LoadNormal)
	if err != nil {
		t.Fatal(err)
	}
	challengeOther, _, _ := srv.Handle(nil, reqFor(t, otherTok), testClient, now, LoadHigh)
	deniedOther := AppendDenied(nil, ReasonServerFull, mustParse(t, otherTok).ID)

	tests := []struct {
		name   string
		server netip.AddrPort
		pkt    []byte
		want   error
	}{
		{"Accepted with a flipped tag bit", testServer, flipBit(accepted, 8*(AcceptedSize-1)), ErrAuth},
		{"Accepted with another connection id", testServer, flipBit(accepted, 8*2), ErrAuth},
		{"Accepted from another server the token lists", testServer6, accepted, ErrAuth},
		{"Challenge for another token", testServer, challengeOther, ErrAuth},
		{"Denied for another token", testServer, deniedOther, ErrAuth},
		{"NoConnection during the handshake", testServer, []byte{KindNoConnection.ControlByte(), 0, 0, 0, 0, 0, 0, 0, 0}, ErrUnexpected},
		{"a connect request", testServer, reqFor(t, tok), ErrUnexpected},
		{"garbage", testServer, []byte{1, 2, 3}, ErrGarbage},
		{"Denied with an unknown reason", testServer, AppendDenied(nil, 200, mustParse(t, tok).ID), ErrMalformed},
		{"Denied with a disconnect reason", testServer, AppendDenied(nil, ReasonClientQuit, mustParse(t, tok).ID), ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewClient(tok, tc.server)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.HandleReply(tc.pkt); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if c.State() != StatePending || !c.ConnID().IsZero() {
				t.Fatalf("state changed to %v", c.State())
			}
		})
	}
}

func mustParse(t *testing.T, tok []byte) Token {
	t.Helper()
	p, err := ParseToken(tok)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestClientDenied(t *testing.T) {
	tok := issue(t, testParams(), testStart.Add(time.Second), 1)
	c, err := NewClient(tok, testServer)
	if err != nil {
		t.Fatal(err)
	}
	err = c.HandleReply(AppendDenied(nil, ReasonTokenExpired, c.Token().ID))
	if !errors.Is(err, ErrDenied) || !errors.Is(err, ErrTokenExpired) {
		t.Fatalf("err = %v", err)
	}
	if c.State() != StateClosed || c.Reason() != ReasonTokenExpired {
		t.Fatalf("state %v reason %v", c.State(), c.Reason())
	}
	if _, err := c.AppendRequest(nil); !errors.Is(err, ErrUnexpected) {
		t.Fatalf("request after denial: %v", err)
	}
	if _, err := c.Session(); err == nil {
		t.Fatal("session after denial")
	}
}

func TestClientLifecycle(t *testing.T) {
	now := testStart.Add(time.Second)
	srv := newTestServer(t, 1)
	tok := issue(t, testParams(), now, 1)
	if _, err := NewClient(tok, testServer6); !errors.Is(err, ErrWrongServer) {
		t.Fatalf("unlisted server: %v", err)
	}
	if _, err := NewClient(tok[:100], testServer); !errors.Is(err, ErrBadToken) {
		t.Fatalf("short token: %v", err)
	}
	c, err := NewClient(tok, testServer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Session(); err == nil {
		t.Fatal("session before connecting")
	}
	ch1, _, _ := srv.Handle(nil, request(t, c), testClient, now, LoadHigh)
	if err := c.HandleReply(ch1); err != nil || c.State() != StateChallenged {
		t.Fatal(err, c.State())
	}
	resp := request(t, c)
	if k, _ := Classify(resp); k != KindChallengeResponse || len(resp) != RequestSize {
		t.Fatalf("challenge response %v, %d bytes", k, len(resp))
	}
	// A second, newer challenge replaces the cookie.
	ch2, _, _ := srv.Handle(nil, reqFor(t, tok), testClient, now.Add(DefaultCookieRotation), LoadHigh)
	if err := c.HandleReply(ch2); err != nil {
		t.Fatal(err)
	}
	acc, g, err := srv.Handle(nil, request(t, c), testClient, now.Add(DefaultCookieRotation), LoadHigh)
	if g == nil {
		t.Fatal(err)
	}
	if err := c.HandleReply(acc); err != nil || c.State() != StateConnected || c.ConnID() != g.ID {
		t.Fatal(err, c.State())
	}
	if err := c.HandleReply(ch1); !errors.Is(err, ErrUnexpected) {
		t.Fatalf("late challenge: %v", err)
	}
	if _, err := c.AppendRequest(nil); !errors.Is(err, ErrUnexpected) {
		t.Fatalf("request when connected: %v", err)
	}
	if _, err := c.Session(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Session(); err == nil {
		t.Fatal("a second Session under the same keys")
	}
}
