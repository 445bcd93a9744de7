package gateway

import (
	"net/netip"
	"testing"

	"github.com/ghostwire/ghostwire/replication/handshake"
)

// BenchmarkRouteLookupRouted: the reader's lookup of a long-form
// (routed) packet's connection by its id (classify, split, table),
// cycling through 1,000 connections, as at 1,000 players behind shared
// addresses (context: one per such datagram in).
func BenchmarkRouteLookupRouted(b *testing.B) { benchLookupByID(b, true) }

// BenchmarkRouteLookupUnknownID is BenchmarkRouteLookupRouted with ids no
// connection has (an attacker's flood of forged long-form packets): each
// must miss at the cost of a hit, not more.
func BenchmarkRouteLookupUnknownID(b *testing.B) { benchLookupByID(b, false) }

func benchLookupByID(b *testing.B, known bool) {
	r := newBenchRouter(b, new(discard), seeded(1))
	const n = 1000
	pkts := make([][]byte, n)
	rng := seeded(2)
	for i := range pkts {
		var id handshake.ConnID
		rng.Read(id[:]) // random, as the server's
		r.byID[id] = &route{id: id}
		if !known {
			rng.Read(id[:])
		}
		pkts[i] = append(handshake.AppendRouted(nil, id), make([]byte, 40)...)
	}
	from := netip.MustParseAddrPort("10.1.0.1:40000")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if rt, _ := r.lookup(pkts[i], from); (rt != nil) != known {
			b.Fatalf("lookup %d: route %p", i, rt)
		}
		if i++; i == n {
			i = 0
		}
	}
}
