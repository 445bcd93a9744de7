package swarm

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/metrics"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/session"
)

func TestTruthPositions(t *testing.T) {
	var tr truth
	tr.reset(77)
	if tr.session.Load() != 77 {
		t.Fatal("session not published")
	}
	for s := uint64(1); s <= 1000; s++ {
		tr.putPos(s, float32(s), -float32(s))
	}
	if x, z, ok := tr.posAt(1000); !ok || x != 1000 || z != -1000 {
		t.Fatalf("posAt(1000) = %v %v %v", x, z, ok)
	}
	if _, _, ok := tr.posAt(1000 - truthLen); ok {
		t.Fatal("an overwritten entry was returned")
	}
	if _, _, ok := tr.posAt(0); ok {
		t.Fatal("seq 0 is never valid")
	}
	tr.invalidate(990, 1000)
	for s := uint64(926); s <= 1000; s++ {
		if _, _, ok := tr.posAt(s); ok {
			t.Fatalf("seq %d survived invalidate", s)
		}
	}
	if _, _, ok := tr.posAt(925); !ok {
		t.Fatal("invalidate went too far back")
	}
	tr.reset(78)
	if _, _, ok := tr.posAt(925); ok {
		t.Fatal("reset kept an old session's positions")
	}
	tr.end()
	if tr.session.Load() != 0 {
		t.Fatal("end did not clear the session")
	}
}

func TestTruthAckAt(t *testing.T) {
	var tr truth
	if _, ok := tr.ackAt(time.Second); ok {
		t.Fatal("empty ring answered")
	}
	// Acks 1..600 at 10 ms, 20 ms, …
	for a := uint64(1); a <= 600; a++ {
		tr.putAck(time.Duration(a)*10*time.Millisecond, a)
	}
	tests := []struct {
		at   time.Duration
		want uint64
		ok   bool
	}{
		{6 * time.Second, 600, true},
		{time.Hour, 600, true},
		{5995 * time.Millisecond, 599, true},
		{5000 * time.Millisecond, 500, true},
		// Older than the ring holds (600 − 256 + 1 = 345 is the oldest): unknown.
		{3449 * time.Millisecond, 0, false},
		{10 * time.Millisecond, 0, false},
	}
	for _, tc := range tests {
		got, ok := tr.ackAt(tc.at)
		if ok != tc.ok || got != tc.want {
			t.Errorf("ackAt(%v) = %d, %v; want %d, %v", tc.at, got, ok, tc.want, tc.ok)
		}
	}
}

// TestTruthAckTimesNeverGoBack: an acknowledgement timed on arrival (no
// section stamp) can be later than the next one's stamp; the ring keeps its
// times ordered, so the search still finds the newest move by a time.
func TestTruthAckTimesNeverGoBack(t *testing.T) {
	var tr truth
	tr.putAck(100*time.Millisecond, 1)
	tr.putAck(300*time.Millisecond, 2) // on arrival, late
	tr.putAck(250*time.Millisecond, 3) // stamped, before it
	tr.putAck(400*time.Millisecond, 4)
	for _, tc := range []struct {
		at   time.Duration
		want uint64
	}{{299 * time.Millisecond, 1}, {300 * time.Millisecond, 3}, {399 * time.Millisecond, 3}, {time.Second, 4}} {
		if got, ok := tr.ackAt(tc.at); !ok || got != tc.want {
			t.Errorf("ackAt(%v) = %d, %v; want %d", tc.at, got, ok, tc.want)
		}
	}
}

// TestTruthConcurrentReaders: one writer, several readers, under -race;
// a reader never sees a torn entry (x and z always written together).
func TestTruthConcurrentReaders(t *testing.T) {
	var tr truth
	tr.reset(1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(1, 2))
			for {
				select {
				case <-stop:
					return
				default:
				}
				s := r.Uint64N(5000) + 1
				if x, z, ok := tr.posAt(s); ok && (x != float32(s) || z != float32(2*s)) {
					errs <- errors.New("torn position entry")
					return
				}
				if a, ok := tr.ackAt(time.Duration(s) * time.Millisecond); ok && a > s {
					errs <- errors.New("ack from the future")
					return
				}
			}
		}()
	}
	for s := uint64(1); s <= 5000; s++ {
		tr.putPos(s, float32(s), float32(2*s))
		tr.putAck(time.Duration(s)*time.Millisecond, s)
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

func TestEchoRoundTrip(t *testing.T) {
	var buf [echoLen]byte
	m := echoMsg{bot: 4242, session: 0x4757_0000_1234, counter: 99, sent: 1234567 * time.Microsecond}
	p := appendEcho(buf[:], m)
	got, err := parseEcho(p)
	if err != nil || got != m {
		t.Fatalf("parse = %+v, %v", got, err)
	}
	for i := range p {
		q := bytes.Clone(p)
		q[i] ^= 0x01
		if _, err := parseEcho(q); err == nil {
			t.Fatalf("flipping byte %d went unnoticed", i)
		}
	}
	if _, err := parseEcho(p[:echoLen-1]); !errors.Is(err, errEchoSize) {
		t.Fatalf("short echo: %v", err)
	}
	if _, err := parseEcho([]byte("chat: hello")); !errors.Is(err, errEchoMagic) {
		t.Fatalf("foreign event: %v", err)
	}
}

// FuzzParseEcho: events come from the network; any bytes give an echo or
// an error, never a panic, and an accepted echo re-encodes to the same bytes.
func FuzzParseEcho(f *testing.F) {
	var buf [echoLen]byte
	f.Add(appendEcho(buf[:], echoMsg{bot: 1, session: 2, counter: 3, sent: 4}))
	f.Add([]byte("GWe1"))
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0xff}, echoLen))
	f.Fuzz(func(t *testing.T, p []byte) {
		m, err := parseEcho(p)
		if err != nil {
			return
		}
		var b [echoLen]byte
		if q := appendEcho(b[:], m); !bytes.Equal(q[:32], p[:32]) {
			t.Fatalf("accepted echo %x re-encodes to %x", p, q)
		}
	})
}

