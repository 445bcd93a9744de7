package ghost

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// TestSkippedViewWritesWhatEntryViewsWrite: a table that takes only some
// of a series' snapshots (a node behind: every view one to four
// snapshots after the last) writes the same bytes as a table given the
// same views as entries, which diffs every state against its own copy.
// Between two views the entities walk, stop and start, step there and
// back, change health, yaw and flags, and some indices get a new entity
// for good, and now and then a view is the same snapshot again; groups
// other than the position change one way only (a value changed and
// changed back is stamped: snapshot views then send a superset, see
// SetSnapshotView). A ghost taken at the same entry as in
// the table's last view goes by takeSince: if it read only the latest
// snapshot's changes (snapView.now), or took a ghost whose entry held
// another entity in a snapshot it skipped, or took a step there and back
// as a move, the packets would differ.
func TestSkippedViewWritesWhatEntryViewsWrite(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4} {
		// wide: the registry has a class of nine groups, so the snapshot's
		// stride is too wide for takeSince's words (stampsAfter's loop).
		for _, wide := range []bool{false, true} {
			taken, fast := skippedViewsTwin(t, seed, nil, 400, wide)
			if fast < taken/3 {
				t.Fatalf("seed %d: %d of %d views skipped snapshots and assigned no ghost: the case is not exercised", seed, fast, taken)
			}
		}
	}
}

// FuzzSkippedViewsWriteWhatEntryViewsWrite is
// TestSkippedViewWritesWhatEntryViewsWrite with the world's draws seeded
// and the snapshots skipped after each view (gaps[k] % 5, in turn) given.
func FuzzSkippedViewsWriteWhatEntryViewsWrite(f *testing.F) {
	f.Add(uint64(1), []byte{1, 2})
	f.Add(uint64(2), []byte{0, 3, 1, 4, 2})
	f.Add(uint64(3), []byte{4})
	f.Add(uint64(4), []byte{})
	f.Fuzz(func(t *testing.T, seed uint64, gaps []byte) {
		skippedViewsTwin(t, seed, gaps, 120, seed%2 == 1)
	})
}

