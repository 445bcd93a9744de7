package gateway

import (
	"iter"
	"math/bits"
	"math/rand/v2"
)

// wordTable maps a one-word key to a route: the routers' tables by
// address (addrTable's IPv4 part) and by connection id (idTable). It is
// open-addressed: a slot is the key and the route pointer, 16 bytes,
// four to a cache line, and a lookup — one per datagram, on the reader
// goroutine — hashes the word and reads the slot it lands on and, rarely,
// the next few (linear probing): one line where the runtime's map read
// its group's control word and then the slot (two lines), and ≈ 15
// instructions where mapaccess1_fast64 took ≈ 48 by address, ≈ 88 with
// memhash64 by ConnID. Deletion shifts the run after the hole back, so
// no tombstones pile up.
//
// A lookup's key comes from the network (an attacker's address or id),
// but the slots a set of keys takes depend on a seed drawn per table, so
// no one outside can build the long runs that would make a miss cost
// more than a hit; and a lookup never writes, so a flood of unknown keys
// costs no memory.
//
// The zero wordTable is not ready: use newWordTable. Not safe for
// concurrent use; the router's mu guards it.
type wordTable struct {
	slots []wordSlot // a power of two long, at most 3/4 full
	shift uint8      // 64 - log2(len(slots)): home's hash bits
	n     int
	seed  uint64
}

// wordSlot is one key and its route; rt is nil in an empty slot.
type wordSlot struct {
	key uint64
	rt  *route
}

// minWordSlots is the smallest table.
const minWordSlots = 16

func newWordTable() wordTable {
	return wordTable{slots: make([]wordSlot, minWordSlots), shift: 64 - uint8(bits.TrailingZeros(minWordSlots)),
		seed: rand.Uint64()}
}

// home is k's first slot: the high bits of a seeded multiply-xorshift
// mix.
func (t *wordTable) home(k uint64) int {
	h := (k ^ t.seed) * 0x9e3779b97f4a7c15
	h ^= h >> 29
	h *= 0xbf58476d1ce4e5b9
	return int(h >> t.shift)
}

func (t *wordTable) get(k uint64) *route {
	mask := len(t.slots) - 1
	for i := t.home(k); ; i = (i + 1) & mask {
		if s := &t.slots[i]; s.rt == nil || s.key == k {
			return s.rt
		}
	}
}

// set files rt under k; a nil rt deletes k (nil marks an empty slot: a
// nil route is no route).
func (t *wordTable) set(k uint64, rt *route) {
	if rt == nil {
		t.del(k)
		return
	}
	if (t.n+1)*4 > len(t.slots)*3 {
		t.grow()
	}
	if t.put(k, rt) {
		t.n++
	}
}

// put files rt under k and reports whether k is new.
func (t *wordTable) put(k uint64, rt *route) bool {
	mask := len(t.slots) - 1
	for i := t.home(k); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.rt == nil {
			*s = wordSlot{key: k, rt: rt}
			return true
		}
		if s.key == k {
			s.rt = rt
			return false
		}
	}
}

// grow doubles the slots (bounded by the connections: only the gateway
// actor enters routes, one a connection granted).
func (t *wordTable) grow() {
	old := t.slots
	t.slots = make([]wordSlot, 2*len(old))
	t.shift--
	for _, s := range old {
		if s.rt != nil {
			t.put(s.key, s.rt)
		}
	}
}

func (t *wordTable) del(k uint64) {
	mask := len(t.slots) - 1
	i := t.home(k)
	for ; t.slots[i].key != k || t.slots[i].rt == nil; i = (i + 1) & mask {
		if t.slots[i].rt == nil {
			return // not in
		}
	}
	// Shift back the slots after it that would no longer be found past
	// the hole (linear probing's deletion: no tombstones to pile up).
	for j := i; ; {
		t.slots[i] = wordSlot{}
		for {
			j = (j + 1) & mask
			if t.slots[j].rt == nil {
				t.n--
				return
			}
			// The slot at j may fill the hole at i unless its home lies
			// cyclically in (i, j].
			h := t.home(t.slots[j].key)
			if (j-h)&mask >= (j-i)&mask {
				break
			}
		}
		t.slots[i] = t.slots[j]
		i = j
	}
}

// all is every route in the table, in slot order. The loop's body may
// delete the route it is given only if it then stops (a delete shifts
// later slots back).
func (t *wordTable) all() iter.Seq[*route] {
	return func(yield func(*route) bool) {
		for _, s := range t.slots {
			if s.rt != nil && !yield(s.rt) {
				return
			}
		}
	}
}
