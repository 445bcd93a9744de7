package event

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

func noRedundancy() Config {
	c := DefaultConfig()
	c.Redundancy = 0
	return c
}

func payloads(g []got) []string {
	var s []string
	for _, e := range g {
		s = append(s, e.Payload)
	}
	return s
}

// TestResendOnlyOnDroppedFate: a guaranteed event is resent when notify says
// its packet was dropped, and never because time passed (RL-2, PN-1).
func TestResendOnlyOnDroppedFate(t *testing.T) {
	p := newPair(t, noRedundancy())
	must(t, p.s.SendOrdered(0, []byte("fire")))
	first := p.write(0, 200)
	var later []uint64
	for i := 1; i <= 20; i++ { // 20 s without a fate: nothing is resent
		seq := p.write(time.Duration(i)*time.Second, 200)
		p.deliver(seq)
		later = append(later, seq)
	}
	if g := p.take(); len(g) != 0 {
		t.Fatalf("event resent without a dropped fate: %v", g)
	}
	if p.s.HasPending(time.Hour) {
		t.Fatal("HasPending with the only event in flight")
	}
	p.fate(first, false)
	for _, seq := range later {
		p.fate(seq, true)
	}
	if !p.s.HasPending(0) {
		t.Fatal("no pending work after a dropped fate")
	}
	p.through(21*time.Second, 200)
	if g := payloads(p.take()); !slices.Equal(g, []string{"fire"}) {
		t.Fatalf("after the drop: %q, want [fire]", g)
	}
	if st := p.s.Stats(); st.Resent != 1 || st.Requeued != 1 {
		t.Fatalf("stats %+v: want 1 requeue, 1 resend", st)
	}
}

// TestRequeueFrontOfLane: a lost event goes back to the front of its lane
// (RL-2: "prepended to the queue"), ahead of events never sent, and the
// receiver delivers the lane in order although the later event arrived first.
func TestRequeueFrontOfLane(t *testing.T) {
	p := newPair(t, noRedundancy())
	ev := func(s string) []byte { return []byte(s + strings.Repeat(".", 40)) }
	for _, s := range []string{"a", "b", "c"} {
		must(t, p.s.SendOrdered(0, ev(s)))
	}
	const oneEvent = 16 // bytes: one 41-byte event does not fit twice
	pa := p.write(0, oneEvent+40)
	pb := p.write(10*ms, oneEvent+40)
	p.deliver(pb) // b arrives first: buffered
	if g := p.take(); len(g) != 0 {
		t.Fatalf("b delivered before a: %v", g)
	}
	p.fate(pa, false)
	p.fate(pb, true)
	pa2 := p.write(20*ms, oneEvent+40) // must be a again, not c
	p.deliver(pa2)
	if g := payloads(p.take()); !slices.Equal(g, []string{string(ev("a")), string(ev("b"))}) {
		t.Fatalf("got %q, want a then b", g)
	}
	p.fate(pa2, true)
	p.through(30*ms, oneEvent+40)
	if g := payloads(p.take()); !slices.Equal(g, []string{string(ev("c"))}) {
		t.Fatalf("got %q, want c", g)
	}
}

