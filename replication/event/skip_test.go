package event

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// TestSkipEmptyIsReadScratch drives two Receivers with the same sections,
// one with ReadScratch alone and one as a Server reads its client's: an
// empty section (its end bit alone) only counted, handed over with
// SkipEmpty when TrimIn says the next trim is due or before a section with
// events. With a trim every third section, so lanes are made, trimmed idle
// and dropped throughout: the same stats at every packet (the counted
// sections added) and the same trim state — lanes kept or dropped, their
// idle and used marks, the Receiver's own — at every hand-over.
func TestSkipEmptyIsReadScratch(t *testing.T) {
	cfg := withReceiverTrim(interned(DefaultConfig()), 3)
	s, _ := NewSender(DefaultConfig())
	a, _ := NewReceiver(DefaultConfig())
	b, _ := NewReceiver(DefaultConfig())
	a.cfg, b.cfg = cfg, cfg
	var quiet, until int // the Server's emptySections
	var skipped, handed, dropped int
	deliver := func(Event) {}
	for seq := uint64(1); seq <= 600; seq++ {
		now := time.Duration(seq) * 50 * time.Millisecond
		if seq%40 < 12 && seq%3 == 0 { // bursts of events, then quiet
			if err := s.SendOrdered(int(seq/40)%3, []byte("hello")); err != nil {
				t.Fatal(err)
			}
		}
		w := bitstream.NewWriter(make([]byte, 64))
		if _, err := s.Write(w, seq, now); err != nil {
			t.Fatal(err)
		}
		// Runs of lost packets in the bursts, longer than the copies
		// cover: their events come later, after others of their lane,
		// which wait in the lane's slots until a trim finds the lane
		// idle.
		// Fates come three packets late, as over a round trip, so later
		// events go out before the lost ones' resends.
		lost := seq%40 >= 4 && seq%40 < 8
		if f := seq - 3; f >= 1 {
			s.OnFate(notify.Fate{Seq: f, Delivered: !(f%40 >= 4 && f%40 < 8)})
		}
		if lost {
			continue
		}
		// Over a buffer with room past the section, as a Server's payload
		// (resetPayload): PeekWindow needs 8 bytes.
		sec, bits := append(w.Bytes(), make([]byte, 8)...), w.BitLen()
		slotsBefore := slotLanes(a)
		var ra, rb bitstream.Reader
		ra.ResetBits(sec, bits)
		if err := a.ReadScratch(&ra, nil, deliver); err != nil {
			t.Fatal(err)
		}
		if empty := ra.Pos() == 1; empty && slotLanes(a) < slotsBefore {
			dropped++ // only a trim drops them in an empty section
		}
		rb.ResetBits(sec, bits)
		if v, n, ok := rb.PeekWindow(); ok && n > 0 && v&1 == 0 {
			rb.TryReadBits(1)
			skipped++
			if until > 1 {
				until--
				quiet++
			} else {
				until, quiet = b.SkipEmpty(quiet+1), 0
				handed++
			}
		} else {
			if quiet > 0 {
				b.SkipEmpty(quiet)
				quiet = 0
				handed++
			}
			if err := b.ReadScratch(&rb, nil, deliver); err != nil {
				t.Fatal(err)
			}
			until = b.TrimIn()
		}
		if ra.Pos() != rb.Pos() {
			t.Fatalf("packet %d: ReadScratch read %d bits, the skip %d", seq, ra.Pos(), rb.Pos())
		}
		sa, sb := a.Stats(), b.Stats()
		sb.Sections += uint64(quiet)
		if sa != sb {
			t.Fatalf("packet %d: stats %+v with ReadScratch, %+v skipping", seq, sa, sb)
		}
		if quiet == 0 {
			if ta, tb := trimState(a), trimState(b); ta != tb {
				t.Fatalf("packet %d: ReadScratch left %s, the skip %s", seq, ta, tb)
			}
		}
		if until != a.TrimIn() {
			t.Fatalf("packet %d: the skip's next trim %d sections on (%d counted), ReadScratch's %d", seq, until, quiet, a.TrimIn())
		}
	}
	t.Logf("%d empty sections skipped, %d hand-overs, %d lanes' slots dropped by a trim", skipped, handed, dropped)
	if skipped < 300 || handed < 100 || dropped == 0 {
		t.Fatalf("%d empty sections skipped, %d hand-overs, %d lanes' slots dropped by a trim: the test no longer exercises the skip", skipped, handed, dropped)
	}
}

// slotLanes counts r's lanes that keep slots.
func slotLanes(r *Receiver) int {
	n := 0
	for _, l := range r.lanes {
		if l.ln != nil && l.ln.slots != nil {
			n++
		}
	}
	return n
}

// trimState describes what r's idle trims read and write.
func trimState(r *Receiver) string {
	s := fmt.Sprintf("since %d used %v quiet %d lanes", r.sinceTrim, r.used, r.quiet)
	for i, l := range r.lanes {
		if l.ln == nil {
			s += fmt.Sprintf(" %d:idle(next %d)", i, l.next)
			continue
		}
		s += fmt.Sprintf(" %d:next %d used %v idle %d slots %d", i, l.ln.next, l.ln.used, l.ln.idle, len(l.ln.slots))
	}
	return s
}

// TestFatesIdleMeansDeliveredFatesChangeNothing drives a Sender with
// events, lost and delivered fates, and at every packet where FatesIdle
// says so, checks that a delivered fate (OnFate) and an early-delivery
// pass (AckDelivered) leave every field of it as it was: what lets a
// Server skip them. And FatesIdle holds most of the time the link is
// clean and no event is in flight, so the skip is worth having.
func TestFatesIdleMeansDeliveredFatesChangeNothing(t *testing.T) {
	s, _ := NewSender(DefaultConfig())
	idle, checked := 0, 0
	for seq := uint64(1); seq <= 3000; seq++ {
		now := time.Duration(seq) * 50 * time.Millisecond
		if seq%40 == 0 {
			if err := s.SendOrdered(int(seq/40)%3, []byte("hello")); err != nil {
				t.Fatal(err)
			}
		}
		w := bitstream.NewWriter(make([]byte, 64))
		if _, err := s.Write(w, seq, now); err != nil {
			t.Fatal(err)
		}
		lost := seq > 200 && seq < 260 && seq%4 == 0 // a lossy spell: the estimate leaves 0
		if s.FatesIdle() {
			idle++
			if !lost {
				before := *s
				s.OnFate(notify.Fate{Seq: seq, Delivered: true})
				s.AckDelivered(func(uint64) bool { return true })
				if !reflect.DeepEqual(before, *s) {
					t.Fatalf("packet %d: a delivered fate changed an idle Sender:\n%+v\n%+v", seq, before, *s)
				}
				checked++
				continue
			}
		}
		s.OnFate(notify.Fate{Seq: seq, Delivered: !lost})
		s.AckDelivered(func(uint64) bool { return !lost })
	}
	if checked < 1500 || idle == 3000 {
		t.Fatalf("idle at %d of 3000 packets, %d checked: the test no longer exercises FatesIdle", idle, checked)
	}
}
