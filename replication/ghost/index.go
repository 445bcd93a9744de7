package ghost

// entityIndex maps an entity id to the ghost id that holds it on one
// connection. It is an open-addressing hash set of ghost ids (linear
// probing, backward-shift deletion) whose keys are not stored: a bucket
// holds id+1 and the key is read from the table's slots[id].entity. 4 bytes
// a bucket at most 3/4 full, against ≈ 25 bytes an entry for a
// map[uint64]uint32 (measured 1.6 KB per player at 1,000 players).
//
// An id is only ever in the index under its own slots[id].entity, and a
// table removes it before the id is freed or reused, so the key read
// through the id is always the one it was inserted under. The zero
// entityIndex is empty and ready to use.
type entityIndex struct {
	b     []uint32 // id+1, 0: empty; len a power of two (or 0)
	n     int32    // ids held (< MaxMaxGhosts); 32 bits keep the Table in its size class
	shift uint8    // 64 − log2(len(b))
}

// fibHash is Knuth's multiplicative hash: entity ids are often
// consecutive, and the top bits of the product spread them.
const fibHash = 0x9E3779B97F4A7C15

func (x *entityIndex) home(e uint64) int { return int((e * fibHash) >> x.shift) }

// get returns the id holding entity e.
func (t *Table) idxGet(e uint64) (uint32, bool) {
	x := &t.idx
	if x.n == 0 {
		return 0, false
	}
	mask := len(x.b) - 1
	for i := x.home(e); ; i = (i + 1) & mask {
		v := x.b[i]
		if v == 0 {
			return 0, false
		}
		if t.slots[v-1].entity == e {
			return v - 1, true
		}
	}
}

// idxSet maps entity e to id (slots[id].entity must already be e),
// replacing the id it mapped to before, if any.
func (t *Table) idxSet(e uint64, id uint32) {
	x := &t.idx
	if (int(x.n)+1)*4 > len(x.b)*3 {
		t.idxGrow()
	}
	mask := len(x.b) - 1
	for i := x.home(e); ; i = (i + 1) & mask {
		v := x.b[i]
		if v == 0 {
			x.b[i] = id + 1
			x.n++
			return
		}
		if v-1 == id || t.slots[v-1].entity == e {
			x.b[i] = id + 1
			return
		}
	}
}

// idxDel removes entity e if it maps to id.
func (t *Table) idxDel(e uint64, id uint32) {
	x := &t.idx
	if x.n == 0 {
		return
	}
	mask := len(x.b) - 1
	i := x.home(e)
	for ; ; i = (i + 1) & mask {
		v := x.b[i]
		if v == 0 {
			return
		}
		if t.slots[v-1].entity == e {
			if v-1 != id {
				return
			}
			break
		}
	}
	x.n--
	// Backward shift: pull later members of the probe run into the hole
	// unless their home lies cyclically in (hole, j].
	for j := i; ; {
		x.b[i] = 0
		for {
			j = (j + 1) & mask
			v := x.b[j]
			if v == 0 {
				return
			}
			k := x.home(t.slots[v-1].entity)
			if (i <= j && (i < k && k <= j)) || (i > j && (i < k || k <= j)) {
				continue // still reachable from its home
			}
			x.b[i] = v
			i = j
			break
		}
	}
}

// idxGrow doubles the buckets (16 at first) and reinserts every id.
func (t *Table) idxGrow() {
	x := &t.idx
	old := x.b
	n := max(16, 2*len(old))
	x.b = make([]uint32, n)
	x.shift = uint8(64 - log2(n))
	mask := n - 1
	for _, v := range old {
		if v == 0 {
			continue
		}
		i := x.home(t.slots[v-1].entity)
		for x.b[i] != 0 {
			i = (i + 1) & mask
		}
		x.b[i] = v
	}
}

// log2 of a power of two.
func log2(n int) int {
	l := 0
	for n > 1 {
		n >>= 1
		l++
	}
	return l
}
