package ghost

import (
	"errors"
	"math"
	"math/bits"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// duo is a Table and a Mirror driven by hand: the test decides what is
// delivered and which fate each packet gets.
type duo struct {
	t   *testing.T
	reg *Registry
	pc  *Class
	nc  *Class
	tab *Table
	mir *Mirror
	now time.Duration
	seq uint64
	buf [MaxPacketBytes]byte
	w   bitstream.Writer
	r   bitstream.Reader
	// fast skips the invariant check after every packet (huge tables).
	fast bool
}

func newDuo(t *testing.T, cfg Config) *duo {
	t.Helper()
	reg, pc, nc := newTestRegistry(t)
	tab, err := NewTable(reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	mir, err := NewMirror(reg, DefaultMirrorConfig())
	if err != nil {
		t.Fatal(err)
	}
	return &duo{t: t, reg: reg, pc: pc, nc: nc, tab: tab, mir: mir, now: time.Second}
}

func (d *duo) view(v ...ViewEntry) {
	d.t.Helper()
	d.now += 50 * time.Millisecond
	if err := d.tab.SetView(d.now, v); err != nil {
		d.t.Fatal(err)
	}
}

// send writes one packet of at most budget bytes; it returns its sequence,
// bytes and record count.
func (d *duo) send(budget int) (uint64, []byte, int) {
	d.t.Helper()
	d.seq++
	d.w.Reset(d.buf[:budget])
	n, err := d.tab.Write(&d.w, d.seq, d.now)
	if err != nil {
		d.t.Fatal(err)
	}
	if d.fast {
		return d.seq, slices.Clone(d.w.Bytes()), n
	}
	if err := checkInvariants(d.tab); err != nil {
		d.t.Fatal(err)
	}
	return d.seq, slices.Clone(d.w.Bytes()), n
}

func (d *duo) recv(pkt []byte) {
	d.t.Helper()
	d.r.Reset(pkt)
	if err := d.mir.Read(&d.r, d.now); err != nil {
		d.t.Fatal(err)
	}
}

func (d *duo) fate(seq uint64, delivered bool) {
	d.t.Helper()
	d.tab.OnFate(notify.Fate{Seq: seq, Delivered: delivered, SentAt: d.now})
	if d.fast {
		return
	}
	if err := checkInvariants(d.tab); err != nil {
		d.t.Fatal(err)
	}
}

// trip sends a full packet, delivers it and reports it delivered.
func (d *duo) trip() int {
	d.t.Helper()
	seq, pkt, n := d.send(MaxPacketBytes)
	d.recv(pkt)
	d.fate(seq, true)
	return n
}

// settle trips packets (one per new view of v) until nothing is pending.
// npcs is a view of n NPCs (entities 1…n), the i-th at i metres.
func (d *duo) npcs(n int) []ViewEntry {
	v := make([]ViewEntry, n)
	for i := range v {
		v[i] = d.npc(uint64(i+1), float64(i))
	}
	return v
}

// exact fails the test unless the client's mirror holds exactly want and
// the table's invariants hold.
func (d *duo) exact(want []ViewEntry) {
	d.t.Helper()
	if diff := mismatch(d.reg, d.mir, want); diff != "" {
		d.t.Fatal(diff)
	}
	if err := checkInvariants(d.tab); err != nil {
		d.t.Fatal(err)
	}
}

func (d *duo) settle(v ...ViewEntry) {
	d.t.Helper()
	for range 50 {
		d.trip()
		if !d.tab.Pending() && d.tab.InFlight() == 0 {
			return
		}
		d.view(v...)
	}
	d.t.Fatal("table did not settle")
}

func (d *duo) npc(entity uint64, x float64) ViewEntry {
	e := ViewEntry{Entity: entity, Class: d.nc, Priority: 1}
	e.State.Pos = [3]float64{x, 2, 0}
	e.State.Health = 50
	return e
}

func TestIDsCompactWidthAndReuseAfterKillAck(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	var v []ViewEntry
	for i := range 5 {
		v = append(v, d.npc(uint64(100+i), float64(i)))
	}
	d.view(v...)
	for i := range 5 {
		if id, ok := d.tab.GhostID(uint64(100 + i)); !ok || id != uint32(i) {
			t.Fatalf("entity %d got id %d (%v), want the lowest free id %d", 100+i, id, ok, i)
		}
	}
	if w := d.tab.IDWidth(); w != 3 { // ids 0..4: ⌈log2(5)⌉
		t.Fatalf("id width %d, want 3", w)
	}
	d.settle(v...)
	// Entity 101 (id 1) and 104 (id 4) leave; the kill goes out but is lost.
	v2 := []ViewEntry{v[0], v[2], v[3]}
	d.view(v2...)
	seq, _, _ := d.send(MaxPacketBytes)
	d.view(append(v2, d.npc(200, 9))...) // a newcomer while the ids are still held
	if id, _ := d.tab.GhostID(200); id != 5 {
		t.Fatalf("newcomer got id %d while ids 1 and 4 await their kill ack; want 5", id)
	}
	d.fate(seq, false) // kill lost: retried, ids still held
	if d.tab.Len() != 6 {
		t.Fatalf("Len %d, want 6 (two killing)", d.tab.Len())
	}
	seq, pkt, _ := d.send(MaxPacketBytes)
	d.recv(pkt)
	d.fate(seq, true)
	if d.tab.Len() != 4 {
		t.Fatalf("Len %d after the kill ack, want 4", d.tab.Len())
	}
	d.view(append(v2, d.npc(200, 9), d.npc(201, 10))...)
	if id, _ := d.tab.GhostID(201); id != 1 {
		t.Fatalf("entity 201 got id %d, want reused id 1", id)
	}
	d.settle(append(v2, d.npc(200, 9), d.npc(201, 10))...)
	if d.mir.Len() != 5 {
		t.Fatalf("mirror holds %d ghosts, want 5", d.mir.Len())
	}
	// Only id 0 left: width 0 (a lone ghost costs no id bits).
	d.view(v[0])
	d.settle(v[0])
	if d.tab.IDWidth() != 0 || d.tab.Len() != 1 {
		t.Fatalf("width %d len %d, want 0 and 1", d.tab.IDWidth(), d.tab.Len())
	}
}

func TestSupports65536Ghosts(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	d.fast = true
	v := make([]ViewEntry, DefaultMaxGhosts)
	for i := range v {
		v[i] = d.npc(uint64(i+1), float64(i%4000)-2000+0.5)
	}
	v[len(v)-1].Priority = 100 // id 65535 goes first: a full-width id on the wire
	d.view(v...)
	if d.tab.Len() != DefaultMaxGhosts || d.tab.IDWidth() != 16 {
		t.Fatalf("Len %d width %d, want 65536 and 16", d.tab.Len(), d.tab.IDWidth())
	}
	if err := d.tab.SetView(d.now+time.Second, append(v, d.npc(1<<40, 0))); !errors.Is(err, ErrTooManyGhosts) {
		t.Fatalf("65,537th ghost: %v, want ErrTooManyGhosts", err)
	}
	d.now += time.Second
	for range 300 {
		d.trip()
	}
	if d.mir.Len() < 10000 {
		t.Fatalf("mirror holds %d ghosts after 3000 packets", d.mir.Len())
	}
	if err := checkInvariants(d.tab); err != nil {
		t.Fatal(err)
	}
	if g, ok := d.mir.ByEntity(DefaultMaxGhosts); !ok || g.ID != DefaultMaxGhosts-1 {
		t.Fatalf("ghost id 65535 did not reach the client (%v)", ok)
	}
	for g := range d.mir.All() { // ids follow the view order: entity i+1 has id i
		if uint64(g.ID)+1 != g.Entity {
			t.Fatalf("entity %d has ghost id %d", g.Entity, g.ID)
		}
	}
}

func TestKillWaitsForInFlightRecords(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	e := d.npc(7, 1)
	d.view(e)
	d.settle(e)
	e.State.Health = 10
	d.view(e)
	upd, pkt, _ := d.send(MaxPacketBytes) // update in flight
	d.view()                              // 7 leaves scope
	_, _, n := d.send(MaxPacketBytes)
	if n != 0 {
		t.Fatalf("wrote %d records while the update is in flight; the kill must wait", n)
	}
	d.recv(pkt)
	d.fate(upd, true)
	d.fate(d.seq, true) // the empty packet
	seq, kill, n := d.send(MaxPacketBytes)
	if n != 1 {
		t.Fatalf("wrote %d records, want the kill", n)
	}
	d.recv(kill)
	d.fate(seq, true)
	if d.mir.Len() != 0 || d.tab.Len() != 0 {
		t.Fatalf("mirror %d table %d, want both empty", d.mir.Len(), d.tab.Len())
	}
}

func TestKillRacesCreate(t *testing.T) {
	for _, tc := range []struct {
		name            string
		createDelivered bool
		wantKill        bool
	}{
		{name: "create delivered: a kill follows", createDelivered: true, wantKill: true},
		{name: "create lost: freed without a kill", createDelivered: false, wantKill: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDuo(t, DefaultConfig())
			e := d.npc(9, 3)
			d.view(e)
			seq, pkt, _ := d.send(MaxPacketBytes) // the create
			d.view()                              // leaves while the create is in flight
			if _, _, n := d.send(MaxPacketBytes); n != 0 {
				t.Fatalf("wrote %d records while the create is in flight", n)
			}
			if tc.createDelivered {
				d.recv(pkt)
			}
			d.fate(seq, tc.createDelivered)
			d.fate(d.seq, true)
			_, kill, n := d.send(MaxPacketBytes)
			if (n == 1) != tc.wantKill {
				t.Fatalf("records after the create's fate: %d, want kill %v", n, tc.wantKill)
			}
			d.recv(kill)
			d.fate(d.seq, true)
			if d.mir.Len() != 0 || d.tab.Len() != 0 {
				t.Fatalf("mirror %d table %d, want both empty", d.mir.Len(), d.tab.Len())
			}
			if got := d.tab.Stats().FreedUnacked; (got == 1) == tc.wantKill {
				t.Fatalf("FreedUnacked %d", got)
			}
		})
	}
}

func TestReenterWhileKilling(t *testing.T) {
	t.Run("kill not yet sent: cancelled, same id", func(t *testing.T) {
		d := newDuo(t, DefaultConfig())
		a, b := d.npc(1, 1), d.npc(2, 2)
		d.view(a, b)
		d.settle(a, b)
		b.State.Health = 99
		d.view(a, b)
		seq, pkt, _ := d.send(MaxPacketBytes) // b's update in flight: its kill must wait
		d.view(a)
		b.State.Health = 77
		d.view(a, b) // back before the kill went out
		if id, _ := d.tab.GhostID(2); id != 1 {
			t.Fatalf("re-entered entity has id %d, want its old id 1", id)
		}
		d.recv(pkt)
		d.fate(seq, true)
		d.settle(a, b)
		if s := d.mir.Stats(); s.Kills != 0 {
			t.Fatalf("%d kills reached the client", s.Kills)
		}
		if m := mismatch(d.reg, d.mir, []ViewEntry{a, b}); m != "" {
			t.Fatal(m)
		}
	})
	t.Run("kill in flight: a new id", func(t *testing.T) {
		d := newDuo(t, DefaultConfig())
		a, b := d.npc(1, 1), d.npc(2, 2)
		d.view(a, b)
		d.settle(a, b)
		d.view(a)
		seq, pkt, n := d.send(MaxPacketBytes) // the kill of b (id 1)
		if n != 1 {
			t.Fatalf("%d records, want the kill", n)
		}
		d.view(a, b)
		if id, _ := d.tab.GhostID(2); id != 2 {
			t.Fatalf("re-entered entity got id %d, want a fresh id 2 (id 1 is being killed)", id)
		}
		// The create of the new id may even arrive before the kill of the old.
		seq2, pkt2, _ := d.send(MaxPacketBytes)
		d.recv(pkt2)
		d.recv(pkt)
		d.fate(seq, true)
		d.fate(seq2, true)
		d.settle(a, b)
		if m := mismatch(d.reg, d.mir, []ViewEntry{a, b}); m != "" {
			t.Fatal(m)
		}
	})
}

// Listing 7.13 / RL-6 acceptance: a car updated at 20 Hz loses a packet —
// no position is resent, a newer packet carries it; a stationary object's
// lost update is resent.
func TestDropRedirtiesOnlyWhatNoLaterPacketCarries(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	car, rock := d.npc(1, 0), d.npc(2, 50)
	d.view(car, rock)
	d.settle(car, rock)

	car.State.Pos[0] += 1
	rock.State.Health = 20 // the stationary object changes once
	d.view(car, rock)
	lost, _, _ := d.send(MaxPacketBytes) // carries car.pos, rock.health
	car.State.Pos[0] += 1
	d.view(car, rock)
	later, laterPkt, _ := d.send(MaxPacketBytes) // carries car.pos only
	st := d.tab.Stats()
	d.fate(lost, false)
	carID, _ := d.tab.GhostID(1)
	rockID, _ := d.tab.GhostID(2)
	if dirty := d.tab.dirtyAt(carID); dirty != 0 {
		t.Fatalf("car dirty %b after the drop: a later packet carries its position", dirty)
	}
	if dirty, hb := d.tab.dirtyAt(rockID), d.nc.GroupBit("health"); dirty != hb {
		t.Fatalf("rock dirty %b, want only health %b", dirty, hb)
	}
	st2 := d.tab.Stats()
	if st2.Suppressed-st.Suppressed != 1 || st2.Redirtied-st.Redirtied != 1 {
		t.Fatalf("suppressed %d redirtied %d, want 1 and 1", st2.Suppressed-st.Suppressed, st2.Redirtied-st.Redirtied)
	}
	d.recv(laterPkt)
	d.fate(later, true)
	d.settle(car, rock)
	if m := mismatch(d.reg, d.mir, []ViewEntry{car, rock}); m != "" {
		t.Fatal(m)
	}
}

// RP-7 acceptance: changing only health sends the id, the mask and health.
func TestChangingOnlyHealthSendsMaskAndHealth(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	var v []ViewEntry
	for i := range 40 {
		v = append(v, d.npc(uint64(i+1), float64(i)))
	}
	d.view(v...)
	d.settle(v...)
	v[17].State.Health = 12345
	d.view(v...)
	_, pkt, n := d.send(MaxPacketBytes)
	if n != 1 {
		t.Fatalf("%d records, want 1", n)
	}
	width := d.tab.IDWidth()
	rec := int(width) + kindMaskLen + len(d.nc.Groups) + int(bitstream.RangeBits(0, 100000))
	want := bitstream.GammaBits(2) + sectionFixed + rec
	if got := d.w.BitLen(); got != want {
		t.Fatalf("section is %d bits, want %d (count %d + header %d + id %d + kind %d + mask %d + health %d)",
			got, want, bitstream.GammaBits(2), sectionFixed, width, kindMaskLen, len(d.nc.Groups), bitstream.RangeBits(0, 100000))
	}
	d.recv(pkt)
	if g, _ := d.mir.ByEntity(18); g.State.Health != 12345 {
		t.Fatalf("health %d", g.State.Health)
	}
}

func TestEmptySectionAndErrors(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	_, pkt, n := d.send(MaxPacketBytes)
	if n != 0 || d.w.BitLen() != 1 || len(pkt) != 1 {
		t.Fatalf("empty section: %d records, %d bits", n, d.w.BitLen())
	}
	d.recv(pkt)
	d.w.Reset(nil)
	if _, err := d.tab.Write(&d.w, d.seq+1, d.now); !errors.Is(err, ErrNoRoom) {
		t.Fatalf("zero-bit budget: %v, want ErrNoRoom", err)
	}
	d.w.Reset(d.buf[:])
	if _, err := d.tab.Write(&d.w, d.seq, d.now); !errors.Is(err, ErrSeqOrder) {
		t.Fatalf("repeated sequence: %v, want ErrSeqOrder", err)
	}
	e := d.npc(1, 0)
	d.view(e)
	if err := d.tab.SetView(d.now, []ViewEntry{e}); !errors.Is(err, ErrViewTime) {
		t.Fatalf("same view time: %v, want ErrViewTime", err)
	}
	bad := e
	bad.State.Pos[0] = 1e6
	if err := d.tab.SetView(d.now+time.Second, []ViewEntry{bad}); !errors.Is(err, ErrBadState) {
		t.Fatalf("position outside the bounds: %v, want ErrBadState", err)
	}
	bad = e
	bad.State.Health = -1
	if err := d.tab.SetView(d.now+time.Second, []ViewEntry{bad}); !errors.Is(err, ErrBadState) {
		t.Fatalf("health outside its range: %v, want ErrBadState", err)
	}
	other := PlayerClass(nil)
	bad = e
	bad.Class = other // same id, but not the registered class value
	if err := d.tab.SetView(d.now+time.Second, []ViewEntry{bad}); !errors.Is(err, ErrUnknownClass) {
		t.Fatalf("unregistered class: %v, want ErrUnknownClass", err)
	}
	if _, ok := d.tab.GhostID(1); !ok {
		t.Fatal("a failed SetView changed the table")
	}
}

// The budget is never exceeded, whatever the buffer, prefix and limit, and a
// packet never exceeds 1200 bytes.
func TestBudgetNeverExceeded(t *testing.T) {
	reg, pc, nc := newTestRegistry(t)
	for seed := range uint64(4) {
		cfg := DefaultConfig()
		rng := rand.New(rand.NewPCG(seed, 11))
		cfg.MaxPacketBytes = 200 + rng.IntN(1001)
		tab, err := NewTable(reg, cfg)
		if err != nil {
			t.Fatal(err)
		}
		mir, err := NewMirror(reg, DefaultMirrorConfig())
		if err != nil {
			t.Fatal(err)
		}
		w := newWorld(seed, reg, pc, nc)
		for range 400 {
			w.ents = append(w.ents, w.spawn())
		}
		buf := make([]byte, 1500) // larger than allowed: the table must cap at 1200
		var bw bitstream.Writer
		var br bitstream.Reader
		now := time.Second
		for i := range 400 {
			now += 50 * time.Millisecond
			for j := range w.ents {
				if rng.IntN(3) == 0 {
					w.mutate(j)
				}
			}
			if i%7 == 0 {
				w.ents = append(w.ents[:0], w.ents[min(rng.IntN(20), len(w.ents)):]...)
				w.ents = append(w.ents, w.spawn(), w.spawn())
			}
			if err := tab.SetView(now, w.view()); err != nil {
				t.Fatal(err)
			}
			size := 1 + rng.IntN(len(buf))
			prefix := rng.IntN(size*8 + 1)
			bw.Reset(buf[:size])
			for p := prefix; p > 0; p -= min(p, 64) {
				bw.WriteBits(0, uint(min(p, 64)))
			}
			_, err := tab.Write(&bw, uint64(i+1), now)
			limit := min(size*8, cfg.MaxPacketBytes*8)
			if prefix >= limit {
				if !errors.Is(err, ErrNoRoom) {
					t.Fatalf("no room: %v", err)
				}
				tab.OnFate(notify.Fate{Seq: uint64(i + 1), Delivered: false, SentAt: now})
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if bw.BitLen() > limit || bw.Len() > MaxPacketBytes {
				t.Fatalf("seed %d packet %d: %d bits in a limit of %d", seed, i, bw.BitLen(), limit)
			}
			// Every section decodes (half are delivered).
			ok := rng.IntN(2) == 0
			if ok {
				br.ResetBits(bw.Bytes(), bw.BitLen())
				br.ReadBits(uint(min(prefix, 64)), "") // skip the prefix
				for p := prefix - min(prefix, 64); p > 0; p -= min(p, 64) {
					br.ReadBits(uint(min(p, 64)), "")
				}
				if err := mir.Read(&br, now); err != nil {
					t.Fatalf("seed %d packet %d: %v", seed, i, err)
				}
			}
			tab.OnFate(notify.Fate{Seq: uint64(i + 1), Delivered: ok, SentAt: now})
			if err := checkInvariants(tab); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A create that does not fit must not stop the smaller updates behind it.
func TestSkipsWhatDoesNotFitAndTriesSmaller(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	var v []ViewEntry
	for i := range 10 {
		v = append(v, d.npc(uint64(i+1), float64(i)))
	}
	d.view(v...)
	d.settle(v...)
	// A player with a long literal name enters with the highest priority, and
	// every NPC moves a little.
	p := ViewEntry{Entity: 99, Class: d.pc, Priority: 1000}
	p.State.Name = MustName("a name far too long to be cheap")
	v = append(v, p)
	for i := range 10 {
		v[i].State.Pos[0] += 0.5
	}
	d.view(v...)
	_, pkt, n := d.send(24) // room for small updates, not for the create
	if n == 0 {
		t.Fatal("nothing written: the packet stopped at the create that did not fit")
	}
	d.recv(pkt)
	if _, ok := d.mir.ByEntity(99); ok {
		t.Fatal("the create fit in 24 bytes?")
	}
	if d.mir.Stats().Updates != uint64(n) {
		t.Fatalf("%d updates applied, %d records written", d.mir.Stats().Updates, n)
	}
}

// RP-12: scope changes go before updates; among updates, higher priority
// first.
func TestPriorityOrder(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	var v []ViewEntry
	for i := range 12 {
		e := d.npc(uint64(i+1), float64(i))
		e.Priority = float32(math.Ldexp(1, i)) // 2^i: separate buckets
		v = append(v, e)
	}
	d.view(v...)
	d.settle(v...)
	for i := range v {
		v[i].State.Pos[0] += 3
	}
	newcomer := d.npc(50, 60)
	newcomer.Priority = 0.001
	d.view(append(v, newcomer)...)
	_, pkt, n := d.send(40) // a few records only
	if n < 3 {
		t.Fatalf("only %d records", n)
	}
	d.recv(pkt)
	if _, ok := d.mir.ByEntity(50); !ok {
		t.Fatal("the create (lowest priority) was not written first")
	}
	// The updates written are the highest-priority ones.
	for i := range v {
		g, _ := d.mir.ByEntity(uint64(i + 1))
		got := g.State.Pos[0] > float64(i)+1
		want := i >= 12-(n-1)
		if got != want {
			t.Fatalf("entity %d (priority 2^%d) updated %v, want %v with %d updates", i+1, i, got, want, n-1)
		}
	}
}

// SC-7 acceptance: with a budget far below demand every in-scope dirty
// entity is sent within a bounded time, and nearer (higher-priority)
// entities are sent more often.
func TestStarvationFreedomUnderTinyBudget(t *testing.T) {
	reg, _, nc := newTestRegistry(t)
	tab, err := NewTable(reg, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	rng := rand.New(rand.NewPCG(5, 5))
	v := make([]ViewEntry, n)
	for i := range v {
		v[i] = ViewEntry{Entity: uint64(i + 1), Class: nc, Priority: float32(math.Pow(10, -6*float64(i)/n))}
		v[i].State.Pos = [3]float64{float64(i), 0, 0}
	}
	var buf [64]byte // ~6 updates per packet against 300 dirty every tick
	var w bitstream.Writer
	now := time.Second
	last := make([]time.Duration, n)
	count := make([]int, n)
	worst := time.Duration(0)
	const tick = 50 * time.Millisecond
	for k := range 1200 { // 60 s
		now += tick
		for i := range v {
			v[i].State.Pos[2] += rng.Float64() + 0.1 // always dirty
		}
		if err := tab.SetView(now, v); err != nil {
			t.Fatal(err)
		}
		w.Reset(buf[:])
		if _, err := tab.Write(&w, uint64(k+1), now); err != nil {
			t.Fatal(err)
		}
		for _, id := range writtenIDs(tab, uint64(k+1)) {
			i := int(tab.entityOf(tab.recOf(id)) - 1)
			if k > 200 { // after the creates
				worst = max(worst, now-last[i])
				count[i]++
			}
			last[i] = now
		}
		tab.OnFate(notify.Fate{Seq: uint64(k + 1), Delivered: true, SentAt: now})
	}
	for i := range last {
		if gap := now - last[i]; gap > worst {
			worst = gap
		}
	}
	// n ghosts always dirty, r records per packet: round robin needs n/r
	// ticks; overdue ghosts are weighted by at most 4 (overdueWeight), and
	// MaxStaleness comes on top.
	perPkt := float64(tab.Stats().Updates) / 1200
	bound := DefaultMaxStaleness + time.Duration(4*float64(n)/perPkt)*tick
	t.Logf("worst wait %v, bound %v, %.1f records/packet, sends: highest priority %d, lowest %d", worst, bound, perPkt, count[0], count[n-1])
	if worst > bound {
		t.Fatalf("an entity waited %v, bound %v (%.1f records per packet)", worst, bound, perPkt)
	}
	if 10*count[0] < 13*count[n-1] {
		t.Fatalf("highest priority sent %d times, lowest %d: priority has no effect", count[0], count[n-1])
	}
}

// SC-8: a class minimum interval is observed.
func TestMinInterval(t *testing.T) {
	reg, err := NewRegistry(DefaultBounds())
	if err != nil {
		t.Fatal(err)
	}
	slow := &Class{ID: 9, Name: "slow", Groups: []Group{PositionGroup()}, MinInterval: 200 * time.Millisecond}
	if err := reg.Register(slow); err != nil {
		t.Fatal(err)
	}
	tab, err := NewTable(reg, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	e := ViewEntry{Entity: 1, Class: slow, Priority: 1}
	var buf [MaxPacketBytes]byte
	var w bitstream.Writer
	now := time.Second
	var sends []time.Duration
	for k := range 40 {
		now += 50 * time.Millisecond
		e.State.Pos[0] += 1
		if err := tab.SetView(now, []ViewEntry{e}); err != nil {
			t.Fatal(err)
		}
		w.Reset(buf[:])
		n, _ := tab.Write(&w, uint64(k+1), now)
		tab.OnFate(notify.Fate{Seq: uint64(k + 1), Delivered: true, SentAt: now})
		if n > 0 {
			sends = append(sends, now)
		}
	}
	for i := 2; i < len(sends); i++ { // [0] is the create
		if gap := sends[i] - sends[i-1]; gap < slow.MinInterval {
			t.Fatalf("updates %v apart, MinInterval %v", gap, slow.MinInterval)
		}
	}
	if len(sends) < 8 {
		t.Fatalf("only %d sends in 2 s", len(sends))
	}
}

func TestAlwaysInScope(t *testing.T) {
	reg, flag, npc := flagRegistry(t)
	d := newDuo(t, DefaultConfig())
	d.reg = reg
	d.tab, _ = NewTable(reg, DefaultConfig())
	d.mir, _ = NewMirror(reg, DefaultMirrorConfig())
	f := ViewEntry{Entity: 1, Class: flag, Priority: 1}
	n := ViewEntry{Entity: 2, Class: npc, Priority: 1}
	d.view(f, n)
	d.settle(f, n)
	d.view() // both omitted: the flag stays, the NPC goes
	d.settle()
	if _, ok := d.mir.ByEntity(1); !ok {
		t.Fatal("always-in-scope ghost left with the view")
	}
	if _, ok := d.mir.ByEntity(2); ok {
		t.Fatal("ordinary ghost stayed")
	}
	d.tab.Remove(1)
	d.view()
	d.settle()
	if d.mir.Len() != 0 || d.tab.Len() != 0 {
		t.Fatalf("after Remove: mirror %d table %d", d.mir.Len(), d.tab.Len())
	}
}

// Steady state allocates nothing: Write, OnFate, SetView of known entities
// and Mirror.Read of updates.
func TestSteadyStateAllocatesNothing(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	var v []ViewEntry
	for i := range 200 {
		e := d.npc(uint64(i+1), float64(i))
		e.State.Name = MustName("wolf")
		if i%2 == 0 {
			e.Class = d.pc
			e.State.Name = MustName("Zed") // a literal name
		}
		v = append(v, e)
	}
	d.view(v...)
	d.settle(v...)
	var buf [MaxPacketBytes]byte
	var w bitstream.Writer
	var r bitstream.Reader
	step := func() {
		d.now += 50 * time.Millisecond
		for i := range v {
			v[i].State.Pos[0] += 0.3
			v[i].State.Yaw += 0.01
		}
		if err := d.tab.SetView(d.now, v); err != nil {
			t.Fatal(err)
		}
		d.seq++
		w.Reset(buf[:])
		if _, err := d.tab.Write(&w, d.seq, d.now); err != nil {
			t.Fatal(err)
		}
		r.Reset(w.Bytes())
		if err := d.mir.Read(&r, d.now); err != nil {
			t.Fatal(err)
		}
		d.tab.OnFate(notify.Fate{Seq: d.seq, Delivered: true, SentAt: d.now})
	}
	for range 20 {
		step()
	}
	if a := testing.AllocsPerRun(50, step); a != 0 {
		t.Fatalf("%v allocations per tick", a)
	}
}

func TestIDWidthIsCeilLog2(t *testing.T) {
	for _, tc := range []struct {
		name string
		top  int
		want uint
	}{
		{"one ghost", 1, 0}, {"two", 2, 1}, {"five", 5, 3}, {"1024", 1024, 10}, {"1025", 1025, 11}, {"65536", 65536, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab := &Table{top: int32(tc.top)}
			if got := tab.IDWidth(); got != tc.want || got != uint(bits.Len(uint(tc.top-1))) {
				t.Fatalf("IDWidth(top %d) = %d, want %d", tc.top, got, tc.want)
			}
		})
	}
}

// The per-ghost records keep their size (packing scans the slot of every
// ghost each packet, and memory per connection is mostly these, times the
// ghosts in scope).
func TestRecordSizes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want uintptr
	}{
		{"slot (the hot record: half a cache line)", unsafe.Sizeof(slot{}), 32},
		{"posTrack (half a cache line; the oldest position in flight its own, the second the pool's fq1)", unsafe.Sizeof(posTrack{}), 32},
		{"goneRec (a ghost leaving scope, snapshot views: its entity too)", unsafe.Sizeof(goneRec{}), 32},
		{"posNode (in-flight position)", unsafe.Sizeof(posNode{}), 16},
		{"entry (in-flight record)", unsafe.Sizeof(entry(0)), 4},
		{"pktRec", unsafe.Sizeof(pktRec{}), 16},
		// A connection's Table is one allocation: past 632 bytes (640
		// with the runtime's 8-byte header) it takes the 704-byte size
		// class (it was 760, in the 768 class, with every Stats counter
		// inline). 608 since the fate's fields share three lines (the
		// ring's indices 32-bit, fateVar gone); 632 since the second
		// positions in flight are a per-id array of the pool's (fq1);
		// 568 (the 576 class, 64 bytes a connection fewer) since a
		// SetView table's states are behind a pointer (entryViews), top
		// and live are 32-bit and the tests' trace is gone (they read
		// the packet's records from the ring: writtenIDs). 512, the
		// largest class without a malloc header (64 bytes a connection
		// fewer again; 513 would take the 576 class), since the hot
		// counters are 32-bit (hotStats: Updates are Records less
		// Creates and Kills) and the states a table keeps itself are in
		// rare (entryViews, carry with them).
		{"Table", unsafe.Sizeof(Table{}), 512},
		// Made only at a connection's first loss, stall, resend, deferred
		// position or error, a hot counter's wrap, a SetView or
		// AlwaysInScope state (or for a class past entMaskBits groups):
		// in the 144-byte class, the two no larger than the Table was; a
		// wide registry's rings behind one pointer (tableWide), and the
		// record ring's growths past the Table's byte.
		{"tableRare", unsafe.Sizeof(tableRare{}), 144},
	} {
		if tc.got != tc.want {
			t.Errorf("%s is %d bytes, want %d", tc.name, tc.got, tc.want)
		}
	}
}

// Tables of one Config share it (a server's do: 88 bytes a connection
// otherwise); a table of another Config has its own, and neither changes
// the other's.
func TestTablesShareConfig(t *testing.T) {
	reg, _, _ := newTestRegistry(t)
	a, err := NewTable(reg, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewTable(reg, DefaultConfig())
	if a.cfg != b.cfg {
		t.Fatal("two tables of one Config keep a copy each")
	}
	cfg := DefaultConfig()
	cfg.MaxMisses++
	cfg.StaleUnit *= 2
	c, _ := NewTable(reg, cfg)
	if c.cfg == a.cfg || c.cfg.Config != cfg || a.cfg.Config != DefaultConfig() {
		t.Fatalf("tables of two Configs: %+v and %+v", a.cfg.Config, c.cfg.Config)
	}
	if c.cfg.unit != uint64(cfg.StaleUnit) || c.cfg.logUnit != ilog4(uint64(cfg.StaleUnit)) || a.cfg.unit != uint64(DefaultStaleUnit) {
		t.Fatal("the derived packing constants do not follow the Config")
	}
}

// ilog4 is bucketOf's scale in integer operations.
func TestIlog4MatchesBucketScale(t *testing.T) {
	for _, x := range []uint64{1, 2, 3, 4, 5, 6, 7, 8, 100, 1000, 1 << 20, 3 << 29, 1e9 / 2} { // bucketOf saturates at 2^32
		want := float64(bucketOf(float32(x))-bucketOf(1)) / 4 // log2(x), quarter octaves
		if got := float64(ilog4(x)) / 4; math.Abs(got-want) > 0.25 {
			t.Fatalf("ilog4(%d)/4 = %v, bucketOf says %v", x, got, want)
		}
	}
}

// collect's table of grown (tableConfig.grownB) gives grown's own
// bucket for every age it covers, and covers the ages below MaxStaleness
// up to maxGrownB (a long MaxStaleness computes the rest).
func TestGrownTableIsGrown(t *testing.T) {
	for _, cfg := range []Config{DefaultConfig(), {StaleUnit: 7 * time.Millisecond, MaxStaleness: 2*time.Second + 300*time.Microsecond}, {StaleUnit: time.Hour, MaxStaleness: time.Minute}} {
		def := DefaultConfig()
		def.StaleUnit, def.MaxStaleness = cfg.StaleUnit, cfg.MaxStaleness
		k := sharedConfig(def)
		if want := min(int(msCeil(def.MaxStaleness)), maxGrownB); len(k.grownB) != want {
			t.Fatalf("StaleUnit %v MaxStaleness %v: %d ages tabled, want %d", def.StaleUnit, def.MaxStaleness, len(k.grownB), want)
		}
		for age := range k.grownB {
			for _, p := range []uint8{0, 1, 100, tierBuckets - 20, tierBuckets - 1} {
				if got, want := min(int(p)+int(k.grownB[age]), tierBuckets-1), k.grown(p, int32(age)); got != want { // collect's clamp
					t.Fatalf("StaleUnit %v, age %d ms, priority bucket %d: tabled %d, grown %d", def.StaleUnit, age, p, got, want)
				}
			}
		}
	}
}

// flagRegistry registers an AlwaysInScope class "flag" (position, health)
// beside the NPC class.
func flagRegistry(t *testing.T) (*Registry, *Class, *Class) {
	t.Helper()
	reg, err := NewRegistry(DefaultBounds())
	if err != nil {
		t.Fatal(err)
	}
	flag := &Class{ID: 3, Name: "flag", Groups: []Group{PositionGroup(), HealthGroup(0, 10)}, AlwaysInScope: true}
	npc := NPCClass(nil)
	if err := reg.Register(flag, npc); err != nil {
		t.Fatal(err)
	}
	return reg, flag, npc
}

// Stats folds the inline counters and the rare ones into one Stats: every
// counter of each comes back under its own name, and a table that never
// counted anything rare reports zeros without making them.
func TestStatsFoldsRareCounters(t *testing.T) {
	reg, _, _ := newTestRegistry(t)
	tab, err := NewTable(reg, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if s := tab.Stats(); s != (Stats{}) || tab.rare != nil {
		t.Fatalf("a new table: stats %+v, rare made %v", s, tab.rare != nil)
	}
	want := map[string]uint64{}
	n := uint64(1)
	rare := reflect.ValueOf(tab.rareOf()).Elem()
	for i := range rare.NumField() {
		if f := rare.Field(i); f.Kind() == reflect.Uint64 && rare.Type().Field(i).IsExported() {
			n++
			f.SetUint(n)
			want[rare.Type().Field(i).Name] = n
		}
	}
	// The hot counters' low halves inline, their wraps in rare: each
	// a count past 2^32.
	lo, wraps := reflect.ValueOf(&tab.stats).Elem(), reflect.ValueOf(&tab.rare.statsWraps).Elem()
	for i := range lo.NumField() {
		n++
		lo.Field(i).SetUint(n << 24)
		wraps.Field(i).SetUint(n)
		want[lo.Type().Field(i).Name] = n<<32 | n<<24
	}
	want["Updates"] = want["Records"] - want["Creates"] - want["Kills"]
	delete(want, "Records")
	tab.recordGrowths = 7
	tab.rare.recordGrowthsHi = 2 * 256 // the byte's wraps
	want["RecordGrowths"] = 2*256 + 7
	got := reflect.ValueOf(tab.Stats())
	for i := range got.NumField() {
		name := got.Type().Field(i).Name
		w, ok := want[name]
		if !ok {
			t.Errorf("Stats.%s is kept nowhere", name)
			continue
		}
		if g := got.Field(i).Uint(); g != w {
			t.Errorf("Stats.%s = %d, want %d", name, g, w)
		}
		delete(want, name)
	}
	for name := range want {
		t.Errorf("counter %s does not reach Stats", name)
	}
}

// The hot counters are 32-bit with their wraps in rare: a table whose
// counters stand one below 2^32 reports, after the same traffic as a new
// one (creates, updates, a kill, a fate of no packet in flight), each
// count exactly 2^32−1 higher — every counter wrapped once on the way —
// and Updates, Records less Creates and Kills, the same.
func TestHotCountersWrapExactly(t *testing.T) {
	run := func(preset bool) Stats {
		d := newDuo(t, DefaultConfig())
		if preset {
			// Records one below the creates and kills together (2^33−2):
			// the Updates they leave stay 0.
			d.tab.stats = hotStats{Packets: math.MaxUint32, Records: math.MaxUint32 - 1, Creates: math.MaxUint32, Kills: math.MaxUint32, UnknownFates: math.MaxUint32, GhostsAssigned: math.MaxUint32}
			d.tab.rareOf().statsWraps.Records = 1
		}
		v := d.npcs(3)
		for _, view := range [][]ViewEntry{v, {v[0], v[1]}, v[1:]} {
			view[0].State.Pos[0] += 5
			d.view(view...)
			d.settle(view...)
		}
		d.fate(d.seq+100, true) // of no packet sent
		return d.tab.Stats()
	}
	fresh, wrapped := run(false), run(true)
	if fresh.Packets == 0 || fresh.Creates == 0 || fresh.Updates == 0 || fresh.Kills == 0 || fresh.UnknownFates == 0 || fresh.GhostsAssigned == 0 {
		t.Fatalf("the traffic moved not every hot counter: %+v", fresh)
	}
	want := fresh
	want.Packets += math.MaxUint32
	want.Creates += math.MaxUint32
	want.Kills += math.MaxUint32
	want.UnknownFates += math.MaxUint32
	want.GhostsAssigned += math.MaxUint32
	if wrapped != want {
		t.Fatalf("from one below 2^32: %+v, want %+v", wrapped, want)
	}
}

// writtenIDs is the ghosts packet seq, the newest in flight, carried
// records of, in the order Write wrote them: its entries in the record
// ring (nil if it carried none: such a packet is not recorded).
func writtenIDs(tab *Table, seq uint64) []uint32 {
	if tab.pktLen == 0 {
		return nil
	}
	p := tab.pkts[int(tab.pktHead+tab.pktLen-1)&(len(tab.pkts)-1)]
	if p.seq != uint32(seq) {
		return nil
	}
	ids := make([]uint32, 0, p.n)
	for k := range int(p.n) {
		ids = append(ids, tab.idOf(tab.ents[int(p.start)+k].rec()))
	}
	return ids
}
