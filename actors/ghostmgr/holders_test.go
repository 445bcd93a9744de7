package ghostmgr

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// TestSnapshotHoldersModel drives a zone's writer, its views and a few
// managers through random sequences of every path a snapshot reference
// takes — a view published, superseded in the slot, taken back by the
// slot's next view, dropped as stale, lowered away, nudged for and
// superseded while it waits for the clock, applied, refused by the table, a view of
// entries in between, a slot and its manager closed and a new one made —
// against a model of what each holder reads: the tick the snapshot had
// when its holder got it. A snapshot reused (rewritten by the writer's
// Next) while a table reads it or a view carries it shows another tick's
// entries, and fails; a reference dropped twice panics in
// Snapshot.Release; one never dropped leaves a snapshot held once every
// holder is gone, and fails.
func TestSnapshotHoldersModel(t *testing.T) {
	for seed := range uint64(12) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) { holdersModel(t, seed, 1500, true) })
	}
}

// FuzzSnapshotHolders is TestSnapshotHoldersModel from any seed.
func FuzzSnapshotHolders(f *testing.F) {
	f.Add(uint64(0))
	f.Add(uint64(99))
	f.Fuzz(func(t *testing.T, seed uint64) { holdersModel(t, seed, 600, false) })
}

// holdersModel runs ops random operations from seed; every lets it check
// that each path was taken.
func holdersModel(t *testing.T, seed uint64, ops int, every bool) {
	reg, _, npc, sw := snapWorld(t)
	const conns, n = 4, 12
	rng := rand.New(rand.NewPCG(seed, 31))
	mark := func(tick uint64) float64 { return float64(tick) } // every entry's Pos[1] in the tick's snapshot
	sealed := map[*ghost.Snapshot]uint64{}                     // the tick each snapshot was last sealed at
	var cur *ghost.Snapshot
	tick := uint64(0)
	newTick := func() {
		tick++
		s := sw.Next(n)
		for i := range n {
			var st ghost.State
			st.Pos = [3]float64{float64(i) + float64(tick%5), mark(tick), 0}
			s.Set(i, uint64(1<<40+i), npc, &st)
		}
		sw.Seal(s)
		cur, sealed[s] = s, tick
	}
	// A slot, its manager and the model's view of it.
	type conn struct {
		slot  *msg.ViewSlot
		m     *Manager
		took  uint64 // the tick of the snapshot the table reads (HeldSnapshot)
		epoch uint64 // the epoch the zone publishes at
		seq   uint64
	}
	cs := make([]*conn, conns)
	var seen Stats // of the managers closed, and of the slots: every path taken
	var stale, superseded uint64
	open := func(c int) {
		slot := new(msg.ViewSlot)
		m, err := New(reg, ghost.DefaultConfig(), slot, nil)
		if err != nil {
			t.Fatal(err)
		}
		cs[c] = &conn{slot: slot, m: m, epoch: 1}
	}
	for c := range cs {
		open(c)
	}
	tally := func(c *conn) {
		st := c.m.Stats()
		seen.Views += st.Views
		seen.ViewErrors += st.ViewErrors
		stale += c.slot.Stale()
		superseded += c.slot.Superseded()
	}
	now := time.Second
	var buf [1200]byte
	check := func(op string) {
		t.Helper()
		for k, c := range cs {
			if s := c.m.Table().HeldSnapshot(); s != nil {
				if !s.Held() {
					t.Fatalf("after %s: conn %d's table reads a snapshot nobody holds", op, k)
				}
				if sealed[s] != c.took {
					t.Fatalf("after %s: conn %d's table took tick %d's snapshot, now rewritten for tick %d", op, k, c.took, sealed[s])
				}
				if _, _, st := s.Entry(0); st.Pos[1] != mark(c.took) {
					t.Fatalf("after %s: conn %d's table reads tick %v's entries, took tick %d's", op, k, st.Pos[1], c.took)
				}
			}

		}
	}
	newTick()
	for op := range ops {
		c := cs[rng.IntN(conns)]
		name := ""
		switch r := rng.IntN(100); {
		case r < 15:
			name = "a tick"
			newTick()
		case r < 45:
			name = "a view published"
			epoch := c.epoch
			switch rng.IntN(8) {
			case 0:
				epoch-- // a late view of the previous owner: stale
			case 1:
				epoch++ // a handoff: the player's epoch goes up
				c.epoch = epoch
			case 2:
				epoch = 0 // unknown
			}
			var v *msg.View
			if rng.IntN(6) == 0 {
				name = "a view of entries published"
				v = msg.NewView()
				for i := range n / 2 {
					_, cl, st := cur.Entry(i)
					v.Entries = append(v.Entries, ghost.ViewEntry{Entity: uint64(1<<40 + i), Class: cl, Priority: 1, State: *st})
				}
			} else {
				v = c.slot.NewViewRefs(n, epoch)
				v.SetSnap(cur)
				for i := range n - rng.IntN(3) {
					v.Refs = append(v.Refs, ghost.NewViewRef(uint32(i), npc, 1))
				}
				if rng.IntN(10) == 0 {
					name = "a view the table refuses published"
					v.Refs = append(v.Refs, ghost.NewViewRef(n+3, npc, 1)) // past the snapshot's entries
				}
			}
			v.Tick, v.Epoch = tick, epoch
			c.slot.Publish(v)
		case r < 60:
			name = "a view taken"
			c.m.Take()
		case r < 80:
			name = "a view applied"
			now += time.Duration(rng.IntN(3)) * time.Millisecond // at times too soon: the view waits
			before := c.m.Table().HeldSnapshot()
			c.m.Apply(now)
			if s := c.m.Table().HeldSnapshot(); s != before && s != nil {
				c.took = sealed[s]
			}
		case r < 90:
			name = "a packet written and its fate"
			now += time.Millisecond
			var w bitstream.Writer
			w.Reset(buf[:])
			c.seq++
			before := c.m.Table().HeldSnapshot()
			if _, err := c.m.Write(&w, c.seq, now); err != nil {
				t.Fatal(err)
			}
			if s := c.m.Table().HeldSnapshot(); s != before && s != nil { // Write applies a waiting view
				c.took = sealed[s]
			}
			c.m.OnFate(notify.Fate{Seq: c.seq, Delivered: rng.IntN(4) != 0, SentAt: now})
		case r < 95:
			name = "the slot lowered"
			c.slot.Lower(c.epoch - uint64(rng.IntN(2)))
		default:
			name = "a connection closed and replaced"
			for k := range cs {
				if cs[k] == c {
					c.m.Close()
					tally(c)
					open(k)
				}
			}
		}
		check(fmt.Sprintf("op %d (%s)", op, name))
	}
	for _, c := range cs {
		c.m.Close()
		tally(c)
	}
	if every && (seen.Views == 0 || seen.ViewErrors == 0 || stale == 0 || superseded == 0) {
		t.Fatalf("a path not taken: %+v, %d stale, %d superseded", seen, stale, superseded)
	}
	newTick() // the writer lets its previous snapshot go
	for s := range sealed {
		if s != cur && s.Held() {
			t.Fatalf("snapshot of tick %d still held with every holder gone", sealed[s])
		}
	}
	if len(sealed) > int(tick)/2 {
		t.Errorf("%d snapshots for %d ticks: the writer did not reuse them", len(sealed), tick)
	}
}
