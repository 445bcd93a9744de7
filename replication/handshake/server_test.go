package handshake

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

func TestHandshakePaths(t *testing.T) {
	now := testStart.Add(time.Second)
	tests := []struct {
		name       string
		load       Load
		wantKinds  []Kind // replies in order
		wantStates []State
	}{
		{name: "one round trip when not under load", load: LoadNormal,
			wantKinds: []Kind{KindAccepted}, wantStates: []State{StateConnected}},
		{name: "two round trips under load", load: LoadHigh,
			wantKinds: []Kind{KindChallenge, KindAccepted}, wantStates: []State{StateChallenged, StateConnected}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newTestServer(t, uint64(i))
			c, err := NewClient(issue(t, testParams(), now, uint64(i)), testServer)
			if err != nil {
				t.Fatal(err)
			}
			var grant *Grant
			for step, want := range tc.wantKinds {
				req := request(t, c)
				reply, g, err := srv.Handle(nil, req, testClient, now, tc.load)
				if err != nil {
					t.Fatalf("step %d: Handle: %v", step, err)
				}
				if k, _ := Classify(reply); k != want {
					t.Fatalf("step %d: reply kind %v, want %v", step, k, want)
				}
				if (g != nil) != (want == KindAccepted) {
					t.Fatalf("step %d: grant %v for reply %v", step, g != nil, want)
				}
				if g != nil {
					grant = g
				}
				if err := c.HandleReply(reply); err != nil {
					t.Fatalf("step %d: HandleReply: %v", step, err)
				}
				if c.State() != tc.wantStates[step] {
					t.Fatalf("step %d: client %v, want %v", step, c.State(), tc.wantStates[step])
				}
			}
			if grant.ID != c.ConnID() || grant.Addr != testClient {
				t.Fatalf("grant id %v addr %v, client id %v", grant.ID, grant.Addr, c.ConnID())
			}
			if grant.Claims.PlayerID != testParams().PlayerID || grant.Claims.Timeout != 10*time.Second {
				t.Errorf("claims %+v", grant.Claims)
			}
			if grant.Claims.ClientToServerKey != [KeySize]byte{} || grant.Claims.ServerToClientKey != [KeySize]byte{} {
				t.Error("grant kept the token's raw keys")
			}
			cs, err := c.Session()
			if err != nil {
				t.Fatal(err)
			}
			ss, err := grant.Session()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := grant.Session(); !errors.Is(err, ErrUnexpected) {
				t.Fatalf("second server Session under the same keys: %v", err)
			}
			exchange(t, cs, ss, testClient)
		})
	}
}

