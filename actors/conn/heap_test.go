package conn

import (
	"math/rand/v2"
	"testing"
	"time"
)

// Random set/move/remove/pop against a plain reference: the heap always yields
// the earliest deadline, every index it records is where the connection
// sits, and a removed connection is gone. A prefetch hint for any
// connection, in the heap or not, or with an index past it, changes none
// of that.
func TestDeadlinesAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 200
	conns := make([]*Conn, n)
	for i := range conns {
		conns[i] = &Conn{hidx: -1}
	}
	var h deadlines
	in := map[*Conn]bool{}
	at := map[*Conn]time.Duration{} // the reference's deadlines
	wild := &Conn{hidx: 1 << 20}
	for step := range 20000 {
		h.prefetch(conns[rng.IntN(n)])
		h.prefetch(wild)
		c := conns[rng.IntN(n)]
		switch rng.IntN(5) {
		case 0:
			at[c] = time.Duration(rng.IntN(1000))
			h.move(c, at[c])
			in[c] = true
		case 1, 4: // as a pump files it: often unchanged, else later or earlier
			if rng.IntN(3) != 0 || !in[c] {
				at[c] = time.Duration(rng.IntN(1000))
			}
			h.move(c, at[c])
			in[c] = true
		case 2:
			h.remove(c)
			delete(in, c)
		case 3:
			if m, _ := h.min(); m != nil {
				h.remove(m)
				delete(in, m)
			}
		}
		if len(h.h) != len(in) {
			t.Fatalf("step %d: heap holds %d, reference %d", step, len(h.h), len(in))
		}
		var want *Conn
		for c := range in {
			if want == nil || at[c] < at[want] {
				want = c
			}
		}
		if got, gotAt := h.min(); (got == nil) != (want == nil) || got != nil && gotAt != at[want] {
			t.Fatalf("step %d: min at %v, want deadline %v", step, gotAt, at[want])
		}
		for i, e := range h.h {
			c := e.c
			if int(c.hidx) != i || !in[c] {
				t.Fatalf("step %d: slot %d holds a connection with hidx %d (in %v)", step, i, c.hidx, in[c])
			}
			if e.at != at[c] {
				t.Fatalf("step %d: slot %d holds deadline %v, the reference %v", step, i, e.at, at[c])
			}
			if i > 0 && h.h[(i-1)/2].at > e.at {
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
