package gateway

import (
	"maps"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/ghostwire/ghostwire/actors/msg"
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
		r.byID.set(id, &route{id: id})
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

// TestIDTableIsAMapByConnID: any sequence of sets, deletes and lookups
// gives what a map keyed by handshake.ConnID gives — ids a byte apart
// (each of the eight), the zero id, growth and backward-shift deletes —
// and all lists exactly the map's routes.
func TestIDTableIsAMapByConnID(t *testing.T) {
	ids := []handshake.ConnID{{}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	for b := range handshake.ConnIDSize {
		for _, v := range []byte{1, 0x80} {
			var id handshake.ConnID
			id[b] = v
			ids = append(ids, id)
		}
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 500 {
		var id handshake.ConnID
		for i := range id {
			id[i] = byte(rng.Uint32())
		}
		ids = append(ids, id)
	}
	rts := make([]*route, 16)
	for i := range rts {
		rts[i] = new(route)
	}
	tab, ref := newIDTable(), map[handshake.ConnID]*route{}
	for step := range 100000 {
		id := ids[rng.IntN(len(ids))]
		if rng.IntN(100) < 60 || step > 50000 && rng.IntN(2) == 0 {
			rt := rts[rng.IntN(len(rts))]
			tab.set(id, rt)
			ref[id] = rt
		} else {
			tab.del(id)
			delete(ref, id)
		}
		if got, want := tab.get(id), ref[id]; got != want {
			t.Fatalf("step %d: get(%x) = %p, want %p", step, id, got, want)
		}
		if tab.len() != len(ref) {
			t.Fatalf("step %d: len %d, want %d", step, tab.len(), len(ref))
		}
		if step%4999 == 0 {
			for _, id := range ids {
				if got, want := tab.get(id), ref[id]; got != want {
					t.Fatalf("step %d: get(%x) = %p, want %p", step, id, got, want)
				}
			}
			listed := map[*route]int{}
			for rt := range tab.all() {
				listed[rt]++
			}
			wantListed := map[*route]int{}
			for _, rt := range ref {
				wantListed[rt]++
			}
			if !maps.Equal(listed, wantListed) {
				t.Fatalf("step %d: all lists %v, want %v", step, listed, wantListed)
			}
		}
	}
}

// TestForgedIDsCostNoMemory: a flood of long-form packets with ids no
// connection has is counted and answered as before, and leaves the id
// table as it was — a lookup never enters what it misses — and a lookup
// allocates nothing.
func TestForgedIDsCostNoMemory(t *testing.T) {
	r := newBenchRouter(t, new(discard), seeded(1))
	rng := seeded(3)
	for range 100 {
		var id handshake.ConnID
		rng.Read(id[:])
		r.byID.set(id, &route{id: id})
	}
	slots, n := len(r.byID.slots), r.byID.len()
	const forged = 10000
	pkt := append(handshake.AppendRouted(nil, handshake.ConnID{}), make([]byte, 40)...)
	d := msg.NewDatagram()
	defer d.Release()
	d.Addr = netip.MustParseAddrPort("10.1.0.1:40000")
	for range forged {
		rng.Read(pkt[1 : 1+handshake.ConnIDSize])
		d.N = copy(d.Buf, pkt)
		if r.handle(nil, d) {
			t.Fatal("a forged id's datagram was handed to a connection")
		}
	}
	if got := r.st.unknownConn.Load(); got != forged {
		t.Fatalf("%d forged ids counted as no connection, want %d", got, forged)
	}
	if len(r.byID.slots) != slots || r.byID.len() != n {
		t.Fatalf("forged lookups changed the id table: %d slots, %d ids; was %d, %d", len(r.byID.slots), r.byID.len(), slots, n)
	}
	if a := testing.AllocsPerRun(100, func() { _, _ = r.lookup(pkt, d.Addr) }); a != 0 {
		t.Fatalf("a lookup by id allocates %v times", a)
	}
}
