package handshake

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
	"time"
)

// Fuzz targets for every decoder that reads the wire, before and after the
// handshake (checklist SEC-12). Each checks: no panic, no reply larger than
// its request, canonical round trips, and that nothing forged is ever accepted.
// Seed corpora live in testdata/fuzz/<target>/ as well as in f.Add.

var fuzzNow = testStart.Add(2 * time.Second)

// newFuzzServer is a server with deterministic secrets: two built with the same
// seed mint the same cookies. It holds a key rotation's second key too, so
// every token that does not open tries it: no token is minted under it, so
// nothing may ever be granted under it.
func newFuzzServer(tb testing.TB) *Server {
	cfg := DefaultServerConfig()
	cfg.ProtocolID, cfg.Addr, cfg.GuardCapacity = testProtocol, testServer, 16
	other := testKey
	other[7] ^= 0x5a
	cfg.OtherKeys = [][KeySize]byte{other}
	s, err := NewServer(cfg, testKey, testStart, detRand(77))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func fuzzToken(tb testing.TB) []byte { return issue(tb, testParams(), testStart.Add(time.Second), 5) }

func fuzzSrc(port uint16) netip.AddrPort {
	return netip.AddrPortFrom(testClient.Addr(), max(port, 1))
}

// genuineCookie is the cookie a fresh fuzz server mints for src at fuzzNow.
func genuineCookie(tb testing.TB, src netip.AddrPort) Cookie {
	s := newFuzzServer(tb)
	id := TokenID(fuzzToken(tb)[hdrNonce : hdrNonce+TokenIDSize])
	c, err := s.jar.mint(fuzzNow, canonAddr(src), &id)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

type reqSeed struct {
	name string
	pkt  []byte
	pad  bool // the target pads pkt with zeros to RequestSize
	load uint8
	port uint16
}

// trim drops a request's zero padding, so the fuzzer mutates (and minimizes)
// the 580 bytes that carry information.
func trim(p []byte) []byte { return bytes.TrimRight(p, "\x00") }

func seedsConnectRequest(tb testing.TB) []reqSeed {
	tok := fuzzToken(tb)
	req := appendRequest(nil, KindConnectRequest, tok[:wireTokenSize], Cookie{})
	resp := appendRequest(nil, KindChallengeResponse, tok[:wireTokenSize], genuineCookie(tb, fuzzSrc(50000)))
	oldVersion := append([]byte(nil), req...)
	oldVersion[4] = 0
	return []reqSeed{
		{"request_normal", trim(req), true, uint8(LoadNormal), 50000},
		{"request_high", trim(req), true, uint8(LoadHigh), 50000},
		{"request_full_length", req, false, uint8(LoadNormal), 50000},
		{"response_genuine_cookie", trim(resp), true, uint8(LoadHigh), 50000},
		{"response_cookie_other_port", trim(resp), true, uint8(LoadHigh), 50001},
		{"request_other_version", trim(oldVersion), true, uint8(LoadNormal), 1},
		{"truncated", req[:100], false, uint8(LoadNormal), 1},
		{"kind_byte_only", []byte{0x07}, false, uint8(LoadFull), 1},
	}
}

func FuzzConnectRequest(f *testing.F) {
	for _, s := range seedsConnectRequest(f) {
		f.Add(s.pkt, s.pad, s.load, s.port)
	}
	f.Fuzz(func(t *testing.T, pkt []byte, pad bool, load uint8, port uint16) {
		if pad && len(pkt) < RequestSize {
			pkt = append(pkt, zeros[:RequestSize-len(pkt)]...)
		}
		srv := newFuzzServer(t)
		out, g, err := srv.Handle(nil, pkt, fuzzSrc(port), fuzzNow, Load(load%3))
		if len(out) > len(pkt) {
			t.Fatalf("reply %d bytes to a %d-byte request", len(out), len(pkt))
		}
		if len(out) == 0 && err == nil {
			t.Fatal("silent drop without an error")
		}
		if g != nil {
			if err != nil || len(out) != AcceptedSize || g.ID.IsZero() || g.Key != 0 {
				t.Fatalf("grant with err %v, reply %d bytes, under key %d", err, len(out), g.Key)
			}
		}
		if r, err := ParseConnectRequest(pkt); err == nil {
			if !bytes.Equal(r.Append(nil), pkt) {
				t.Fatal("decode → encode is not the identity")
			}
		} else if !errors.Is(err, ErrGarbage) && !errors.Is(err, ErrUnexpected) && !errors.Is(err, ErrMalformed) &&
			!errors.Is(err, ErrBadToken) && !errors.Is(err, ErrWrongVersion) {
			t.Fatalf("unclassified error %v", err)
		}
	})
}

type cookieSeed struct {
	name  string
	epoch uint64
	mac   []byte
	port  uint16
}

func seedsChallengeResponse(tb testing.TB) []cookieSeed {
	c := genuineCookie(tb, fuzzSrc(50000))
	return []cookieSeed{
		{"genuine", c.Epoch, c.MAC[:], 50000},
		{"other_port", c.Epoch, c.MAC[:], 50001},
		{"previous_epoch", c.Epoch - 1, c.MAC[:], 50000},
		{"next_epoch", c.Epoch + 1, c.MAC[:], 50000},
		{"zero", 0, make([]byte, 16), 1},
	}
}

// FuzzChallengeResponse: a cookie is accepted exactly when it is the one the
// server minted for that source address; no other (epoch, MAC) gets in.
func FuzzChallengeResponse(f *testing.F) {
	for _, s := range seedsChallengeResponse(f) {
		f.Add(s.epoch, s.mac, s.port)
	}
	tok := fuzzToken(f)
	f.Fuzz(func(t *testing.T, epoch uint64, mac []byte, port uint16) {
		var c Cookie
		c.Epoch = epoch
		copy(c.MAC[:], mac)
		src := fuzzSrc(port)
		pkt := appendRequest(nil, KindChallengeResponse, tok[:wireTokenSize], c)
		srv := newFuzzServer(t)
		out, g, err := srv.Handle(nil, pkt, src, fuzzNow, LoadHigh)
		if len(out) > len(pkt) {
			t.Fatalf("reply %d bytes", len(out))
		}
		genuine := c == genuineCookie(t, src)
		if (g != nil) != genuine {
			t.Fatalf("cookie %+v: granted %v, genuine %v (err %v)", c, g != nil, genuine, err)
		}
		if !genuine {
			if k, _ := Classify(out); k != KindChallenge || !errors.Is(err, ErrAuth) {
				t.Fatalf("refused cookie answered with %v, %v", k, err)
			}
		}
	})
}

type bytesSeed struct {
	name string
	b    []byte
}

func seedsParseToken(tb testing.TB) []bytesSeed {
	p6 := testParams()
	p6.ServerAddrs = []netip.AddrPort{testServer6, testServer}
	p6.UserData = bytes.Repeat([]byte{1}, MaxUserData)
	tok := fuzzToken(tb)
	return []bytesSeed{
		{"token", tok},
		{"ipv6_two_servers_full_user_data", issue(tb, p6, testStart, 6)},
		{"header_only", tok[:TokenHeaderSize]},
		{"zeros", make([]byte, TokenSize)},
	}
}

func FuzzParseToken(f *testing.F) {
	var genuine [][]byte
	for _, s := range seedsParseToken(f) {
		f.Add(s.b)
		if len(s.b) == TokenSize && s.name != "zeros" {
			genuine = append(genuine, s.b[:wireTokenSize])
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tok, err := ParseToken(b)
		if err != nil {
			if tok.NumServers != 0 || tok.ClientToServerKey != [KeySize]byte{} {
				t.Fatal("failed parse returned data")
			}
			return
		}
		if !bytes.Equal(tok.Bytes(), b) {
			t.Fatal("Bytes differs from the input")
		}
		var h TokenHeader
		if err := parseHeader(b[:TokenHeaderSize], &h); err != nil || h != tok.TokenHeader {
			t.Fatalf("header does not re-parse: %v", err)
		}
		if tok.NumServers < 1 || tok.NumServers > MaxServerAddrs || tok.Expires <= tok.Created || tok.Timeout <= 0 {
			t.Fatalf("parsed header out of range: %+v", tok.TokenHeader)
		}
		// The server side must not panic either, and only what the backend sealed
		// opens (the client's key copy is outside the seal and may differ).
		if _, err := OpenToken(testKey, b, fuzzNow, tok.Servers[0]); err == nil {
			for _, g := range genuine {
				if bytes.Equal(g, b[:wireTokenSize]) {
					return
				}
			}
			t.Fatalf("a token the backend never sealed opened: %x", b)
		}
	})
}

// newFuzzFixture returns a fixed client→server sender and server receiver with
// known packets sealed at known sequence numbers.
type fuzzFixture struct {
	send   *Session
	known  map[uint64][]byte // seq → the datagram sealed at it (short or long form)
	hdrLen map[uint64]int
}

func newFuzzFixture(tb testing.TB) *fuzzFixture {
	keys := SessionKeys{ClientToServer: [KeySize]byte{1}, ServerToClient: [KeySize]byte{2}}
	id := ConnID{0xC0, 0xFF, 0xEE, 1, 2, 3, 4, 5}
	send, err := newSession(RoleClient, id, keys, testServer)
	if err != nil {
		tb.Fatal(err)
	}
	fx := &fuzzFixture{send: send, known: map[uint64][]byte{}, hdrLen: map[uint64]int{}}
	for _, p := range []struct {
		seq  uint64
		hdr  []byte
		body string
		long bool
	}{
		{0, []byte{0x00, 0x12, 0x34}, "", false},
		{1, []byte{0x00, 0x12, 0x34}, "forty-byte packet: moves and events.", false},
		{5, []byte{0x01, 0xFF}, "ack", true},
		{1000, []byte{0x02, 0, 0, 0}, "bye", false},
	} {
		var pkt []byte
		if p.long {
			pkt = AppendRouted(pkt, id)
		}
		pkt = append(pkt, p.hdr...)
		pkt, err = send.Seal(pkt, pkt[len(pkt)-len(p.hdr):], []byte(p.body), p.seq)
		if err != nil {
			tb.Fatal(err)
		}
		fx.known[p.seq], fx.hdrLen[p.seq] = pkt, len(p.hdr)
	}
	disc, err := send.AppendDisconnect(nil, ReasonClientQuit)
	if err != nil {
		tb.Fatal(err)
	}
	fx.known[1001] = disc
	return fx
}

func (fx *fuzzFixture) receiver(tb testing.TB) *Session {
	keys := SessionKeys{ClientToServer: [KeySize]byte{1}, ServerToClient: [KeySize]byte{2}}
	r, err := newSession(RoleServer, fx.send.ID(), keys, testClient)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

type openSeed struct {
	name   string
	pkt    []byte
	hdrLen uint8
	seq    uint64
}

func seedsOpen(tb testing.TB) []openSeed {
	fx := newFuzzFixture(tb)
	return []openSeed{
		{"ack_only_seq0", fx.known[0], uint8(fx.hdrLen[0]), 0},
		{"data_seq1", fx.known[1], uint8(fx.hdrLen[1]), 1},
		{"routed_seq5", fx.known[5], uint8(fx.hdrLen[5]), 5},
		// Each form of a known packet as the other: the short form of the
		// long-form seq 5, the long form of the short-form seq 1.
		{"short_form_of_routed_seq5", fx.known[5][1+ConnIDSize:], uint8(fx.hdrLen[5]), 5},
		{"long_form_of_data_seq1", append(AppendRouted(nil, fx.send.ID()), fx.known[1]...), uint8(fx.hdrLen[1]), 1},
		{"data_seq1000", fx.known[1000], uint8(fx.hdrLen[1000]), 1000},
		{"disconnect", fx.known[1001], 0, 1001},
		{"data_wrong_seq", fx.known[1], uint8(fx.hdrLen[1]), 2},
		{"short", []byte{0x00, 1, 2, 3}, 1, 7},
	}
}

// FuzzOpen: arbitrary datagrams, header lengths and sequence numbers through the
// receive path of a session (short form, long form, Disconnect). Anything that
// authenticates must be exactly a packet the sender sealed at that sequence,
// in its own form or the other (short or long).
func FuzzOpen(f *testing.F) {
	for _, s := range seedsOpen(f) {
		f.Add(s.pkt, s.hdrLen, s.seq)
	}
	fx := newFuzzFixture(f)
	f.Fuzz(func(t *testing.T, pkt []byte, hdrLen uint8, seq uint64) {
		recv := fx.receiver(t)
		k, err := Classify(pkt)
		if err != nil {
			return
		}
		switch k {
		case KindDisconnect:
			r, err := recv.OpenDisconnect(pkt)
			if err == nil && (!bytes.Equal(pkt, fx.known[1001]) || r != ReasonClientQuit) {
				t.Fatalf("forged disconnect accepted: %x", pkt)
			}
			return
		case KindData, KindRouted:
		default:
			return
		}
		inner := pkt
		if k == KindRouted {
			id, rest, err := ParseRouted(pkt)
			if err != nil {
				return
			}
			if id != recv.ID() {
				return // the gateway would not route it here
			}
			inner = rest
		}
		n := min(int(hdrLen), len(inner))
		pt, _, err := recv.Open(nil, inner[:n], inner[n:], seq, testClient)
		if err != nil {
			return
		}
		// A known packet opens in either form: the long form is the short
		// form behind a prefix that only routes, the connection id being in
		// the associated data of both (docs/protocol.md § 7.9). So what must
		// match is the short form.
		want, ok := fx.known[seq]
		if _, short, err := ParseRouted(want); err == nil {
			want = short
		}
		if !ok || !bytes.Equal(want, inner) || n != fx.hdrLen[seq] {
			t.Fatalf("forged packet accepted: seq %d hdr %d %x → %q", seq, n, pkt, pt)
		}
	})
}

// FuzzSealOpen is the round trip: write → read gives the payload back, and the
// packet opens at no other sequence number.
func FuzzSealOpen(f *testing.F) {
	f.Add([]byte{0, 1, 2}, []byte("payload"), uint64(0))
	f.Add([]byte{}, []byte{}, uint64(1<<63))
	f.Add(make([]byte, 300), make([]byte, 800), uint64(12345))
	f.Fuzz(func(t *testing.T, hdr, payload []byte, seq uint64) {
		send, recv := testProtectors(t)
		ct, err := send.Seal(nil, hdr, payload, seq)
		if len(hdr)+len(payload)+TagSize > MaxPacketSize {
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("oversized: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		pt, err := recv.Open(nil, hdr, ct, seq)
		if err != nil || !bytes.Equal(pt, payload) {
			t.Fatalf("round trip: %v", err)
		}
		if _, err := recv.Open(nil, hdr, ct, seq+1); err == nil {
			t.Fatal("opened at another sequence number")
		}
	})
}

func seedsClassify(tb testing.TB) []bytesSeed {
	srv := newFuzzServer(tb)
	tok := fuzzToken(tb)
	req := appendRequest(nil, KindConnectRequest, tok[:wireTokenSize], Cookie{})
	ch, _, _ := srv.Handle(nil, req, testClient, fuzzNow, LoadHigh)
	acc, _, _ := srv.Handle(nil, req, testClient, fuzzNow, LoadNormal)
	fx := newFuzzFixture(tb)
	return []bytesSeed{
		{"connect_request", req}, {"challenge", ch}, {"accepted", acc},
		{"denied", AppendDenied(nil, ReasonServerFull, TokenID(tok[hdrNonce:hdrNonce+TokenIDSize]))},
		{"disconnect", fx.known[1001]}, {"routed", fx.known[5]}, {"data", fx.known[1]},
		{"no_connection", []byte{KindNoConnection.ControlByte(), 1, 2, 3, 4, 5, 6, 7, 8}},
		{"one_byte", []byte{0xFF}}, {"empty", []byte{}},
	}
}

// FuzzClassify: the packet-type parse and every handshake decoder on arbitrary
// bytes, including the client's reply handling. Each decoder succeeds only on
// its own kind; NoConnection never answers anything but data and never
// amplifies.
func FuzzClassify(f *testing.F) {
	for _, s := range seedsClassify(f) {
		f.Add(s.b)
	}
	tok := fuzzToken(f)
	f.Fuzz(func(t *testing.T, pkt []byte) {
		k, err := Classify(pkt)
		if err != nil {
			if !errors.Is(err, ErrGarbage) {
				t.Fatalf("Classify error %v", err)
			}
		}
		ok := func(want Kind, err error) {
			if err == nil && k != want {
				t.Fatalf("%v decoder accepted a %v packet", want, k)
			}
		}
		_, err = ParseConnectRequest(pkt)
		if err == nil && k != KindConnectRequest && k != KindChallengeResponse {
			t.Fatalf("request decoder accepted %v", k)
		}
		_, _, err = ParseChallenge(pkt)
		ok(KindChallenge, err)
		_, _, err = ParseDenied(pkt)
		ok(KindDenied, err)
		_, err = ParseNoConnection(pkt)
		ok(KindNoConnection, err)
		id, rest, err := ParseRouted(pkt)
		ok(KindRouted, err)
		// SplitRouted (a packet already classified) on anything: no panic,
		// and on a long-form packet the same answer as ParseRouted.
		sid, srest, serr := SplitRouted(pkt)
		if k == KindRouted && (sid != id || !bytes.Equal(srest, rest) || (serr == nil) != (err == nil)) {
			t.Fatalf("SplitRouted %v %x %v, ParseRouted %v %x %v", sid, srest, serr, id, rest, err)
		}
		if serr == nil && (len(pkt) < MinRoutedSize || len(srest) != len(pkt)-1-ConnIDSize) {
			t.Fatalf("SplitRouted accepted %d bytes, %d after the id", len(pkt), len(srest))
		}
		_, err = ParseDisconnectID(pkt)
		ok(KindDisconnect, err)
		out, err := AppendNoConnection(nil, pkt)
		if err == nil && (len(out) > len(pkt) || (k != KindData && k != KindRouted)) {
			t.Fatalf("NoConnection of %d bytes answered a %d-byte %v", len(out), len(pkt), k)
		}
		c, err := NewClient(tok, testServer)
		if err != nil {
			t.Fatal(err)
		}
		before := c.State()
		if err := c.HandleReply(pkt); err != nil && c.State() != before && !errors.Is(err, ErrDenied) {
			t.Fatalf("failed reply changed state: %v", err)
		}
	})
}

// FuzzReplayWindow drives a ReplayWindow with arbitrary operations against the
// exact reference model: each 9-byte record is an op (low bit: commit or
// check) and a sequence delta.
func FuzzReplayWindow(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0x80})
	f.Add(bytes.Repeat([]byte{3, 7, 0, 0, 0, 0, 0, 0, 0}, 300))
	f.Fuzz(func(t *testing.T, ops []byte) {
		var w ReplayWindow
		seen := map[uint64]bool{}
		var newest, cur uint64
		any := false
		for len(ops) >= 9 {
			op := ops[0]
			var d uint64
			for i := range 8 {
				d |= uint64(ops[1+i]) << (8 * i)
			}
			ops = ops[9:]
			if op&2 != 0 {
				cur -= d % (4 * ReplayWindowSize)
			} else {
				cur += d
			}
			want := error(nil)
			switch {
			case any && cur <= newest && newest-cur >= ReplayWindowSize:
				want = ErrStale
			case seen[cur]:
				want = ErrDuplicate
			}
			var err error
			if op&1 == 1 {
				err = w.Commit(cur)
				if want == nil {
					seen[cur] = true
					newest = max(newest, cur)
					if !any {
						newest = cur
					}
					any = true
				}
			} else {
				err = w.Check(cur)
			}
			if err != want {
				t.Fatalf("seq %d: %v, want %v", cur, err, want)
			}
		}
	})
}
