package handshake

import (
	"errors"
	"net/netip"
	"testing"
	"time"
)

func newSessions(t *testing.T, seed uint64) (cs, ss *Session, srv *Server, g *Grant) {
	t.Helper()
	now := testStart.Add(time.Second)
	srv = newTestServer(t, seed)
	cs, ss, g = connect(t, srv, issue(t, testParams(), now, seed), testClient, now, LoadNormal)
	return cs, ss, srv, g
}

func TestServerSessionSilentUntilVerified(t *testing.T) {
	cs, ss, _, _ := newSessions(t, 1)
	if ss.State() != StatePending {
		t.Fatalf("fresh server session %v", ss.State())
	}
	if _, err := ss.Seal(nil, []byte{1}, nil, 0); !errors.Is(err, ErrUnverified) {
		t.Fatalf("pending Seal: %v", err)
	}
	if _, err := ss.AppendDisconnect(nil, ReasonKicked); !errors.Is(err, ErrUnverified) {
		t.Fatalf("pending Disconnect: %v", err)
	}
	// A forged packet (the attacker holds the token's keys but not the
	// connection id, which only the Accepted carried) does not verify it.
	keys := DeriveSessionKeys(&[KeySize]byte{}, &[KeySize]byte{}, testServer, ConnID{})
	forger, _ := NewProtector(keys.ClientToServer, ConnID{0xBA, 0xD}, ClientToServer)
	bad, _ := forger.Seal(nil, []byte{1}, []byte("x"), 0)
	if _, _, err := ss.Open(nil, []byte{1}, bad, 0, testClient); !errors.Is(err, ErrAuth) || ss.State() != StatePending {
		t.Fatalf("forged: %v, state %v", err, ss.State())
	}
	exchange(t, cs, ss, testClient)
}

