package main

// kcp-go (github.com/xtaci/kcp-go/v5), configured the way its README and
// KCP's own documentation recommend for latency-sensitive traffic such as
// games (see configureKCP). The server is kcp.Listener (one socket,
// recvmmsg/sendmmsg through x/net) with a reader goroutine per session, as
// the library is meant to be used; each client is a UDPSession over its own
// socket.

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"time"

	kcp "github.com/xtaci/kcp-go/v5"
)

// configureKCP applies the game settings to one session, on both ends:
//
//   - SetNoDelay(1, 10, 2, 1): KCP's "fastest" mode (skywind3000/kcp README,
//     "协议配置"/protocol configuration, and kcp-go's README link to it):
//     nodelay=1 (minimum RTO 30 ms instead of 100 ms, RTO grows ×1.5 per
//     timeout instead of ×2), interval=10 ms (the internal flush/update
//     clock), resend=2 (fast retransmit after 2 duplicate ACKs), nc=1
//     (congestion window off: a game sends at its own rate).
//   - SetWindowSize(128, 128): the window the KCP README pairs with the fast
//     mode (the default is 32); one message is one segment here, so it only
//     matters during a loss stall.
//   - SetStreamMode(false): message mode, so every Write is one segment and
//     every Read returns one whole message (the default, set explicitly).
//   - SetWriteDelay(false): Write flushes at once instead of waiting for the
//     next 10 ms update (the default, set explicitly).
//   - SetACKNoDelay(false): ACKs ride on the next flush (a Write, or the 10 ms
//     update) instead of one datagram per received packet; kcp-go marks the
//     immediate mode as for testing, and kcptun's default is off.
//   - MTU 1400 (the default); no FEC (dataShards = parityShards = 0: a 10/3
//     group of 40-byte inputs at 30 Hz fills only every 333 ms, so parity
//     would arrive long after a retransmission); 4 MiB socket buffers, the
//     same as ghostwire's gateway and the ENet run.
func configureKCP(s *kcp.UDPSession) {
	s.SetNoDelay(1, 10, 2, 1)
	s.SetWindowSize(128, 128)
	s.SetStreamMode(false)
	s.SetWriteDelay(false)
	s.SetACKNoDelay(false)
	s.SetMtu(1400)
}

const sockBuf = 4 << 20

// kcpBlock is the optional packet encryption: AES-128 (what kcp-go's README
// suggests when encrypting: "AES-128 is suggested for minimal encryption")
// with a fixed bench key. It adds a 16-byte nonce and a CRC-32 to every
// datagram.
func kcpBlock(crypt bool) kcp.BlockCrypt {
	if !crypt {
		return nil
	}
	k := sha256.Sum256([]byte("ghostwire bench/peers kcp key"))
	b, err := kcp.NewAESBlockCrypt(k[:16])
	if err != nil {
		panic(err)
	}
	return b
}

// ---------------------------------------------------------------------------
// Server

type kcpServer struct {
	l    *kcp.Listener
	rec  *recorder
	stop chan struct{}
	wg   sync.WaitGroup

	mu    sync.Mutex
	sess  []*kcpConn
	state int
}

type kcpConn struct {
	s       *kcp.UDPSession
	downSeq uint32
}

func startKCP(o serveOpts) (server, error) {
	l, err := kcp.ListenWithOptions("127.0.0.1:0", kcpBlock(o.crypt), 0, 0)
	if err != nil {
		return nil, err
	}
	_ = l.SetReadBuffer(sockBuf)
	_ = l.SetWriteBuffer(sockBuf)
	s := &kcpServer{l: l, rec: new(recorder), stop: make(chan struct{}), state: o.stateSize}
	s.wg.Add(2)
	go s.accept()
	go s.tick(time.Second / time.Duration(o.stateHz))
	return s, nil
}

func (s *kcpServer) accept() {
	defer s.wg.Done()
	for {
		sess, err := s.l.AcceptKCP()
		if err != nil {
			return
		}
		configureKCP(sess)
		c := &kcpConn{s: sess}
		s.mu.Lock()
		s.sess = append(s.sess, c)
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			buf := make([]byte, 2048)
			var last uint32
			for {
				n, err := sess.Read(buf)
				if err != nil {
					return
				}
				s.rec.recv(buf[:n], &last, nowNS())
			}
		}()
	}
}

