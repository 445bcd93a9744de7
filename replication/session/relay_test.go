package session_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/notify"
	"github.com/ghostwire/ghostwire/replication/session"
)

// TestRelayFatesReachTheTable drives a real ghost.Table through a relay with
// every fate path — delivered, dropped with its packet, replaced before it was
// sent, too big for the packet — and checks that every section the table wrote
// got exactly one fate: nothing unknown, nothing left in flight.
func TestRelayFatesReachTheTable(t *testing.T) {
	reg := session.DefaultRegistry()
	tab, err := ghost.NewTable(reg, ghost.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	npc, _ := reg.Lookup(ghost.NPCClassID)
	relay, err := session.NewGhostRelay(session.MaxPacketSize, 64)
	if err != nil {
		t.Fatal(err)
	}
	var g, pkt uint64
	var gw, pw bitstream.Writer
	gbuf := make([]byte, 600)
	pbuf := make([]byte, 1200)
	offer := func(now time.Duration) {
		gw.Reset(gbuf)
		g++
		n, err := tab.Write(&gw, g, now)
		if err != nil {
			t.Fatal(err)
		}
		if err := relay.Offer(g, n, gw.Bytes(), gw.BitLen(), now); err != nil {
			t.Fatal(err)
		}
	}
	type sent struct {
		seq uint64
		at  time.Duration
	}
	var inflight []sent
	var fates []notify.Fate
	toTable := func() {
		fates = relay.PopFates(fates[:0])
		for _, f := range fates {
			tab.OnFate(f)
		}
	}
	for i := 1; i <= 400; i++ {
		now := time.Duration(i) * 10 * time.Millisecond
		view := make([]ghost.ViewEntry, 0, 30)
		for k := 0; k < 30; k++ {
			view = append(view, ghost.ViewEntry{Entity: uint64(k + 1), Class: npc, Priority: 1,
				State: ghost.State{Pos: [3]float64{float64(k), 0, float64(i%50) * 0.5}}})
		}
		if err := tab.SetView(now, view); err != nil {
			t.Fatal(err)
		}
		offer(now)
		if i%5 == 0 {
			offer(now) // replaces the one not sent yet: dropped at once
		}
		room := 1200
		if i%7 == 0 {
			room = 8 // too small: dropped at once
		}
		pkt++
		pw.Reset(pbuf[:room])
		relay.Write(&pw, pkt, now)
		inflight = append(inflight, sent{pkt, now}) // with ghosts or not: the relay ignores the rest
		// Fates come back in send order a few packets later; every third
		// packet is lost.
		for len(inflight) > 3 {
			s := inflight[0]
			inflight = inflight[1:]
			relay.OnFate(notify.Fate{Seq: s.seq, Delivered: s.seq%3 != 0, SentAt: s.at})
		}
		toTable()
	}
	for _, s := range inflight {
		relay.OnFate(notify.Fate{Seq: s.seq, Delivered: true, SentAt: s.at})
	}
	relay.Write(&pw, pkt+1, 0) // the last offer, if any, never fits now
	pw.Reset(pbuf[:1])
	relay.Write(&pw, pkt+2, 0)
	toTable()
	st := tab.Stats()
	if st.UnknownFates != 0 || tab.InFlight() != 0 || relay.Lost() != 0 {
		t.Fatalf("table: %d unknown fates, %d packets in flight; relay lost %d", st.UnknownFates, tab.InFlight(), relay.Lost())
	}
	if st.UpdatesLost == 0 || st.Updates == 0 {
		t.Fatalf("scenario too thin: %+v", st)
	}
	if err := relay.Offer(1, 1, gbuf, 8, 0); !errors.Is(err, session.ErrRelaySeq) {
		t.Fatalf("offer with an old sequence: %v", err)
	}
	if err := relay.Offer(g+10, 1, gbuf[:1], 9, 0); !errors.Is(err, bitstream.ErrWidth) {
		t.Fatalf("offer of more bits than data: %v", err)
	}
}
