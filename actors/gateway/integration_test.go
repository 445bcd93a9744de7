package gateway_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ghostwire/ghostwire/actors/udp"
	"github.com/ghostwire/ghostwire/client"
	"github.com/ghostwire/ghostwire/replication/move"

	"github.com/ghostwire/ghostwire/actors/gateway"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/netsim"
	"github.com/ghostwire/ghostwire/replication/session"
)

// exchange is a client script: once connected, send n ordered events on
// lane 1, one every interval, then wait until all n echoes came back, then
// close.
func exchange(n int, interval time.Duration, closeAfter *sync.WaitGroup) script {
	var next time.Duration
	closing := false
	return func(tc *tclient, now time.Duration) {
		if tc.c.State() != handshake.StateConnected {
			return
		}
		if tc.sentAt < n && now >= next {
			if err := tc.c.SendEvent(1, []byte(fmt.Sprintf("p%d-e%d", tc.id, tc.sentAt))); err == nil {
				tc.sentAt++
				next = now + interval
			}
		}
		// Close once every echo and the first ghosts (the zone's view) arrived.
		if !closing && tc.sentAt == n && len(tc.received()) >= n && tc.maxGhosts > 0 {
			closing = true
			if closeAfter != nil {
				closeAfter.Done()
				closeAfter.Wait() // every client got its echoes before anyone leaves
			}
			if tc.up != nil {
				// The goodbye goes over a clean link: losing all five
				// Disconnect copies (0.2^5) correctly ends in a server-side
				// timeout 10 s later, which this test must not mistake for
				// the connection failing during the exchange.
				clean := netsim.Config{Latency: 100 * time.Millisecond}
				_ = tc.up.SetConfig(clean)
				_ = tc.down.SetConfig(clean)
			}
			tc.c.Close(now)
		}
	}
}

func wantEvents(id uint64, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("p%d-e%d", id, i)
	}
	return out
}

func runClients(t *testing.T, r *rig, n, events int, link *netsim.Config, timeout time.Duration) []*tclient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	clients := make([]*tclient, n)
	for i := range clients {
		id := uint64(1000 + i)
		clients[i] = newClient(t, id, r.token(t, id), r.gw.PublicAddr(), r.start, link, id)
	}
	var barrier sync.WaitGroup
	barrier.Add(n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, tc := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = tc.run(ctx, exchange(events, 20*time.Millisecond, &barrier))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("client %d: %T %v state %v got %d/%d (stats %+v)", clients[i].id, err, err, clients[i].c.State(), len(clients[i].received()), clients[i].sentAt, clients[i].c.Stats().Counters)
		}
	}
	return clients
}

