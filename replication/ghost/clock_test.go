package ghost

import (
	"bytes"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// A table keeps its times in 16-bit milliseconds from an epoch it moves on
// in steps of rebaseBy (≈ 8 s) once 2^16 − 2 ms past it (rebase). Two
// tables given the same views, writes and fates write the same bytes when
// one of them started its clock three steps and 25 s earlier (an empty
// view), so their epochs move at other times until the older one's grid
// is the other's, across gaps of up to a day (waits past the window read
// as pinned at the epoch, alike in both), for 40 days: ≈ 700 rebases
// each, of ≈ 850,000 steps (a gap's rebase takes all its steps at once).
func TestClockRebaseChangesNothing(t *testing.T) {
	reg, _, nc := newTestRegistry(t)
	var tabs [2]*Table
	for i := range tabs {
		tab, err := NewTable(reg, DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		tabs[i] = tab
	}
	const day = 24 * time.Hour
	start := 13 * day
	if err := tabs[0].SetView(start-time.Second, nil); err != nil {
		t.Fatal(err)
	}
	if err := tabs[1].SetView(start-time.Second-3*rebaseBy*time.Millisecond, nil); err != nil {
		t.Fatal(err)
	}
	epoch0 := [2]time.Duration{tabs[0].epoch, tabs[1].epoch}
	rng := rand.New(rand.NewPCG(3, 4))
	view := make([]ViewEntry, 20)
	for i := range view {
		view[i] = ViewEntry{Entity: uint64(i + 1), Class: nc, Priority: float32(i+1) / 20}
		view[i].State.Health = 100
		view[i].State.Name = MustName("wolf")
	}
	now, seq := start, uint64(0)
	var bufs [2][300]byte // small: not every dirty ghost fits, so order matters
	var w [2]bitstream.Writer
	type sent struct {
		seq uint64
		at  time.Duration
	}
	var inFlight []sent
	for now < start+40*day {
		switch rng.IntN(100) {
		case 0:
			now += time.Duration(rng.Int64N(int64(day)))
		case 1, 2, 3:
			now += time.Duration(rng.Int64N(int64(10 * time.Minute)))
		default:
			now += 50 * time.Millisecond
		}
		for i := range view {
			if rng.IntN(3) == 0 {
				view[i].State.Pos[0] += float64(rng.IntN(200)-100) / 100
			}
			if rng.IntN(50) == 0 {
				view[i].State.Health = int32(rng.IntN(100))
			}
		}
		seq++
		for k, tab := range tabs {
			if err := tab.SetView(now, view); err != nil {
				t.Fatal(err)
			}
			w[k].Reset(bufs[k][:])
			if _, err := tab.Write(&w[k], seq, now); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(w[0].Bytes(), w[1].Bytes()) {
			t.Fatalf("packet %d at %v: %x, the rebased table %x", seq, now-start, w[0].Bytes(), w[1].Bytes())
		}
		inFlight = append(inFlight, sent{seq, now})
		for len(inFlight) > 0 && (len(inFlight) > 4 || rng.IntN(3) == 0) {
			f := notify.Fate{Seq: inFlight[0].seq, Delivered: rng.IntN(5) > 0, SentAt: inFlight[0].at}
			for _, tab := range tabs {
				tab.OnFate(f)
			}
			inFlight = inFlight[1:]
		}
	}
	for k, tab := range tabs {
		if moved := tab.epoch - epoch0[k]; moved < 39*day || tab.Stats().Updates == 0 {
			t.Fatalf("table %d: epoch moved %v, %d updates: the test lost its point", k, moved, tab.Stats().Updates)
		}
	}
	for _, tab := range tabs {
		if err := checkInvariants(tab); err != nil {
			t.Fatal(err)
		}
	}
}

// A jump of the clock by far more than the epoch's reach (100 days between
// two views) leaves no ghost waiting: every time older than the epoch
// counts as the epoch, long past any MinInterval or deadline.
func TestClockJumpSendsAtOnce(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	wolf := d.npc(1, 0)
	d.view(wolf)
	d.settle(wolf)
	id, _ := d.tab.GhostID(1)
	for _, jump := range []time.Duration{100 * 24 * time.Hour, 30 * 24 * time.Hour, time.Second} {
		d.now += jump
		wolf.State.Pos[0] += 1
		d.view(wolf)
		st := d.tab.Stats()
		seq, _, _ := d.send(MaxPacketBytes)
		if d.tab.Stats().Updates != st.Updates+1 {
			t.Fatalf("after a jump of %v: the moved ghost was not written (dirty %b)", jump, d.tab.dirtyAt(id))
		}
		if got := d.tab.lastNow - d.tab.epoch; got >= rebaseAt*time.Millisecond {
			t.Fatalf("after a jump of %v: %v past the epoch", jump, got)
		}
		d.fate(seq, true)
	}
}

// collectBucket runs packing's collect at now and returns ghost id's
// bucket (−1: not a candidate) and whether ConfirmDeadline pressed it.
func collectBucket(tab *Table, id uint32, now time.Duration) (int, bool) {
	p := &tab.pk
	p.borrow()
	defer p.release()
	p.collect(tab, tab.clock(now))
	b := -1
	for w := range p.nonEmpty {
		for m := p.nonEmpty[w]; m != 0; m &= m - 1 {
			bb := w*64 + bits.TrailingZeros64(m)
			for i := p.head[bb]; i >= 0; i = p.next[i] {
				if uint32(i) == id {
					b = bb
				}
			}
		}
	}
	pressed := p.pressed[id>>6]&(1<<(id&63)) != 0
	p.clear()
	return b, pressed
}

// A ghost idle longer than the slots' 16-bit window (msWindow, ≈ 57 s)
// has its times pinned at the table's epoch, rebase after rebase, and
// still behaves as its true times say: a change left unsent (no Write for
// the idle time) is overdue, ordered as waiting min(idle, the pinned age);
// a change whose only copy is still unconfirmed is pressed
// (ConfirmDeadline), or without one resent speculatively
// (ResendInterval), and no longer pressed once a copy written after it
// is reported delivered 20 s on (past a rebase); a ghost whose changes
// were confirmed is not a candidate at all. Idle times below the window, at it, across one and
// many rebases (a view every 5 s) and across jumps of the clock (a view
// every 7 minutes, or none), from a start where the view stamps wrap, the
// changes 60 s after the epoch (the next rebase moves their times).
func TestIdleGhostsAcrossRebases(t *testing.T) {
	idles := []time.Duration{
		30 * time.Second,
		msWindow*time.Millisecond - time.Second,
		msWindow*time.Millisecond + time.Second,
		rebaseAt*time.Millisecond + 3*time.Second,
		10 * time.Minute,
		3 * time.Hour,
		50 * time.Hour,
	}
	for _, idle := range idles {
		for _, start := range []time.Duration{time.Second, (1<<32 - 20_000) * time.Millisecond} {
			for _, views := range []bool{true, false} {
				for _, deadline := range []bool{true, false} {
					t.Run(fmt.Sprintf("idle %v start %v views %v deadline %v", idle, start, views, deadline), func(t *testing.T) {
						idleGhostCase(t, idle, start, views, deadline)
					})
				}
			}
		}
	}
}

func idleGhostCase(t *testing.T, idle, start time.Duration, views, deadline bool) {
	cfg := DefaultConfig()
	if !deadline {
		cfg.ConfirmDeadline = 0 // wolf overdue by its staleness alone
	}
	d := newDuo(t, cfg)
	d.now = start
	wolf, bear, deer, elk := d.npc(1, 0), d.npc(2, 5), d.npc(3, 9), d.npc(4, 13)
	all := []ViewEntry{wolf, bear, deer, elk}
	d.view(all...)
	d.settle(all...)
	// The changes come 60 s after the table's epoch, near the top of
	// its window: the first rebase must move their times down.
	for d.now < start+60*time.Second {
		d.now += 5 * time.Second
		d.view(all...)
		d.trip()
	}
	k := d.tab.cfg
	ids := [4]uint32{}
	for i := range ids {
		ids[i], _ = d.tab.GhostID(uint64(i + 1))
	}
	// deer: changed, written, delivered. elk: changed, written, resent,
	// the first copy delivered only after the idle time. bear: changed,
	// written, its packet's fate never comes. wolf: changed, never
	// written.
	one := func(what string) (uint64, time.Duration) {
		t.Helper()
		all = []ViewEntry{wolf, bear, deer, elk}
		d.view(all...)
		seq, _, n := d.send(MaxPacketBytes)
		if n != 1 {
			t.Fatalf("%s: %d records, want 1", what, n)
		}
		return seq, d.now
	}
	deer.State.Health = 3
	deerSeq, _ := one("deer's change")
	d.fate(deerSeq, true)
	elk.State.Health = 4
	elkSeq, elkAt := one("elk's change")
	d.view(all...)
	elkResend, _ := one("elk's resend")
	bear.State.Health = 2
	bearSeq, _ := one("bear's change")
	wolf.State.Health = 1
	all = []ViewEntry{wolf, bear, deer, elk}
	d.view(all...)
	changedAt := d.now
	end := changedAt + idle
	step := 5 * time.Second
	if idle > 10*time.Minute {
		step = 7 * time.Minute
	}
	// elk's first copy, written from a view after its change, is
	// reported delivered 20 s on, past the next rebase (with views).
	if views {
		d.now = elkAt + 20*time.Second
		if err := d.tab.SetView(d.now, all); err != nil {
			t.Fatal(err)
		}
	}
	d.tab.OnFate(notify.Fate{Seq: elkSeq, Delivered: true, SentAt: elkAt})
	if views {
		for d.now+step < end {
			d.now += step
			if err := d.tab.SetView(d.now, all); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The age a pinned time reads: from the epoch, at least msWindow.
	age := min(idle, time.Duration(rebaseAt+1)*time.Millisecond)
	b, _ := collectBucket(d.tab, ids[0], end)
	lo := tierOverdue*tierBuckets + k.waited(owtBTable[d.tab.slotOf(ids[0]).prioB], int32(min(idle, msWindow*time.Millisecond)/time.Millisecond))
	hi := tierOverdue*tierBuckets + k.waited(owtBTable[d.tab.slotOf(ids[0]).prioB], int32(age/time.Millisecond))
	if b < lo || b > hi {
		t.Fatalf("wolf, dirty %v and unsent: bucket %d, want overdue in [%d, %d]", idle, b, lo, hi)
	}
	if idle < msWindow*time.Millisecond && b != lo {
		t.Fatalf("wolf, dirty %v (inside the window): bucket %d, want %d exactly", idle, b, lo)
	}
	switch b, pressed := collectBucket(d.tab, ids[1], end); {
	case deadline && (!pressed || b/tierBuckets != tierOverdue):
		t.Fatalf("bear, its change unconfirmed for %v: bucket %d pressed %v, want pressed (ConfirmDeadline)", idle, b, pressed)
	case !deadline && (pressed || b != tierResend*tierBuckets+int(d.tab.slotOf(ids[1]).prioB)):
		t.Fatalf("bear, its change unconfirmed for %v: bucket %d pressed %v, want a speculative resend", idle, b, pressed)
	}
	if b, _ := collectBucket(d.tab, ids[2], end); b != -1 {
		t.Fatalf("deer, confirmed: bucket %d, want none", b)
	}
	// elk's change is confirmed: its resend is still a candidate, no
	// longer pressed.
	if b, pressed := collectBucket(d.tab, ids[3], end); pressed || b != tierResend*tierBuckets+int(d.tab.slotOf(ids[3]).prioB) {
		t.Fatalf("elk, its change confirmed late: bucket %d pressed %v, want a speculative resend", b, pressed)
	}
	if got := d.tab.lastNow - d.tab.epoch; got >= rebaseAt*time.Millisecond || got < 0 {
		t.Fatalf("%v past the epoch", got)
	}
	// And the table goes on: bear's packet reported lost at last,
	// everything settles.
	d.now = end
	d.fate(bearSeq, false)
	d.fate(elkResend, false)
	d.view(all...)
	d.settle(all...)
}

// A fate delay learned past the slots' window (a delivery reported 80 s
// after its packet) still lets ConfirmDeadline press an unconfirmed
// change once its last copy is that old: the delay counts as msWindow,
// the oldest a time pinned at the epoch reads.
func TestConfirmDeadlineAfterLongFateDelay(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	wolf := d.npc(1, 0)
	d.view(wolf)
	seq, _, _ := d.send(MaxPacketBytes) // the create: the table's first fate
	sent := d.now
	d.now += 80 * time.Second
	d.view(wolf)
	d.tab.OnFate(notify.Fate{Seq: seq, Delivered: true, SentAt: sent})
	if d.tab.fateDelay < 79*time.Second {
		t.Fatalf("fate delay %v: the case is not tested", d.tab.fateDelay)
	}
	wolf.State.Health = 2
	d.view(wolf)
	d.send(MaxPacketBytes) // its fate never comes
	id, _ := d.tab.GhostID(1)
	for range 120 { // 10 minutes
		d.now += 5 * time.Second
		if err := d.tab.SetView(d.now, []ViewEntry{wolf}); err != nil {
			t.Fatal(err)
		}
	}
	if b, pressed := collectBucket(d.tab, id, d.now); !pressed || b/tierBuckets != tierOverdue {
		t.Fatalf("a change unconfirmed for 10 minutes, fate delay %v: bucket %d pressed %v, want pressed", d.tab.fateDelay, b, pressed)
	}
}