func TestServerClockEpochs(t *testing.T) {
	var c serverClock
	base := 3*time.Hour + 17*time.Millisecond
	if s := c.shift(base); s != 0 {
		t.Fatalf("first bot shift %v", s)
	}
	// Another bot whose mirror epoch is two wraps later, with 3 ms more delay.
	other := base - 2*stampEpoch - 3*time.Millisecond
	if s := c.shift(other); s != 2*stampEpoch {
		t.Fatalf("shift %v, want %v", s, 2*stampEpoch)
	}
	if s := c.shift(base + stampEpoch + time.Millisecond); s != -stampEpoch {
		t.Fatalf("shift %v", s)
	}
}

func TestHeapOrder(t *testing.T) {
	w := &worker{}
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 200 {
		b := &bot{slot: int32(i), wake: time.Duration(r.Int64N(1e9))}
		w.bots = append(w.bots, b)
		w.insert(b)
	}
	check := func() {
		for i, e := range w.heap {
			b := w.bots[e.slot]
			if w.heapIdx(b) != i {
				t.Fatalf("heapIdx %d at %d", w.heapIdx(b), i)
			}
			if e.wake != b.wake {
				t.Fatalf("heap has wake %v for a bot due at %v", e.wake, b.wake)
			}
			if i > 0 && w.heap[(i-1)/2].wake > e.wake {
				t.Fatal("heap property broken")
			}
		}
	}
	check()
	// Move some, remove some.
	for i := range 100 {
		b := w.bots[r.IntN(len(w.bots))]
		at := w.heapIdx(b)
		if at < 0 {
			continue
		}
		if i%3 == 0 {
			w.remove(at)
			w.pos[b.slot] = -1
		} else {
			old := b.wake
			b.wake = time.Duration(r.Int64N(1e9))
			w.heap[at].wake = b.wake
			if b.wake < old {
				w.up(at)
			} else {
				w.down(at)
			}
		}
		check()
	}
	last := time.Duration(-1)
	for len(w.heap) > 0 {
		b := w.pop()
		if b.wake < last {
			t.Fatal("pop out of order")
		}
		if w.heapIdx(b) != -1 {
			t.Fatal("a popped bot still has a heap index")
		}
		last = b.wake
	}
}

// TestTransports: each socket-per-bot transport sends to and receives from
// a local UDP peer, tags datagrams with their socket's tag, and reports ICMP
// errors. (The shared transport routes by protocol ids: the swarm tests
// against the fake zone cover it.)
func TestTransports(t *testing.T) {
	kinds := []string{"goroutines"}
	if _, err := newEpollTransport(); err == nil {
		kinds = append(kinds, "epoll")
	}
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			checkNoLeaks(t)
			peer, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			defer peer.Close()
			addr := peer.LocalAddr().(*net.UDPAddr).AddrPort()
			tr, err := newTransport(kind, false)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.shutdown()
			socks := map[int32]sock{}
			for tag := int32(0); tag < 3; tag++ {
				s, err := tr.open(addr, tag)
				if err != nil {
					t.Fatal(err)
				}
				socks[tag] = s
				if err := tr.send(s, []byte{byte('a' + tag)}); err != nil {
					t.Fatal(err)
				}
			}
			// The peer answers each datagram to its source, prefixed.
			_ = peer.SetReadDeadline(time.Now().Add(5 * time.Second))
			for range 3 {
				b := make([]byte, 64)
				n, from, err := peer.ReadFromUDPAddrPort(b)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := peer.WriteToUDPAddrPort(append([]byte("re:"), b[:n]...), from); err != nil {
					t.Fatal(err)
				}
			}
			got := map[int32]string{}
			deadline := time.Now().Add(5 * time.Second)
			for len(got) < 3 && time.Now().Before(deadline) {
				tr.wait(100*time.Millisecond, func(tag int32, p []byte, err error) {
					if err == nil {
						got[tag] = string(p)
					}
				})
			}
			for tag := int32(0); tag < 3; tag++ {
				if want := "re:" + string(rune('a'+tag)); got[tag] != want {
					t.Errorf("tag %d got %q, want %q", tag, got[tag], want)
				}
			}
			// A stranger's datagram never reaches a connected socket.
			stranger, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			defer stranger.Close()
			_ = tr.send(socks[0], []byte("x"))
			b := make([]byte, 64)
			_, from, err := peer.ReadFromUDPAddrPort(b)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = stranger.WriteToUDPAddrPort([]byte("spoof"), from)
			tr.wait(100*time.Millisecond, func(tag int32, p []byte, err error) {
				if string(p) == "spoof" {
					t.Error("a datagram from another address got through")
				}
			})
			// Closed sockets stay quiet; the peer going away is an error, not a hang.
			tr.close(socks[1])
			peer.Close()
			_ = tr.send(socks[2], []byte("into the void"))
			sawErr := false
			deadline = time.Now().Add(2 * time.Second)
			for !sawErr && time.Now().Before(deadline) {
				tr.wait(50*time.Millisecond, func(tag int32, p []byte, err error) {
					if err != nil {
						sawErr = true
					}
				})
				_ = tr.send(socks[2], []byte("again"))
			}
			if !sawErr {
				t.Error("no error reported for an unreachable peer (ICMP port unreachable)")
			}
			if tr.name() == "" {
				t.Error("unnamed transport")
			}
		})
	}
	if _, err := newTransport("carrier-pigeon", false); err == nil {
		t.Error("unknown transport accepted")
	}
}