// TestRedundantCopies: with Redundancy 2 an unacknowledged unit rides in the
// next two packets and no more; the copies are discarded as duplicates; an
// acknowledgement stops them; RedundancyBytes 0 disables them.
func TestRedundantCopies(t *testing.T) {
	t.Run("copies then stop", func(t *testing.T) {
		p := newPair(t, DefaultConfig())
		must(t, p.s.SendOrdered(1, []byte("x")))
		seqs := []uint64{p.write(0, 100), p.write(50*ms, 100), p.write(100*ms, 100), p.write(150*ms, 100)}
		for _, s := range seqs {
			p.deliver(s)
		}
		if g := payloads(p.take()); !slices.Equal(g, []string{"x"}) {
			t.Fatalf("delivered %q, want x once", g)
		}
		if st, rs := p.s.Stats(), p.r.Stats(); st.Redundant != 2 || rs.Duplicates != 2 {
			t.Fatalf("redundant %d, duplicates %d: want 2 and 2", st.Redundant, rs.Duplicates)
		}
	})
	t.Run("second copy repairs a loss", func(t *testing.T) {
		p := newPair(t, DefaultConfig())
		must(t, p.s.SendOrdered(1, []byte("x")))
		p.write(0, 100) // lost
		p.deliver(p.write(50*ms, 100))
		if g := payloads(p.take()); !slices.Equal(g, []string{"x"}) {
			t.Fatalf("delivered %q, want x from the copy", g)
		}
	})
	t.Run("ack stops copies", func(t *testing.T) {
		p := newPair(t, DefaultConfig())
		must(t, p.s.SendOrdered(1, []byte("x")))
		p.through(0, 100)
		p.write(50*ms, 100)
		if st := p.s.Stats(); st.Redundant != 0 {
			t.Fatalf("copy after the ack: %+v", st)
		}
	})
	t.Run("budget zero", func(t *testing.T) {
		c := DefaultConfig()
		c.RedundancyBytes = 0
		p := newPair(t, c)
		must(t, p.s.SendOrdered(1, []byte("x")))
		p.write(0, 100)
		p.write(50*ms, 100)
		if st := p.s.Stats(); st.Redundant != 0 {
			t.Fatalf("copy with RedundancyBytes 0: %+v", st)
		}
	})
}

// TestRequeueOnFirstDropOfItsRound: the first carrier of a unit's round
// reported dropped requeues it, though a copy of the round is still in
// flight — that copy followed the dropped packet by an interval and is
// covered by the same ack, so waiting for its own verdict only costs that
// interval again. A copy delivered in the same batch of fates cancels the
// resend; drops of an older round's carriers requeue nothing.
func TestRequeueOnFirstDropOfItsRound(t *testing.T) {
	c := DefaultConfig()
	c.Redundancy, c.ResidualLoss = 1, 0
	p := newPair(t, c)
	must(t, p.s.SendOrdered(0, []byte("x")))
	p1, p2 := p.write(0, 100), p.write(50*ms, 100)
	p.fate(p1, false)
	if st := p.s.Stats(); st.Requeued != 1 || !p.s.HasPending(0) {
		t.Fatalf("not requeued on the round's first drop: %+v", st)
	}
	p3 := p.write(100*ms, 100) // the resend: a new round
	p.fate(p2, false)          // the old round's copy: no second requeue
	if st := p.s.Stats(); st.Requeued != 1 || st.Resent != 1 || p.s.HasPending(0) {
		t.Fatalf("the old round's drop requeued again: %+v", st)
	}
	p.deliver(p3)
	p.fate(p3, true)
	if g := payloads(p.take()); !slices.Equal(g, []string{"x"}) {
		t.Fatalf("got %q", g)
	}
	if p.s.InFlight(0) != 0 {
		t.Fatalf("lane holds %d after the resend was delivered", p.s.InFlight(0))
	}

	q := newPair(t, c)
	must(t, q.s.SendOrdered(0, []byte("y")))
	q1, q2 := q.write(0, 100), q.write(50*ms, 100)
	q.deliver(q2)
	q.s.OnFate(fate(q1, false)) // the first copy was lost…
	q.s.OnFate(fate(q2, true))  // …the second delivered: nothing to resend
	q.write(100*ms, 100)
	if st := q.s.Stats(); st.Resent != 0 || q.s.InFlight(0) != 0 {
		t.Fatalf("stats %+v, in flight %d: want no resend, lane empty", st, q.s.InFlight(0))
	}
}

