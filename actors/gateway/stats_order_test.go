package gateway_test

import (
	crand "crypto/rand"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/tokenkey"
	"github.com/ghostwire/ghostwire/replication/handshake"
)

// A Stats snapshot never counts a handled handshake without its outcome: while
// a burst of expired-token requests is handled, every snapshot has
// Handshakes ≤ Replies + HandshakeDrop and Handshakes ≤ Denied[TokenExpired]
// (each request here is denied). TestHostileTraffic waits for Handshakes and
// then reads Denied; it failed in CI when the router counted the request
// before its denial.
func TestStatsCountHandshakeAfterItsOutcome(t *testing.T) {
	defer verifyNoLeaks(t)()
	r := newRig(t, nil)
	defer r.close(t)
	tok, err := handshake.IssueToken(r.key, handshake.TokenParams{
		PlayerID: 9000, ProtocolID: tokenkey.DefaultProtocolID, Expiry: time.Second,
		Timeout: time.Second, ServerAddrs: []netip.AddrPort{r.gw.PublicAddr()},
	}, time.Now().Add(-time.Hour), crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	req := request(t, tok, r.gw.PublicAddr())
	atk, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer atk.Close()

	const burst, bursts = 64, 40
	var done atomic.Bool
	polled := make(chan int)
	go func() {
		n := 0
		for ; !done.Load(); n++ {
			s := r.gw.Stats()
			if out := s.Replies + s.HandshakeDrop; s.Handshakes > out {
				t.Errorf("snapshot %d: %d handshakes handled, %d replied or dropped", n, s.Handshakes, out)
				break
			}
			if d := s.Denied[handshake.ReasonTokenExpired]; s.Handshakes > d {
				t.Errorf("snapshot %d: %d handshakes handled, %d denied as expired", n, s.Handshakes, d)
				break
			}
		}
		polled <- n
	}()
	for b := range bursts {
		for range burst {
			if _, err := atk.WriteToUDPAddrPort(req, r.gw.Addr()); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, 10*time.Second, "the burst handled", func() bool {
			return r.gw.Stats().Handshakes >= uint64((b+1)*burst)
		})
	}
	done.Store(true)
	n := <-polled
	s := r.gw.Stats()
	if want := uint64(burst * bursts); s.Handshakes != want || s.Denied[handshake.ReasonTokenExpired] != want {
		t.Errorf("handled %d, denied as expired %v, want %d each", s.Handshakes, s.Denied, want)
	}
	t.Logf("%d snapshots during %d handshakes", n, s.Handshakes)
}
