package ghost

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// fieldRig drives one NPC ghost by hand beside a reference model of its
// per-group sequences in 64 bits: the table keeps 8.
type fieldRig struct {
	t      *testing.T
	tab    *Table
	view   []ViewEntry
	id     uint32
	now    time.Duration
	seq    uint64
	buf    [MaxPacketBytes]byte
	w      bitstream.Writer
	newest [MaxGroups]uint64 // reference: newest seq that carried each group
	ack    uint64            // reference: newest delivered packet that carried the ghost
	sent   map[uint64]uint64 // in flight: seq → groups carried
}

func newFieldRig(t *testing.T) *fieldRig {
	reg, _, nc := newTestRegistry(t)
	cfg := DefaultConfig()
	cfg.ResendInterval, cfg.ConfirmDeadline = 0, 0
	tab, err := NewTable(reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &fieldRig{t: t, tab: tab, now: time.Second, sent: map[uint64]uint64{}}
	r.view = []ViewEntry{{Entity: 1, Class: nc, Priority: 1}}
	r.view[0].State.Health = 100
	r.view[0].State.Name = MustName("wolf")
	r.step(1, 100)
	r.fate(r.seq, true)
	r.id, _ = tab.GhostID(1)
	return r
}

// step moves the ghost (and, if health, changes its health), takes the view
// and writes packet seq+gap.
func (r *fieldRig) step(gap uint64, health int32) {
	r.t.Helper()
	r.now += 50 * time.Millisecond
	r.view[0].State.Pos[0] = float64(r.seq%100) / 10
	r.view[0].State.Health = health
	if err := r.tab.SetView(r.now, r.view); err != nil {
		r.t.Fatal(err)
	}
	r.seq += gap
	r.w.Reset(r.buf[:])
	if _, err := r.tab.Write(&r.w, r.seq, r.now); err != nil {
		r.t.Fatal(err)
	}
	if i, ok := r.tab.findPacket(r.seq); ok {
		p := &r.tab.pkts[i]
		var m uint64
		for j := range int(p.n) {
			k := int(p.start) + j
			m |= r.tab.entMask(k, r.tab.ents[k])
		}
		r.sent[r.seq] = m
		for g := range MaxGroups {
			if m&(1<<uint(g)) != 0 {
				r.newest[g] = r.seq
			}
		}
	}
}

// fate reports packet seq and checks the drop's re-dirtied groups against
// the reference: those whose newest carrier it was.
func (r *fieldRig) fate(seq uint64, delivered bool) {
	r.t.Helper()
	m, ok := r.sent[seq]
	if !ok {
		return
	}
	delete(r.sent, seq)
	before := r.tab.dirtyAt(r.id)
	r.tab.OnFate(notify.Fate{Seq: seq, Delivered: delivered, SentAt: r.now})
	if delivered {
		r.ack = max(r.ack, seq)
		return
	}
	var want uint64
	for g := range MaxGroups {
		if m&(1<<uint(g)) != 0 && r.newest[g] == seq {
			want |= 1 << uint(g)
		}
	}
	if got := r.tab.dirtyAt(r.id) &^ before; got != want&^before {
		r.t.Fatalf("drop of %d (carried %b): re-dirtied %b, want %b", seq, m, got, want&^before)
	}
}

// check compares unconfirmed with the reference when nothing is dirty
// (the only time the table asks).
func (r *fieldRig) check() {
	r.t.Helper()
	s := r.tab.slotOf(r.id)
	if s.dirty != 0 {
		return
	}
	var want uint64
	c := r.tab.classOf(s)
	for g := range c.Groups {
		if r.newest[g] > r.ack {
			want |= 1 << uint(g)
		}
	}
	if got := r.tab.unconfirmed(r.tab.recOf(r.id), s, c); got != want {
		r.t.Fatalf("seq %d ack %d: unconfirmed %b, want %b (newest %v)", r.seq, r.ack, got, want, r.newest[:len(c.Groups)])
	}
}

// A group left unsent for far more than 2^16 packets (health, never
// changed) while the ghost's position goes out in every one never reads as
// unconfirmed, at every step across several wraps of the 16-bit sequences.
func TestFieldSeqsGroupUnsentAcrossWraps(t *testing.T) {
	r := newFieldRig(t)
	const gap = 5 // small gaps: the distances accumulate write by write
	for range 3 * (1 << 16) / gap {
		r.step(gap, 100)
		r.check() // one packet in flight: its groups, health not among them
		r.fate(r.seq, true)
		r.check()
	}
	if r.newest[2] != 1 {
		t.Fatalf("health was sent again (newest %d): the test lost its point", r.newest[2])
	}
}

// Random sequence gaps (up to the span Write allows), drops and several
// packets in flight: re-dirtied groups and unconfirmed groups match a
// model that keeps whole sequence numbers.
func TestFieldSeqsMatchWholeSequences(t *testing.T) {
	for seed := range uint64(4) {
		r := newFieldRig(t)
		rng := rand.New(rand.NewPCG(seed, 9))
		health := int32(100)
		var inFlight []uint64
		for range 6000 {
			var gap uint64 = 1
			switch rng.IntN(40) {
			case 0:
				gap = 1 + rng.Uint64N(1<<fieldBlock)
			case 1:
				gap = maxSeqSpan - 4 + rng.Uint64N(8) // near the span limit
			case 2:
				gap = 1<<16 + rng.Uint64N(1<<17) // only with nothing in flight
			}
			if rng.IntN(500) == 0 {
				health++
			}
			if len(inFlight) > 0 && (gap >= 1<<16 || r.seq+gap-inFlight[0] >= maxSeqSpan) {
				for _, s := range inFlight { // Write would stall: fate them first
					r.fate(s, rng.IntN(4) > 0)
				}
				inFlight = inFlight[:0]
				r.check()
			}
			r.step(gap, health)
			if _, ok := r.sent[r.seq]; ok {
				inFlight = append(inFlight, r.seq)
			}
			r.check()
			for len(inFlight) > 0 && (len(inFlight) > 3 || rng.IntN(2) == 0) {
				r.fate(inFlight[0], rng.IntN(5) > 0)
				inFlight = inFlight[1:]
				r.check()
			}
			if err := checkInvariants(r.tab); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Write records nothing while a packet 2^7 sequences back is still in
// flight: the 8-bit per-group sequences could not tell its records apart.
func TestWriteStallsBeyondSequenceSpan(t *testing.T) {
	r := newFieldRig(t)
	r.step(1, 100)
	first := r.seq
	st := r.tab.Stats()
	r.step(maxSeqSpan, 100)
	if _, ok := r.sent[r.seq]; ok || r.tab.Stats().Stalls != st.Stalls+1 {
		t.Fatalf("packet %d sequences after one in flight recorded (stalls %d → %d)", r.seq-first, st.Stalls, r.tab.Stats().Stalls)
	}
	r.fate(first, true)
	r.step(1, 100)
	if _, ok := r.sent[r.seq]; !ok {
		t.Fatal("nothing recorded once the old packet's fate came")
	}
}

// A group whose only carrier stays in flight for as long as Write records
// anything (until the span stalls it) is still found lost when that packet
// drops: the per-group sequences tell every packet Write lets be in flight
// apart (a span past what their bits hold would pin the group as
// confirmed, and its value would never be resent).
func TestDroppedGroupFoundAcrossTheWholeSpan(t *testing.T) {
	r := newFieldRig(t)
	r.step(1, 101) // health changes: this packet carries it
	p := r.seq
	if r.sent[p]&(1<<2) == 0 {
		t.Fatalf("packet %d carried %b, not health", p, r.sent[p])
	}
	stalls := r.tab.Stats().Stalls
	for r.tab.Stats().Stalls == stalls {
		if r.seq-p > 1<<16 {
			t.Fatal("Write never stalled")
		}
		r.step(1, 101) // the position only
		r.fate(r.seq, true)
	}
	if r.seq-p < 100 {
		t.Fatalf("Write stalled %d packets on: the test lost its point", r.seq-p)
	}
	r.fate(p, false) // checks health re-dirtied
	if r.tab.dirtyAt(r.id)&(1<<2) == 0 {
		t.Fatal("health not dirty after its only carrier dropped")
	}
}