// TestMissedFate: a transmission record whose fate never came is resolved as
// dropped when a later fate arrives (a resend is safe: duplicates go by id).
func TestMissedFate(t *testing.T) {
	p := newPair(t, noRedundancy())
	must(t, p.s.SendOrdered(0, []byte("a")))
	p1 := p.write(0, 100)
	must(t, p.s.SendOrdered(0, []byte("b")))
	p2 := p.write(50*ms, 100)
	p.deliver(p1)
	p.deliver(p2)
	p.fate(p2, true) // p1's fate skipped
	if st := p.s.Stats(); st.MissedFates != 1 || st.Requeued != 1 {
		t.Fatalf("stats %+v: want 1 missed fate, 1 requeue", st)
	}
	p.through(100*ms, 100)
	if g := payloads(p.take()); !slices.Equal(g, []string{"a", "b"}) {
		t.Fatalf("got %q, want a b (the resent a discarded as a duplicate)", g)
	}
	if d := p.r.Stats().Duplicates; d != 1 {
		t.Fatalf("duplicates %d, want 1", d)
	}
}

// TestUnguaranteed: written only if room remains after guaranteed data, once,
// with no transmission record (RL-4).
func TestUnguaranteed(t *testing.T) {
	p := newPair(t, noRedundancy())
	must(t, p.s.SendOrdered(0, bytes.Repeat([]byte("g"), 60)))
	must(t, p.s.SendUnguaranteed(bytes.Repeat([]byte("u"), 40)))
	p.through(0, 80) // room for the guaranteed event only
	if g := p.take(); len(g) != 1 || g[0].Class != Ordered {
		t.Fatalf("got %v, want only the ordered event", g)
	}
	if st := p.s.Stats(); st.UnguarDrops != 1 || st.Unguaranteed != 0 {
		t.Fatalf("stats %+v: want the unguaranteed event dropped", st)
	}
	p.through(50*ms, 80)
	if g := p.take(); len(g) != 0 {
		t.Fatalf("dropped unguaranteed event came back: %v", g)
	}

	must(t, p.s.SendUnguaranteed([]byte("once")))
	seq := p.write(100*ms, 80)
	p.fate(seq, false) // lost: never resent
	for i := 0; i < 5; i++ {
		p.through(time.Duration(150+50*i)*ms, 80)
	}
	if g := p.take(); len(g) != 0 {
		t.Fatalf("unguaranteed event resent: %v", g)
	}
	if p.s.QueuedBytes() != 0 {
		t.Fatalf("sender still holds %d bytes", p.s.QueuedBytes())
	}
}

// TestLaneFairness: busy lanes share a packet round-robin, so one lane with a
// backlog cannot starve another (RL-14).
func TestLaneFairness(t *testing.T) {
	p := newPair(t, noRedundancy())
	for i := 0; i < 100; i++ {
		must(t, p.s.SendOrdered(0, payload(0, i, 20)))
	}
	must(t, p.s.SendOrdered(5, payload(5, 0, 20)))
	p.through(0, 200)
	var lanes []int
	for _, g := range p.take() {
		lanes = append(lanes, g.Lane)
	}
	if !slices.Contains(lanes, 5) || len(lanes) < 3 {
		t.Fatalf("first packet delivered lanes %v: lane 5 starved", lanes)
	}
}

func TestSendErrors(t *testing.T) {
	cfg := DefaultConfig()
	big := make([]byte, cfg.MaxEventSize+1)
	frag := make([]byte, cfg.MaxFragment+1)
	for _, tc := range []struct {
		name string
		send func(s *Sender) error
		want error
	}{
		{"lane -1", func(s *Sender) error { return s.SendOrdered(-1, nil) }, ErrBadLane},
		{"lane 8", func(s *Sender) error { return s.SendOrdered(8, nil) }, ErrBadLane},
		{"ordered too large", func(s *Sender) error { return s.SendOrdered(0, big) }, ErrTooLarge},
		{"unordered too large", func(s *Sender) error { return s.SendUnordered(big) }, ErrTooLarge},
		{"unguaranteed beyond a fragment", func(s *Sender) error { return s.SendUnguaranteed(frag) }, ErrTooLarge},
		{"staggered beyond a fragment", func(s *Sender) error { return s.SendStaggered(0, frag, 0) }, ErrTooLarge},
		{"staggered key", func(s *Sender) error { return s.SendStaggered(256, nil, 0) }, ErrBadKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := NewSender(cfg)
			if err := tc.send(s); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if s.QueuedBytes() != 0 || s.HasPending(0) {
				t.Fatal("a refused event was queued")
			}
		})
	}
}

