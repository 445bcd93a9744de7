package main

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/ghostwire/ghostwire/replication/netsim"
)

// relay is the impairment every library's traffic crosses in the lossy run:
// a UDP relay on loopback. Clients send to its front socket; for each client
// address it opens a back socket of its own towards the server (so the
// server still sees one address per client) and runs one netsim.Link per
// direction: the project's deterministic link model (seeded per client and
// direction), driven here in real time. Each link drops with Bernoulli
// probability Loss and delays by Latency (FIFO, no jitter); RTT = 2 ×
// Latency. The same relay code, configuration and seeds serve every library.
type relay struct {
	front  *net.UDPConn
	server netip.AddrPort
	cfg    netsim.Config
	start  time.Time

	mu    sync.Mutex
	flows map[netip.AddrPort]*flow
	list  []*flow
	seed  uint64

	wake chan struct{}
	done chan struct{}
	wg   sync.WaitGroup
}

type flow struct {
	client   netip.AddrPort
	back     *net.UDPConn
	up, down *netsim.Link
}

const maxFlows = 4096

func startRelay(server netip.AddrPort, cfg netsim.Config) (*relay, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	front, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		return nil, err
	}
	_ = front.SetReadBuffer(sockBuf)
	_ = front.SetWriteBuffer(sockBuf)
	r := &relay{front: front, server: server, cfg: cfg, start: time.Now(), flows: map[netip.AddrPort]*flow{},
		seed: cfg.Seed, wake: make(chan struct{}, 1), done: make(chan struct{})}
	r.wg.Add(2)
	go r.readFront()
	go r.schedule()
	return r, nil
}

func (r *relay) addr() netip.AddrPort { return r.front.LocalAddr().(*net.UDPAddr).AddrPort() }

func (r *relay) now() time.Duration { return time.Since(r.start) }

func (r *relay) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *relay) readFront() {
	defer r.wg.Done()
	buf := make([]byte, 2048)
	for {
		n, from, err := r.front.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		r.mu.Lock()
		f := r.flows[from]
		if f == nil {
			f = r.newFlow(from)
		}
		if f != nil {
			f.up.Send(r.now(), buf[:n])
		}
		r.mu.Unlock()
		r.poke()
	}
}

// newFlow opens the back socket of a new client (r.mu held).
func (r *relay) newFlow(client netip.AddrPort) *flow {
	if len(r.list) >= maxFlows {
		return nil
	}
	back, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		return nil
	}
	_ = back.SetReadBuffer(1 << 20)
	up, down := r.cfg, r.cfg
	r.seed++
	up.Seed = r.seed * 2
	down.Seed = r.seed*2 + 1
	f := &flow{client: client, back: back}
	f.up, _ = netsim.NewLink(up) // validated above
	f.down, _ = netsim.NewLink(down)
	r.flows[client] = f
	r.list = append(r.list, f)
	r.wg.Add(1)
	go r.readBack(f)
	return f
}

func (r *relay) readBack(f *flow) {
	defer r.wg.Done()
	buf := make([]byte, 2048)
	for {
		n, _, err := f.back.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		r.mu.Lock()
		f.down.Send(r.now(), buf[:n])
		r.mu.Unlock()
		r.poke()
	}
}

// schedule delivers every packet when its link says it is due.
func (r *relay) schedule() {
	defer r.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		r.mu.Lock()
		now := r.now()
		next := now + time.Hour
		for _, f := range r.list {
			f.up.Deliver(now, func(p []byte) { _, _ = f.back.WriteToUDPAddrPort(p, r.server) })
			f.down.Deliver(now, func(p []byte) { _, _ = r.front.WriteToUDPAddrPort(p, f.client) })
			if at, ok := f.up.NextDelivery(); ok {
				next = min(next, at)
			}
			if at, ok := f.down.NextDelivery(); ok {
				next = min(next, at)
			}
		}
		r.mu.Unlock()
		t.Reset(max(next-r.now(), 0))
		select {
		case <-r.done:
			return
		case <-r.wake:
		case <-t.C:
		}
	}
}

// stats sums the links' counters: what was offered and what was dropped.
func (r *relay) stats() (up, down netsim.Stats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.list {
		a, b := f.up.Stats(), f.down.Stats()
		up.Sent += a.Sent
		up.Dropped.Loss += a.Dropped.Loss
		up.Dropped.InFlight += a.Dropped.InFlight
		down.Sent += b.Sent
		down.Dropped.Loss += b.Dropped.Loss
		down.Dropped.InFlight += b.Dropped.InFlight
	}
	return up, down
}

func (r *relay) close() {
	close(r.done)
	r.front.Close()
	r.mu.Lock()
	for _, f := range r.list {
		f.back.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}
