package gateway_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/gateway"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/session"
)

// start runs tc in a goroutine; the channel yields its result.
func start(ctx context.Context, tc *tclient, s script) <-chan error {
	done := make(chan error, 1)
	go func() { done <- tc.run(ctx, s) }()
	return done
}

func wait(t *testing.T, what string, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: client did not finish", what)
		return nil
	}
}

// sendThen sends the events in order once connected, then calls after.
func sendThen(events []string, after func(tc *tclient, now time.Duration)) script {
	return func(tc *tclient, now time.Duration) {
		if tc.c.State() != handshake.StateConnected {
			return
		}
		for tc.sentAt < len(events) {
			if tc.c.SendEvent(1, []byte(events[tc.sentAt])) != nil {
				return
			}
			tc.sentAt++
		}
		if after != nil {
			after(tc, now)
		}
	}
}

// closeWhenEchoed closes the client once n echoes arrived.
func closeWhenEchoed(n int) func(*tclient, time.Duration) {
	return func(tc *tclient, now time.Duration) {
		if len(tc.received()) >= n && tc.c.State() == handshake.StateConnected {
			tc.c.Close(now)
		}
	}
}

func TestServerFullRefusesWithReason(t *testing.T) {
	defer verifyNoLeaks(t)()
	r := newRig(t, func(c *gateway.Config) { c.MaxConns, c.ChallengeAt = 2, 2 })
	ctx, cancel := context.WithCancel(context.Background())
	var done []<-chan error
	for i := range 2 {
		tc := newClient(t, uint64(i+1), r.token(t, uint64(i+1)), r.gw.PublicAddr(), r.start, nil, 1)
		done = append(done, start(ctx, tc, nil))
	}
	eventually(t, 10*time.Second, "two connections verified", func() bool { return r.gw.Stats().Verified == 2 })
	third := newClient(t, 3, r.token(t, 3), r.gw.PublicAddr(), r.start, nil, 1)
	err := wait(t, "third client", start(ctx, third, nil))
	var denied *session.DeniedError
	if !errors.As(err, &denied) || !errors.Is(err, handshake.ErrServerFull) {
		t.Fatalf("third client: %v, want a denial for ServerFull", err)
	}
	if got := r.gw.Stats().Denied[handshake.ReasonServerFull]; got == 0 {
		t.Fatal("ServerFull denial not counted")
	}
	cancel()
	for _, d := range done {
		<-d
	}
	r.close(t)
}

// With ChallengeAt = 0 every client must first echo a stateless cookie; it
// still connects and plays.
func TestCookieChallengePath(t *testing.T) {
	defer verifyNoLeaks(t)()
	r := newRig(t, func(c *gateway.Config) { c.ChallengeAt = 0 })
	tc := newClient(t, 1, r.token(t, 1), r.gw.PublicAddr(), r.start, nil, 1)
	events := []string{"a", "b", "c"}
	if err := wait(t, "client", start(context.Background(), tc, sendThen(events, closeWhenEchoed(3)))); err != nil {
		t.Fatal(err)
	}
	if got := tc.received(); !slices.Equal(got, events) {
		t.Fatalf("echoes %v, want %v", got, events)
	}
	if st := tc.c.Stats(); st.Challenges == 0 {
		t.Fatalf("client answered no challenge (stats %+v)", st)
	}
	r.close(t)
}

