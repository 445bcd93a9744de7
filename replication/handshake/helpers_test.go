package handshake

import (
	"io"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

// Fixtures shared by the tests: a token key, a server address, a wall-clock
// epoch and deterministic randomness.
var (
	testKey      = [KeySize]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32}
	testServer   = netip.MustParseAddrPort("203.0.113.7:7777")
	testServer6  = netip.MustParseAddrPort("[2001:db8::7]:7777")
	testClient   = netip.MustParseAddrPort("198.51.100.20:50000")
	testClient2  = netip.MustParseAddrPort("198.51.100.99:40000")
	testStart    = time.Unix(1_800_000_000, 0) // server start
	testProtocol = uint64(0x6768_6f73_7477_6972)
)

// detRand is deterministic randomness for one test.
func detRand(seed uint64) io.Reader {
	var s [32]byte
	for i := range s {
		s[i] = byte(seed >> (8 * (i % 8)))
		s[i] ^= byte(i)
	}
	return rand.NewChaCha8(s)
}

func testParams() TokenParams {
	return TokenParams{
		PlayerID:    424242,
		ProtocolID:  testProtocol,
		Expiry:      time.Minute,
		Timeout:     10 * time.Second,
		ServerAddrs: []netip.AddrPort{testServer},
		UserData:    []byte("guild=ravens;level=17"),
	}
}

// issue mints a token created at now (after the server start unless a test
// says otherwise).
func issue(tb testing.TB, p TokenParams, now time.Time, seed uint64) []byte {
	tb.Helper()
	tok, err := IssueToken(testKey, p, now, detRand(seed))
	if err != nil {
		tb.Fatalf("IssueToken: %v", err)
	}
	return tok
}

func newTestServer(tb testing.TB, seed uint64) *Server {
	tb.Helper()
	cfg := DefaultServerConfig()
	cfg.ProtocolID = testProtocol
	cfg.Addr = testServer
	cfg.GuardCapacity = 1024
	s, err := NewServer(cfg, testKey, testStart, detRand(seed))
	if err != nil {
		tb.Fatalf("NewServer: %v", err)
	}
	return s
}

// request builds the client's current request packet.
func request(tb testing.TB, c *Client) []byte {
	tb.Helper()
	pkt, err := c.AppendRequest(nil)
	if err != nil {
		tb.Fatalf("AppendRequest: %v", err)
	}
	return pkt
}

// connect runs the handshake at load and returns both sessions.
func connect(tb testing.TB, srv *Server, tok []byte, from netip.AddrPort, now time.Time, load Load) (cs, ss *Session, g *Grant) {
	tb.Helper()
	c, err := NewClient(tok, testServer)
	if err != nil {
		tb.Fatalf("NewClient: %v", err)
	}
	for range 3 {
		req := request(tb, c)
		reply, grant, err := srv.Handle(nil, req, from, now, load)
		if len(reply) > len(req) {
			tb.Fatalf("reply %d bytes > request %d", len(reply), len(req))
		}
		if grant != nil {
			g = grant
		}
		if len(reply) == 0 {
			tb.Fatalf("no reply (err %v)", err)
		}
		if err := c.HandleReply(reply); err != nil {
			tb.Fatalf("HandleReply: %v", err)
		}
		if c.State() == StateConnected {
			break
		}
	}
	if c.State() != StateConnected || g == nil {
		tb.Fatalf("not connected: client %v, grant %v", c.State(), g != nil)
	}
	cs, err = c.Session()
	if err != nil {
		tb.Fatal(err)
	}
	ss, err = g.Session()
	if err != nil {
		tb.Fatal(err)
	}
	return cs, ss, g
}

// flipBit returns a copy of b with bit i flipped.
func flipBit(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i/8] ^= 1 << (i % 8)
	return c
}
