package ghost

// entityIndex maps an entity id to the record of the ghost that holds it
// on one connection (Table.idm: not its wire id). It is an
// open-addressing hash set of records (linear probing, backward-shift
// deletion) whose keys are not stored: a bucket holds rc+1 and the key is
// read from the table's entityOf(rc). 2 bytes a bucket at most 3/4 full
// (4 once a record past 2^16−2 is held: wide), against ≈ 25 bytes an
// entry for a map[uint64]uint32 (measured 1.6 KB per player at 1,000
// players). The bucket count is any (the room of the buckets' size class,
// idxBucketsFor), not a power of two: a scope of 97 to 150 ghosts took
// 256 buckets, 512 bytes, where 3/4 full and an eighth of room fit them
// in 272 to 416 (TestEntityIndexFootprint).
//
// A record is only ever in the index under its own entityOf(rc), and a
// table removes it before the record is freed or reused, and renames it
// when its ghost moves to another record (idxMove), so the key read
// through the record is always the one it was inserted under. The zero
// entityIndex is empty and ready to use.
type entityIndex struct {
	// b holds the buckets: rc+1, 0 for empty; one uint16 each, or while
	// wide two (low half first).
	b []uint16
	n int32 // records held (≤ maxTableGhosts); 32 bits keep the Table in its size class
	// wide: a record of 2^16−1 or more was held (records are dense, so
	// only a scope of that many ghosts gets there), and the
	// buckets have 32 bits since. A scope of the usual tens of ghosts
	// keeps 2 bytes a bucket.
	wide bool
	// hw is the most records held since the last trim (idxTrim), at most
	// 2^16−1: it sits in the struct's padding.
	hw uint16
}

// fibHash is Knuth's multiplicative hash: entity ids are often
// consecutive, and the top bits of the product spread them.
const fibHash = 0x9E3779B97F4A7C15

// home is entity e's first bucket: the product's top 32 bits scaled to
// the bucket count (a multiply and a shift, for any count).
func (x *entityIndex) home(e uint64) int {
	return int((e * fibHash >> 32) * uint64(x.buckets()) >> 32)
}

// nextBucket is the bucket after i, of n, wrapping.
func nextBucket(i, n int) int {
	if i++; i == n {
		return 0
	}
	return i
}

// buckets is the bucket count.
func (x *entityIndex) buckets() int {
	if x.wide {
		return len(x.b) / 2
	}
	return len(x.b)
}

// at is bucket i.
func (x *entityIndex) at(i int) uint32 {
	if x.wide {
		return uint32(x.b[2*i]) | uint32(x.b[2*i+1])<<16
	}
	return uint32(x.b[i])
}

// put sets bucket i to v.
func (x *entityIndex) put(i int, v uint32) {
	if x.wide {
		x.b[2*i], x.b[2*i+1] = uint16(v), uint16(v>>16)
		return
	}
	x.b[i] = uint16(v)
}

// idxGet returns the record holding entity e.
func (t *Table) idxGet(e uint64) (uint32, bool) {
	x := &t.idx
	if x.n == 0 {
		return 0, false
	}
	nb := x.buckets()
	for i := x.home(e); ; i = nextBucket(i, nb) {
		v := x.at(i)
		if v == 0 {
			return 0, false
		}
		if t.entityOf(v-1) == e {
			return v - 1, true
		}
	}
}

// idxSet maps entity e to record rc (entityOf(rc) is e, or rc is not in
// the index), replacing the record it mapped to before, if any.
func (t *Table) idxSet(e uint64, rc uint32) {
	x := &t.idx
	if rc >= 1<<16-1 && !x.wide {
		t.idxRebuild(x.buckets(), true)
	}
	if (int(x.n)+1)*4 > x.buckets()*3 {
		// Twice the records it holds three quarters full (12 at first: 16
		// buckets); idxTrim gives back what the scope does not use.
		t.idxRebuild(idxBucketsFor(max(12, 2*(x.buckets()*3/4)), x.wide), x.wide)
	}
	nb := x.buckets()
	for i := x.home(e); ; i = nextBucket(i, nb) {
		v := x.at(i)
		if v == 0 {
			x.put(i, rc+1)
			x.n++
			x.hw = max(x.hw, uint16(min(x.n, 1<<16-1)))
			return
		}
		if v-1 == rc || t.entityOf(v-1) == e {
			x.put(i, rc+1)
			return
		}
	}
}

// idxDel removes entity e if it maps to record rc.
func (t *Table) idxDel(e uint64, rc uint32) {
	x := &t.idx
	if x.n == 0 {
		return
	}
	nb := x.buckets()
	i := x.home(e)
	for ; ; i = nextBucket(i, nb) {
		v := x.at(i)
		if v == 0 {
			return
		}
		if t.entityOf(v-1) == e {
			if v-1 != rc {
				return
			}
			break
		}
	}
	x.n--
	// Backward shift: pull later members of the probe run into the hole
	// unless their home lies cyclically in (hole, j].
	for j := i; ; {
		x.put(i, 0)
		for {
			j = nextBucket(j, nb)
			v := x.at(j)
			if v == 0 {
				return
			}
			k := x.home(t.entityOf(v - 1))
			if (i <= j && (i < k && k <= j)) || (i > j && (i < k || k <= j)) {
				continue // still reachable from its home
			}
			x.put(i, v)
			i = j
			break
		}
	}
}

// idxMove makes the index name record to where it named record from,
// entity e's ghost (moveRecord), if it holds it.
func (t *Table) idxMove(e uint64, from, to uint32) {
	x := &t.idx
	if x.n == 0 {
		return
	}
	nb := x.buckets()
	for i := x.home(e); ; i = nextBucket(i, nb) {
		switch x.at(i) {
		case 0:
			return
		case from + 1:
			x.put(i, to+1)
			return
		}
	}
}

// idxRebuild gives the index n buckets (more than it holds), 32-bit ones
// if wide, and reinserts every record.
func (t *Table) idxRebuild(n int, wide bool) {
	old := t.idx
	x := &t.idx
	x.wide = wide
	if wide {
		x.b = make([]uint16, 2*n)
	} else {
		x.b = make([]uint16, n)
	}
	for j := range old.buckets() {
		v := old.at(j)
		if v == 0 {
			continue
		}
		i := x.home(t.entityOf(v - 1))
		for x.at(i) != 0 {
			i = nextBucket(i, n)
		}
		x.put(i, v)
	}
}

// idxBucketsFor is the bucket count for n records: at least 16, that holds
// them three quarters full, and the rest of its size class's room (the
// heap's block holds it either way).
func idxBucketsFor(n int, wide bool) int {
	size := 2
	if wide {
		size = 4
	}
	return roomFor(max((4*n+2)/3, 16), size)
}

// idxTrim gives the index the buckets for the most records it held since the
// last trim and an eighth more, once that is an eighth fewer than it has:
// the buckets of a peak of ghosts in scope (a crowd the player walked
// through, or a few entering before the leaving ones' kills went out) and
// idxSet's doubling are given back, not kept for the connection's life,
// and a scope walking within an eighth of its peak does not move them.
func (t *Table) idxTrim() {
	x := &t.idx
	hw := max(int(x.hw), int(x.n))
	if n := x.buckets(); n > 0 {
		if b := idxBucketsFor(hw+hw/8, x.wide); b <= n-n/8 {
			t.idxRebuild(b, x.wide)
		}
	}
	x.hw = uint16(min(x.n, 1<<16-1))
}