// A client whose address changes (NAT rebinding) keeps its connection: the
// gateway answers the unknown address with NoConnection, the client falls
// back to the long form, the connection authenticates it and the gateway
// re-routes.
func TestNATRebindingKeepsTheConnection(t *testing.T) {
	defer verifyNoLeaks(t)()
	r := newRig(t, nil)
	tc := newClient(t, 1, r.token(t, 1), r.gw.PublicAddr(), r.start, nil, 1)
	first := []string{"one", "two"}
	second := []string{"three", "four"}
	swapped := false
	all := append(slices.Clone(first), second...)
	err := wait(t, "client", start(context.Background(), tc, func(tc *tclient, now time.Duration) {
		if tc.c.State() != handshake.StateConnected {
			return
		}
		if !swapped {
			sendThen(first, nil)(tc, now)
			if len(tc.received()) < len(first) {
				return
			}
			// The NAT rebinds: same client, new source port.
			ns, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
			if err != nil {
				t.Error(err)
				return
			}
			tc.sock.Close()
			tc.sock = ns
			swapped = true
		}
		sendThen(all, closeWhenEchoed(len(all)))(tc, now)
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got := tc.received(); !slices.Equal(got, all) {
		t.Fatalf("echoes %v, want %v", got, all)
	}
	s := r.gw.Stats()
	if s.Moved != 1 || s.NoConnSent == 0 {
		t.Fatalf("moved %d, NoConnection sent %d; want 1 move after ≥ 1 NoConnection", s.Moved, s.NoConnSent)
	}
	eventually(t, 5*time.Second, "closed", func() bool { return r.gw.Stats().Closed[handshake.ReasonClientQuit] == 1 })
	r.close(t)
}

// The same player connecting again with a new token supersedes the older
// connection (ReasonDuplicate).
func TestDuplicatePlayerSupersedesOlderConnection(t *testing.T) {
	defer verifyNoLeaks(t)()
	r := newRig(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	old := newClient(t, 5, r.token(t, 5), r.gw.PublicAddr(), r.start, nil, 1)
	oldDone := start(ctx, old, nil)
	eventually(t, 10*time.Second, "first connection verified", func() bool { return r.gw.Stats().Verified == 1 })
	nw := newClient(t, 5, r.token(t, 5), r.gw.PublicAddr(), r.start, nil, 2)
	newDone := start(ctx, nw, sendThen([]string{"x"}, closeWhenEchoed(1)))
	var de *session.DisconnectError
	if err := wait(t, "old client", oldDone); !errors.As(err, &de) || de.Reason != handshake.ReasonDuplicate {
		t.Fatalf("old client: %v, want Disconnect(Duplicate)", err)
	}
	if err := wait(t, "new client", newDone); err != nil {
		t.Fatalf("new client: %v", err)
	}
	if s := r.gw.Stats(); s.Superseded != 1 {
		t.Fatalf("superseded %d, want 1", s.Superseded)
	}
	r.close(t)
}

// The zone kicks a player: the client is told why.
func TestZoneKick(t *testing.T) {
	defer verifyNoLeaks(t)()
	r := newRig(t, nil)
	tc := newClient(t, 1, r.token(t, 1), r.gw.PublicAddr(), r.start, nil, 1)
	err := wait(t, "client", start(context.Background(), tc, sendThen([]string{"kick-me"}, nil)))
	var de *session.DisconnectError
	if !errors.As(err, &de) || de.Reason != handshake.ReasonKicked {
		t.Fatalf("client: %v, want Disconnect(Kicked)", err)
	}
	eventually(t, 5*time.Second, "zone saw the leave", func() bool {
		r.zst.mu.Lock()
		defer r.zst.mu.Unlock()
		return r.zst.leaves[handshake.ReasonKicked] == 1
	})
	r.close(t)
}

// A handoff redirects the connection: later input goes to the new zone.
func TestRedirectMovesInputToTheNewZone(t *testing.T) {
	defer verifyNoLeaks(t)()
	r := newRig(t, nil)
	tc := newClient(t, 1, r.token(t, 1), r.gw.PublicAddr(), r.start, nil, 1)
	before := []string{"a", "move-me"}
	after := []string{"b", "c"}
	moved := false
	err := wait(t, "client", start(context.Background(), tc, func(tc *tclient, now time.Duration) {
		if tc.c.State() != handshake.StateConnected {
			return
		}
		if !moved {
			sendThen(before, nil)(tc, now)
			if len(tc.received()) < len(before) {
				return
			}
			moved = true
		}
		sendThen(append(slices.Clone(before), after...), closeWhenEchoed(len(before)+len(after)))(tc, now)
	}))
	if err != nil {
		t.Fatal(err)
	}
	r.zst.mu.Lock()
	got1 := slices.Clone(r.zst.events[1])
	r.zst.mu.Unlock()
	r.zone2st.mu.Lock()
	got2 := slices.Clone(r.zone2st.events[1])
	joins2 := r.zone2st.joins
	r.zone2st.mu.Unlock()
	if !slices.Equal(got1, before) || !slices.Equal(got2, after) || joins2 != 1 {
		t.Fatalf("zone 1 got %v, zone 2 got %v (joins %d); want %v then %v", got1, got2, joins2, before, after)
	}
	r.close(t)
}

// A client that vanishes is timed out with the token's timeout, and its zone
// is told.
func TestSilentClientTimesOut(t *testing.T) {
	defer verifyNoLeaks(t)()
	r := newRig(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	tc := newClient(t, 1, r.tokenTimeout(t, 1, 1500*time.Millisecond), r.gw.PublicAddr(), r.start, nil, 1)
	done := start(ctx, tc, nil)
	eventually(t, 10*time.Second, "verified", func() bool { return r.gw.Stats().Verified == 1 })
	cancel() // the client goes silent: no Disconnect
	<-done
	eventually(t, 5*time.Second, "timed out", func() bool { return r.gw.Stats().Closed[handshake.ReasonTimeout] == 1 })
	eventually(t, 5*time.Second, "zone saw the leave", func() bool {
		r.zst.mu.Lock()
		defer r.zst.mu.Unlock()
		return r.zst.leaves[handshake.ReasonTimeout] == 1
	})
	r.close(t)
}

// Closing the gateway tells every client why (ServerShutdown, sent
// redundantly) before the socket closes.
func TestCloseDisconnectsClients(t *testing.T) {
	defer verifyNoLeaks(t)()
	r := newRig(t, nil)
	var done []<-chan error
	for i := range 3 {
		tc := newClient(t, uint64(i+1), r.token(t, uint64(i+1)), r.gw.PublicAddr(), r.start, nil, 1)
		done = append(done, start(context.Background(), tc, nil))
	}
	eventually(t, 10*time.Second, "verified", func() bool { return r.gw.Stats().Verified == 3 })
	r.close(t)
	for i, d := range done {
		var de *session.DisconnectError
		if err := wait(t, "client", d); !errors.As(err, &de) || de.Reason != handshake.ReasonServerShutdown {
			t.Errorf("client %d: %v, want Disconnect(ServerShutdown)", i, err)
		}
	}
}

// A view of 300 NPCs reaches the client through the ghost manager's credit
// flow within the connection's bandwidth (16 kB/s): every entity becomes a
// ghost on the client, and keeps moving.
func TestManyGhostsReachTheClient(t *testing.T) {
	defer verifyNoLeaks(t)()
	const npcs = 300
	r := newRigNPCs(t, npcs, nil)
	tc := newClient(t, 1, r.token(t, 1), r.gw.PublicAddr(), r.start, nil, 1)
	var full time.Duration
	err := wait(t, "client", start(context.Background(), tc, func(tc *tclient, now time.Duration) {
		if tc.c.State() != handshake.StateConnected {
			return
		}
		if full == 0 && tc.c.Mirror().Len() == npcs+1 {
			full = now
		}
		if full > 0 && now > full+500*time.Millisecond {
			tc.c.Close(now)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if full == 0 {
		t.Fatalf("the client held %d ghosts, want %d", tc.maxGhosts, npcs+1)
	}
	st := tc.c.Stats().Ghosts
	if st.Creates < npcs+1 || st.Updates == 0 {
		t.Fatalf("mirror: %d creates, %d updates", st.Creates, st.Updates)
	}
	t.Logf("%d ghosts %v after connecting; %d updates by the end", npcs+1,
		full-time.Duration(tc.connectedAt.Load()), st.Updates)
	r.close(t)
}
