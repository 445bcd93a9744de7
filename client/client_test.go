package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/udp"
	"github.com/ghostwire/ghostwire/client"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/netsim"
	"github.com/ghostwire/ghostwire/replication/session"
)

// checkNoLeak waits for the goroutine count to settle back to base.
func checkNoLeak(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines leaked: %d > %d\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// collect reads events until want arrived or the timeout passed.
func collect(t *testing.T, s *client.Session, want int, timeout time.Duration) []client.Event {
	t.Helper()
	var got []client.Event
	deadline := time.After(timeout)
	for len(got) < want {
		select {
		case e, ok := <-s.Events():
			if !ok {
				t.Fatalf("events closed after %d of %d: %v", len(got), want, s.Err())
			}
			got = append(got, e)
		case <-deadline:
			t.Fatalf("%d of %d events after %v (stats %+v)", len(got), want, timeout, s.Stats().Counters)
		}
	}
	return got
}

// checkEchoes asserts got holds the echo of payload(lane, i) for every lane
// and i < n, each once, in order per lane.
func checkEchoes(t *testing.T, got []client.Event, prefix string, lanes, n int) {
	t.Helper()
	next := make([]int, lanes)
	for _, e := range got {
		if e.Class != event.Ordered || e.Lane >= lanes {
			t.Fatalf("unexpected event %+v", e)
		}
		want := echoOf(fmt.Appendf(nil, "%s/%d/%d", prefix, e.Lane, next[e.Lane]))
		if !bytes.Equal(e.Payload, want) {
			t.Fatalf("lane %d: got %q, want %q", e.Lane, e.Payload, want)
		}
		next[e.Lane]++
	}
	for l, c := range next {
		if c != n {
			t.Fatalf("lane %d: %d echoes, want %d", l, c, n)
		}
	}
}

func TestDialEventsControlClose(t *testing.T) {
	base := runtime.NumGoroutine()
	ts := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := client.Dial(ctx, ts.addr.String(), ts.token(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetInput(move.Move{Forward: 127}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if err := s.SendEvent(i%2, fmt.Appendf(nil, "c/%d/%d", i%2, i/2)); err != nil {
			t.Fatal(err)
		}
	}
	checkEchoes(t, collect(t, s, 10, 5*time.Second), "c", 2, 5)
	// Walking forward at full stick: the predicted control object moves, and
	// the server acknowledges the moves.
	deadline := time.Now().Add(5 * time.Second)
	for s.Control().Pos[2] < 1 || s.Stats().Moves.Acked < 10 {
		if time.Now().After(deadline) {
			t.Fatalf("control at %v, %d moves acked", s.Control().Pos, s.Stats().Moves.Acked)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := s.Stats(); st.RTT <= 0 || st.BytesIn == 0 || st.BytesOut == 0 {
		t.Fatalf("stats %+v", st)
	}
	// The NPCs the zone shows every player arrive as ghosts, drawn on their
	// circles (radius 20 m) between received states.
	var views []client.GhostView
	waitFor(t, func() bool { views = s.View(views[:0]); return len(views) == npcs })
	time.Sleep(300 * time.Millisecond) // a few states each: interpolation, not a single held state
	views = s.View(views[:0])
	for _, v := range views {
		if r := math.Hypot(v.Pose.Pos[0], v.Pose.Pos[2]); v.Entity < 500 || v.Entity >= 500+npcs || math.Abs(r-20) > 0.5 {
			t.Fatalf("ghost %d drawn at %v (radius %.2f, mode %v)", v.Entity, v.Pose.Pos, r, v.Mode)
		}
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(s.Err(), client.ErrClosed) {
		t.Fatalf("Err after Close: %v", s.Err())
	}
	if _, ok := <-s.Events(); ok {
		t.Fatal("events channel open after Close")
	}
	waitFor(t, func() bool { _, e, _ := ts.snapshot(); return e[handshake.ReasonClientQuit] == 1 })
	ts.Stop()
	checkNoLeak(t, base)
}

// waitFor polls cond for up to 15 s: generous, because the race detector on
// a loaded 2-core host stretches 60 clients' closing handshakes to seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 15 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestManyClients(t *testing.T) {
	const clients, lanes, per = 60, 3, 5
	base := runtime.NumGoroutine()
	ts := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			s, err := client.Dial(ctx, ts.addr.String(), ts.token(uint64(100+i)))
			if err != nil {
				errs <- err
				return
			}
			for k := 0; k < lanes*per; k++ {
				s.SendEvent(k%lanes, fmt.Appendf(nil, "p%d/%d/%d", i, k%lanes, k/lanes))
			}
			deadline := time.After(10 * time.Second)
			var got []client.Event
			for len(got) < lanes*per {
				select {
				case e := <-s.Events():
					got = append(got, e)
				case <-deadline:
					errs <- fmt.Errorf("client %d: %d echoes", i, len(got))
					s.Close(ctx)
					return
				}
			}
			next := make([]int, lanes)
			for _, e := range got {
				if want := echoOf(fmt.Appendf(nil, "p%d/%d/%d", i, e.Lane, next[e.Lane])); !bytes.Equal(e.Payload, want) {
					errs <- fmt.Errorf("client %d: %q, want %q", i, e.Payload, want)
				}
				next[e.Lane]++
			}
			if err := s.Close(ctx); err != nil {
				errs <- err
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		n, e, _ := ts.snapshot()
		if n == 0 && e[handshake.ReasonClientQuit] == clients {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 15 s: %d connections open, ended by reason %v, want 0 open and %d ClientQuit (server socket drops %s)", n, e, clients, udp.KernelDrops(ts.addr.Port()))
		}
	}
	ts.Stop()
	checkNoLeak(t, base)
}

func TestImpairedLinkThroughWrapper(t *testing.T) {
	const lanes, per = 2, 25
	base := runtime.NumGoroutine()
	ts := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	impaired := netsim.Config{Loss: 0.2, Latency: 100 * time.Millisecond, Jitter: 30 * time.Millisecond,
		Reorder: 0.05, Duplicate: 0.01, AllowJitterReorder: true}
	var sims []*simConn
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ab, ba := impaired, impaired
			ab.Seed, ba.Seed = uint64(i+1), uint64(i+101)
			s, err := client.Dial(ctx, ts.addr.String(), ts.token(uint64(200+i)),
				client.WithPacketConn(func(pc net.PacketConn) net.PacketConn {
					sc := newSimConn(pc, ab, ba)
					mu.Lock()
					sims = append(sims, sc)
					mu.Unlock()
					return sc
				}))
			if err != nil {
				t.Error(err)
				return
			}
			s.SetInput(move.Move{Forward: 60, Strafe: int8(i * 10)})
			for k := 0; k < lanes*per; k++ { // paced over ~3 s: a few hundred packets
				s.SendEvent(k%lanes, fmt.Appendf(nil, "i%d/%d/%d", i, k%lanes, k/lanes))
				time.Sleep(60 * time.Millisecond)
			}
			checkEchoes(t, collect(t, s, lanes*per, 20*time.Second), fmt.Sprintf("i%d", i), lanes, per)
			if s.Err() != nil {
				t.Errorf("client %d: %v", i, s.Err())
			}
			s.Close(ctx)
		}(i)
	}
	wg.Wait()
	mu.Lock()
	var loss, reordered, dup uint64
	for _, sc := range sims {
		sc.mu.Lock()
		for _, l := range []*netsim.Link{sc.pipe.AtoB, sc.pipe.BtoA} {
			st := l.Stats()
			loss, reordered, dup = loss+st.Dropped.Loss, reordered+st.Reordered, dup+st.Duplicated
		}
		sc.mu.Unlock()
	}
	mu.Unlock()
	if loss == 0 || reordered == 0 || dup == 0 {
		t.Errorf("the link was not impaired: %d lost, %d reordered, %d duplicated", loss, reordered, dup)
	}
	_, ended, _ := ts.snapshot()
	if ended[handshake.ReasonTimeout] != 0 {
		t.Fatalf("timeouts on the impaired link: %v", ended)
	}
	ts.Stop()
	checkNoLeak(t, base)
}

func TestDialRefusedAndCancelled(t *testing.T) {
	base := runtime.NumGoroutine()
	ts := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	// Wrong protocol id: the server says why.
	_, err := client.Dial(ctx, ts.addr.String(), ts.token(1, func(p *handshake.TokenParams) { p.ProtocolID = 5 }))
	var de *session.DeniedError
	if !errors.As(err, &de) || de.Reason != handshake.ReasonWrongProtocol || !errors.Is(err, handshake.ErrWrongProtocol) {
		t.Fatalf("dial with a foreign token: %v", err)
	}
	// A token used once does not open a second session.
	tok := ts.token(2)
	s, err := client.Dial(ctx, ts.addr.String(), tok)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return s.Stats().Accepted > 1 }) // the server has seen our first packet
	time.Sleep(50 * time.Millisecond)
	if _, err := client.Dial(ctx, ts.addr.String(), tok); !errors.Is(err, handshake.ErrTokenUsed) {
		t.Fatalf("second dial with one token: %v", err)
	}
	s.Close(ctx)
	// Not a listed server.
	if _, err := client.Dial(ctx, "127.0.0.1:1", ts.token(3)); !errors.Is(err, handshake.ErrWrongServer) {
		t.Fatalf("dial to an unlisted address: %v", err)
	}
	ts.Stop()

	// Nobody answers: the context ends the dial.
	dead := startServer(t)
	dead.Stop() // its port is closed now
	cctx, ccancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer ccancel()
	// Without the context the dial would end in ErrConnectTimeout after 10 s.
	_, err = client.Dial(cctx, dead.addr.String(), dead.token(4))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dial to a dead port: %v", err)
	}
	checkNoLeak(t, base)
}

func TestServerKickEndsSession(t *testing.T) {
	base := runtime.NumGoroutine()
	ts := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := client.Dial(ctx, ts.addr.String(), ts.token(9))
	if err != nil {
		t.Fatal(err)
	}
	ts.kickPlayer(9)
	select {
	case <-s.Done():
	case <-ctx.Done():
		t.Fatal("session still up after the kick")
	}
	var de *session.DisconnectError
	if !errors.As(s.Err(), &de) || de.Reason != handshake.ReasonKicked {
		t.Fatalf("Err %v, want a DisconnectError(Kicked)", s.Err())
	}
	if err := s.SendEvent(0, []byte("x")); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("SendEvent after the kick: %v", err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Close with a context that is already over: the socket closes at once.
	s2, err := client.Dial(ctx, ts.addr.String(), ts.token(10))
	if err != nil {
		t.Fatal(err)
	}
	over, stop := context.WithCancel(context.Background())
	stop()
	if err := s2.Close(over); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close with a cancelled context: %v", err)
	}
	select {
	case <-s2.Done():
	default:
		t.Fatal("Close returned before the session goroutine ended")
	}
	ts.Stop()
	checkNoLeak(t, base)
}