// TestBounds: MaxInFlightPerLane events per lane and MaxQueuedBytes, with
// clear errors, and room again once events are acknowledged.
func TestBounds(t *testing.T) {
	t.Run("events per lane", func(t *testing.T) {
		p := newPair(t, noRedundancy())
		m := p.s.Config().MaxInFlightPerLane
		for i := 0; i < m; i++ {
			must(t, p.s.SendOrdered(0, []byte{1}))
		}
		if err := p.s.SendOrdered(0, []byte{1}); !errors.Is(err, ErrLaneFull) {
			t.Fatalf("event %d on a full lane: %v, want ErrLaneFull", m+1, err)
		}
		must(t, p.s.SendOrdered(1, []byte{1})) // other lanes are independent
		for i := 0; i < m; i++ {
			must(t, p.s.SendUnordered(nil))
		}
		if err := p.s.SendUnordered(nil); !errors.Is(err, ErrLaneFull) {
			t.Fatalf("unordered beyond the bound: %v, want ErrLaneFull", err)
		}
		p.through(0, 1200) // acknowledges a few hundred
		must(t, p.s.SendOrdered(0, []byte{1}))
		must(t, p.s.SendUnordered(nil))
	})
	t.Run("queued bytes", func(t *testing.T) {
		cfg := noRedundancy()
		cfg.MaxQueuedBytes = cfg.MaxEventSize
		p := newPair(t, cfg)
		must(t, p.s.SendOrdered(0, make([]byte, cfg.MaxEventSize-10)))
		for _, send := range []func() error{
			func() error { return p.s.SendOrdered(1, make([]byte, 11)) },
			func() error { return p.s.SendUnordered(make([]byte, 11)) },
			func() error { return p.s.SendUnguaranteed(make([]byte, 11)) },
			func() error { return p.s.SendStaggered(1, make([]byte, 11), 0) },
		} {
			if err := send(); !errors.Is(err, ErrQueueFull) {
				t.Fatalf("over the byte bound: %v, want ErrQueueFull", err)
			}
		}
		must(t, p.s.SendUnordered(make([]byte, 10)))
		for i := 0; p.s.QueuedBytes() > 0; i++ {
			if i > 200 {
				t.Fatalf("still %d bytes queued", p.s.QueuedBytes())
			}
			p.through(time.Duration(i)*ms, 1200)
		}
		must(t, p.s.SendOrdered(1, make([]byte, 11)))
	})
	t.Run("unguaranteed count", func(t *testing.T) {
		p := newPair(t, DefaultConfig())
		for i := 0; i < p.s.Config().MaxUnguaranteed; i++ {
			must(t, p.s.SendUnguaranteed(nil))
		}
		if err := p.s.SendUnguaranteed(nil); !errors.Is(err, ErrQueueFull) {
			t.Fatalf("got %v, want ErrQueueFull", err)
		}
	})
}

func TestWriteErrors(t *testing.T) {
	p := newPair(t, DefaultConfig())
	var w bitstream.Writer
	if _, err := p.s.Write(&w, 1, 0); !errors.Is(err, ErrNoRoom) {
		t.Fatalf("zero writer: %v, want ErrNoRoom", err)
	}
	w.Reset(make([]byte, 8))
	if _, err := p.s.Write(&w, 5, 0); err != nil {
		t.Fatal(err)
	}
	w.Reset(make([]byte, 8))
	if _, err := p.s.Write(&w, 5, 0); !errors.Is(err, ErrSeqOrder) {
		t.Fatalf("repeated seq: %v, want ErrSeqOrder", err)
	}
}

