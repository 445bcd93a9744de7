package gateway

import (
	"maps"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"
)

// TestAddrTableIsAMapByAddrPort: any sequence of sets, deletes and
// lookups gives what a map keyed by netip.AddrPort gives — an IPv4
// address and the same address mapped into IPv6, a zone, a port, a byte
// of the address: each tells two keys apart, exactly as there.
func TestAddrTableIsAMapByAddrPort(t *testing.T) {
	var addrs []netip.AddrPort
	for _, s := range []string{"10.0.0.2", "10.0.0.3", "10.0.1.2", "0.0.0.0", "255.255.255.255", "::ffff:10.0.0.2",
		"::ffff:10.0.0.3", "2001:db8::2", "2001:db8::3", "fe80::1%eth0", "fe80::1%eth1", "fe80::1", "::"} {
		for _, port := range []uint16{0, 1, 40000, 65535} {
			addrs = append(addrs, netip.AddrPortFrom(netip.MustParseAddr(s), port))
		}
	}
	routes := make([]*route, 8)
	for i := range routes {
		routes[i] = new(route)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	tab, ref := newAddrTable(), map[netip.AddrPort]*route{}
	for range 20000 {
		ap := addrs[rng.IntN(len(addrs))]
		switch rng.IntN(3) {
		case 0:
			rt := routes[rng.IntN(len(routes))]
			tab.set(ap, rt)
			ref[ap] = rt
		case 1:
			tab.del(ap)
			delete(ref, ap)
		}
		if got, want := tab.get(ap), ref[ap]; got != want {
			t.Fatalf("get(%v) = %p, want %p", ap, got, want)
		}
		if tab.len() != len(ref) {
			t.Fatalf("len %d, want %d", tab.len(), len(ref))
		}
		if rng.IntN(100) == 0 { // all gives back each address as filed (an IPv4 one from its key)
			seen := map[netip.AddrPort]*route{}
			for ap, rt := range tab.all() {
				seen[ap] = rt
			}
			if !maps.Equal(seen, ref) {
				t.Fatalf("all yields %v, want %v", seen, ref)
			}
		}
	}
	for _, ap := range addrs {
		if got, want := tab.get(ap), ref[ap]; got != want {
			t.Fatalf("at the end: get(%v) = %p, want %p", ap, got, want)
		}
	}
	if a := testing.AllocsPerRun(100, func() { _ = tab.get(addrs[5]) }); a != 0 {
		t.Fatalf("a lookup allocates %v times", a)
	}
}

// TestAddrTableDelRoute: delRoute finds the address a route is filed
// under among all (IPv4 and not) and deletes that one alone — what the
// router does for a connection that failed without naming its address
// (router.forget).
func TestAddrTableDelRoute(t *testing.T) {
	tab := newAddrTable()
	var rts []*route
	var aps []netip.AddrPort
	for i := range 300 {
		ap := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 4, byte(i >> 8), byte(i)}), uint16(50000+i))
		if i%3 == 0 {
			ap = netip.AddrPortFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(i >> 8), 15: byte(i)}), uint16(i))
		}
		rt := new(route)
		tab.set(ap, rt)
		rts, aps = append(rts, rt), append(aps, ap)
	}
	for i, rt := range rts {
		if i%2 == 1 {
			continue
		}
		tab.delRoute(rt)
		tab.delRoute(rt) // none left: a no-op
	}
	for i, ap := range aps {
		want := rts[i]
		if i%2 == 0 {
			want = nil
		}
		if got := tab.get(ap); got != want {
			t.Fatalf("%v: route %p after deleting the even routes, want %p", ap, got, want)
		}
	}
	if tab.len() != len(rts)/2 {
		t.Fatalf("%d addresses left, want %d", tab.len(), len(rts)/2)
	}
}

