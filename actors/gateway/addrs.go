package gateway

import (
	"encoding/binary"
	"net/netip"
)

// addrTable maps a client's address to its route (short-form packets
// carry no connection id). An IPv4 address and port are one uint64 key:
// the map's slot is 16 bytes instead of the 40 of a netip.AddrPort key
// and its pointer (≈ 50 KB fewer at 1,000 connections), and a lookup —
// one per datagram, on the reader goroutine — hashes and compares one
// word (the runtime's 64-bit fast path) instead of the AddrPort's fields.
// Every other address (IPv6, IPv4-mapped IPv6 as received) keys the
// second map as it is, so two addresses are one key exactly when they
// are equal, as with a map keyed by netip.AddrPort.
//
// The zero addrTable is not ready: use newAddrTable. Not safe for
// concurrent use; the router's mu guards it.
type addrTable struct {
	v4 map[uint64]*route
	v6 map[netip.AddrPort]*route
}

func newAddrTable() addrTable {
	return addrTable{v4: make(map[uint64]*route), v6: make(map[netip.AddrPort]*route)}
}

// key4 is ap as one word when it is an IPv4 address (no zone, not
// mapped): the four address bytes, then the port.
func key4(ap netip.AddrPort) (uint64, bool) {
	a := ap.Addr()
	if !a.Is4() {
		return 0, false
	}
	b := a.As4()
	return uint64(binary.BigEndian.Uint32(b[:]))<<16 | uint64(ap.Port()), true
}

func (t *addrTable) get(ap netip.AddrPort) *route {
	if k, ok := key4(ap); ok {
		return t.v4[k]
	}
	return t.v6[ap]
}

func (t *addrTable) set(ap netip.AddrPort, rt *route) {
	if k, ok := key4(ap); ok {
		t.v4[k] = rt
		return
	}
	t.v6[ap] = rt
}

func (t *addrTable) del(ap netip.AddrPort) {
	if k, ok := key4(ap); ok {
		delete(t.v4, k)
		return
	}
	delete(t.v6, ap)
}

func (t *addrTable) len() int { return len(t.v4) + len(t.v6) }