// TestNATRebinding: once a packet from a new address authenticates, the
// server session moves there; a replayed or older packet from elsewhere, or a
// forged one, does not move it.
func TestNATRebinding(t *testing.T) {
	cs, ss, _, _ := newSessions(t, 2)
	hdr := []byte{0x11}
	send := func(seq uint64) []byte {
		p, err := cs.Seal(nil, hdr, []byte("m"), seq)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	rebound := netip.MustParseAddrPort("198.51.100.20:61000")
	attacker := netip.MustParseAddrPort("192.0.2.66:1234")
	p0, p1, p2, p3 := send(0), send(1), send(2), send(3)
	steps := []struct {
		name      string
		pkt       []byte
		seq       uint64
		from      netip.AddrPort
		wantErr   error
		wantMoved bool
		wantAddr  netip.AddrPort
	}{
		{"first packet verifies the session", p0, 0, testClient, nil, false, testClient},
		{"newest packet from a new port moves it", p2, 2, rebound, nil, true, rebound},
		{"older packet from the old address does not move it back", p1, 1, testClient, nil, false, rebound},
		{"replay from a third address is refused", p2, 2, attacker, ErrDuplicate, false, rebound},
		{"forged packet from a third address is refused", flipBit(p3, 3), 3, attacker, ErrAuth, false, rebound},
		{"genuine newer packet moves it", p3, 3, testClient, nil, true, testClient},
	}
	for _, st := range steps {
		_, moved, err := ss.Open(nil, hdr, st.pkt, st.seq, st.from)
		if !errors.Is(err, st.wantErr) || (st.wantErr == nil) != (err == nil) || moved != st.wantMoved || ss.Addr() != st.wantAddr {
			t.Fatalf("%s: err %v moved %v addr %v", st.name, err, moved, ss.Addr())
		}
	}
	// The client never moves.
	p, _ := ss.Seal(nil, hdr, nil, 0)
	if _, moved, err := cs.Open(nil, hdr, p, 0, attacker); err != nil || moved || cs.Addr() != testServer {
		t.Fatalf("client: %v %v %v", err, moved, cs.Addr())
	}
}

func TestLongFormPacket(t *testing.T) {
	cs, ss, _, _ := newSessions(t, 3)
	hdr := []byte{0x21, 0x05}
	pkt := AppendRouted(nil, cs.ID())
	pkt, err := cs.Seal(append(pkt, hdr...), pkt[len(pkt):len(pkt)+len(hdr)], []byte("payload"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if k, _ := Classify(pkt); k != KindRouted {
		t.Fatalf("kind %v", k)
	}
	id, inner, err := ParseRouted(pkt)
	if err != nil || id != ss.ID() {
		t.Fatalf("ParseRouted: %v %v", id, err)
	}
	pt, _, err := ss.Open(nil, inner[:len(hdr)], inner[len(hdr):], 0, testClient)
	if err != nil || string(pt) != "payload" {
		t.Fatalf("Open: %q %v", pt, err)
	}
	// The short form of the same packet carries the same tag: the connection id
	// is associated data either way.
	if k, _ := Classify(inner); k != KindData {
		t.Fatalf("inner kind %v", k)
	}
	// Routed to the wrong session, it fails.
	other, _, _, _ := newSessions(t, 4)
	if _, _, err := other.Open(nil, inner[:len(hdr)], inner[len(hdr):], 1, testClient); !errors.Is(err, ErrAuth) {
		t.Fatalf("wrong session: %v", err)
	}
}

func TestDisconnect(t *testing.T) {
	cs, ss, _, _ := newSessions(t, 5)
	exchange(t, cs, ss, testClient)
	if _, err := cs.AppendDisconnect(nil, ReasonServerFull); !errors.Is(err, ErrConfig) {
		t.Fatalf("denial reason in a disconnect: %v", err)
	}
	var copies [][]byte
	for range 3 {
		p, err := cs.AppendDisconnect(nil, ReasonClientQuit)
		if err != nil {
			t.Fatal(err)
		}
		if len(p) != DisconnectSize {
			t.Fatalf("disconnect %d bytes", len(p))
		}
		copies = append(copies, p)
	}
	if cs.State() != StateDraining {
		t.Fatalf("sender %v", cs.State())
	}
	if _, err := cs.Seal(nil, []byte{1}, nil, cs.NextSeq()); !errors.Is(err, ErrClosed) {
		t.Fatalf("draining Seal: %v", err)
	}
	if id, err := ParseDisconnectID(copies[1]); err != nil || id != ss.ID() {
		t.Fatalf("ParseDisconnectID %v %v", id, err)
	}
	if _, err := ss.OpenDisconnect(flipBit(copies[1], 8*20)); !errors.Is(err, ErrAuth) {
		t.Fatalf("tampered disconnect: %v", err)
	}
	r, err := ss.OpenDisconnect(copies[1])
	if err != nil || r != ReasonClientQuit || ss.State() != StateClosed || ss.Reason() != ReasonClientQuit {
		t.Fatalf("OpenDisconnect: %v %v %v", r, err, ss.State())
	}
	for _, c := range [][]byte{copies[0], copies[2]} {
		if _, err := ss.OpenDisconnect(c); !errors.Is(err, ErrClosed) {
			t.Fatalf("redundant copy: %v", err)
		}
	}
	if _, _, err := ss.Open(nil, nil, make([]byte, 20), 99, testClient); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed Open: %v", err)
	}
	other, _, _, _ := newSessions(t, 6)
	if _, err := other.OpenDisconnect(copies[0]); !errors.Is(err, ErrWrongConn) {
		t.Fatalf("other session: %v", err)
	}
	cs.Close(ReasonTimeout)
	if cs.State() != StateClosed || cs.Reason() != ReasonClientQuit {
		t.Fatalf("Close: %v %v", cs.State(), cs.Reason())
	}
}

// TestNoConnectionCannotReflect: NoConnection answers only protected data
// packets, is never larger than them, and is never itself answered.
func TestNoConnectionCannotReflect(t *testing.T) {
	id := ConnID{1, 2, 3, 4, 5, 6, 7, 8}
	data := make([]byte, MinDataSize)
	routed := append(AppendRouted(nil, id), make([]byte, MinDataSize)...)
	tests := []struct {
		name   string
		req    []byte
		want   error
		wantID ConnID
	}{
		{"smallest short-form packet", data, nil, ConnID{}},
		{"long-form packet echoes its id", routed, nil, id},
		{"a NoConnection is never answered", []byte{KindNoConnection.ControlByte(), 1, 2, 3, 4, 5, 6, 7, 8}, ErrUnexpected, ConnID{}},
		{"a Disconnect is never answered", append([]byte{KindDisconnect.ControlByte()}, make([]byte, DisconnectSize-1)...), ErrUnexpected, ConnID{}},
		{"a handshake reply is never answered", AppendDenied(nil, ReasonBusy, TokenID{}), ErrUnexpected, ConnID{}},
		{"garbage is never answered", []byte{0x00, 1}, ErrGarbage, ConnID{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := AppendNoConnection(nil, tc.req)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if err != nil {
				if len(out) != 0 {
					t.Fatal("refusal wrote a reply")
				}
				return
			}
			if len(out) > len(tc.req) || len(out) != NoConnectionSize {
				t.Fatalf("reply %d bytes to a %d-byte packet", len(out), len(tc.req))
			}
			got, err := ParseNoConnection(out)
			if err != nil || got != tc.wantID {
				t.Fatalf("ParseNoConnection %v %v", got, err)
			}
			if _, err := AppendNoConnection(nil, out); err == nil {
				t.Fatal("a NoConnection drew a NoConnection")
			}
		})
	}
}

// TestScratchSharedAcrossSessions: one Scratch serves every call of two
// connections in both directions, interleaved (as a shard's connections
// share one): each call builds its nonce and associated data afresh — the
// direction, the sequence number and its own connection id — so every
// packet opens on its own connection and on no other.
func TestScratchSharedAcrossSessions(t *testing.T) {
	c1, s1, _, _ := newSessions(t, 11)
	c2, s2, _, _ := newSessions(t, 12)
	if c1.ID() == c2.ID() {
		t.Fatal("two connections with one id")
	}
	var sc Scratch
	hdr := []byte{0x21, 0x07}
	ends := []struct {
		name     string
		from, to *Session
		addr     netip.AddrPort
	}{
		{"client 1 → server 1", c1, s1, testClient},
		{"client 2 → server 2", c2, s2, testClient},
		{"server 1 → client 1", s1, c1, testServer},
		{"server 2 → client 2", s2, c2, testServer},
	}
	for seq := uint64(0); seq < 6; seq++ {
		for d := 0; d < 4; d += 2 { // both connections of one direction at a time
			if seq == 0 && d == 2 {
				continue // a server session seals once a client packet verified it
			}
			var pkts, payloads [2][]byte
			for j := range 2 {
				e := ends[d+j]
				payloads[j] = []byte{byte(seq), byte(d + j), 0xAA}
				var err error
				if pkts[j], err = e.from.SealWith(&sc, nil, hdr, payloads[j], seq); err != nil {
					t.Fatalf("%s seq %d: seal: %v", e.name, seq, err)
				}
			}
			for j := range 2 {
				e, other := ends[d+j], ends[d+1-j].to
				if _, _, err := other.OpenWith(&sc, nil, hdr, pkts[j], seq, e.addr); !errors.Is(err, ErrAuth) {
					t.Fatalf("%s seq %d: opening on the other connection gave %v, want ErrAuth", e.name, seq, err)
				}
			}
			for j := range 2 {
				e := ends[d+j]
				pt, _, err := e.to.OpenWith(&sc, nil, hdr, pkts[j], seq, e.addr)
				if err != nil || string(pt) != string(payloads[j]) {
					t.Fatalf("%s seq %d: open %q, %v; want %q", e.name, seq, pt, err, payloads[j])
				}
			}
		}
	}
}
