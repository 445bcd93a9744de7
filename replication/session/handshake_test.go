package session_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/netsim"
	"github.com/ghostwire/ghostwire/replication/session"
)

func TestHandshakeRoundTrips(t *testing.T) {
	const oneWay = 20 * time.Millisecond
	link := netsim.Config{Latency: oneWay}
	for _, tc := range []struct {
		name       string
		load       handshake.Load
		requests   uint64 // connect requests + challenge responses the client sent
		challenges uint64
		rtts       int
	}{
		{name: "1-RTT under normal load", load: handshake.LoadNormal, requests: 1, challenges: 0, rtts: 1},
		{name: "2-RTT cookie under high load", load: handshake.LoadHigh, requests: 2, challenges: 1, rtts: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, withLink(link, link), withLoad(tc.load))
			w.connect(2 * time.Second)
			st := w.cli.Stats()
			if st.Requests != tc.requests || st.Challenges != tc.challenges {
				t.Fatalf("requests %d challenges %d, want %d and %d", st.Requests, st.Challenges, tc.requests, tc.challenges)
			}
			// The harness steps 1 ms: a challenge is answered on the next step.
			want := time.Duration(tc.rtts) * 2 * oneWay
			if st.ConnectTime < want || st.ConnectTime > want+time.Duration(tc.rtts-1)*time.Millisecond {
				t.Fatalf("connect took %v, want %d round trips = %v", st.ConnectTime, tc.rtts, want)
			}
			// The server session is proven by the client's first packet, which
			// the client sends at once: one more one-way trip.
			if w.srv.State() != handshake.StateConnected {
				t.Fatalf("server %v", w.srv.State())
			}
			if w.srv.Stats().Accepted == 0 || w.cli.ID() != w.srv.ID() {
				t.Fatalf("server accepted %d, ids %v / %v", w.srv.Stats().Accepted, w.cli.ID(), w.srv.ID())
			}
			// Data flows both ways afterwards.
			w.cli.SendEvent(0, []byte("hello"))
			w.srv.SendEvent(1, []byte("welcome"))
			w.run(200*time.Millisecond, 5*time.Millisecond)
			if len(w.srvH.events) != 1 || string(w.srvH.events[0].Payload) != "hello" {
				t.Fatalf("server got %v", w.srvH.events)
			}
			if len(w.cliH.events) != 1 || string(w.cliH.events[0].Payload) != "welcome" || w.cliH.events[0].Lane != 1 {
				t.Fatalf("client got %v", w.cliH.events)
			}
		})
	}
}

func TestHandshakeSurvivesLossWithBackoff(t *testing.T) {
	lossy := netsim.Config{Loss: 0.5, Latency: 30 * time.Millisecond}
	for seed := uint64(1); seed <= 10; seed++ {
		w := newWorld(t, withLink(lossy, lossy), withLoad(handshake.LoadHigh), withSeed(seed))
		w.connect(10 * time.Second)
	}
}

func TestDeniedCarriesReason(t *testing.T) {
	w := newWorld(t, withToken(func(p *handshake.TokenParams) { p.ProtocolID = 99 }))
	w.run(500*time.Millisecond, 5*time.Millisecond)
	if w.cli.State() != handshake.StateClosed {
		t.Fatalf("client %v, want closed", w.cli.State())
	}
	var de *session.DeniedError
	err := w.cli.Err()
	if !errors.As(err, &de) || de.Reason != handshake.ReasonWrongProtocol ||
		!errors.Is(err, handshake.ErrDenied) || !errors.Is(err, handshake.ErrWrongProtocol) {
		t.Fatalf("client error %v, want a DeniedError(WrongProtocol)", err)
	}
	if w.srv != nil {
		t.Fatal("a session was granted for a refused token")
	}
	// Closed: nothing more is sent.
	if out, _ := w.cli.Poll(w.now+time.Second, nil); len(out) != 0 {
		t.Fatal("closed client still sends")
	}
}

func TestConnectTimeoutWithBackoff(t *testing.T) {
	dead := netsim.Config{Loss: 1}
	w := newWorld(t, withLink(dead, dead), withClientConfig(func(c *session.ClientConfig) {
		c.ConnectTimeout = 5 * time.Second
	}))
	w.run(6*time.Second, 10*time.Millisecond)
	if w.cli.State() != handshake.StateClosed || !errors.Is(w.cli.Err(), session.ErrConnectTimeout) {
		t.Fatalf("client %v, err %v; want closed with ErrConnectTimeout", w.cli.State(), w.cli.Err())
	}
	// 0, 100, 250, 475, 812, 1318, 2077, 3077, 4077 ms (×1.5 up to 1 s): 9 requests.
	if got := w.cli.Stats().Requests; got != 9 {
		t.Fatalf("%d connect requests in 5 s, want 9 (backoff 100 ms ×1.5, cap 1 s)", got)
	}
	if w.pipe.AtoB.Stats().SentBytes != 9*handshake.RequestSize {
		t.Fatalf("requests not padded to %d bytes: %d bytes in all", handshake.RequestSize, w.pipe.AtoB.Stats().SentBytes)
	}
}

func TestExpiredTokenRefusedLocally(t *testing.T) {
	w := newWorld(t)
	_, err := session.NewClient(w.token, serverAddr, session.DefaultClientConfig(), nil, t0.Add(2*time.Hour), 0)
	if !errors.Is(err, handshake.ErrTokenExpired) {
		t.Fatalf("NewClient with an expired token: %v", err)
	}
}