// tick sends every session its state at the state rate, from one goroutine,
// as a game server's tick does.
func (s *kcpServer) tick(period time.Duration) {
	defer s.wg.Done()
	t := time.NewTicker(period)
	defer t.Stop()
	buf := make([]byte, s.state)
	var conns []*kcpConn
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		conns = append(conns[:0], s.sess...)
		s.mu.Unlock()
		for _, c := range conns {
			c.downSeq++
			ts := nowNS()
			stamp(buf, ts, 0, c.downSeq)
			if _, err := c.s.Write(buf); err == nil {
				s.rec.sent(ts)
			}
		}
	}
}

func (s *kcpServer) addr() netip.AddrPort {
	return s.l.Addr().(*net.UDPAddr).AddrPort()
}

func (s *kcpServer) setWindow(a, b int64) { s.rec.setWindow(a, b) }
func (s *kcpServer) counts() (uint64, uint64) {
	return s.rec.recvWin.Load(), s.rec.sentWin.Load()
}

func (s *kcpServer) report() serverReport {
	snmp := kcp.DefaultSnmp.Copy()
	return serverReport{Up: s.rec.summary(), DownSent: s.rec.sentWin.Load(), Extra: map[string]any{
		"retrans_segs": snmp.RetransSegs, "fast_retrans_segs": snmp.FastRetransSegs,
		"lost_segs": snmp.LostSegs, "repeat_segs": snmp.RepeatSegs,
		"out_pkts": snmp.OutPkts, "in_pkts": snmp.InPkts,
	}}
}

func (s *kcpServer) close() {
	close(s.stop)
	s.mu.Lock()
	for _, c := range s.sess {
		c.s.Close()
	}
	s.mu.Unlock()
	s.l.Close()
	s.wg.Wait()
}

// ---------------------------------------------------------------------------
// Clients

type kcpClients struct {
	goSide
	opts  clientOpts
	mu    sync.Mutex
	ss    []*kcp.UDPSession
	socks []net.PacketConn
	wg    sync.WaitGroup
	in    *inputDriver
}

func newKCPClients(o clientOpts) (clientSet, error) {
	return &kcpClients{goSide: newGoSide(), opts: o}, nil
}

func (c *kcpClients) dial(ctx context.Context, n int, server, via netip.AddrPort) error {
	c.ss = make([]*kcp.UDPSession, n)
	c.socks = make([]net.PacketConn, n)
	raddr := net.UDPAddrFromAddrPort(via)
	block := kcpBlock(c.opts.crypt)
	connected := make(chan int, n)
	for i := range n {
		pc, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
		if err != nil {
			return err
		}
		_ = pc.SetReadBuffer(1 << 20)
		c.socks[i] = pc
		// NewConn3 over our own socket (wrapped to count its bytes): what
		// kcp.DialWithOptions does with a socket of its own.
		sess, err := kcp.NewConn3(rand.Uint32(), raddr, block, 0, 0, &countConn{pc, c.tr})
		if err != nil {
			return err
		}
		configureKCP(sess)
		c.mu.Lock()
		c.ss[i] = sess
		c.mu.Unlock()
		// KCP has no handshake: the first segment creates the server's
		// session. Sequence 0 is a hello the receiver does not count.
		hello := make([]byte, c.opts.inputSize)
		stamp(hello, nowNS(), uint32(i), 0)
		if _, err := sess.Write(hello); err != nil {
			return err
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			buf := make([]byte, 2048)
			var last uint32
			first := true
			for {
				n, err := sess.Read(buf)
				if err != nil {
					return
				}
				c.rec.recv(buf[:n], &last, nowNS())
				if first {
					first = false
					connected <- i
				}
			}
		}()
	}
	// Connected: the first state message arrived.
	for range n {
		select {
		case <-connected:
		case <-ctx.Done():
			return fmt.Errorf("kcp-go: clients connecting: %w", ctx.Err())
		}
	}
	c.in = startInputs(n, c.opts, c.rec, func(i int, p []byte) {
		_, _ = c.ss[i].Write(p) // one segment, flushed at once
	})
	return nil
}

func (c *kcpClients) close() {
	if c.in != nil {
		c.in.stop()
	}
	c.mu.Lock()
	for _, s := range c.ss {
		if s != nil {
			s.Close()
		}
	}
	for _, pc := range c.socks {
		if pc != nil {
			pc.Close()
		}
	}
	c.mu.Unlock()
	c.wg.Wait()
}
