package client_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/client"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
)

// A server's Redirect is followed without the application noticing: the
// same Session continues on the other server (moves acknowledged there,
// events echoed), Err stays nil, the redirect is counted and reported, and
// View never drops an entity while the new connection's view fills in.
func TestSessionFollowsRedirect(t *testing.T) {
	base := runtime.NumGoroutine()
	a := startServer(t)
	stopA := sync.OnceFunc(a.Stop)
	defer stopA()
	b := startServerKey(t, &a.key)
	b.mu.Lock()
	b.ghostDelay = 200 * time.Millisecond // the new view comes a while after the connection
	b.mu.Unlock()
	stopB := sync.OnceFunc(b.Stop)
	defer stopB()
	var seen atomic.Int32
	var got client.Redirected
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := client.Dial(ctx, a.addr.String(), a.token(7), client.OnRedirect(func(r client.Redirected) {
		got = r
		seen.Add(1)
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetInput(move.Move{Forward: 60, Yaw: 100}); err != nil {
		t.Fatal(err)
	}
	full := 0
	for deadline := time.Now().Add(5 * time.Second); full < npcs || s.Stats().Moves.LastAck == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not playing on a: %d ghosts, acked %d", full, s.Stats().Moves.LastAck)
		}
		full = len(s.View(nil))
	}
	if n := a.redirectAll(b); n != 1 {
		t.Fatalf("redirected %d", n)
	}
	// Frame by frame, as a renderer would: the view must never lose an NPC.
	minView := npcs
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not playing on b: server %v, stats %+v, err %v", s.Server(), s.Stats().Moves, s.Err())
		}
		minView = min(minView, len(s.View(nil)))
		if s.Server() == b.addr && s.Stats().Moves.LastAck > 30 {
			break
		}
	}
	if minView < npcs {
		t.Errorf("View showed %d of %d NPCs during the redirect (a pop)", minView, npcs)
	}
	if err := s.Err(); err != nil {
		t.Fatalf("session ended: %v", err)
	}
	st := s.Stats()
	if st.Redirects != 1 || seen.Load() != 1 || got.From != a.addr || got.To != b.addr {
		t.Fatalf("redirects %d, reported %d %+v", st.Redirects, seen.Load(), got)
	}
	if st.GhostsCarried == 0 {
		t.Errorf("no ghost carried over from the old connection's view: %+v", st.Ghosts)
	}
	// Events flow on the new connection.
	if err := s.SendEvent(0, []byte("after")); err != nil {
		t.Fatal(err)
	}
	if e := collect(t, s, 1, 5*time.Second); string(e[0].Payload) != "echo:after" {
		t.Fatalf("echo %q", e[0].Payload)
	}
	waitEnded := func(ts *testServer, r handshake.Reason) {
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if _, ended, _ := ts.snapshot(); ended[r] == 1 {
				return
			}
			if time.Now().After(deadline) {
				_, ended, _ := ts.snapshot()
				t.Fatalf("server ended %v, want one %v", ended, r)
			}
		}
	}
	waitEnded(a, handshake.ReasonRedirected) // the old server saw the acknowledgement
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitEnded(b, handshake.ReasonClientQuit)
	stopA()
	stopB()
	checkNoLeak(t, base)
}

// A Redirect while the application streams ordered events: the events the
// old server had not reported applied go again on the new connection, and
// the zone (shared by both servers, as a cluster's is) drops those it
// applied already: every event is applied exactly once, in order. Before
// event numbering the ones in flight at the switch were lost.
func TestRedirectMidStreamAppliesEventsOnce(t *testing.T) {
	base := runtime.NumGoroutine()
	z := newSharedZone()
	a := startServer(t)
	stopA := sync.OnceFunc(a.Stop)
	defer stopA()
	b := startServerKey(t, &a.key)
	stopB := sync.OnceFunc(b.Stop)
	defer stopB()
	for _, ts := range []*testServer{a, b} {
		ts.mu.Lock()
		ts.zone = z
		ts.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := client.Dial(ctx, a.addr.String(), a.token(7))
	if err != nil {
		t.Fatal(err)
	}
	sent := 0
	send := func(n int, gap time.Duration) {
		for range n {
			if err := s.SendEvent(2, fmt.Appendf(nil, "%05d", sent)); err != nil {
				t.Fatalf("event %d: %v", sent, err)
			}
			sent++
			time.Sleep(gap)
		}
	}
	send(60, 2*time.Millisecond)
	send(10, 0) // a burst still in flight at the Redirect
	if n := a.redirectAll(b); n != 1 {
		t.Fatalf("redirected %d", n)
	}
	send(120, time.Millisecond) // through the switch
	var got []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got = z.log(7)
		if len(got) >= sent && s.Server() == b.addr {
			break
		}
		if time.Now().After(deadline) {
			break
		}
	}
	if s.Stats().Redirects != 1 {
		t.Fatalf("redirects %d", s.Stats().Redirects)
	}
	for i, p := range got {
		if want := fmt.Sprintf("%05d", i); p != want {
			t.Fatalf("applied event %d is %s, want %s (lost, reordered or applied twice)", i, p, want)
		}
	}
	if len(got) != sent {
		t.Fatalf("%d of %d events applied", len(got), sent)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	stopA()
	stopB()
	checkNoLeak(t, base)
}
