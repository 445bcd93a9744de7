package gateway

import (
	"math/rand/v2"
	"testing"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/handshake"
)

// TestInboundBoundMatchesModel: deliver reads the connection's count of
// datagrams taken only when its own lagging copy (route.seen) says the
// queue may be full, and its every decision is still the one an exact
// count makes — accept while fewer than MaxInbound wait, drop the newest
// when MaxInbound do. Random deliveries and takes, against a queue length
// kept here; a deliver that never read the count again (or read it and
// kept the old copy) drops datagrams a queue with room should take.
func TestInboundBoundMatchesModel(t *testing.T) {
	for _, limit := range []int{1, 3, 8} {
		r := newBenchRouter(t, new(discard), seeded(1))
		r.cfg.Conn.MaxInbound = limit
		rt := &route{id: handshake.ConnID{1}, addr: benchClient}
		r.byID.set(rt.id, rt)
		r.byAddr.set(rt.addr, rt)
		queued := 0 // the model: datagrams handed to the connection, not taken yet
		ctx := &stubCtx{deliver: func(d *msg.Datagram) { queued++; d.Release() }}
		rng := rand.New(rand.NewPCG(uint64(limit), 7))
		reads, delivered := 0, 0
		for i := range 5000 {
			if rng.IntN(3) != 0 {
				d := msg.NewDatagram()
				d.N = copy(d.Buf[:], make([]byte, 40)) // a short-form data packet
				d.Addr = benchClient
				before, dropped := queued, r.st.inboundDropped.Load()
				seen := rt.seen.Load()
				if !r.handle(ctx, d) {
					d.Release()
				}
				if rt.seen.Load() != seen {
					reads++
				}
				took := queued > before
				if want := before < limit; took != want {
					t.Fatalf("limit %d, step %d: %d queued, delivered %v, want %v (dropped %d → %d)",
						limit, i, before, took, want, dropped, r.st.inboundDropped.Load())
				}
				if took {
					delivered++
				}
				continue
			}
			k := rng.IntN(queued + 1) // the connection takes some of its queue
			queued -= k
			rt.looseTaken.Add(uint32(k))
		}
		if got := rt.queued(); got != queued {
			t.Fatalf("limit %d: route counts %d queued, the model %d", limit, got, queued)
		}
		// The count is read once a full estimate at most: never more often
		// than once in limit datagrams routed, plus the drops' reads.
		dropped := int(r.st.inboundDropped.Load())
		if reads > delivered/limit+dropped+1 {
			t.Fatalf("limit %d: the connection's count read %d times for %d routed, %d dropped", limit, reads, delivered, dropped)
		}
	}
}
