package handshake

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestTokenRoundTrip(t *testing.T) {
	now := testStart.Add(time.Minute)
	tests := []struct {
		name   string
		params func(*TokenParams)
		server netip.AddrPort
	}{
		{name: "ipv4 server, user data", params: func(*TokenParams) {}, server: testServer},
		{name: "no user data", params: func(p *TokenParams) { p.UserData = nil }, server: testServer},
		{name: "full user data", params: func(p *TokenParams) { p.UserData = bytes.Repeat([]byte{0xA5}, MaxUserData) }, server: testServer},
		{name: "ipv6 server", params: func(p *TokenParams) { p.ServerAddrs = []netip.AddrPort{testServer6} }, server: testServer6},
		{name: "eight servers, last one", params: func(p *TokenParams) {
			p.ServerAddrs = nil
			for i := range MaxServerAddrs - 1 {
				p.ServerAddrs = append(p.ServerAddrs, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), 7000))
			}
			p.ServerAddrs = append(p.ServerAddrs, testServer6)
		}, server: testServer6},
		{name: "ipv4-mapped server address is stored as ipv4", params: func(p *TokenParams) {
			p.ServerAddrs = []netip.AddrPort{netip.MustParseAddrPort("[::ffff:203.0.113.7]:7777")}
		}, server: testServer},
		{name: "sub-second expiry rounds up", params: func(p *TokenParams) { p.Expiry = 300 * time.Millisecond }, server: testServer},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := testParams()
			tc.params(&p)
			tok := issue(t, p, now, uint64(i))
			if len(tok) != TokenSize {
				t.Fatalf("token is %d bytes, want %d", len(tok), TokenSize)
			}
			pub, err := ParseToken(tok)
			if err != nil {
				t.Fatalf("ParseToken: %v", err)
			}
			wantExpiry := now.Unix() + int64((p.Expiry+time.Second-1)/time.Second)
			if pub.ProtocolID != p.ProtocolID || pub.Created != now.Unix() || pub.Expires != wantExpiry || pub.Timeout != p.Timeout {
				t.Errorf("header = %+v", pub.TokenHeader)
			}
			if pub.NumServers != len(p.ServerAddrs) || !pub.Lists(tc.server) {
				t.Errorf("servers = %v (n=%d), want %v listed", pub.Servers, pub.NumServers, tc.server)
			}
			if !bytes.Equal(pub.Bytes(), tok) {
				t.Error("Bytes() differs from the parsed token")
			}
			c, err := OpenToken(testKey, tok, now, tc.server)
			if err != nil {
				t.Fatalf("OpenToken: %v", err)
			}
			if c.PlayerID != p.PlayerID || !bytes.Equal(c.UserData[:c.UserDataLen], p.UserData) {
				t.Errorf("claims player %d user %q", c.PlayerID, c.UserData[:c.UserDataLen])
			}
			if c.ClientToServerKey != pub.ClientToServerKey || c.ServerToClientKey != pub.ServerToClientKey {
				t.Error("sealed keys differ from the client's copy")
			}
			if c.ID != pub.ID {
				t.Error("token id differs")
			}
		})
	}
}

// TestTokenLayout pins the documented byte offsets (docs/protocol.md §7).
func TestTokenLayout(t *testing.T) {
	p := testParams()
	now := testStart.Add(time.Minute)
	tok := issue(t, p, now, 7)
	pub, err := ParseToken(tok)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name string
		got  uint64
		want uint64
	}{
		{"sizes", TokenHeaderSize<<32 | SealedSize<<16 | TokenSize, 209<<32 | 346<<16 | 619},
		{"protocol id @28", binary.LittleEndian.Uint64(tok[28:]), p.ProtocolID},
		{"created @36", binary.LittleEndian.Uint64(tok[36:]), uint64(now.Unix())},
		{"expires @44", binary.LittleEndian.Uint64(tok[44:]), uint64(now.Unix() + 60)},
		{"timeout ms @52", uint64(binary.LittleEndian.Uint32(tok[52:])), 10000},
		{"server count @56", uint64(tok[56]), 1},
		{"server family @57", uint64(tok[57]), 4},
		{"server port @74", uint64(binary.LittleEndian.Uint16(tok[74:])), 7777},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	if string(tok[:4]) != "GW\x00\x01" || !bytes.Equal(tok[4:28], pub.ID[:]) {
		t.Errorf("version %q / id mismatch", tok[:4])
	}
	if !bytes.Equal(tok[58:62], []byte{203, 0, 113, 7}) {
		t.Errorf("server address bytes %v", tok[58:62])
	}
	if !bytes.Equal(tok[555:587], pub.ClientToServerKey[:]) || !bytes.Equal(tok[587:619], pub.ServerToClientKey[:]) {
		t.Error("client key copy not at 555/587")
	}
}

