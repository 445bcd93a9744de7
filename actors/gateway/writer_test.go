package gateway

import (
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/udp"
)

// fakeConn is a udp.Conn whose writes wait on a gate and record sizes.
type fakeConn struct {
	gate    chan struct{}
	mu      sync.Mutex
	written []int
	fail    atomic.Bool // the first message of each batch fails
	stall   atomic.Bool // every batch sends nothing and reports no error
}

func (c *fakeConn) ReadBatch([]udp.Message) (int, error) { return 0, udp.ErrClosed }
func (c *fakeConn) WriteBatch(ms []udp.Message) (int, error) {
	<-c.gate
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stall.Load() {
		return 0, nil
	}
	if c.fail.Load() && len(ms) > 0 {
		c.fail.Store(false)
		return 0, errors.New("sendmmsg: invalid argument")
	}
	for _, m := range ms {
		c.written = append(c.written, m.N)
	}
	return len(ms), nil
}
func (c *fakeConn) LocalAddr() netip.AddrPort { return netip.AddrPort{} }
func (c *fakeConn) Close() error              { return nil }

func (c *fakeConn) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.written)
}

func datagram(n int) *msg.Datagram {
	d := msg.NewDatagram()
	d.N = n
	d.Addr = netip.MustParseAddrPort("127.0.0.1:9")
	return d
}

// A full queue drops the newest datagram and counts it; Send never blocks.
func TestWriterDropsWhenFull(t *testing.T) {
	c := &fakeConn{gate: make(chan struct{})}
	w := newWriter(c, 4, 2)
	w.start()
	// The writer takes the first datagram and blocks in WriteBatch; four
	// more fill the queue; the rest are dropped.
	accepted := 0
	for range 20 {
		if w.Send(datagram(10)) {
			accepted++
		}
	}
	if accepted < 4 || accepted > 5+2 || w.dropped.Load() != uint64(20-accepted) {
		t.Fatalf("accepted %d dropped %d of 20 with a queue of 4", accepted, w.dropped.Load())
	}
	close(c.gate)
	w.close() // flushes what was queued
	if got := c.count(); got != accepted || w.sent.Load() != uint64(accepted) {
		t.Fatalf("written %d, sent %d, want %d", got, w.sent.Load(), accepted)
	}
}

// A write error skips the datagram that failed and sends the rest.
func TestWriterSkipsAFailedDatagram(t *testing.T) {
	c := &fakeConn{gate: make(chan struct{})}
	close(c.gate)
	c.fail.Store(true)
	w := newWriter(c, 16, 8)
	for range 3 {
		w.Send(datagram(5))
	}
	w.start()
	w.close()
	if w.errors.Load() != 1 || w.sent.Load() != 2 {
		t.Fatalf("errors %d sent %d, want 1 and 2", w.errors.Load(), w.sent.Load())
	}
}

// A batch the socket takes nothing of, without an error, is not sent: its
// datagrams count as dropped, none is lost from the counters.
func TestWriterCountsAStalledBatchDropped(t *testing.T) {
	c := &fakeConn{gate: make(chan struct{})}
	close(c.gate)
	c.stall.Store(true)
	w := newWriter(c, 16, 8)
	for range 5 {
		w.Send(datagram(5))
	}
	w.start()
	w.close()
	if w.sent.Load() != 0 || w.dropped.Load() != 5 || w.errors.Load() != 0 {
		t.Fatalf("sent %d dropped %d errors %d of 5, want 0, 5, 0", w.sent.Load(), w.dropped.Load(), w.errors.Load())
	}
}
