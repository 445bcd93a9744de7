package client_test

import (
	"net"
	"os"
	"sync"
	"time"

	"github.com/ghostwire/ghostwire/replication/netsim"
)

// simConn puts a netsim pipe between a client's socket and the network, in
// real time: what the client writes is impaired by pipe.AtoB, what arrives
// by pipe.BtoA. One pump goroutine moves packets; Close stops it and closes
// the socket. It serves one peer (the server), which is all a client talks to.
type simConn struct {
	net.PacketConn // the real socket
	start          time.Time

	mu   sync.Mutex
	pipe *netsim.Pipe
	dst  net.Addr // where AtoB delivers (the server)
	src  net.Addr // who BtoA delivers as (the server)

	in     chan []byte
	dlMu   sync.Mutex
	dl     time.Time
	dlWake chan struct{}
	closed chan struct{}
	once   sync.Once
	pumped chan struct{}
}

func newSimConn(pc net.PacketConn, ab, ba netsim.Config) *simConn {
	pipe, err := netsim.NewPipe(ab, ba)
	if err != nil {
		panic(err)
	}
	s := &simConn{PacketConn: pc, start: time.Now(), pipe: pipe, in: make(chan []byte, 4096),
		dlWake: make(chan struct{}, 1), closed: make(chan struct{}), pumped: make(chan struct{})}
	go s.pump()
	return s
}

func (s *simConn) now() time.Duration { return time.Since(s.start) }

func (s *simConn) pump() {
	defer close(s.pumped)
	buf := make([]byte, 2048)
	for {
		select {
		case <-s.closed:
			return
		default:
		}
		s.PacketConn.SetReadDeadline(time.Now().Add(time.Millisecond))
		n, from, err := s.PacketConn.ReadFrom(buf)
		s.mu.Lock()
		now := s.now()
		if err == nil {
			s.src = from
			s.pipe.BtoA.Send(now, buf[:n])
		}
		s.pipe.AtoB.Deliver(now, func(p []byte) {
			if s.dst != nil {
				s.PacketConn.WriteTo(p, s.dst)
			}
		})
		s.pipe.BtoA.Deliver(now, func(p []byte) {
			select {
			case s.in <- append([]byte(nil), p...):
			default: // the reader is gone or far behind: a full socket buffer drops too
			}
		})
		s.mu.Unlock()
	}
}

func (s *simConn) WriteTo(p []byte, addr net.Addr) (int, error) {
	select {
	case <-s.closed:
		return 0, net.ErrClosed
	default:
	}
	s.mu.Lock()
	s.dst = addr
	s.pipe.AtoB.Send(s.now(), p)
	s.mu.Unlock()
	return len(p), nil
}

func (s *simConn) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		s.dlMu.Lock()
		dl := s.dl
		s.dlMu.Unlock()
		var timer *time.Timer
		var expired <-chan time.Time
		if !dl.IsZero() {
			d := time.Until(dl)
			if d <= 0 {
				return 0, nil, os.ErrDeadlineExceeded
			}
			timer = time.NewTimer(d)
			expired = timer.C
		}
		stop := func() {
			if timer != nil {
				timer.Stop()
			}
		}
		select {
		case p := <-s.in:
			stop()
			s.mu.Lock()
			src := s.src
			s.mu.Unlock()
			return copy(b, p), src, nil
		case <-expired:
			return 0, nil, os.ErrDeadlineExceeded
		case <-s.dlWake:
			stop()
			continue // the deadline moved
		case <-s.closed:
			stop()
			return 0, nil, net.ErrClosed
		}
	}
}

func (s *simConn) SetReadDeadline(t time.Time) error {
	s.dlMu.Lock()
	s.dl = t
	s.dlMu.Unlock()
	select {
	case s.dlWake <- struct{}{}:
	default:
	}
	return nil
}

func (s *simConn) Close() error {
	s.once.Do(func() {
		close(s.closed)
		<-s.pumped
		s.PacketConn.Close()
	})
	return nil
}