// exchange sends one packet each way and checks the server session verified.
func exchange(t *testing.T, cs, ss *Session, from netip.AddrPort) {
	t.Helper()
	hdr, msg := []byte{0x10, 0x20, 0x30}, []byte("hello")
	pkt, err := cs.Seal(nil, hdr, msg, cs.NextSeq())
	if err != nil {
		t.Fatal(err)
	}
	pt, _, err := ss.Open(nil, hdr, pkt, cs.NextSeq()-1, from)
	if err != nil || string(pt) != "hello" {
		t.Fatalf("server Open: %q, %v", pt, err)
	}
	if ss.State() != StateConnected {
		t.Fatalf("server session %v after the first authenticated packet", ss.State())
	}
	pkt, err = ss.Seal(nil, hdr, []byte("welcome"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if pt, _, err := cs.Open(nil, hdr, pkt, 0, testServer); err != nil || string(pt) != "welcome" {
		t.Fatalf("client Open: %q, %v", pt, err)
	}
}

// TestDenials checks each refusal: the reason in the Denied packet, the error
// returned, and that nothing is granted.
func TestDenials(t *testing.T) {
	now := testStart.Add(time.Second)
	wrongProto := testParams()
	wrongProto.ProtocolID++
	otherServer := testParams()
	otherServer.ServerAddrs = []netip.AddrPort{testServer6}
	otherKey := testKey
	otherKey[31] ^= 0x80
	tokOtherKey, err := IssueToken(otherKey, testParams(), now, detRand(9))
	if err != nil {
		t.Fatal(err)
	}
	badVersion := request(t, mustClient(t, issue(t, testParams(), now, 1)))
	badVersion[1+3] = 2 // "GW\0\2"

	tests := []struct {
		name   string
		pkt    []byte
		now    time.Time
		load   Load
		reason Reason
		want   error
	}{
		{"wrong version", badVersion, now, LoadNormal, ReasonWrongVersion, ErrWrongVersion},
		{"wrong protocol id", reqFor(t, issue(t, wrongProto, now, 2)), now, LoadNormal, ReasonWrongProtocol, ErrWrongProtocol},
		{"expired", reqFor(t, issue(t, testParams(), now, 3)), now.Add(time.Minute), LoadNormal, ReasonTokenExpired, ErrTokenExpired},
		{"created before the server started", reqFor(t, issue(t, testParams(), testStart.Add(-time.Second), 4)), now, LoadNormal, ReasonTokenTooOld, ErrTokenTooOld},
		{"server not listed", reqFor(t, issueFor(t, otherServer, now, 5)), now, LoadNormal, ReasonWrongServer, ErrWrongServer},
		{"sealed under another key", reqFor(t, tokOtherKey), now, LoadNormal, ReasonBadToken, ErrBadToken},
		{"server full", reqFor(t, issue(t, testParams(), now, 6)), now, LoadFull, ReasonServerFull, ErrServerFull},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newTestServer(t, uint64(100+i))
			reply, g, err := srv.Handle(nil, tc.pkt, testClient, tc.now, tc.load)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if g != nil {
				t.Fatal("granted")
			}
			r, id, perr := ParseDenied(reply)
			if perr != nil || r != tc.reason {
				t.Fatalf("reply %x: reason %v (%v), want %v", reply, r, perr, tc.reason)
			}
			if !bytes.Equal(id[:], tc.pkt[1+hdrNonce:1+hdrNonce+TokenIDSize]) {
				t.Error("Denied does not echo the token id")
			}
			if srv.Stats().Denied[tc.reason] != 1 || srv.Guard().Len() != 0 {
				t.Errorf("stats %+v, guard %d", srv.Stats(), srv.Guard().Len())
			}
		})
	}
}

func mustClient(t *testing.T, tok []byte) *Client {
	t.Helper()
	c, err := NewClient(tok, testServer)
	if err != nil {
		// Tokens for other servers: build the request by hand.
		var c2 Client
		pt, perr := ParseToken(tok)
		if perr != nil {
			t.Fatal(perr)
		}
		c2.tok = pt
		return &c2
	}
	return c
}

func reqFor(t *testing.T, tok []byte) []byte { return request(t, mustClient(t, tok)) }

func issueFor(t *testing.T, p TokenParams, now time.Time, seed uint64) []byte {
	return issue(t, p, now, seed)
}

func TestRetryIsIdempotent(t *testing.T) {
	now := testStart.Add(time.Second)
	for _, load := range []Load{LoadNormal, LoadHigh, LoadFull} {
		t.Run("retry under "+load.String(), func(t *testing.T) {
			srv := newTestServer(t, 1)
			c := mustClient(t, issue(t, testParams(), now, 2))
			first, g, err := srv.Handle(nil, request(t, c), testClient, now, LoadNormal)
			if err != nil || g == nil {
				t.Fatalf("first: %v", err)
			}
			for i := range 3 {
				again, g2, err := srv.Handle(nil, request(t, c), testClient, now.Add(time.Duration(i)*time.Second), load)
				if err != nil || g2 != nil || !bytes.Equal(again, first) {
					t.Fatalf("retry %d: err %v, grant %v, same bytes %v", i, err, g2 != nil, bytes.Equal(again, first))
				}
			}
			if s := srv.Stats(); s.Granted != 1 || s.Retries != 3 {
				t.Fatalf("stats %+v", s)
			}
			if err := c.HandleReply(first); err != nil {
				t.Fatal(err)
			}
			if err := c.HandleReply(first); err != nil {
				t.Fatalf("duplicate Accepted: %v", err)
			}
		})
	}
}

