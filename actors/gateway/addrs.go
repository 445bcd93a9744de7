package gateway

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"net/netip"
)

// addrTable maps a client's address to its route (short-form packets
// carry no connection id). An IPv4 address and port are one uint64 key,
// in an open-addressed table of its own (v4): a slot is the key and the
// route pointer, 16 bytes, four to a cache line, and a lookup — one per
// datagram, on the reader goroutine — hashes the word and reads the slot
// it lands on and, rarely, the next few: one line where the runtime's map
// read its group's control word and then the slot (two lines, ≈ 1.5
// misses a datagram in BenchmarkReaderRouteCold), and ≈ 15 instructions
// where mapaccess1_fast64 took ≈ 48. Every other address (IPv6,
// IPv4-mapped IPv6 as received) keys the map v6 as it is, so two
// addresses are one key exactly when they are equal, as with a map keyed
// by netip.AddrPort.
//
// The zero addrTable is not ready: use newAddrTable. Not safe for
// concurrent use; the router's mu guards it.
type addrTable struct {
	v4    []addrSlot // a power of two long, at most 3/4 full
	shift uint8      // 64 - log2(len(v4)): home's hash bits
	n4    int
	seed  uint64 // drawn per table: the slots a set of addresses takes cannot be chosen from outside
	v6    map[netip.AddrPort]*route
}

// addrSlot is one IPv4 key and its route; rt is nil in an empty slot.
type addrSlot struct {
	key uint64
	rt  *route
}

// minAddrSlots is the smallest v4 table.
const minAddrSlots = 16

func newAddrTable() addrTable {
	return addrTable{v4: make([]addrSlot, minAddrSlots), shift: 64 - uint8(bits.TrailingZeros(minAddrSlots)),
		seed: rand.Uint64(), v6: make(map[netip.AddrPort]*route)}
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

// home is k's first slot: the high bits of a seeded multiply-xorshift
// mix.
func (t *addrTable) home(k uint64) int {
	h := (k ^ t.seed) * 0x9e3779b97f4a7c15
	h ^= h >> 29
	h *= 0xbf58476d1ce4e5b9
	return int(h >> t.shift)
}

func (t *addrTable) get(ap netip.AddrPort) *route {
	if k, ok := key4(ap); ok {
		return t.get4(k)
	}
	return t.get6(ap)
}

func (t *addrTable) get4(k uint64) *route {
	mask := len(t.v4) - 1
	for i := t.home(k); ; i = (i + 1) & mask {
		if s := &t.v4[i]; s.rt == nil || s.key == k {
			return s.rt
		}
	}
}

// get6 is out of line: the map access would keep get from inlining.
//
//go:noinline
func (t *addrTable) get6(ap netip.AddrPort) *route { return t.v6[ap] }

func (t *addrTable) set(ap netip.AddrPort, rt *route) {
	k, ok := key4(ap)
	if !ok {
		t.v6[ap] = rt
		return
	}
	if rt == nil { // nil marks an empty slot: a nil route is no route
		t.del(ap)
		return
	}
	if (t.n4+1)*4 > len(t.v4)*3 {
		t.grow()
	}
	if t.put(k, rt) {
		t.n4++
	}
}

// put files rt under k and reports whether k is new.
func (t *addrTable) put(k uint64, rt *route) bool {
	mask := len(t.v4) - 1
	for i := t.home(k); ; i = (i + 1) & mask {
		s := &t.v4[i]
		if s.rt == nil {
			*s = addrSlot{key: k, rt: rt}
			return true
		}
		if s.key == k {
			s.rt = rt
			return false
		}
	}
}

// grow doubles v4 (bounded by the connections: only the gateway actor
// enters routes, one a connection granted).
func (t *addrTable) grow() {
	old := t.v4
	t.v4 = make([]addrSlot, 2*len(old))
	t.shift--
	for _, s := range old {
		if s.rt != nil {
			t.put(s.key, s.rt)
		}
	}
}

func (t *addrTable) del(ap netip.AddrPort) {
	k, ok := key4(ap)
	if !ok {
		delete(t.v6, ap)
		return
	}
	mask := len(t.v4) - 1
	i := t.home(k)
	for ; t.v4[i].key != k || t.v4[i].rt == nil; i = (i + 1) & mask {
		if t.v4[i].rt == nil {
			return // not in
		}
	}
	// Shift back the slots after it that would no longer be found past
	// the hole (linear probing's deletion: no tombstones to pile up).
	for j := i; ; {
		t.v4[i] = addrSlot{}
		for {
			j = (j + 1) & mask
			if t.v4[j].rt == nil {
				t.n4--
				return
			}
			// The slot at j may fill the hole at i unless its home lies
			// cyclically in (i, j].
			h := t.home(t.v4[j].key)
			if (j-h)&mask >= (j-i)&mask {
				break
			}
		}
		t.v4[i] = t.v4[j]
		i = j
	}
}

func (t *addrTable) len() int { return t.n4 + len(t.v6) }
