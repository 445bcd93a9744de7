package gateway

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestAdmitMatchesQueue: route.admit against a model queue, through a
// random run of datagrams routed and taken. The connection's count is
// read only when the router's own bound says full, yet admit must
// refuse exactly when limit datagrams wait (never more queued, never a
// datagram dropped with room), across the counters' wrap.
func TestAdmitMatchesQueue(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit int
		start uint32 // the counters' first value
	}{
		{name: "default MaxInbound", limit: 8},
		{name: "one", limit: 1},
		{name: "counters wrap", limit: 8, start: math.MaxUint32 - 100},
		{name: "large MaxInbound wraps", limit: 4096, start: math.MaxUint32 - 5000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, uint64(tc.limit)))
			rt := &route{sent: tc.start, seen: tc.start}
			rt.taken.Store(tc.start)
			queued, admitted, refused := 0, 0, 0
			for i := range 200_000 {
				// Bursts of routing and of taking, so the queue runs
				// full and empty again and again.
				if r.IntN(8) < 4+int(i/1000%2)*3 {
					ok := rt.admit(tc.limit)
					if ok != (queued < tc.limit) {
						t.Fatalf("step %d: admit = %v with %d of %d queued", i, ok, queued, tc.limit)
					}
					if ok {
						queued++
						admitted++
					} else {
						refused++
					}
				} else if queued > 0 {
					queued--
					rt.taken.Add(1) // the connection took one (conn.Conn.onDatagram)
				}
				if got := rt.queued(); got != queued {
					t.Fatalf("step %d: route counts %d queued, the queue holds %d", i, got, queued)
				}
			}
			if admitted == 0 || refused == 0 {
				t.Fatalf("admitted %d, refused %d: the run never filled the queue or never routed", admitted, refused)
			}
		})
	}
}

// TestAdmitReadsTakenOnlyWhenFull: the router looks at the connection's
// count (its shard's line) only when its own bound reaches the limit —
// about once every limit datagrams of a connection that keeps up — so
// a datagram costs the reader no line the shard writes.
func TestAdmitReadsTakenOnlyWhenFull(t *testing.T) {
	const limit, n = 8, 10_000
	rt := new(route)
	refreshes := 0
	for range n {
		before := rt.seen
		if !rt.admit(limit) {
			t.Fatal("a connection that takes every datagram ran full")
		}
		if rt.seen != before {
			refreshes++
		}
		rt.taken.Add(1) // taken at once
	}
	// The first limit datagrams fill the bound; each refresh then finds
	// all taken and leaves room for limit more.
	if want := n/limit - 1; refreshes > want+1 || refreshes < want-1 {
		t.Fatalf("%d refreshes of the connection's count for %d datagrams, want ≈ %d", refreshes, n, want)
	}
}
