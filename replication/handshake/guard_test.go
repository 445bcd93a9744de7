package handshake

import (
	"errors"
	"testing"
	"time"
)

func TestReplayGuard(t *testing.T) {
	g, err := NewReplayGuard(3)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	a, b, c, d := TokenID{1}, TokenID{2}, TokenID{3}, TokenID{4}
	ins := func(id TokenID, expires int64) error {
		return g.Insert(id, GuardEntry{Addr: testClient, Expires: expires}, now)
	}
	if err := ins(a, 1010); err != nil {
		t.Fatal(err)
	}
	if err := ins(a, 1010); !errors.Is(err, ErrTokenUsed) {
		t.Fatalf("second insert: %v", err)
	}
	if e := g.Lookup(a, now); e.State != GuardPending || e.Addr != testClient {
		t.Fatalf("lookup %+v", e)
	}
	g.Consume(a)
	if e := g.Lookup(a, now); e.State != GuardConsumed {
		t.Fatalf("after consume %v", e.State)
	}
	ins(b, 1005)
	ins(c, 1020)
	if err := ins(d, 1020); !errors.Is(err, ErrGuardFull) {
		t.Fatalf("full: %v", err)
	}
	if g.Lookup(a, now).State != GuardConsumed {
		t.Fatal("a full guard evicted a live entry")
	}
	// At 1005 b has expired: its slot frees, and a lookup no longer finds it.
	now = time.Unix(1005, 0)
	if g.Lookup(b, now).State != GuardAbsent {
		t.Fatal("expired entry still found")
	}
	if err := ins(d, 1030); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	if g.Len() != 3 {
		t.Fatalf("len %d", g.Len())
	}
	g.Consume(TokenID{99}) // unknown: ignored
	if _, err := NewReplayGuard(0); !errors.Is(err, ErrConfig) {
		t.Fatal(err)
	}
}
