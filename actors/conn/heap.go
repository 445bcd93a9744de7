package conn

import (
	"time"
	"unsafe"

	"github.com/ghostwire/ghostwire/replication/prefetch"
)

// deadlines is a shard's binary min-heap of connections by deadline; each
// connection knows its index (hidx, -1 when absent), so re-arming is
// O(log n) and allocates nothing once the heap has grown.
//
// The deadlines sit in the heap's own entries, beside the connections:
// sifting compares entries of the shard's array, never reads another
// connection. With the deadline in the Conn, each comparison read a
// connection that had left the cache (one or two a sift, ≈ 0.5 misses a
// received datagram in BenchmarkShardReceiveCold); a move now writes only
// the index of each connection it passes.
type deadlines struct{ h []dueAt }

// dueAt is one heap entry: c is due at at.
type dueAt struct {
	at time.Duration
	c  *Conn
}

// min is the connection due first and its deadline (nil: none).
func (d *deadlines) min() (*Conn, time.Duration) {
	if len(d.h) == 0 {
		return nil, 0
	}
	return d.h[0].c, d.h[0].at
}

// deadline is c's deadline; c must be in the heap (hidx ≥ 0).
func (d *deadlines) deadline(c *Conn) time.Duration { return d.h[c.hidx].at }

// move gives c the deadline t, inserting it if it is not in. A
// connection in the heap moves only the way its deadline went: a later
// one can only sift down, an earlier one only up, and an unchanged one
// (most pumps after a datagram, the send slot not open yet) stays where
// it is.
func (d *deadlines) move(c *Conn, t time.Duration) {
	if c.hidx < 0 {
		c.hidx = int32(len(d.h))
		d.h = append(d.h, dueAt{at: t, c: c})
		d.up(int(c.hidx))
		return
	}
	i := int(c.hidx)
	old := d.h[i].at
	d.h[i].at = t
	switch {
	case t > old:
		d.down(i)
	case t < old:
		d.up(i)
	}
}

// prefetch asks for c's entry, which the pump after c's event or send
// re-arms (move): the shard's array of them, 16 bytes a connection, is
// out of the caches by the time a connection comes round again on a
// loaded node (move's first read, 1.5 % of the node's samples at 2,000
// players). c's first line must be at hand (its index is read). A hint.
func (d *deadlines) prefetch(c *Conn) {
	if i := int(c.hidx); i >= 0 && i < len(d.h) {
		prefetch.Lines(unsafe.Pointer(&d.h[i]), unsafe.Sizeof(dueAt{}))
	}
}

// remove takes c out (a no-op if it is not in).
func (d *deadlines) remove(c *Conn) {
	i := int(c.hidx)
	if i < 0 {
		return
	}
	last := len(d.h) - 1
	if i != last {
		d.swap(i, last)
	}
	d.h[last] = dueAt{}
	d.h = d.h[:last]
	c.hidx = -1
	if i != last {
		if !d.up(i) {
			d.down(i)
		}
	}
}

func (d *deadlines) swap(i, j int) {
	d.h[i], d.h[j] = d.h[j], d.h[i]
	d.h[i].c.hidx, d.h[j].c.hidx = int32(i), int32(j)
}

// up sifts i towards the root; it reports whether it moved.
func (d *deadlines) up(i int) bool {
	moved := false
	for i > 0 {
		p := (i - 1) / 2
		if d.h[p].at <= d.h[i].at {
			break
		}
		d.swap(i, p)
		i, moved = p, true
	}
	return moved
}

func (d *deadlines) down(i int) {
	n := len(d.h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && d.h[r].at < d.h[l].at {
			m = r
		}
		if d.h[i].at <= d.h[m].at {
			return
		}
		d.swap(i, m)
		i = m
	}
}