// An Input lost between a connection and its zone (NATS is at most once:
// a batch in flight when the server restarts is gone) leaves the zone
// waiting at a gap. The connection notices that the zone stopped reporting
// its moves applied and sends them again, so every move is applied, once,
// in order, and the client's window never fills.
func TestConnResendsMovesTheZoneNeverGot(t *testing.T) {
	defer verifyNoLeaks(t)()
	r := newRig(t, nil)
	r.zst.mu.Lock()
	r.zst.loseNth = 5
	r.zst.mu.Unlock()
	const n = 4
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	clients := make([]*tclient, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range clients {
		id := uint64(2000 + i)
		clients[i] = newClient(t, id, r.token(t, id), r.gw.PublicAddr(), r.start, nil, id)
		tc := clients[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			var caughtUp time.Duration
			errs[i] = tc.run(ctx, func(tc *tclient, now time.Duration) {
				at := time.Duration(tc.connectedAt.Load())
				if tc.c.State() != handshake.StateConnected || at == 0 || now < at+1500*time.Millisecond {
					return
				}
				// Play on until the zone acknowledged everything sent
				// before the last 100 ms, then leave.
				if tc.c.LastAck()+3 >= tc.c.Stats().Moves.Added && caughtUp == 0 {
					caughtUp = now
				}
				if caughtUp != 0 && now >= caughtUp+100*time.Millisecond {
					tc.c.Close(now)
				}
			})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("client %d: %v (acked %d of %d moves)", clients[i].id, err, clients[i].c.LastAck(), clients[i].c.Stats().Moves.Added)
		}
	}
	r.zst.mu.Lock()
	lost, bad := r.zst.inputsLost, r.zst.badOrder
	r.zst.mu.Unlock()
	if lost != n {
		t.Fatalf("the zone lost %d inputs, want one per client (%d): the test did not lose anything", lost, n)
	}
	if bad != 0 {
		t.Fatalf("%d moves applied out of sequence", bad)
	}
	for _, tc := range clients {
		if st := tc.c.Stats().Moves; st.Dropped != 0 || st.Held != 0 {
			t.Errorf("client %d: %d moves dropped, %d samples held: the gap was not filled in time", tc.id, st.Dropped, st.Held)
		}
	}
	if s := r.gw.Stats(); s.MovesResent == 0 {
		t.Fatal("no move resent")
	}
	eventually(t, 10*time.Second, "every connection closed", func() bool { return r.gw.Stats().Conns == 0 })
	r.close(t)
}

// 200 clients (the client library, client.Dial) connect over real UDP,
// exchange events both ways and disconnect cleanly; every event arrives
// exactly once, in order, at the zone and back at the client, and every
// client sees its ghosts.
//
// What it checks is correctness with many sessions at once (handshakes,
// routing by connection, ordered events, moves handed to the zone, clean
// closes, every datagram accounted for), not how fast: timeouts have their
// own tests (lifecycle_test.go). The clients run in the test's process,
// and at the default rates (30 moves and packets a second each, 6,000 a
// second in all, each decoded under -race) they starved the gateway's two
// shard goroutines on a loaded host, which fell more than the token's 10 s
// timeout behind: sessions timed out at both ends, a liveness failure the
// test does not mean to measure. So the clients send 10 moves a second
// (as cheap as the property allows: every session still moves, sends its
// events and gets echoes and ghosts), the tokens give sessions 60 s of
// silence, and every wait is on its condition with a bound far above a
// quiet run's (≈ 2 s).
//
// At most dialsAtOnce clients dial at a time (each session, once up, plays
// on beside the others). A dial's bound is the client's ConnectTimeout
// (10 s) for its own handshake; with all 200 dialing at once it covered
// the whole storm's instead (each client resending its request every
// 0.1-1 s, the connections' inbound queues overflowing), behind the
// sessions already up. At load 20-25 under -race 3 of 10 runs failed so
// (2026-12-01): 113, 91 and 14 of 200 "connect timed out", the gateway's
// two shards at 85-176 rounds in 18-66 s and 487-3,753 datagrams dropped
// at full inbound queues; the fewest connected in a failing run's first
// 10 s was 87.
func TestTwoHundredClients(t *testing.T) {
	defer verifyNoLeaks(t)()
	r := newRig(t, nil)
	defer r.close(t) // before the leak check, however the test ends
	const n, events, dialsAtOnce = 200, 10, 32
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cheap := session.DefaultClientConfig()
	cheap.Moves.InputRate, cheap.SendRate = 10, 10
	var wg sync.WaitGroup
	errs := make(chan error, n)
	dialing := make(chan struct{}, dialsAtOnce)
	for i := range n {
		id := uint64(1000 + i)
		tok := r.tokenTimeout(t, id, time.Minute)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := playGated(ctx, dialing, r.gw.PublicAddr().String(), tok, id, events, client.WithConfig(cheap)); err != nil {
				errs <- fmt.Errorf("client %d: %w", id, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.Fatalf("gateway: %+v; gateway socket drops %s", r.gw.Stats(), udp.KernelDrops(r.gw.PublicAddr().Port()))
	}
	// Every client sent its goodbye: a connection still open after 30 s lost
	// every copy of it (it would close by timeout) — say so, with the
	// socket's drops (a starved host overflows the receive buffer).
	for deadline := time.Now().Add(30 * time.Second); r.gw.Stats().Conns != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("connections still open 30 s after every client quit: gateway %+v; gateway socket drops %s",
				r.gw.Stats(), udp.KernelDrops(r.gw.PublicAddr().Port()))
		}
	}
	eventually(t, 30*time.Second, "the zone saw every player leave", func() bool {
		r.zst.mu.Lock()
		defer r.zst.mu.Unlock()
		return r.zst.leaves[handshake.ReasonClientQuit] == n
	})
	s := r.gw.Stats()
	if s.Closed[handshake.ReasonClientQuit] != n || s.Granted != n || s.Verified != n {
		t.Errorf("granted %d verified %d closed %v, want %d each by ClientQuit", s.Granted, s.Verified, s.Closed, n)
	}
	r.zst.mu.Lock()
	for i := range n {
		id := uint64(1000 + i)
		if got, want := r.zst.events[id], wantEvents(id, events); !slices.Equal(got, want) {
			t.Errorf("zone got %v from %d, want %v", got, id, want)
		}
		if r.zst.moves[id] == 0 {
			t.Errorf("zone applied no move of %d", id)
		}
	}
	if r.zst.joins != n || r.zst.badOrder != 0 {
		t.Errorf("zone: joins %d out-of-order moves %d", r.zst.joins, r.zst.badOrder)
	}
	r.zst.mu.Unlock()
	checkAccounting(t, r.gw.Stats)
}

// playOnce is one player's session through the client library: dial, walk,
// send events on lane 1, wait for every echo and a ghost, close.
func playOnce(ctx context.Context, addr string, tok []byte, id uint64, events int, opts ...client.Option) error {
	return playGated(ctx, nil, addr, tok, id, events, opts...)
}

// playGated is playOnce dialing only while it holds a place in dialing (a
// semaphore; nil: no gate), given back once the dial returns.
func playGated(ctx context.Context, dialing chan struct{}, addr string, tok []byte, id uint64, events int, opts ...client.Option) error {
	if dialing != nil {
		select {
		case dialing <- struct{}{}:
		case <-ctx.Done():
			return fmt.Errorf("waiting to dial: %w", ctx.Err())
		}
	}
	start := time.Now()
	s, err := client.Dial(ctx, addr, tok, opts...)
	if dialing != nil {
		<-dialing
	}
	if err != nil {
		return err
	}
	dialed := time.Since(start)
	defer s.Close(context.Background())
	if err := s.SetInput(move.Move{Forward: 60, Yaw: uint16(id * 100)}); err != nil {
		return err
	}
	want := wantEvents(id, events)
	for _, e := range want {
		if err := s.SendEvent(1, []byte(e)); err != nil {
			return err
		}
	}
	var got []string
	var view []client.GhostView
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for len(got) < events || len(view) == 0 {
		select {
		case e, ok := <-s.Events():
			if !ok {
				st := s.Stats()
				return fmt.Errorf("session ended after %v (dial %v, %d/%d echoes, %d ghosts; socket drops %s; in %d accepted %d out %d, rtt %v): %w",
					time.Since(start), dialed, len(got), events, len(view), udp.KernelDrops(uint16(s.LocalAddr().(*net.UDPAddr).Port)),
					st.PacketsIn, st.Accepted, st.PacketsOut, st.RTT, s.Err())
			}
			got = append(got, string(e.Payload))
		case <-tick.C:
			// Only until the first ghosts: 200 clients taking View every
			// 10 ms for the whole exchange (20,000 calls a second under
			// -race, each under the session's lock) starved the gateway's
			// two shard goroutines in the same process on a loaded host;
			// they fell over 10 s behind, and sessions timed out at both
			// ends with their datagrams queued.
			if len(view) == 0 {
				view = s.View(view[:0])
			}
		case <-ctx.Done():
			return fmt.Errorf("got %d/%d echoes, %d ghosts: %w", len(got), events, len(view), ctx.Err())
		}
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("echoes %v, want %v", got, want)
	}
	return s.Close(ctx)
}

// verifyNoLeaks notes the goroutines running when a test starts and
// returns the check that the test left none behind: defer verifyNoLeaks(t)().
// (The snapshot must be the start's: taken in the deferred call, it would
// ignore every goroutine the test leaked.) protoactor's dead-letter log
// throttle is exempt: it is a library goroutine that ends by itself one
// second after the last dead letter (a zone's tick message racing a
// connection's stop is one).
func verifyNoLeaks(t *testing.T) func() {
	before := goleak.IgnoreCurrent()
	return func() {
		goleak.VerifyNone(t, before,
			goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
	}
}

// checkAccounting: every datagram read has exactly one fate.
//
// The counters are read while datagrams may still come in (a closed
// client's Disconnect copies, 25 ms apart): one read between a datagram's
// count and its fate's is off by one. So it waits, up to 5 s, for a read
// in which they agree; a datagram with no fate never lets them.
func checkAccounting(t *testing.T, stats func() gateway.Stats) {
	t.Helper()
	var s gateway.Stats
	var fates uint64
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		s = stats()
		fates = s.Garbage + s.Unexpected + s.UnknownConn + s.HandshakeLimited + s.Handshakes + s.Routed + s.InboundDropped
		if fates == s.DatagramsIn || time.Now().After(deadline) {
			break
		}
	}
	if fates != s.DatagramsIn {
		t.Errorf("datagrams in %d, fates %d: %+v", s.DatagramsIn, fates, s)
	}
	// Every read and write went through a batched system call that
	// carried at least one datagram.
	if s.DatagramsIn > 0 && (s.ReadBatches == 0 || s.ReadBatches > s.DatagramsIn) {
		t.Errorf("%d read batches for %d datagrams in", s.ReadBatches, s.DatagramsIn)
	}
	if s.DatagramsOut > 0 && (s.WriteBatches == 0 || s.WriteBatches > s.DatagramsOut) {
		t.Errorf("%d write batches for %d datagrams out", s.WriteBatches, s.DatagramsOut)
	}
}

// Through an impaired link (netsim on each client's socket, both ways: 20%
// loss, 100 ms ± 30 ms, 5% reordered, 1% duplicated) every guaranteed event
// arrives exactly once and in order, both ways, and no connection times out.
func TestImpairedLinkDeliversExactlyOnceInOrder(t *testing.T) {
	defer verifyNoLeaks(t)()
	r := newRig(t, nil)
	link := &netsim.Config{
		Loss: 0.20, Latency: 100 * time.Millisecond, Jitter: 30 * time.Millisecond,
		Reorder: 0.05, Duplicate: 0.01, AllowJitterReorder: true,
	}
	const n, events = 16, 40
	clients := runClients(t, r, n, events, link, 60*time.Second)
	var lost uint64
	for _, tc := range clients {
		if got, want := tc.received(), wantEvents(tc.id, events); !slices.Equal(got, want) {
			t.Fatalf("client %d echoes = %v, want %v", tc.id, got, want)
		}
		lost += tc.up.Stats().Dropped.Loss + tc.down.Stats().Dropped.Loss
	}
	if lost == 0 {
		t.Fatal("the link lost nothing: the test did not test loss")
	}
	eventually(t, 10*time.Second, "every connection closed", func() bool { return r.gw.Stats().Conns == 0 })
	s := r.gw.Stats()
	if s.Closed[handshake.ReasonTimeout] != 0 {
		t.Errorf("%d connections timed out", s.Closed[handshake.ReasonTimeout])
	}
	r.zst.mu.Lock()
	for _, tc := range clients {
		if got, want := r.zst.events[tc.id], wantEvents(tc.id, events); !slices.Equal(got, want) {
			t.Errorf("zone got %v from %d, want %v", got, tc.id, want)
		}
	}
	if r.zst.badOrder != 0 {
		t.Errorf("zone saw %d moves out of sequence", r.zst.badOrder)
	}
	r.zst.mu.Unlock()
	checkAccounting(t, r.gw.Stats)
	r.close(t)
}
