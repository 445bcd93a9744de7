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
// (BenchmarkZoneInputMailbox); this one costs ≈ 36, inlined (keys, slots in
// two arrays: 12 bytes an entry, 16–32 bytes an entity at its load).
//
// The zero slotIndex is empty and ready. Not safe for concurrent use; its
// Zone owns it.
type slotIndex struct {
	keys []uint64
	// slots holds an entry's slot + 1; 0 marks an empty entry (any id,
	// 0 included, is a valid key).
	slots []int32
	n     int   // entries held
	shift uint8 // 64 − log2(len(keys))
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
	mask := uint64(len(x.keys) - 1)
	for i := x.home(id); ; i = (i + 1) & mask {
		s := x.slots[i&mask]
		if s == 0 {
			return 0, false
		}
		if x.keys[i&mask] == id {
			return s - 1, true
		}
	}
}

// set maps id to slot s (s ≥ 0), replacing what id had.
func (x *slotIndex) set(id uint64, s int32) {
	if (x.n+1)*4 > len(x.keys)*3 {
		x.grow()
	}
	mask := uint64(len(x.keys) - 1)
	for i := x.home(id); ; i = (i + 1) & mask {
		if x.slots[i] == 0 {
			x.keys[i], x.slots[i] = id, s+1
			x.n++
			return
		}
		if x.keys[i] == id {
			x.slots[i] = s + 1
			return
		}
	}
}

// del removes id (nothing if it is not held).
func (x *slotIndex) del(id uint64) {
	if x.n == 0 {
		return
	}
	mask := uint64(len(x.keys) - 1)
	i := x.home(id)
	for ; ; i = (i + 1) & mask {
		if x.slots[i] == 0 {
			return
		}
		if x.keys[i] == id {
			break
		}
	}
	// Shift the rest of the probe run back over the hole: an entry moves
	// to the hole unless its home lies cyclically in (hole, its place].
	for j := (i + 1) & mask; x.slots[j] != 0; j = (j + 1) & mask {
		h := x.home(x.keys[j])
		if i <= j {
			if i < h && h <= j {
				continue
			}
		} else if i < h || h <= j {
			continue
		}
		x.keys[i], x.slots[i] = x.keys[j], x.slots[j]
		i = j
	}
	x.keys[i], x.slots[i] = 0, 0
	x.n--
}

// grow doubles the room (minIndex at first) and puts every entry back.
func (x *slotIndex) grow() {
	keys, slots := x.keys, x.slots
	size := max(2*len(keys), minIndex)
	x.keys, x.slots, x.n = make([]uint64, size), make([]int32, size), 0
	x.shift = uint8(64 - bits.TrailingZeros(uint(size))) // size is a power of two
	for i, s := range slots {
		if s != 0 {
			x.set(keys[i], s-1)
		}
	}
}
