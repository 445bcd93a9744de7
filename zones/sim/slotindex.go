package sim

import "math/bits"

// slotIndex maps an entity's id to its slot in Zone.ents: an open-addressed
// table with linear probing and Fibonacci hashing, kept at most three
// quarters full, deleting by shifting the probe run back (no tombstones,
// so a zone's churn never slows its lookups).
//
// It replaced a map[uint64]int32: every input looks its player up here
// (sim.Zone.InputBatch), and the map's lookup (mapaccess2_fast64 with its
// hash call) cost ≈ 82 instructions of the ≈ 485 a zone spent on an input
// (BenchmarkZoneInputMailbox); this one costs ≈ 36, inlined. An entry's
// id and slot sit side by side (16 bytes an entry, 32–64 bytes an entity
// at its load): a lookup reads one line, where keys and slots in two
// arrays (12 bytes an entry) read two, and an input on a busy server
// found neither in the cache (BenchmarkZoneInput1000: D1 read misses an
// input 4.8 → 3.8).
//
// The zero slotIndex is empty and ready. Not safe for concurrent use; its
// Zone owns it.
type slotIndex struct {
	ents  []slotEntry
	n     int   // entries held
	shift uint8 // 64 − log2(len(ents))
}

// slotEntry is one entry of a slotIndex: an id and its slot + 1; slot 0
// marks an empty entry (any id, 0 included, is a valid key).
type slotEntry struct {
	key  uint64
	slot int32
}

// minIndex is the least room a slotIndex takes (entries).
const minIndex = 16

// home is id's first probe position.
func (x *slotIndex) home(id uint64) uint64 { return (id * 0x9E3779B97F4A7C15) >> x.shift }

// get returns id's slot.
func (x *slotIndex) get(id uint64) (int32, bool) {
	if x.n == 0 {
		return 0, false
	}
	mask := uint64(len(x.ents) - 1)
	for i := x.home(id); ; i = (i + 1) & mask {
		e := &x.ents[i&mask]
		if e.slot == 0 {
			return 0, false
		}
		if e.key == id {
			return e.slot - 1, true
		}
	}
}

// set maps id to slot s (s ≥ 0), replacing what id had.
func (x *slotIndex) set(id uint64, s int32) {
	if (x.n+1)*4 > len(x.ents)*3 {
		x.grow()
	}
	mask := uint64(len(x.ents) - 1)
	for i := x.home(id); ; i = (i + 1) & mask {
		e := &x.ents[i]
		if e.slot == 0 {
			*e = slotEntry{id, s + 1}
			x.n++
			return
		}
		if e.key == id {
			e.slot = s + 1
			return
		}
	}
}

// del removes id (nothing if it is not held).
func (x *slotIndex) del(id uint64) {
	if x.n == 0 {
		return
	}
	mask := uint64(len(x.ents) - 1)
	i := x.home(id)
	for ; ; i = (i + 1) & mask {
		if x.ents[i].slot == 0 {
			return
		}
		if x.ents[i].key == id {
			break
		}
	}
	// Shift the rest of the probe run back over the hole: an entry moves
	// to the hole unless its home lies cyclically in (hole, its place].
	for j := (i + 1) & mask; x.ents[j].slot != 0; j = (j + 1) & mask {
		h := x.home(x.ents[j].key)
		if i <= j {
			if i < h && h <= j {
				continue
			}
		} else if i < h || h <= j {
			continue
		}
		x.ents[i] = x.ents[j]
		i = j
	}
	x.ents[i] = slotEntry{}
	x.n--
}

// grow doubles the room (minIndex at first) and puts every entry back.
func (x *slotIndex) grow() {
	old := x.ents
	size := max(2*len(old), minIndex)
	x.ents, x.n = make([]slotEntry, size), 0
	x.shift = uint8(64 - bits.TrailingZeros(uint(size))) // size is a power of two
	for _, e := range old {
		if e.slot != 0 {
			x.set(e.key, e.slot-1)
		}
	}
}