// TestTokenBoundToOneSession is the GHSA-v29p-3vj4-vg4f regression: a token
// that was granted a session never opens a second one, from any address, before
// or after that session ends.
func TestTokenBoundToOneSession(t *testing.T) {
	now := testStart.Add(time.Second)
	srv := newTestServer(t, 1)
	tok := issue(t, testParams(), now, 2)
	req := reqFor(t, tok)
	if _, g, err := srv.Handle(nil, req, testClient, now, LoadNormal); err != nil || g == nil {
		t.Fatalf("first use: %v", err)
	}
	steps := []struct {
		name    string
		consume bool
		from    netip.AddrPort
		load    Load
		want    error
	}{
		{"pending, other address", false, testClient2, LoadNormal, ErrTokenInUse},
		{"pending, other port of the same host", false, netip.AddrPortFrom(testClient.Addr(), 50001), LoadNormal, ErrTokenInUse},
		{"pending, other address under load", false, testClient2, LoadHigh, ErrTokenInUse},
		{"consumed, same address", true, testClient, LoadNormal, ErrTokenUsed},
		{"consumed, other address", true, testClient2, LoadNormal, ErrTokenUsed},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if st.consume {
				srv.Consume(TokenID(req[1+hdrNonce : 1+hdrNonce+TokenIDSize]))
			}
			reply, g, err := srv.Handle(nil, req, st.from, now, st.load)
			if g != nil || !errors.Is(err, st.want) {
				t.Fatalf("grant %v err %v, want %v", g != nil, err, st.want)
			}
			if r, _, _ := ParseDenied(reply); r.Err() != st.want {
				t.Fatalf("Denied reason %v", r)
			}
		})
	}
	if s := srv.Stats(); s.Granted != 1 {
		t.Fatalf("granted %d sessions for one token", s.Granted)
	}
}

func TestCookieRotation(t *testing.T) {
	rot := DefaultCookieRotation
	// Align to an epoch start so "one rotation later" is unambiguous.
	e0 := time.Unix(0, (testStart.Add(time.Minute).UnixNano()/int64(rot)+1)*int64(rot))
	tests := []struct {
		name    string
		answer  time.Time // when the challenge response arrives
		from    netip.AddrPort
		tamper  bool
		granted bool
	}{
		{name: "same rotation", answer: e0.Add(rot / 2), from: testClient, granted: true},
		{name: "previous rotation is accepted", answer: e0.Add(rot + rot/2), from: testClient, granted: true},
		{name: "two rotations ago is refused", answer: e0.Add(2 * rot), from: testClient},
		{name: "other source address", answer: e0.Add(time.Second), from: testClient2},
		{name: "forged MAC", answer: e0.Add(time.Second), from: testClient, tamper: true},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newTestServer(t, uint64(i))
			p := testParams()
			p.Expiry = MaxTokenLifetime
			c := mustClient(t, issue(t, p, testStart.Add(time.Second), uint64(i)))
			ch, _, err := srv.Handle(nil, request(t, c), testClient, e0, LoadHigh)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.HandleReply(ch); err != nil || c.State() != StateChallenged {
				t.Fatalf("challenge: %v, %v", err, c.State())
			}
			resp := request(t, c)
			if tc.tamper {
				resp[reqCookie+8] ^= 1
			}
			reply, g, err := srv.Handle(nil, resp, tc.from, tc.answer, LoadHigh)
			if (g != nil) != tc.granted {
				t.Fatalf("granted %v, want %v (err %v)", g != nil, tc.granted, err)
			}
			k, _ := Classify(reply)
			if tc.granted {
				if k != KindAccepted {
					t.Fatalf("reply %v", k)
				}
				// Accepted once: the same cookie again is a retry (same bytes), and
				// once the session is consumed it opens nothing.
				again, g2, _ := srv.Handle(nil, resp, tc.from, tc.answer, LoadHigh)
				if g2 != nil || !bytes.Equal(again, reply) {
					t.Fatal("second use of the cookie granted again")
				}
				srv.Consume(c.Token().ID)
				if _, g3, err := srv.Handle(nil, resp, tc.from, tc.answer, LoadHigh); g3 != nil || !errors.Is(err, ErrTokenUsed) {
					t.Fatalf("after consume: grant %v err %v", g3 != nil, err)
				}
				return
			}
			if !errors.Is(err, ErrAuth) || k != KindChallenge {
				t.Fatalf("refused cookie: err %v, reply %v; want ErrAuth and a fresh Challenge", err, k)
			}
			if srv.Stats().BadCookies != 1 || srv.Guard().Len() != 0 {
				t.Fatalf("stats %+v", srv.Stats())
			}
			// The fresh challenge works.
			if err := c.HandleReply(reply); err != nil {
				t.Fatal(err)
			}
			if _, g, err := srv.Handle(nil, request(t, c), tc.from, tc.answer, LoadHigh); g == nil {
				t.Fatalf("fresh cookie refused: %v", err)
			}
		})
	}
}