// TestFragmentation: events up to 64 KiB are cut into fragments of at most
// MaxFragment bytes and reassembled, ordered and unordered, under loss and
// reordering (checklist G-10); small events are never cut.
func TestFragmentation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		loss  float64
		sizes []int
	}{
		{"max event, clean", 0, []int{65536}},
		{"mixed sizes, 20% loss", 0.2, []int{65536, 1025, 3000, 1, 0, 200, 1024, 5000, 129}},
		{"many mid sizes, 40% loss", 0.4, []int{2048, 2049, 4095, 777, 1500, 9999, 12, 30000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLossyPair(t, DefaultConfig(), 7, tc.loss, 3, 1200)
			var want []string
			for i, n := range tc.sizes {
				b := make([]byte, n)
				for j := range b {
					b[j] = byte(i*7 + j*13)
				}
				must(t, l.s.SendOrdered(i%3, b))
				must(t, l.s.SendUnordered(b))
				want = append(want, string(b))
			}
			for i := 0; len(l.got) < 2*len(want); i++ {
				if i > 5000 {
					t.Fatalf("delivered %d of %d", len(l.got), 2*len(want))
				}
				l.tick()
			}
			var ord [3][]string
			var un []string
			for _, g := range l.got {
				if g.Class == Ordered {
					ord[g.Lane] = append(ord[g.Lane], g.Payload)
				} else {
					un = append(un, g.Payload)
				}
			}
			for i, w := range want {
				lane := i % 3
				if len(ord[lane]) == 0 || ord[lane][0] != w {
					t.Fatalf("lane %d: event %d (%d bytes) missing or out of order", lane, i, len(w))
				}
				ord[lane] = ord[lane][1:]
			}
			slices.Sort(un)
			sorted := slices.Clone(want)
			slices.Sort(sorted)
			if !slices.Equal(un, sorted) {
				t.Fatalf("unordered events differ")
			}
			if st := l.s.Stats(); st.Fragments == 0 {
				t.Fatal("nothing was fragmented")
			}
		})
	}
	t.Run("small event not cut", func(t *testing.T) {
		p := newPair(t, noRedundancy())
		must(t, p.s.SendOrdered(0, make([]byte, 100)))
		p.through(0, 60) // 100 bytes do not fit; ≥ MinFragment would not either
		if st := p.s.Stats(); st.Fragments != 0 || st.Units != 0 {
			t.Fatalf("a 100-byte event was cut: %+v", st)
		}
		p.through(10*ms, 200)
		if g := p.take(); len(g) != 1 || len(g[0].Payload) != 100 {
			t.Fatalf("got %v", g)
		}
	})
}

// TestIDWrap sends more than 2^15 events per stream (the 15-bit wire id wraps
// twice) through loss and reordering: all arrive once, in order.
func TestIDWrap(t *testing.T) {
	l := newLossyPair(t, DefaultConfig(), 3, 0.2, 3, 1200)
	const n = 70_000
	sent, un := 0, 0
	next := 0
	seen := make([]bool, n)
	for step := 0; next < n || un < n; step++ {
		if step > 20000 {
			t.Fatalf("stuck: ordered %d, unordered %d of %d", next, un, n)
		}
		for ; sent < n && l.s.InFlight(0) < 2000; sent++ {
			must(t, l.s.SendOrdered(0, payload(0, sent, 8)))
			must(t, l.s.SendUnordered(payload(1, sent, 8)))
		}
		l.tick()
		for _, g := range l.take() {
			s, i, ok := parsePayload([]byte(g.Payload))
			switch {
			case !ok:
				t.Fatalf("corrupt payload %q", g.Payload)
			case g.Class == Ordered && (s != 0 || i != next):
				t.Fatalf("ordered: got %d/%d, want 0/%d", s, i, next)
			case g.Class == Ordered:
				next++
			case s != 1 || seen[i]:
				t.Fatalf("unordered %d/%d duplicated or corrupt", s, i)
			default:
				seen[i] = true
				un++
			}
		}
	}
}

