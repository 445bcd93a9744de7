package conn

import (
	"math/rand/v2"
	"testing"
	"time"
)

// Random set/move/remove/pop against a plain reference: the heap always yields
// the earliest deadline, every index it records is where the connection
// sits, and a removed connection is gone.
func TestDeadlinesAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 200
	conns := make([]*Conn, n)
	for i := range conns {
		conns[i] = &Conn{hidx: -1}
	}
	var h deadlines
	in := map[*Conn]bool{}
	for step := range 20000 {
		c := conns[rng.IntN(n)]
		switch rng.IntN(5) {
		case 0:
			c.deadline = time.Duration(rng.IntN(1000))
			h.set(c)
			in[c] = true
		case 1, 4: // as a pump files it: often unchanged, else later or earlier
			t := c.deadline
			if rng.IntN(3) != 0 {
				t = time.Duration(rng.IntN(1000))
			}
			h.move(c, t)
			in[c] = true
		case 2:
			h.remove(c)
			delete(in, c)
		case 3:
			if m := h.min(); m != nil {
				h.remove(m)
				delete(in, m)
			}
		}
		if len(h.h) != len(in) {
			t.Fatalf("step %d: heap holds %d, reference %d", step, len(h.h), len(in))
		}
		var want *Conn
		for c := range in {
			if want == nil || c.deadline < want.deadline {
				want = c
			}
		}
		if got := h.min(); (got == nil) != (want == nil) || got != nil && got.deadline != want.deadline {
			t.Fatalf("step %d: min %v, want deadline %v", step, got, want)
		}
		for i, c := range h.h {
			if int(c.hidx) != i || !in[c] {
				t.Fatalf("step %d: slot %d holds a connection with hidx %d (in %v)", step, i, c.hidx, in[c])
			}
			if i > 0 && h.h[(i-1)/2].deadline > c.deadline {
				t.Fatalf("step %d: heap order broken at %d", step, i)
			}
		}
		for _, c := range conns {
			if !in[c] && c.hidx != -1 {
				t.Fatalf("step %d: a connection out of the heap has hidx %d", step, c.hidx)
			}
		}
	}
}