// TestNothingAllocatedBeforeProofUnderLoad: under LoadHigh a flood of valid
// connect requests (fresh tokens, spoofed sources) opens no token, grants
// nothing, stores nothing and allocates nothing (checklist SEC-10).
func TestNothingAllocatedBeforeProofUnderLoad(t *testing.T) {
	now := testStart.Add(time.Second)
	srv := newTestServer(t, 1)
	reqs := make([][]byte, 64)
	for i := range reqs {
		reqs[i] = reqFor(t, issue(t, testParams(), now, uint64(i)))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 0, MaxPacketSize)
	i := 0
	allocs := testing.AllocsPerRun(2000, func() {
		src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{byte(rng.Uint32()), 1, 2, 3}), uint16(1+rng.IntN(60000)))
		out, g, err := srv.Handle(buf[:0], reqs[i%len(reqs)], src, now, LoadHigh)
		if err != nil || g != nil || len(out) != ChallengeSize {
			t.Fatalf("got %d bytes, grant %v, err %v", len(out), g != nil, err)
		}
		i++
	})
	if allocs != 0 {
		t.Errorf("%v allocations per challenged request, want 0", allocs)
	}
	if srv.Guard().Len() != 0 || srv.Stats().Granted != 0 {
		t.Errorf("state after the flood: guard %d, granted %d", srv.Guard().Len(), srv.Stats().Granted)
	}
}

func TestGuardFullRefusesRatherThanEvicts(t *testing.T) {
	now := testStart.Add(time.Second)
	cfg := DefaultServerConfig()
	cfg.ProtocolID, cfg.Addr, cfg.GuardCapacity = testProtocol, testServer, 2
	srv, err := NewServer(cfg, testKey, testStart, detRand(1))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, g, err := srv.Handle(nil, reqFor(t, issue(t, testParams(), now, uint64(i))), testClient, now, LoadNormal); g == nil {
			t.Fatalf("token %d: %v", i, err)
		}
	}
	third := reqFor(t, issue(t, testParams(), now, 2))
	reply, g, err := srv.Handle(nil, third, testClient, now, LoadNormal)
	if g != nil || !errors.Is(err, ErrGuardFull) {
		t.Fatalf("grant %v err %v", g != nil, err)
	}
	if r, _, _ := ParseDenied(reply); r != ReasonBusy {
		t.Fatalf("reason %v", r)
	}
	// Once the first tokens expire their slots free up.
	later := now.Add(time.Minute)
	p := testParams()
	if _, g, err := srv.Handle(nil, reqFor(t, issue(t, p, later, 3)), testClient, later, LoadNormal); g == nil {
		t.Fatalf("after expiry: %v", err)
	}
}

