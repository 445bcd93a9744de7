package notify

import (
	"testing"
)

// PrefetchAccept is a hint: between ReadHeaderInto and AcceptHeader it
// changes nothing of the Conn, and whatever a Header holds (an ack far
// past anything sent, a sequence far ahead) it reads only in-range ring
// elements — it never panics.
func TestPrefetchAcceptChangesNothing(t *testing.T) {
	a, b, _, now := lockstepPair(t, DefaultConfig(), 7, []uint64{0, 2, 3, 5})
	for i := range 3 {
		now += 10 * ms
		_, p := b.send(t, now, TypeData)
		a.r.Reset(p)
		var h Header
		if err := a.c.ReadHeaderInto(&a.r, &h); err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		before := takeSnapshot(a.c)
		a.c.PrefetchAccept(&h)
		if !takeSnapshot(a.c).equal(before) {
			t.Fatalf("packet %d: PrefetchAccept changed the Conn", i)
		}
		if err := a.c.AcceptHeader(&h, now); err != nil {
			t.Fatalf("packet %d: AcceptHeader after the prefetch: %v", i, err)
		}
	}
	wild := Header{Seq: 1<<63 + 12345, hasAck: true, ackL: ^uint64(0)}
	a.c.PrefetchAccept(&wild)
	var fresh Conn // no rings yet
	fresh.PrefetchAccept(&wild)
	mustInvariants(t, a)
}
