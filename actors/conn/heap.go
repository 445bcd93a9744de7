package conn

import "time"

// deadlines is a shard's binary min-heap of connections by deadline; each
// connection knows its index (hidx, -1 when absent), so re-arming is
// O(log n) and allocates nothing once the heap has grown.
type deadlines struct{ h []*Conn }

func (d *deadlines) min() *Conn {
	if len(d.h) == 0 {
		return nil
	}
	return d.h[0]
}

// set inserts c or moves it to its new deadline.
func (d *deadlines) set(c *Conn) {
	if c.hidx < 0 {
		c.hidx = int32(len(d.h))
		d.h = append(d.h, c)
		d.up(int(c.hidx))
		return
	}
	if i := int(c.hidx); !d.up(i) {
		d.down(i)
	}
}

// move gives c the deadline t, inserting it if it is not in. A
// connection in the heap moves only the way its deadline went: a later
// one can only sift down, an earlier one only up, and an unchanged one
// (most pumps after a datagram, the send slot not open yet) stays where
// it is. set would read the parent's deadline and then the children's:
// two or three other connections, each a cache miss on a busy shard.
func (d *deadlines) move(c *Conn, t time.Duration) {
	old := c.deadline
	c.deadline = t
	switch {
	case c.hidx < 0:
		d.set(c)
	case t > old:
		d.down(int(c.hidx))
	case t < old:
		d.up(int(c.hidx))
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
	d.h[last] = nil
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
	d.h[i].hidx, d.h[j].hidx = int32(i), int32(j)
}

// up sifts i towards the root; it reports whether it moved.
func (d *deadlines) up(i int) bool {
	moved := false
	for i > 0 {
		p := (i - 1) / 2
		if d.h[p].deadline <= d.h[i].deadline {
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
		if r := l + 1; r < n && d.h[r].deadline < d.h[l].deadline {
			m = r
		}
		if d.h[i].deadline <= d.h[m].deadline {
			return
		}
		d.swap(i, m)
		i = m
	}
}