// TestServerClockStepsBack: a wall clock that steps back must not revive an
// expired token.
func TestServerClockStepsBack(t *testing.T) {
	now := testStart.Add(time.Second)
	srv := newTestServer(t, 1)
	req := reqFor(t, issue(t, testParams(), now, 2))
	if _, _, err := srv.Handle(nil, garbageOf(1), testClient, now.Add(2*time.Minute), LoadNormal); !errors.Is(err, ErrGarbage) {
		t.Fatal(err)
	}
	if _, _, err := srv.Handle(nil, req, testClient2, now.Add(2*time.Minute), LoadNormal); !errors.Is(err, ErrTokenExpired) {
		t.Fatalf("at expiry: %v", err)
	}
	if _, g, err := srv.Handle(nil, req, testClient, now, LoadNormal); g != nil || !errors.Is(err, ErrTokenExpired) {
		t.Fatalf("clock stepped back: grant %v err %v", g != nil, err)
	}
}

func garbageOf(n int) []byte { return bytes.Repeat([]byte{0xFF}, n) }

// TestRepliesNeverLargerThanRequests drives every reply the server can send —
// Accepted, retried Accepted, Challenge, every Denied, the fresh Challenge for
// a bad cookie — plus random garbage and random mutations of valid requests,
// and checks each reply against the request that caused it.
func TestRepliesNeverLargerThanRequests(t *testing.T) {
	now := testStart.Add(time.Second)
	srv := newTestServer(t, 1)
	rng := rand.New(rand.NewPCG(3, 4))
	var valid [][]byte
	for i := range 16 {
		p := testParams()
		if i%4 == 1 {
			p.ProtocolID++
		}
		if i%4 == 2 {
			p.ServerAddrs = []netip.AddrPort{testServer6}
		}
		valid = append(valid, reqFor(t, issue(t, p, now, uint64(i))))
	}
	kinds := map[Kind]int{}
	check := func(req []byte, src netip.AddrPort, load Load) {
		reply, _, _ := srv.Handle(nil, req, src, now, load)
		if len(reply) > len(req) {
			t.Fatalf("reply of %d bytes to a %d-byte request", len(reply), len(req))
		}
		if len(reply) > 0 {
			k, err := Classify(reply)
			if err != nil {
				t.Fatalf("server sent garbage %x", reply)
			}
			kinds[k]++
		}
	}
	for i := range 20000 {
		load := Load(rng.IntN(3))
		src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(rng.IntN(4)), 0, 1}), 1000)
		req := valid[rng.IntN(len(valid))]
		switch i % 4 {
		case 0: // as sent
		case 1: // one byte changed
			req = append([]byte(nil), req...)
			req[rng.IntN(len(req))] ^= byte(1 + rng.IntN(255))
		case 2: // random garbage of random length
			req = make([]byte, 1+rng.IntN(MaxPacketSize))
			for j := range req {
				req[j] = byte(rng.Uint32())
			}
		case 3: // a challenge response with a random cookie
			req = append([]byte(nil), req...)
			req[0] = KindChallengeResponse.ControlByte()
			for j := reqCookie; j < reqPad; j++ {
				req[j] = byte(rng.Uint32())
			}
		}
		check(req, src, load)
	}
	for _, k := range []Kind{KindAccepted, KindChallenge, KindDenied} {
		if kinds[k] == 0 {
			t.Errorf("no %v reply was exercised (%v)", k, kinds)
		}
	}
}

func TestServerConfigValidate(t *testing.T) {
	good := DefaultServerConfig()
	good.Addr = testServer
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		mod  func(*ServerConfig)
	}{
		{"no address", func(c *ServerConfig) { c.Addr = netip.AddrPort{} }},
		{"wildcard address", func(c *ServerConfig) { c.Addr = netip.MustParseAddrPort("0.0.0.0:7777") }},
		{"rotation too short", func(c *ServerConfig) { c.CookieRotation = time.Millisecond }},
		{"rotation too long", func(c *ServerConfig) { c.CookieRotation = time.Hour }},
		{"guard empty", func(c *ServerConfig) { c.GuardCapacity = 0 }},
		{"too many token keys", func(c *ServerConfig) { c.OtherKeys = make([][KeySize]byte, MaxTokenKeys) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.mod(&c)
			if err := c.Validate(); !errors.Is(err, ErrConfig) {
				t.Fatalf("err = %v", err)
			}
			if _, err := NewServer(c, testKey, testStart, detRand(1)); !errors.Is(err, ErrConfig) {
				t.Fatalf("NewServer err = %v", err)
			}
		})
	}
}

