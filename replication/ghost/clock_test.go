package ghost

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// A table keeps its times in 32-bit milliseconds from an epoch it moves on
// every 2^29 ms (rebase). Two tables given the same views, writes and fates
// write the same bytes when one of them started its clock 11.9 days
// earlier (an empty view) and so moves its epoch in the middle of the run,
// across gaps of up to a day (waits that long must still order ghosts as
// before), for 40 days.
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
	if err := tabs[1].SetView(start-(rebaseAt*time.Millisecond-2*time.Hour), nil); err != nil {
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
		if moved := tab.epoch - epoch0[k]; moved < 3*rebaseBy*time.Millisecond || tab.stats.Updates == 0 {
			t.Fatalf("table %d: epoch moved %v, %d updates: the test lost its point", k, moved, tab.stats.Updates)
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
			t.Fatalf("after a jump of %v: the moved ghost was not written (dirty %b)", jump, d.tab.slots[id].dirty)
		}
		if got := d.tab.lastNow - d.tab.epoch; got >= rebaseAt*time.Millisecond {
			t.Fatalf("after a jump of %v: %v past the epoch", jump, got)
		}
		d.fate(seq, true)
	}
}