func TestIssueTokenRejectsBadParams(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*TokenParams)
	}{
		{"zero expiry", func(p *TokenParams) { p.Expiry = 0 }},
		{"expiry beyond max lifetime", func(p *TokenParams) { p.Expiry = MaxTokenLifetime + time.Second }},
		{"zero timeout", func(p *TokenParams) { p.Timeout = 0 }},
		{"timeout beyond max", func(p *TokenParams) { p.Timeout = MaxTimeout + time.Millisecond }},
		{"no servers", func(p *TokenParams) { p.ServerAddrs = nil }},
		{"nine servers", func(p *TokenParams) { p.ServerAddrs = make([]netip.AddrPort, 9) }},
		{"invalid server", func(p *TokenParams) { p.ServerAddrs = []netip.AddrPort{{}} }},
		{"port zero", func(p *TokenParams) { p.ServerAddrs = []netip.AddrPort{netip.MustParseAddrPort("1.2.3.4:0")} }},
		{"unspecified address", func(p *TokenParams) { p.ServerAddrs = []netip.AddrPort{netip.MustParseAddrPort("0.0.0.0:7777")} }},
		{"zoned address", func(p *TokenParams) { p.ServerAddrs = []netip.AddrPort{netip.MustParseAddrPort("[fe80::1%eth0]:7777")} }},
		{"user data too long", func(p *TokenParams) { p.UserData = make([]byte, MaxUserData+1) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := testParams()
			tc.mod(&p)
			if _, err := IssueToken(testKey, p, testStart, detRand(1)); !errors.Is(err, ErrParams) {
				t.Fatalf("err = %v, want ErrParams", err)
			}
		})
	}
	t.Run("broken randomness", func(t *testing.T) {
		if _, err := IssueToken(testKey, testParams(), testStart, strings.NewReader("short")); !errors.Is(err, ErrRand) {
			t.Fatalf("err = %v, want ErrRand", err)
		}
		if _, err := IssueToken(testKey, testParams(), testStart, bytes.NewReader(make([]byte, 200))); !errors.Is(err, ErrRand) {
			t.Fatalf("constant randomness: err = %v, want ErrRand", err)
		}
	})
}

func TestOpenTokenRejects(t *testing.T) {
	now := testStart.Add(time.Minute)
	tok := issue(t, testParams(), now, 3)
	expires := now.Add(time.Minute)
	otherKey := testKey
	otherKey[0] ^= 1
	tests := []struct {
		name   string
		key    [KeySize]byte
		tok    []byte
		now    time.Time
		server netip.AddrPort
		want   error
	}{
		{"valid one second before expiry", testKey, tok, expires.Add(-time.Second), testServer, nil},
		{"expired at the expiry second", testKey, tok, expires, testServer, ErrTokenExpired},
		{"expired long after", testKey, tok, expires.Add(time.Hour), testServer, ErrTokenExpired},
		{"server not listed", testKey, tok, now, testServer6, ErrWrongServer},
		{"same ip other port", testKey, tok, now, netip.AddrPortFrom(testServer.Addr(), 7778), ErrWrongServer},
		{"wrong key", otherKey, tok, now, testServer, ErrBadToken},
		{"truncated", testKey, tok[:TokenSize-1], now, testServer, ErrBadToken},
		{"sealed byte flipped", testKey, flipBit(tok, 8*(TokenHeaderSize+100)), now, testServer, ErrBadToken},
		{"tag byte flipped", testKey, flipBit(tok, 8*(wireTokenSize-1)), now, testServer, ErrBadToken},
		{"nonce (token id) flipped", testKey, flipBit(tok, 8*hdrNonce+3), now, testServer, ErrBadToken},
		{"protocol id flipped", testKey, flipBit(tok, 8*hdrProtocol), now, testServer, ErrBadToken},
		{"user-data length flipped is caught by the tag", testKey, flipBit(tok, 8*(TokenHeaderSize+privUserLen)), now, testServer, ErrBadToken},
		{"expiry extended", testKey, flipBit(tok, 8*hdrExpires+1), now, testServer, ErrBadToken},
		{"version changed", testKey, flipBit(tok, 8*3), now, testServer, ErrWrongVersion},
		{"magic changed", testKey, flipBit(tok, 8*1), now, testServer, ErrBadToken},
		{"unused server slot dirty", testKey, flipBit(tok, 8*(TokenHeaderSize-1)), now, testServer, ErrBadToken},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := OpenToken(tc.key, tc.tok, tc.now, tc.server)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if err != nil && (c.PlayerID != 0 || c.ClientToServerKey != [KeySize]byte{}) {
				t.Error("a refused token leaked claims")
			}
		})
	}
}

// TestTokenHeaderEveryBitAuthenticated flips every bit of the header and the
// sealed part: none may yield the original claims silently.
func TestTokenHeaderEveryBitAuthenticated(t *testing.T) {
	now := testStart.Add(time.Minute)
	tok := issue(t, testParams(), now, 4)
	for bit := range 8 * wireTokenSize {
		bad := flipBit(tok, bit)
		if _, err := OpenToken(testKey, bad, now, testServer); err == nil {
			t.Fatalf("bit %d flipped: token still opens", bit)
		}
	}
}
