package gateway_test

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/gateway"
	"github.com/ghostwire/ghostwire/actors/tokenkey"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/session"
)

// A running gateway takes a rotation's keys without a restart (SetKeys):
// tokens under the new key open from then on, tokens under the old one
// while it is still held, and not after it is dropped; the sessions
// already up stay; a drain's Redirect tokens are sealed with the new
// first key, so a target that holds only the new key takes them; the
// counts by key carry over a key's move from second to first.
func TestSetKeysRotatesARunningGateway(t *testing.T) {
	defer verifyNoLeaks(t)()
	a := newRig(t, nil)
	oldKey := a.key
	newKey, err := tokenkey.Generate(crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b := newRig(t, func(c *gateway.Config) { c.Key = newKey })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tokenUnder := func(k tokenkey.Key, player uint64) []byte {
		tok, err := handshake.IssueToken(k, handshake.TokenParams{
			PlayerID: player, ProtocolID: tokenkey.DefaultProtocolID, Expiry: time.Minute,
			Timeout: 10 * time.Second, ServerAddrs: []netip.AddrPort{a.gw.PublicAddr()},
			UserData: []byte(fmt.Sprint("player-", player)),
		}, time.Now(), crand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	var done []<-chan error
	join := func(k tokenkey.Key, player uint64) {
		t.Helper()
		tc := newClient(t, player, tokenUnder(k, player), a.gw.PublicAddr(), a.start, nil, player)
		done = append(done, start(ctx, tc, nil))
		n := uint64(len(done))
		eventually(t, 10*time.Second, fmt.Sprintf("client %d verified", player), func() bool { return a.gw.Stats().Verified == n })
	}
	refused := func(k tokenkey.Key, player uint64) {
		t.Helper()
		tc := newClient(t, player, tokenUnder(k, player), a.gw.PublicAddr(), a.start, nil, player)
		var de *session.DeniedError
		if err := wait(t, "refused client", start(ctx, tc, nil)); !errors.As(err, &de) || de.Reason != handshake.ReasonBadToken {
			t.Fatalf("player %d: %v, want Denied(BadToken)", player, err)
		}
	}
	held := func(want ...tokenkey.Key) {
		t.Helper()
		if got := a.gw.Stats().KeysHeld; !slices.Equal(got, tokenkey.Keys(want).Fingerprints()) {
			t.Fatalf("keys held %v, want %v", got, tokenkey.Keys(want).Fingerprints())
		}
	}

	join(oldKey, 1)
	refused(newKey, 2)
	if err := a.gw.SetKeys(ctx, newKey, []tokenkey.Key{newKey}); !errors.Is(err, handshake.ErrConfig) {
		t.Fatalf("a key twice: %v", err)
	}
	held(oldKey)
	if err := a.gw.SetKeys(ctx, oldKey, []tokenkey.Key{newKey}); err != nil { // step 1
		t.Fatal(err)
	}
	held(oldKey, newKey)
	join(newKey, 3)
	if err := a.gw.SetKeys(ctx, newKey, []tokenkey.Key{oldKey}); err != nil { // step 2
		t.Fatal(err)
	}
	held(newKey, oldKey)
	join(oldKey, 4)
	if err := a.gw.SetKeys(ctx, newKey, nil); err != nil { // step 3
		t.Fatal(err)
	}
	held(newKey)
	refused(oldKey, 5)
	s := a.gw.Stats()
	if s.Verified != 3 || s.Conns != 3 || s.TokenKeys[tokenkey.Fingerprint(newKey)] != 1 || len(s.TokenKeys) != 1 {
		t.Fatalf("after the rotation: %d verified, %d up, by key %v", s.Verified, s.Conns, s.TokenKeys)
	}

	// The drain seals its Redirects with the new key; b holds only it.
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	moved, err := a.gw.RedirectAll(rctx, []netip.AddrPort{b.gw.PublicAddr()})
	rcancel()
	if err != nil || moved != 3 {
		t.Fatalf("RedirectAll: %d, %v", moved, err)
	}
	for i, d := range done {
		var re *session.RedirectError
		if err := wait(t, "client", d); !errors.As(err, &re) {
			t.Fatalf("client %d: %v, want a redirect", i, err)
		}
		player := uint64(i*2 + 1) // 1, 3, 4 joined
		if i == 2 {
			player = 4
		}
		follow := newClient(t, player, re.Token, re.Server, b.start, nil, 50+player)
		if err := wait(t, "follower", start(ctx, follow, sendThen([]string{"x"}, closeWhenEchoed(1)))); err != nil {
			t.Fatalf("following the redirect of player %d: %v", player, err)
		}
	}
	if got := b.gw.Stats().TokenKeys[tokenkey.Fingerprint(newKey)]; got != 3 {
		t.Fatalf("b opened %d redirect tokens under the new key, want 3", got)
	}
	a.close(t)
	b.close(t)
}