// TestCauseOf: a session that was up ends with the server's Disconnect
// reason or its own timeout; the report splits disconnects by it.
func TestCauseOf(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want metrics.Cause
	}{
		{"server shutdown", &session.DisconnectError{Reason: handshake.ReasonServerShutdown}, metrics.CauseShutdown},
		{"kicked", &session.DisconnectError{Reason: handshake.ReasonKicked}, metrics.CauseKicked},
		{"server timed us out", &session.DisconnectError{Reason: handshake.ReasonTimeout}, metrics.CauseTimeout},
		{"silence", session.ErrTimeout, metrics.CauseTimeout},
		{"silence, wrapped", fmt.Errorf("bot: %w", session.ErrTimeout), metrics.CauseTimeout},
		{"superseded by a newer session of the player id", &session.DisconnectError{Reason: handshake.ReasonDuplicate}, metrics.CauseSuperseded},
		{"protocol error", fmt.Errorf("%w: bad section", session.ErrProtocol), metrics.CauseOther},
		{"no error", nil, metrics.CauseOther},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := causeOf(tc.err); got != tc.want {
				t.Fatalf("causeOf(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// TestInputPointsAreTheStreamsClock: the bot asks its session for an input
// only at inputPoint(k), so those must be exactly the times the move
// stream's own clock makes a sample due — not a nanosecond later (a sample
// would wait a whole period) nor earlier (a wasted InputDue).
func TestInputPointsAreTheStreamsClock(t *testing.T) {
	for _, rate := range []int{30, 60, 64, 20} {
		st, err := move.NewStream(move.Config{InputRate: rate})
		if err != nil {
			t.Fatal(err)
		}
		t0 := 1234567 * time.Nanosecond
		b := &bot{w: &worker{sw: &Swarm{cfg: Config{InputRate: rate}}}, inputEpoch: t0}
		if !st.Due(t0) { // starts the stream's clock, as the bot's first service does
			t.Fatal("first sample not due at the start")
		}
		for k := int64(1); k <= 10*int64(rate)*60; k++ { // ten minutes of samples
			p := b.inputPoint(k)
			if st.Due(p - 1) {
				t.Fatalf("rate %d: sample %d due before inputPoint %v", rate, k, p)
			}
			if !st.Due(p) {
				t.Fatalf("rate %d: sample %d not due at inputPoint %v", rate, k, p)
			}
		}
	}
}

// TestEchoSkippedAheadCountsTheSkippedAsLost: on the ordered echo lane an
// echo that skips ahead means the ones between will never come; they are
// lost, not late, and a late copy of one is a duplicate.
func TestEchoSkippedAheadCountsTheSkippedAsLost(t *testing.T) {
	w := &worker{sw: &Swarm{}, shard: metrics.NewShard()}
	b := &bot{w: w, idx: 7, pid: 0x4757_0000_0007, echoNext: 1, echoSent: 6}
	echo := func(counter uint64) {
		var buf [echoLen]byte
		b.Event(event.Event{Class: event.Ordered, Lane: echoLane,
			Payload: appendEcho(buf[:], echoMsg{bot: 7, session: b.pid, counter: counter})})
	}
	echo(1)
	echo(2)
	echo(5) // 3 and 4 skipped
	echo(3) // can only be a duplicate now
	echo(6)
	c := w.shard.C
	if c.EventsEchoed != 4 || c.EventsOutOfOrder != 1 || c.EventsLost != 2 || c.EventsDuplicate != 1 {
		t.Fatalf("echoed %d, out of order %d, lost %d, duplicate %d; want 4, 1, 2, 1",
			c.EventsEchoed, c.EventsOutOfOrder, c.EventsLost, c.EventsDuplicate)
	}
}
