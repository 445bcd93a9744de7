package gateway

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/udp"
)

// writer sends datagrams from a bounded queue in batches. Send never blocks
// (policy when full: drop and count); one goroutine drains the queue with
// sendmmsg. Safe for concurrent Send. It carries the gateway's own replies;
// connections send through their shards.
type writer struct {
	q     chan *msg.Datagram
	sock  udp.Conn
	batch int
	stop  chan struct{}
	wg    sync.WaitGroup

	sent, bytes, dropped, errors atomic.Uint64
	batches                      atomic.Uint64 // WriteBatch calls that sent a datagram or more
}

func newWriter(sock udp.Conn, queue, batch int) *writer {
	return &writer{q: make(chan *msg.Datagram, queue), sock: sock, batch: batch, stop: make(chan struct{})}
}

// Send queues d for sending and gives it up; false: the queue was full and d
// was released.
func (w *writer) Send(d *msg.Datagram) bool {
	select {
	case w.q <- d:
		return true
	default:
		w.dropped.Add(1)
		d.Release()
		return false
	}
}

func (w *writer) start() {
	w.wg.Add(1)
	go w.loop()
}

// close stops the writer after it sent what was queued; datagrams Sent later
// stay in the channel and are collected with it.
func (w *writer) close() {
	close(w.stop)
	w.wg.Wait()
}

func (w *writer) loop() {
	defer w.wg.Done()
	ds := make([]*msg.Datagram, 0, w.batch)
	ms := make([]udp.Message, w.batch)
	for {
		var d *msg.Datagram
		select {
		case d = <-w.q:
		case <-w.stop:
			// Flush what is queued (the Disconnect copies of a drain), then go.
			for {
				ds = ds[:0]
			fill:
				for len(ds) < w.batch {
					select {
					case d := <-w.q:
						ds = append(ds, d)
					default:
						break fill
					}
				}
				if len(ds) == 0 {
					return
				}
				w.flush(ds, ms)
			}
		}
		ds = append(ds[:0], d)
	more:
		for len(ds) < w.batch {
			select {
			case d := <-w.q:
				ds = append(ds, d)
			default:
				break more
			}
		}
		w.flush(ds, ms)
	}
}

func (w *writer) flush(ds []*msg.Datagram, ms []udp.Message) {
	for i, d := range ds {
		ms[i] = udp.Message{Buf: d.Buf[:], N: d.N, Addr: d.Addr}
	}
	done := 0
	for done < len(ds) {
		n, err := w.sock.WriteBatch(ms[done:len(ds)])
		if n > 0 {
			w.batches.Add(1)
		}
		for _, d := range ds[done : done+n] {
			w.sent.Add(1)
			w.bytes.Add(uint64(d.N))
		}
		done += n
		if err != nil {
			if errors.Is(err, udp.ErrClosed) {
				break
			}
			// One bad destination (EINVAL, unreachable) must not sink the
			// batch: count it, skip it, send the rest.
			w.errors.Add(1)
			done++
			continue
		}
		if n == 0 {
			// Nothing sent and no error: the rest are not sent either, and
			// count as dropped like the shards' (conn.shard.flush).
			w.dropped.Add(uint64(len(ds) - done))
			break
		}
	}
	for i, d := range ds {
		ms[i].Buf = nil
		d.Release()
	}
}
