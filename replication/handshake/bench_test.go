package handshake

import (
	"math/rand/v2"
	"net/netip"
	"strconv"
	"testing"
	"time"
)

// BenchmarkSealOpen: one packet sealed by the sender and opened by the
// receiver, replay window included, per iteration. Tracked: ns/op and 0
// allocs/op for 1200-byte (full) and 40-byte (typical small) datagrams.
func BenchmarkSealOpen(b *testing.B) {
	for _, size := range []int{1200, 40} {
		b.Run(strconv.Itoa(size)+"B", func(b *testing.B) {
			keys := SessionKeys{ClientToServer: [KeySize]byte{1}, ServerToClient: [KeySize]byte{2}}
			id := ConnID{1, 2, 3, 4, 5, 6, 7, 8}
			send, err := newSession(RoleClient, id, keys, testServer)
			if err != nil {
				b.Fatal(err)
			}
			recv, err := newSession(RoleServer, id, keys, testClient)
			if err != nil {
				b.Fatal(err)
			}
			hdr := []byte{0x00, 0x12, 0x34} // a loss-free steady-state notify header
			payload := make([]byte, size-len(hdr)-TagSize)
			var pkt, out [MaxPacketSize]byte
			seq := uint64(0)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				p := append(pkt[:0], hdr...)
				p, err := send.Seal(p, hdr, payload, seq)
				if err != nil {
					b.Fatal(err)
				}
				if len(p) != size {
					b.Fatalf("packet %d bytes", len(p))
				}
				if _, _, err := recv.Open(out[:0], p[:len(hdr)], p[len(hdr):], seq, testClient); err != nil {
					b.Fatal(err)
				}
				seq++
			}
		})
	}
}

// BenchmarkRejectGarbageHandshake: Server.Handle on hostile datagrams that
// must die before any crypto — random bytes, right kind byte with a wrong
// length, full-size requests with a wrong version or a non-canonical field.
// Tracked: ns/op and 0 allocs/op.
func BenchmarkRejectGarbageHandshake(b *testing.B) {
	srv := newTestServer(b, 1)
	rng := rand.New(rand.NewPCG(1, 1))
	valid := reqFor2(b, issue(b, testParams(), testStart.Add(time.Second), 1))
	var pkts [][]byte
	for i := range 256 {
		var p []byte
		switch i % 4 {
		case 0: // random bytes, random length
			p = make([]byte, 1+rng.IntN(MaxPacketSize))
			for j := range p {
				p[j] = byte(rng.Uint32())
			}
		case 1: // connect request kind, wrong length
			p = append([]byte{KindConnectRequest.ControlByte()}, make([]byte, rng.IntN(RequestSize-1))...)
		case 2: // full size, dirty padding
			p = append([]byte(nil), valid...)
			p[RequestSize-1-rng.IntN(100)] = 1
		case 3: // full size, zero token header (bad version)
			p = make([]byte, RequestSize)
			p[0] = KindChallengeResponse.ControlByte()
			p[1] = byte(rng.Uint32()) | 1
		}
		pkts = append(pkts, p)
	}
	src := netip.MustParseAddrPort("192.0.2.1:1000")
	now := testStart.Add(2 * time.Second)
	var out [MaxPacketSize]byte
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		r, g, _ := srv.Handle(out[:0], pkts[i&255], src, now, LoadNormal)
		if g != nil || len(r) > DeniedSize {
			b.Fatal("garbage got through")
		}
		i++
	}
}

func reqFor2(tb testing.TB, tok []byte) []byte {
	return appendRequest(nil, KindConnectRequest, tok[:wireTokenSize], Cookie{})
}

// BenchmarkHandshake measures the server's cost per handshake step (not tracked).
func BenchmarkHandshake(b *testing.B) {
	now := testStart.Add(2 * time.Second)
	b.Run("challenge", func(b *testing.B) { // LoadHigh: one cookie MAC
		srv := newTestServer(b, 1)
		req := reqFor2(b, issue(b, testParams(), testStart.Add(time.Second), 1))
		var out [MaxPacketSize]byte
		b.ReportAllocs()
		for b.Loop() {
			if r, _, _ := srv.Handle(out[:0], req, testClient, now, LoadHigh); len(r) != ChallengeSize {
				b.Fatal(len(r))
			}
		}
	})
	// A forged sealed part: every cheaper check passes, every key's open fails.
	badToken := func(b *testing.B, srv *Server) {
		req := reqFor2(b, issue(b, testParams(), testStart.Add(time.Second), 1))
		req[reqWire+TokenHeaderSize+10] ^= 1
		var out [MaxPacketSize]byte
		b.ReportAllocs()
		for b.Loop() {
			if r, _, _ := srv.Handle(out[:0], req, testClient, now, LoadNormal); len(r) != DeniedSize {
				b.Fatal(len(r))
			}
		}
	}
	b.Run("bad-token", func(b *testing.B) { // LoadNormal, sealed part forged: one XChaCha20-Poly1305 open
		badToken(b, newTestServer(b, 1))
	})
	b.Run("bad-token-4-keys", func(b *testing.B) { // the same under a rotation's 4 keys: 4 opens
		cfg := DefaultServerConfig()
		cfg.ProtocolID, cfg.Addr, cfg.GuardCapacity = testProtocol, testServer, 1024
		for i := range MaxTokenKeys - 1 {
			k := testKey
			k[0] ^= byte(i + 1)
			cfg.OtherKeys = append(cfg.OtherKeys, k)
		}
		srv, err := NewServer(cfg, testKey, testStart, detRand(1))
		if err != nil {
			b.Fatal(err)
		}
		badToken(b, srv)
	})
	b.Run("grant", func(b *testing.B) { // LoadNormal: token open, KDF, Accepted tag, guard insert
		const n = 4096
		reqs := make([][]byte, n)
		for i := range reqs {
			reqs[i] = reqFor2(b, issue(b, testParams(), testStart.Add(time.Second), uint64(i)))
		}
		cfg := DefaultServerConfig()
		cfg.ProtocolID, cfg.Addr, cfg.GuardCapacity = testProtocol, testServer, n
		var srv *Server
		var out [MaxPacketSize]byte
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			if i%n == 0 { // every token used: a fresh server (untimed)
				b.StopTimer()
				var err error
				if srv, err = NewServer(cfg, testKey, testStart, detRand(uint64(i))); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			if _, g, err := srv.Handle(out[:0], reqs[i%n], testClient, now, LoadNormal); g == nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("issue", func(b *testing.B) {
		r := detRand(1)
		p := testParams()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := IssueToken(testKey, p, now, r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRateLimiterAllow: one decision for a flood of distinct sources.
func BenchmarkRateLimiterAllow(b *testing.B) {
	l, err := NewRateLimiter(DefaultRateLimitConfig(), detRand(1))
	if err != nil {
		b.Fatal(err)
	}
	i := uint32(0)
	now := time.Duration(0)
	b.ReportAllocs()
	for b.Loop() {
		i++
		now += time.Microsecond
		l.Allow(netip.AddrFrom4([4]byte{byte(i >> 16), byte(i >> 8), byte(i), 1}), now)
	}
}
