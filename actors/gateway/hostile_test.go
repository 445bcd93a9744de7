package gateway_test

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/conn"
	"github.com/ghostwire/ghostwire/actors/gateway"
	"github.com/ghostwire/ghostwire/actors/tokenkey"
	"github.com/ghostwire/ghostwire/replication/handshake"
)

// Bounded hostile traffic at a live gateway (loopback, fixed counts) while
// legitimate clients play: random garbage, invalid kinds, truncated packets,
// forged connection ids, replayed and bit-flipped copies of real packets,
// expired and reused tokens, server-only packet kinds. Nothing panics, every
// hostile datagram is counted under a rejection, none is accepted, and the
// legitimate clients finish their exchange exactly as without the attack.
// (The million bit-flips run against the pure path: TestBitFlipsNeverAuthenticate.)
func TestHostileTraffic(t *testing.T) {
	defer verifyNoLeaks(t)()
	r := newRig(t, nil)
	const n, events = 8, 60
	const replaySources = 4 // the newest datagrams of each client the attacker replays
	// attackBurst bounds the attacker's datagrams not yet counted: half a
	// connection's inbox (conn.DefaultMaxInbound), room for its own
	// client's datagrams beside them.
	const attackBurst = conn.DefaultMaxInbound / 2

	// Legitimate clients, each recording its long-form packets (sent until
	// the server's first authenticated packet) for the attacker to truncate
	// and bit-flip, and its newest datagrams for the attacker to replay.
	var capMu sync.Mutex
	var captured [][]byte
	recent := make([][][]byte, n) // a client's last datagrams, owned by its goroutine
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	clients := make([]*tclient, n)
	tokens := make([][]byte, n)
	for i := range clients {
		id := uint64(2000 + i)
		tokens[i] = r.token(t, id)
		tc := newClient(t, id, tokens[i], r.gw.PublicAddr(), r.start, nil, id)
		tc.onSend = func(p []byte) {
			k, err := handshake.Classify(p)
			if err == nil && k == handshake.KindRouted {
				capMu.Lock()
				captured = append(captured, slices.Clone(p))
				capMu.Unlock()
			}
			if err == nil && (k == handshake.KindRouted || k == handshake.KindData) {
				if len(recent[i]) == replaySources {
					recent[i] = recent[i][1:]
				}
				recent[i] = append(recent[i], slices.Clone(p))
			}
		}
		clients[i] = tc
	}
	// Closed when the attack is over. A client checks it without waiting:
	// blocked inside its run loop it would stop sending, reading and
	// acknowledging, and the attack would meet a frozen connection.
	attackOver := make(chan struct{})
	// While still is set the clients send nothing, so the datagrams the
	// attacker replays stay within reach of their connections' truncated
	// sequence numbers (see the replay phase). Each client, once it has
	// nothing in flight, leaves its newest datagrams in routed (long)
	// form in fresh and says so on quiet.
	var still atomic.Bool
	var quiet sync.WaitGroup
	fresh := make([][][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, tc := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Keep sending events through the attack, close only after it.
			var next time.Duration
			closing, quietSaid := false, false
			errs[i] = tc.run(ctx, func(tc *tclient, now time.Duration) {
				if tc.c.State() != handshake.StateConnected {
					return
				}
				if tc.hold = still.Load(); tc.hold {
					if st := tc.c.Stats().Notify; !quietSaid && st.Sent == st.Delivered+st.Dropped {
						quietSaid = true
						for _, p := range recent[i] {
							if k, _ := handshake.Classify(p); k == handshake.KindData {
								p = append(handshake.AppendRouted(nil, tc.c.ID()), p...)
							}
							fresh[i] = append(fresh[i], p)
						}
						quiet.Done()
					}
					return
				}
				if tc.sentAt < events && now >= next {
					if tc.c.SendEvent(1, []byte(wantEvents(tc.id, events)[tc.sentAt])) == nil {
						tc.sentAt++
						next = now + 25*time.Millisecond
					}
				}
				if !closing && tc.sentAt == events && len(tc.received()) >= events {
					select {
					case <-attackOver:
						closing = true
						tc.c.Close(now)
					default:
					}
				}
			})
		}()
	}
	eventually(t, 20*time.Second, "legitimate clients verified", func() bool { return r.gw.Stats().Verified == n })
	capMu.Lock()
	long := slices.Clone(captured)
	capMu.Unlock()
	if len(long) == 0 {
		t.Fatal("no long-form packet captured to replay")
	}
	time.Sleep(100 * time.Millisecond) // every captured packet has reached the server
	before := r.gw.Stats()

	// The attacker: one socket on loopback, fixed counts, paced by the
	// gateway's own count so no queue drops anything (the test counts
	// every datagram): every attackBurst datagrams it waits until the
	// gateway has given each one its fate. A fixed rate (it was 50 per
	// 2 ms) overflowed a connection's inbox (then 64 datagrams) when a loaded
	// host ran the connection actors late (InboundDropped).
	atk, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	defer atk.Close()
	rng := rand.New(rand.NewPCG(7, 7))
	sent := 0
	send := func(p []byte) {
		if _, err := atk.WriteToUDPAddrPort(p, r.gw.Addr()); err != nil {
			t.Fatal(err)
		}
		sent++
		if sent%attackBurst == 0 {
			caughtUp(t, 10*time.Second, func() bool {
				return hostileFates(r.gw.Stats())-hostileFates(before) >= uint64(sent)
			})
		}
	}
	randBytes := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	const (
		nGarbage, nBadKind, nTrunc, nForged, nReplay, nFlip, nServerKinds = 3000, 1000, 1000, 1000, 1000, 1000, 200
	)
	for range nGarbage {
		send(randBytes(1 + rng.IntN(1200)))
	}
	for range nBadKind {
		b := randBytes(1 + rng.IntN(1200))
		b[0] = 0xFF // control kind 63: no such packet
		send(b)
	}
	for range nTrunc {
		p := long[rng.IntN(len(long))]
		send(p[:rng.IntN(len(p))+0])
	}
	for range nForged {
		b := append([]byte{handshake.KindRouted.ControlByte()}, randBytes(handshake.ConnIDSize+20+rng.IntN(200))...)
		send(b)
	}
	// Replays: copies of the clients' newest datagrams, each in the long
	// form (the routing prefix is not authenticated: anyone may add it).
	// A connection reconstructs a datagram's sequence number from its low
	// bits (7 while the peer acknowledges promptly), so a copy that
	// arrives about 64 or more sequence numbers late is
	// no longer recognisable as a replay: it opens under the wrong nonce
	// and counts as AuthFailed (docs/protocol.md §3.6, maximum reorder
	// depth). Replaying the handshake-time packets was therefore a replay
	// only as long as the clients had sent fewer than about 60 packets by
	// the time the gateway read the copies — not so under load. So the
	// clients hold still (reading, not sending) from when their newest
	// datagrams are taken until the gateway has read every copy: each
	// copy is then exactly a duplicate, whatever the load.
	eventually(t, 10*time.Second, "the gateway read the attack so far", func() bool {
		return hostileFates(r.gw.Stats())-hostileFates(before) >= uint64(sent)
	})
	quiet.Add(n)
	still.Store(true)
	waitGroup(t, &quiet, 10*time.Second, "legitimate clients quiet with nothing in flight")
	for i, f := range fresh {
		if len(f) == 0 {
			t.Fatalf("legitimate client %d sent nothing to replay", clients[i].id)
		}
	}
	preReplay, replayFrom := r.gw.Stats(), sent
	for range nReplay {
		f := fresh[rng.IntN(n)]
		send(f[rng.IntN(len(f))])
	}
	eventually(t, 10*time.Second, "the gateway read the replays", func() bool {
		return hostileFates(r.gw.Stats())-hostileFates(preReplay) >= uint64(sent-replayFrom)
	})
	postReplay := r.gw.Stats()
	still.Store(false)
	if got := postReplay.Replayed - preReplay.Replayed; got != nReplay || hostileFates(postReplay)-hostileFates(preReplay) != nReplay {
		t.Errorf("replays: %d counted as Replayed, want all %d\nduring the replays:%s", got, nReplay, statsDiff(preReplay, postReplay))
	}
	for range nFlip {
		p := slices.Clone(long[rng.IntN(len(long))])
		// Flip one bit past the routing prefix, so the packet still reaches
		// the connection and its authentication is what must refuse it.
		bit := 8*(1+handshake.ConnIDSize) + rng.IntN(8*(len(p)-1-handshake.ConnIDSize))
		p[bit/8] ^= 1 << (bit % 8)
		send(p)
	}
	for range nServerKinds {
		id := handshake.TokenID{}
		send(handshake.AppendDenied(nil, handshake.ReasonServerFull, id))
	}
	// Tokens: expired ones, and the legitimate clients' own (already used).
	expired := 0
	for i := range 20 {
		tok, err := handshake.IssueToken(r.key, handshake.TokenParams{
			PlayerID: uint64(9000 + i), ProtocolID: tokenkey.DefaultProtocolID, Expiry: time.Second,
			Timeout: time.Second, ServerAddrs: []netip.AddrPort{r.gw.PublicAddr()},
		}, time.Now().Add(-time.Hour), crand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		send(request(t, tok, r.gw.PublicAddr()))
		expired++
	}
	reused := 0
	for _, tok := range tokens {
		for range 3 {
			send(request(t, tok, r.gw.PublicAddr()))
			reused++
		}
	}
	hostile := sent

	// Wait until the gateway has read everything the attacker sent.
	eventually(t, 10*time.Second, "the gateway read the attack", func() bool {
		s := r.gw.Stats()
		return hostileFates(s)-hostileFates(before) >= uint64(hostile)
	})
	// Snapshot before the legitimate clients leave (their redundant
	// Disconnect copies are rejections too, by design).
	after := r.gw.Stats()
	close(attackOver)
	wg.Wait()

	for i, err := range errs {
		if err != nil {
			t.Errorf("legitimate client %d: %v", clients[i].id, err)
		}
	}
	for _, tc := range clients {
		if got, want := tc.received(), wantEvents(tc.id, events); !slices.Equal(got, want) {
			t.Errorf("legitimate client %d got %v, want %v", tc.id, got, want)
		}
	}
	r.zst.mu.Lock()
	for _, tc := range clients {
		if got, want := r.zst.events[tc.id], wantEvents(tc.id, events); !slices.Equal(got, want) {
			t.Errorf("zone got %v from %d, want %v: a hostile packet was accepted", got, tc.id, want)
		}
	}
	if r.zst.badOrder != 0 {
		t.Errorf("zone saw %d moves out of sequence", r.zst.badOrder)
	}
	r.zst.mu.Unlock()

	d := func(f func(gateway.Stats) uint64) uint64 { return f(after) - f(before) }
	if got := hostileFates(after) - hostileFates(before); got != uint64(hostile) {
		t.Errorf("hostile datagrams %d, counted under rejections %d\nbefore %+v\nafter %+v", hostile, got, before, after)
	}
	for _, c := range []struct {
		name string
		got  uint64
		min  uint64
	}{
		{"Garbage (invalid kinds at least)", d(func(s gateway.Stats) uint64 { return s.Garbage }), nBadKind},
		{"UnknownConn (forged ids at least)", d(func(s gateway.Stats) uint64 { return s.UnknownConn }), nForged},
		{"Unexpected (server-only kinds)", d(func(s gateway.Stats) uint64 { return s.Unexpected }), nServerKinds},
		{"Replayed (replays at least)", d(func(s gateway.Stats) uint64 { return s.Replayed }), nReplay},
		{"connection rejections (replays + flips)", d(connRejected), nReplay + nFlip},
		{"Denied TokenExpired", after.Denied[handshake.ReasonTokenExpired] - before.Denied[handshake.ReasonTokenExpired], uint64(expired)},
		{"Denied TokenUsed", after.Denied[handshake.ReasonTokenUsed] - before.Denied[handshake.ReasonTokenUsed], uint64(reused)},
	} {
		if c.got < c.min {
			t.Errorf("%s: %d, want ≥ %d\nduring the attack:%s", c.name, c.got, c.min, statsDiff(before, after))
		}
	}
	if after.Moved != 0 || after.Granted != n || after.ProtocolErrors != 0 || after.InboundDropped != 0 {
		t.Errorf("moved %d granted %d protocol errors %d inbound drops %d: a hostile packet got through or the pacing failed",
			after.Moved, after.Granted, after.ProtocolErrors, after.InboundDropped)
	}
	eventually(t, 5*time.Second, "every connection closed", func() bool { return r.gw.Stats().Conns == 0 })
	if s := r.gw.Stats(); s.Closed[handshake.ReasonClientQuit] != n {
		t.Errorf("closed %v, want %d by ClientQuit", s.Closed, n)
	}
	checkAccounting(t, r.gw.Stats)
	r.close(t)
}

func connRejected(s gateway.Stats) uint64 {
	return s.AuthFailed + s.Replayed + s.WrongConn + s.BadHeader + s.AfterClose + s.ConnGarbage + s.ConnUnexpected
}

// hostileFates sums every fate a hostile datagram can have: rejected at the
// gateway, refused by the handshake, or routed and rejected by a connection.
func hostileFates(s gateway.Stats) uint64 {
	return s.Garbage + s.Unexpected + s.UnknownConn + s.HandshakeLimited + s.Handshakes + s.InboundDropped + connRejected(s)
}

// request is the connect request a client with tok sends.
func request(t *testing.T, tok []byte, server netip.AddrPort) []byte {
	t.Helper()
	c, err := handshake.NewClient(tok, server)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.AppendRequest(nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// statsDiff lists the counters that changed from before to after, for a
// failure message: which rejection the datagrams actually landed in.
func statsDiff(before, after gateway.Stats) string {
	var b strings.Builder
	bv, av := reflect.ValueOf(before), reflect.ValueOf(after)
	for i := range av.NumField() {
		name := av.Type().Field(i).Name
		switch f := av.Field(i); f.Kind() {
		case reflect.Uint64:
			if d := f.Uint() - bv.Field(i).Uint(); d != 0 {
				fmt.Fprintf(&b, " %s+%d", name, d)
			}
		case reflect.Map:
			for _, k := range f.MapKeys() {
				old := uint64(0)
				if v := bv.Field(i).MapIndex(k); v.IsValid() {
					old = v.Uint()
				}
				if d := f.MapIndex(k).Uint() - old; d != 0 {
					fmt.Fprintf(&b, " %s[%v]+%d", name, k, d)
				}
			}
		}
	}
	return b.String()
}

// waitGroup waits for wg, failing the test after d.
func waitGroup(t *testing.T, wg *sync.WaitGroup, d time.Duration, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
}

// caughtUp waits for cond, polling often (the attacker's pacing calls it
// every few dozen datagrams), failing the test after d.
func caughtUp(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for the gateway to count the attack", d)
		}
		time.Sleep(200 * time.Microsecond)
	}
}