// During a key rotation a server opens tokens sealed under its own key or
// under any of its other keys, says which one opened each, and still
// refuses a token sealed under a key it does not hold.
func TestServerAcceptsARotationsKeys(t *testing.T) {
	now := testStart.Add(time.Second)
	next, gone := testKey, testKey
	next[0] ^= 0xff
	gone[1] ^= 0xff
	cfg := DefaultServerConfig()
	cfg.ProtocolID, cfg.Addr, cfg.GuardCapacity = testProtocol, testServer, 1024
	cfg.OtherKeys = [][KeySize]byte{next}
	srv, err := NewServer(cfg, testKey, testStart, detRand(1))
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		key  [KeySize]byte
		want int
	}{{next, 1}, {testKey, 0}, {next, 1}} {
		p := testParams()
		p.PlayerID = uint64(1000 + i)
		tok, err := IssueToken(tc.key, p, now, detRand(uint64(10+i)))
		if err != nil {
			t.Fatal(err)
		}
		cs, ss, g := connect(t, srv, tok, testClient, now, LoadNormal)
		if g.Key != tc.want || g.Claims.PlayerID != p.PlayerID {
			t.Fatalf("token %d: opened by key %d for player %d, want key %d, player %d", i, g.Key, g.Claims.PlayerID, tc.want, p.PlayerID)
		}
		exchange(t, cs, ss, testClient) // the keys came out of the right token
		srv.Consume(g.Claims.ID)
	}
	tok, err := IssueToken(gone, testParams(), now, detRand(20))
	if err != nil {
		t.Fatal(err)
	}
	reply, g, err := srv.Handle(nil, reqFor(t, tok), testClient2, now, LoadNormal)
	if r, _, _ := ParseDenied(reply); !errors.Is(err, ErrBadToken) || g != nil || r != ReasonBadToken {
		t.Fatalf("a key the server does not hold: err %v, granted %v, reason %v", err, g != nil, r)
	}
	st := srv.Stats()
	if st.Granted != 3 || st.GrantedByKey != [MaxTokenKeys]uint64{1, 2} || st.Denied[ReasonBadToken] != 1 {
		t.Fatalf("stats: granted %d by key %v, bad tokens %d", st.Granted, st.GrantedByKey, st.Denied[ReasonBadToken])
	}

	// The keys reloaded (the rotation's last step, and a new one's first):
	// testKey is no longer held, gone is; a refused set changes nothing.
	if err := srv.SetKeys(next, [][KeySize]byte{gone, gone}); !errors.Is(err, ErrConfig) {
		t.Fatalf("SetKeys with a key twice: %v", err)
	}
	if err := srv.SetKeys(next, [][KeySize]byte{gone}); err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		key  [KeySize]byte
		want int // -1: refused
	}{{testKey, -1}, {gone, 1}, {next, 0}} {
		p := testParams()
		p.PlayerID = uint64(2000 + i)
		tok, err := IssueToken(tc.key, p, now, detRand(uint64(30+i)))
		if err != nil {
			t.Fatal(err)
		}
		_, g, err := srv.Handle(nil, reqFor(t, tok), netip.AddrPortFrom(testClient.Addr(), uint16(3000+i)), now, LoadNormal)
		switch {
		case tc.want < 0 && (g != nil || !errors.Is(err, ErrBadToken)):
			t.Fatalf("after SetKeys, a token under the dropped key: granted %v, err %v", g != nil, err)
		case tc.want >= 0 && (g == nil || g.Key != tc.want):
			t.Fatalf("after SetKeys, token %d: err %v, want key %d", i, err, tc.want)
		}
	}

	// A key listed twice is an operator's mistake, not a second key.
	cfg.OtherKeys = [][KeySize]byte{next, testKey}
	if _, err := NewServer(cfg, testKey, testStart, detRand(1)); !errors.Is(err, ErrConfig) {
		t.Fatalf("own key listed again: err %v", err)
	}
	cfg.OtherKeys = [][KeySize]byte{next, gone, next}
	if _, err := NewServer(cfg, testKey, testStart, detRand(1)); !errors.Is(err, ErrConfig) {
		t.Fatalf("other key listed twice: err %v", err)
	}
}

