package handshake

import (
	"errors"
	"testing"
	"time"
)

// TestOpenAccepted: a swarm sharing one socket finds the owner of an
// Accepted without changing any client: the holder of the token gets the
// granted connection id, every other token (or server) an error, and a
// client that then handles the packet connects with that same id.
func TestOpenAccepted(t *testing.T) {
	now := testStart.Add(time.Second)
	srv := newTestServer(t, 1)
	tok, other := issue(t, testParams(), now, 1), issue(t, testParams(), now, 2)
	acc, g, err := srv.Handle(nil, reqFor(t, tok), testClient, now, LoadNormal)
	if g == nil {
		t.Fatal(err)
	}
	mine, theirs := mustParse(t, tok), mustParse(t, other)
	if id, err := OpenAccepted(acc, &theirs, testServer); err == nil {
		t.Fatalf("another token opens it: %v", id)
	}
	if _, err := OpenAccepted(acc, &mine, testServer6); err == nil {
		t.Fatal("opens for another server")
	}
	if _, err := OpenAccepted(flipBit(acc, 8*(AcceptedSize-1)), &mine, testServer); !errors.Is(err, ErrAuth) {
		t.Fatalf("flipped tag: %v", err)
	}
	if _, err := OpenAccepted(AppendDenied(nil, ReasonServerFull, mine.ID), &mine, testServer); err == nil {
		t.Fatal("a Denied opens as an Accepted")
	}
	id, err := OpenAccepted(acc, &mine, testServer)
	if err != nil || id != g.ID {
		t.Fatalf("id %v err %v, want %v", id, err, g.ID)
	}
	c, err := NewClient(tok, testServer)
	if err != nil {
		t.Fatal(err)
	}
	if c.State() != StatePending {
		t.Fatalf("state %v", c.State())
	}
	if err := c.HandleReply(acc); err != nil || c.ConnID() != id {
		t.Fatalf("client: %v, id %v", err, c.ConnID())
	}
}
