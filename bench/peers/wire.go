package main

import (
	"encoding/binary"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Every benchmark message, in both directions and for every library, starts
// with the same 16-byte stamp; the rest of the payload is filler:
//
//	[0:8]   send time, ns since the Unix epoch (CLOCK_REALTIME: one clock for
//	        the driver and the server process, read the same way from Go and C)
//	[8:12]  client index (informative)
//	[12:16] sequence number on this connection and direction, from 1
//
// A message with sequence 0 is a hello (kcp-go has no handshake: the first
// datagram creates the server's session) and is not counted.
const stampSize = 16

func stamp(p []byte, ts int64, client, seq uint32) {
	binary.LittleEndian.PutUint64(p[0:], uint64(ts))
	binary.LittleEndian.PutUint32(p[8:], client)
	binary.LittleEndian.PutUint32(p[12:], seq)
}

func unstamp(p []byte) (ts int64, client, seq uint32, ok bool) {
	if len(p) < stampSize {
		return 0, 0, 0, false
	}
	return int64(binary.LittleEndian.Uint64(p[0:])), binary.LittleEndian.Uint32(p[8:]), binary.LittleEndian.Uint32(p[12:]), true
}

func nowNS() int64 { return time.Now().UnixNano() }

// maxSamples bounds the latency samples one recorder keeps (4 bytes each).
const maxSamples = 8 << 20

// recorder counts the messages one end receives for one direction and keeps
// the delivery latency of those sent inside the measurement window
// [start, end) (send time as stamped). Safe for concurrent use.
type recorder struct {
	start, end atomic.Int64 // window; end 0: no window yet

	sentWin  atomic.Uint64 // messages this end sent inside the window (other direction)
	recvWin  atomic.Uint64 // messages received that were sent inside the window
	recvAll  atomic.Uint64 // every message received
	orderErr atomic.Uint64 // a sequence number that was not last+1

	mu      sync.Mutex
	samples []int32 // µs
	dropped uint64  // samples beyond maxSamples
}

func (r *recorder) setWindow(start, end int64) {
	r.start.Store(start)
	r.end.Store(end)
}

func (r *recorder) inWindow(ts int64) bool {
	e := r.end.Load()
	return e != 0 && ts >= r.start.Load() && ts < e
}

// sent counts a message this end sent at ts.
func (r *recorder) sent(ts int64) {
	if r.inWindow(ts) {
		r.sentWin.Add(1)
	}
}

// recv handles one received message; last is the connection's newest
// sequence number in this direction (owned by the caller's goroutine).
func (r *recorder) recv(p []byte, last *uint32, at int64) {
	ts, _, seq, ok := unstamp(p)
	if !ok || seq == 0 {
		return
	}
	if seq != *last+1 {
		r.orderErr.Add(1)
	}
	*last = seq
	r.recvAll.Add(1)
	if !r.inWindow(ts) {
		return
	}
	r.recvWin.Add(1)
	us := (at - ts) / 1000
	r.mu.Lock()
	if len(r.samples) < maxSamples {
		r.samples = append(r.samples, int32(min(max(us, 0), 1<<31-1)))
	} else {
		r.dropped++
	}
	r.mu.Unlock()
}

// dirStats is one direction's result, as one end saw it.
type dirStats struct {
	Sent     uint64  `json:"sent"`      // sent inside the window (by the other end)
	Recv     uint64  `json:"recv"`      // of those, delivered by the end of the drain
	OrderErr uint64  `json:"order_err"` // out of sequence or duplicated
	P50      float64 `json:"p50_ms"`
	P99      float64 `json:"p99_ms"`
	P999     float64 `json:"p999_ms"`
	Max      float64 `json:"max_ms"`
}

func (r *recorder) summary() dirStats {
	r.mu.Lock()
	s := slices.Clone(r.samples)
	r.mu.Unlock()
	return summarize(s, r.recvWin.Load(), r.orderErr.Load())
}

// summarize turns latency samples (µs; sorted in place) into a dirStats.
func summarize(s []int32, recv, orderErr uint64) dirStats {
	d := dirStats{Recv: recv, OrderErr: orderErr}
	if len(s) == 0 {
		return d
	}
	slices.Sort(s)
	q := func(f float64) float64 {
		i := int(f * float64(len(s)-1))
		return float64(s[i]) / 1000
	}
	d.P50, d.P99, d.P999, d.Max = q(0.50), q(0.99), q(0.999), float64(s[len(s)-1])/1000
	return d
}

// traffic counts the UDP payload bytes and datagrams of a set of client
// sockets, each way. Safe for concurrent use.
type traffic struct {
	upB, upP, downB, downP atomic.Uint64
}

type trafficSnap struct{ UpB, UpP, DownB, DownP uint64 }

func (t *traffic) snap() trafficSnap {
	return trafficSnap{t.upB.Load(), t.upP.Load(), t.downB.Load(), t.downP.Load()}
}

func (a trafficSnap) sub(b trafficSnap) trafficSnap {
	return trafficSnap{a.UpB - b.UpB, a.UpP - b.UpP, a.DownB - b.DownB, a.DownP - b.DownP}
}

// countConn counts what a client socket sends and receives. It keeps every
// method of the socket it wraps (deadlines, Close) through the embedding.
type countConn struct {
	net.PacketConn
	t *traffic
}

func (c *countConn) WriteTo(p []byte, addr net.Addr) (int, error) {
	n, err := c.PacketConn.WriteTo(p, addr)
	if err == nil {
		c.t.upB.Add(uint64(n))
		c.t.upP.Add(1)
	}
	return n, err
}

func (c *countConn) ReadFrom(p []byte) (int, net.Addr, error) {
	n, a, err := c.PacketConn.ReadFrom(p)
	if err == nil {
		c.t.downB.Add(uint64(n))
		c.t.downP.Add(1)
	}
	return n, a, err
}