func TestServerIgnoresNonRequests(t *testing.T) {
	srv := newTestServer(t, 1)
	id := TokenID{1}
	tests := []struct {
		name string
		pkt  []byte
		want error
	}{
		{"empty", nil, ErrGarbage},
		{"short request", append([]byte{KindConnectRequest.ControlByte()}, make([]byte, 99)...), ErrGarbage},
		{"denied", AppendDenied(nil, ReasonBusy, id), ErrUnexpected},
		{"data", make([]byte, 40), ErrUnexpected},
		{"random bytes behind a request kind byte (no magic)", func() []byte {
			r := reqFor(t, issue(t, testParams(), testStart.Add(time.Second), 1))
			r[1] = 'X'
			return r
		}(), ErrGarbage},
		{"nonzero padding", func() []byte {
			r := reqFor(t, issue(t, testParams(), testStart.Add(time.Second), 1))
			r[RequestSize-1] = 1
			return r
		}(), ErrMalformed},
		{"cookie in a connect request", func() []byte {
			r := reqFor(t, issue(t, testParams(), testStart.Add(time.Second), 1))
			r[reqCookie] = 1
			return r
		}(), ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, g, err := srv.Handle(nil, tc.pkt, testClient, testStart.Add(time.Second), LoadNormal)
			if len(out) != 0 || g != nil || !errors.Is(err, tc.want) {
				t.Fatalf("reply %d bytes, grant %v, err %v; want silence and %v", len(out), g != nil, err, tc.want)
			}
		})
	}
}

// TestRefusalsAllocateNothing: every way a request is refused — garbage,
// malformed, each Denied, a bad cookie — allocates nothing, so a flood of any
// of them costs the server CPU only.
func TestRefusalsAllocateNothing(t *testing.T) {
	now := testStart.Add(time.Second)
	srv := newTestServer(t, 1)
	valid := reqFor(t, issue(t, testParams(), now, 1))
	if _, g, err := srv.Handle(nil, valid, testClient, now, LoadNormal); g == nil {
		t.Fatal(err)
	}
	forged := reqFor(t, issue(t, testParams(), now, 2))
	forged[reqWire+TokenHeaderSize+5] ^= 1
	expired := reqFor(t, issue(t, testParams(), now.Add(-time.Hour+time.Second), 3))
	badCookie := reqFor(t, issue(t, testParams(), now, 4))
	badCookie[0] = KindChallengeResponse.ControlByte()
	badCookie[reqCookie+9] = 1
	tests := []struct {
		name string
		pkt  []byte
		src  netip.AddrPort
		want error
	}{
		{"garbage", garbageOf(300), testClient, ErrGarbage},
		{"forged sealed part", forged, testClient, ErrBadToken},
		{"expired", expired, testClient, ErrTokenExpired},
		{"token in use elsewhere", valid, testClient2, ErrTokenInUse},
		{"bad cookie", badCookie, testClient, ErrAuth},
	}
	var out [MaxPacketSize]byte
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			allocs := testing.AllocsPerRun(100, func() {
				_, _, err = srv.Handle(out[:0], tc.pkt, tc.src, now, LoadNormal)
			})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if allocs != 0 {
				t.Fatalf("%v allocations per refusal", allocs)
			}
		})
	}
}