// TestAddrTableManyIPv4: the IPv4 table against a map through growth and
// a crowded table — thousands of sets and deletes among 3,000 addresses,
// so that probe runs are long and a delete shifts the slots after it
// back (a slot left out of its run would no longer be found, one moved
// before its home found by the wrong key).
func TestAddrTableManyIPv4(t *testing.T) {
	addrs := make([]netip.AddrPort, 3000)
	for i := range addrs {
		addrs[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i % 7), byte(i >> 8), byte(i)}), uint16(40000+i%13))
	}
	rts := make([]*route, 16)
	for i := range rts {
		rts[i] = new(route)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	tab, ref := newAddrTable(), map[netip.AddrPort]*route{}
	for step := range 200000 {
		ap := addrs[rng.IntN(len(addrs))]
		// Mostly sets early (the table grows), as many deletes as sets later.
		if rng.IntN(100) < 70 || step > 100000 && rng.IntN(2) == 0 {
			rt := rts[rng.IntN(len(rts))]
			tab.set(ap, rt)
			ref[ap] = rt
		} else {
			tab.del(ap)
			delete(ref, ap)
		}
		if step%997 == 0 {
			for _, a := range addrs {
				if got, want := tab.get(a), ref[a]; got != want {
					t.Fatalf("step %d: get(%v) = %p, want %p", step, a, got, want)
				}
			}
		}
		if tab.len() != len(ref) {
			t.Fatalf("step %d: len %d, want %d", step, tab.len(), len(ref))
		}
	}
	for _, a := range addrs {
		tab.del(a)
	}
	if tab.len() != 0 {
		t.Fatalf("%d left after deleting every address", tab.len())
	}
	for _, s := range tab.v4.slots {
		if s.rt != nil {
			t.Fatalf("a slot still holds %x after deleting every address", s.key)
		}
	}
}

// BenchmarkRouteLookup: the reader's lookup of a short-form data packet's
// connection by its source address (classify + table), cycling through
// 1,000 IPv4 clients, as at 1,000 players (context: one per datagram in).
func BenchmarkRouteLookup(b *testing.B) {
	r := newBenchRouter(b, new(discard), seeded(1))
	const n = 1000
	addrs := make([]netip.AddrPort, n)
	for i := range addrs {
		addrs[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), uint16(40000+i))
		r.byAddr.set(addrs[i], &route{})
	}
	pkt := make([]byte, 40) // first byte 0: short-form data
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if rt, _ := r.lookup(pkt, addrs[i]); rt == nil {
			b.Fatal("no route")
		}
		if i++; i == n {
			i = 0
		}
	}
}

// maxAddrTableBytes bounds the address table's bytes per IPv4 client at
// 1,000 clients. Measured 37.0 B (42.6 B under -race; a map keyed by
// netip.AddrPort: 98.4 B, its 40-byte slots). A size check, not a timing
// one.
const maxAddrTableBytes = 44

// TestAddrTableFootprint: the table of 1,000 IPv4 clients' routes keeps
// one-word keys (16-byte slots with the route pointer), not 32-byte
// netip.AddrPort ones.
func TestAddrTableFootprint(t *testing.T) {
	const n = 1000
	addrs := make([]netip.AddrPort, n)
	rt := new(route)
	for i := range addrs {
		addrs[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), uint16(40000+i))
	}
	before := liveHeap()
	tab := newAddrTable()
	for _, ap := range addrs {
		tab.set(ap, rt)
	}
	per := float64(liveHeap()-before) / n
	runtime.KeepAlive(tab)
	before = liveHeap()
	ref := make(map[netip.AddrPort]*route)
	for _, ap := range addrs {
		ref[ap] = rt
	}
	perRef := float64(liveHeap()-before) / n
	runtime.KeepAlive(ref)
	t.Logf("%d IPv4 clients: %.1f B each (a map by netip.AddrPort: %.1f B)", n, per, perRef)
	if per > maxAddrTableBytes {
		t.Fatalf("the address table keeps %.1f B a client, want ≤ %d", per, maxAddrTableBytes)
	}
}

// liveHeap is the heap in use after two collections (the second empties
// the pools' victim caches): the footprint tests' reading.
func liveHeap() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