// skippedViewsTwin runs ticks ticks of TestSkippedViewWritesWhatEntryViewsWrite's
// world (gaps nil: each view skips 0 to 3 snapshots, drawn; wide: the
// registry has a class of nine groups besides, which no entity is of)
// and returns how many views the tables took and how many of those were
// behind and assigned no ghost.
func skippedViewsTwin(t *testing.T, seed uint64, gaps []byte, ticks int, wide bool) (taken, fast int) {
	reg, pc, nc := newTestRegistry(t)
	if wide {
		c := &Class{ID: 9, Name: "wide", Groups: []Group{
			PositionGroup(), YawGroup(8), HealthGroup(0, 100), FlagsGroup(8), FlagsGroup(4),
			ExtraGroup(1), HealthGroup(0, 10), FlagsGroup(2), FlagsGroup(1),
		}}
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	ent, err := NewTable(reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	snp, err := NewTable(reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sw := writerFor(t, reg)
	if got := sw.Next(0).stride > stampWindow; got != wide {
		t.Fatalf("a stride over %d: %v, want %v", stampWindow, got, wide)
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	const n = 40
	ents := make([]ViewEntry, n)
	next := uint64(1000)
	newEntity := func(i int) {
		c := nc
		if rng.IntN(3) == 0 {
			c = pc
		}
		next++
		ents[i] = ViewEntry{Entity: next, Class: c, Priority: float32(1+rng.IntN(60)) / 64}
		ents[i].State.Pos = [3]float64{rng.Float64()*100 - 50, 0, rng.Float64()*100 - 50}
		ents[i].State.Health = 50
		ents[i].State.Name = MustName("wolf")
	}
	for i := range ents {
		newEntity(i)
	}
	in := make([]bool, n)
	for i := range in {
		in[i] = i < 30
	}
	now, seq := time.Second, uint64(0)
	var bufE, bufS [MaxPacketBytes]byte
	var we, ws bitstream.Writer
	wait := 0
	for tick := range ticks {
		now += 50 * time.Millisecond
		for i := range ents {
			st := &ents[i].State
			switch k := (tick/3 + i) % 7; {
			case k < 3: // walks
				st.Pos[0] += 0.3
			case k == 3: // steps there and back, one a tick
				if tick%2 == 0 {
					st.Pos[2] += 0.5
				} else {
					st.Pos[2] -= 0.5
				}
			} // else stands still
			if rng.IntN(5) == 0 {
				st.Health++
			}
			if rng.IntN(7) == 0 {
				st.Yaw += 0.1
				st.Flags++
			}
			if rng.IntN(200) == 0 {
				newEntity(i) // the index's entity leaves the zone, another takes it
			}
		}
		s := sw.Next(n)
		for i := range ents {
			s.Set(i, ents[i].Entity, ents[i].Class, &ents[i].State)
		}
		sw.Seal(s)
		if wait > 0 {
			wait-- // a snapshot the node behind skips
			continue
		}
		if gaps == nil {
			wait = rng.IntN(4)
		} else if len(gaps) > 0 {
			wait = int(gaps[taken%len(gaps)] % 5)
		}
		if rng.IntN(20) == 0 {
			i := rng.IntN(n)
			in[i] = !in[i]
		}
		var view []ViewEntry
		var refs []ViewRef
		for i := range ents {
			if in[i] {
				view = append(view, ents[i])
				refs = append(refs, NewViewRef(uint32(i), ents[i].Class, ents[i].Priority))
			}
		}
		// Now and then the same snapshot again, a little later (a view the
		// zone sent twice): nothing changed, the walkers stop.
		for again := rng.IntN(10) == 0; ; again = false {
			last := snp.snapSeq
			behind := snp.snap != nil && s.seq-last != 1
			before := snp.Stats().GhostsAssigned
			if err := ent.SetView(now, view); err != nil {
				t.Fatal(err)
			}
			if err := snp.SetSnapshotView(now, s, refs); err != nil {
				t.Fatal(err)
			}
			if behind && snp.Stats().GhostsAssigned == before {
				fast++
			}
			taken++
			seq++
			we.Reset(bufE[:])
			ws.Reset(bufS[:])
			if _, err := ent.Write(&we, seq, now); err != nil {
				t.Fatal(err)
			}
			if _, err := snp.Write(&ws, seq, now); err != nil {
				t.Fatal(err)
			}
			if a, b := we.Bytes(), ws.Bytes(); !bytes.Equal(a, b) {
				t.Fatalf("seed %d, tick %d (snapshot %d, the table's last %d): the snapshot table wrote %d bytes, the entry table %d:\n%x\n%x",
					seed, tick, s.seq, last, len(b), len(a), b, a)
			}
			f := notify.Fate{Seq: seq, Delivered: seq%5 != 0, SentAt: now}
			ent.OnFate(f)
			snp.OnFate(f)
			if !again {
				break
			}
			now += 10 * time.Millisecond
		}
	}
	return taken, fast
}

// TestStampsOverIsStampsAfter: takeSince's test of eight stamps two to a
// word gives, for an entry's groups, what the general path's compare of
// each stamp does (int32(stamp − p) > 0) for every series seq below 2^31,
// whatever the stamps past the entry's hold; and stampsAfter, its
// fallback, is that compare for any seq.
func TestStampsOverIsStampsAfter(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, seq := range []uint32{1, 2, 300, 1 << 20, 1<<31 - 1} {
		for range 2000 {
			p := seq - min(seq, uint32(rng.IntN(ageMax+1)))
			groups := 1 + rng.IntN(stampWindow)
			var row [stampWindow]uint32
			for g := range row {
				switch {
				case g >= groups:
					row[g] = rng.Uint32() // the next entry's, or stale room
				case rng.IntN(4) == 0:
					row[g] = p - min(p, uint32(rng.IntN(3))) + uint32(rng.IntN(3)) // at p, just before, just after
				default:
					row[g] = uint32(rng.Int64N(int64(seq) + 1))
				}
			}
			var want uint64
			for g, stamp := range row[:groups] {
				if int32(stamp-p) > 0 {
					want |= 1 << g
				}
			}
			mask := uint64(1)<<groups - 1
			pw := uint64(p|1<<31) * (1 | 1<<32)
			if got := stampsOver(unsafe.Pointer(&row), pw) & mask; got != want {
				t.Fatalf("seq %d, p %d, stamps %v of %d groups: stampsOver %08b, want %08b", seq, p, row, groups, got, want)
			}
			if got := stampsAfter(row[:groups], p); got != want {
				t.Fatalf("seq %d, p %d, stamps %v: stampsAfter %08b, want %08b", seq, p, row[:groups], got, want)
			}
		}
	}
	// Past 2^31 (a series 3.4 years old at 20 Hz), the compare is int32's:
	// a stamp 2^31 or more before p reads as newer.
	for _, c := range []struct{ stamp, p uint32 }{{0, 1 << 31}, {5, 1<<31 + 6}, {1<<31 + 7, 1<<31 + 6}, {1 << 31, 1<<31 + 1}, {3, 1<<31 + 3}} {
		want := uint64(0)
		if int32(c.stamp-c.p) > 0 {
			want = 1
		}
		if got := stampsAfter([]uint32{c.stamp}, c.p); got != want {
			t.Errorf("stamp %d, p %d: stampsAfter %d, want %d", c.stamp, c.p, got, want)
		}
	}
}
