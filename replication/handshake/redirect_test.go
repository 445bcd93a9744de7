package handshake

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
	"time"
)

var testTarget = netip.MustParseAddrPort("192.0.2.77:7778")

// redirectToken is a fresh token for the same player naming testTarget.
func redirectToken(tb testing.TB, seed uint64) []byte {
	p := testParams()
	p.ServerAddrs = []netip.AddrPort{testTarget}
	p.Expiry = 30 * time.Second
	return issue(tb, p, testStart.Add(2*time.Second), seed)
}

func TestRedirect(t *testing.T) {
	cs, ss, _, _ := newSessions(t, 11)
	tok := redirectToken(t, 12)
	if _, err := ss.AppendRedirect(nil, testTarget, tok); !errors.Is(err, ErrUnverified) {
		t.Fatalf("redirect before the client proved its address: %v", err)
	}
	exchange(t, cs, ss, testClient)
	if _, err := cs.AppendRedirect(nil, testTarget, tok); !errors.Is(err, ErrConfig) {
		t.Fatalf("a client redirecting: %v", err)
	}
	if _, err := ss.AppendRedirect(nil, testTarget, tok[:100]); !errors.Is(err, ErrConfig) {
		t.Fatalf("short token: %v", err)
	}
	var copies [][]byte
	for range 3 {
		p, err := ss.AppendRedirect(nil, testTarget, tok)
		if err != nil {
			t.Fatal(err)
		}
		if len(p) != RedirectSize || p[0] != 0x27 {
			t.Fatalf("redirect %d bytes, first byte %#x", len(p), p[0])
		}
		if k, err := Classify(p); err != nil || k != KindRedirect {
			t.Fatalf("Classify: %v %v", k, err)
		}
		copies = append(copies, p)
	}
	if ss.State() != StateConnected {
		t.Fatalf("a redirecting server session is %v; it waits for the client's Disconnect", ss.State())
	}
	if id, err := ParseRedirectID(copies[0]); err != nil || id != cs.ID() {
		t.Fatalf("ParseRedirectID %v %v", id, err)
	}
	if _, _, err := cs.OpenRedirect(flipBit(copies[1], 8*30)); !errors.Is(err, ErrAuth) {
		t.Fatalf("tampered redirect: %v", err)
	}
	if _, _, err := ss.OpenRedirect(copies[1]); !errors.Is(err, ErrUnexpected) {
		t.Fatalf("a server opening a redirect: %v", err)
	}
	to, got, err := cs.OpenRedirect(copies[1])
	if err != nil || to != testTarget || !bytes.Equal(got, tok) {
		t.Fatalf("OpenRedirect: %v %v, token equal %v", to, err, bytes.Equal(got, tok))
	}
	if _, _, err := cs.OpenRedirect(copies[1]); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("the same copy again: %v", err)
	}
	if _, _, err := cs.OpenRedirect(copies[2]); err != nil {
		t.Fatalf("another copy: %v", err)
	}
	other, _, _, _ := newSessions(t, 13)
	if _, _, err := other.OpenRedirect(copies[0]); !errors.Is(err, ErrWrongConn) {
		t.Fatalf("other session: %v", err)
	}
	// The client acknowledges with its Disconnect; the server closes.
	d, err := cs.AppendDisconnect(nil, ReasonRedirected)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := ss.OpenDisconnect(d); err != nil || r != ReasonRedirected || ss.State() != StateClosed {
		t.Fatalf("ack: %v %v %v", r, err, ss.State())
	}
	if _, err := ss.AppendRedirect(nil, testTarget, tok); !errors.Is(err, ErrClosed) {
		t.Fatalf("redirect after close: %v", err)
	}
}

// A Redirect whose token does not list its address, or whose address is
// not canonical, authenticates but is refused: the client could not follow.
func TestRedirectRefusesWhatCannotBeFollowed(t *testing.T) {
	cs, ss, _, _ := newSessions(t, 14)
	exchange(t, cs, ss, testClient)
	p, err := ss.AppendRedirect(nil, testServer, redirectToken(t, 15)) // the token lists testTarget
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := cs.OpenRedirect(p); !errors.Is(err, ErrMalformed) {
		t.Fatalf("token not listing the address: %v", err)
	}
	bad := bytes.Repeat([]byte{0xAB}, TokenSize)
	p, err = ss.AppendRedirect(nil, testTarget, bad)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := cs.OpenRedirect(p); !errors.Is(err, ErrMalformed) {
		t.Fatalf("garbage token: %v", err)
	}
	if ReasonRedirected.String() != "redirected" || !ReasonRedirected.IsDisconnect() {
		t.Fatalf("reason 38: %v", ReasonRedirected)
	}
}

// FuzzOpenRedirect: arbitrary datagrams through a client's Redirect path.
// Nothing panics, and only the packet the server sealed authenticates.
func FuzzOpenRedirect(f *testing.F) {
	keys := SessionKeys{ClientToServer: [KeySize]byte{1}, ServerToClient: [KeySize]byte{2}}
	id := ConnID{0xC0, 0xFF, 0xEE, 1, 2, 3, 4, 5}
	srv, err := newSession(RoleServer, id, keys, testClient)
	if err != nil {
		f.Fatal(err)
	}
	srv.state = StateConnected
	tok := redirectToken(f, 16)
	known, err := srv.AppendRedirect(nil, testTarget, tok)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(known)
	f.Add(flipBit(known, 100))
	f.Add(known[:DisconnectSize])
	f.Add(append([]byte{KindRedirect.ControlByte()}, make([]byte, RedirectSize-1)...))
	f.Fuzz(func(t *testing.T, pkt []byte) {
		cli, err := newSession(RoleClient, id, keys, testServer)
		if err != nil {
			t.Fatal(err)
		}
		to, got, err := cli.OpenRedirect(pkt)
		if err != nil {
			return
		}
		if !bytes.Equal(pkt, known) || to != testTarget || !bytes.Equal(got, tok) {
			t.Fatalf("forged redirect accepted: %x", pkt)
		}
	})
}
