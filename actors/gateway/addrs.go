package gateway

import (
	"encoding/binary"
	"iter"
	"net/netip"
)

// addrTable maps a client's address to its route (short-form packets
// carry no connection id). An IPv4 address and port are one uint64 key,
// in a wordTable of its own (v4): ≈ 1 miss a datagram where the
// runtime's map took ≈ 1.5 in BenchmarkReaderRouteCold. Every other
// address (IPv6, IPv4-mapped IPv6 as received) keys the map v6 as it is,
// so two addresses are one key exactly when they are equal, as with a
// map keyed by netip.AddrPort.
//
// The zero addrTable is not ready: use newAddrTable. Not safe for
// concurrent use; the router's mu guards it.
type addrTable struct {
	v4 wordTable
	v6 map[netip.AddrPort]*route
}

func newAddrTable() addrTable {
	return addrTable{v4: newWordTable(), v6: make(map[netip.AddrPort]*route)}
}

// key4 is ap as one word when it is an IPv4 address (no zone, not
// mapped): the four address bytes, then the port.
func key4(ap netip.AddrPort) (uint64, bool) {
	a := ap.Addr()
	if !a.Is4() {
		return 0, false
	}
	b := a.As16() // as As4 (an IPv4 address is its last four bytes), without its panic: key4 and get inline
	return uint64(binary.BigEndian.Uint32(b[12:]))<<16 | uint64(ap.Port()), true
}

func (t *addrTable) get(ap netip.AddrPort) *route {
	if k, ok := key4(ap); ok {
		return t.v4.get(k)
	}
	return t.get6(ap)
}

// get6 is out of line: the map access would keep get from inlining.
//
//go:noinline
func (t *addrTable) get6(ap netip.AddrPort) *route { return t.v6[ap] }

func (t *addrTable) set(ap netip.AddrPort, rt *route) {
	if k, ok := key4(ap); ok {
		t.v4.set(k, rt)
	} else {
		t.v6[ap] = rt
	}
}

func (t *addrTable) del(ap netip.AddrPort) {
	if k, ok := key4(ap); ok {
		t.v4.del(k)
	} else {
		delete(t.v6, ap)
	}
}

func (t *addrTable) len() int { return t.v4.n + len(t.v6) }

// addr4 is the address key4 made k from.
func addr4(k uint64) netip.AddrPort {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(k>>16))
	return netip.AddrPortFrom(netip.AddrFrom4(b), uint16(k))
}

// all is every address and the route filed under it. The loop's body may
// not change the table.
func (t *addrTable) all() iter.Seq2[netip.AddrPort, *route] {
	return func(yield func(netip.AddrPort, *route) bool) {
		for _, s := range t.v4.slots {
			if s.rt != nil && !yield(addr4(s.key), s.rt) {
				return
			}
		}
		for ap, rt := range t.v6 {
			if !yield(ap, rt) {
				return
			}
		}
	}
}

// delRoute deletes the address rt is filed under, if any, looking for it
// among all of them: for a route whose address is not known (the router
// keeps none; router.forget).
func (t *addrTable) delRoute(rt *route) {
	for ap, r := range t.all() {
		if r == rt {
			t.del(ap) // and stop: a delete shifts the v4 slots after it
			return
		}
	}
}