// TestStreamsIndependent: a loss on one lane never delays another lane, the
// unordered stream or staggered state (RL-2, RL-3, RL-14).
func TestStreamsIndependent(t *testing.T) {
	p := newPair(t, noRedundancy())
	must(t, p.s.SendOrdered(0, []byte("chat-1")))
	lost := p.write(0, 100)
	must(t, p.s.SendOrdered(0, []byte("chat-2")))
	must(t, p.s.SendOrdered(1, []byte("move")))
	must(t, p.s.SendUnordered([]byte("pickup")))
	must(t, p.s.SendStaggered(0, []byte("state"), 50*ms))
	next := p.write(50*ms, 200)
	p.deliver(next)
	got := payloads(p.take())
	slices.Sort(got)
	if want := []string{"move", "pickup", "state"}; !slices.Equal(got, want) {
		t.Fatalf("with lane 0 blocked: %q, want %q", got, want)
	}
	p.fate(lost, false)
	p.fate(next, true)
	p.through(100*ms, 100)
	if g := payloads(p.take()); !slices.Equal(g, []string{"chat-1", "chat-2"}) {
		t.Fatalf("lane 0 after the resend: %q", g)
	}
}

func TestClassString(t *testing.T) {
	for c, want := range map[Class]string{Unguaranteed: "unguaranteed", Unordered: "unordered", Ordered: "ordered", Staggered: "staggered", 4: "class(?)"} {
		if got := c.String(); got != want {
			t.Errorf("%d: %q, want %q", c, got, want)
		}
	}
	_ = fmt.Sprint(got{})
}

// TestCopiesOutlastTheBudget: when the copy budget holds one copy a packet
// and three units are due, each still gets its Redundancy copies, one packet
// after another, units sent once before any unit's second copy — a unit the
// budget leaves out stays due instead of dropping out of the chain of
// copies (which left a burst's units with fewer copies than the loss rate
// asks for, then a loss verdict and a resend: 200–300 ms late on a 100 ms
// path).
func TestCopiesOutlastTheBudget(t *testing.T) {
	c := DefaultConfig()
	c.ResidualLoss = 0 // two copies each, fixed
	c.RedundancyBytes = 12
	p := newPair(t, c)
	for _, x := range []string{"aaaaaaaa", "bbbbbbbb", "cccccccc"} {
		must(t, p.s.SendOrdered(1, []byte(x)))
	}
	p.write(0, 200)
	if st := p.s.Stats(); st.Units != 3 || st.Redundant != 0 {
		t.Fatalf("first packet: %+v, want the three units", st)
	}
	var order []uint64 // the unit copied by each later packet
	for i := 1; i <= 8; i++ {
		p.write(time.Duration(i)*50*ms, 200)
		switch len(p.s.prev) {
		case 0:
		case 1:
			order = append(order, p.s.prev[0].id())
		default:
			t.Fatalf("packet %d carried %d copies; the budget holds one", i, len(p.s.prev))
		}
	}
	if len(order) != 6 || p.s.Stats().Redundant != 6 {
		t.Fatalf("copies of units %v (%d), want two for each of the three", order, p.s.Stats().Redundant)
	}
	if first := slices.Sorted(slices.Values(order[:3])); !slices.Equal(first, []uint64{0, 1, 2}) {
		t.Fatalf("copies in order %v: every unit's first copy must come before any second one", order)
	}
	if p.s.HasRedundant() {
		t.Fatal("copies still due after every unit had its two")
	}
}
