package session_test

import (
	"encoding/binary"
	"testing"

	"github.com/ghostwire/ghostwire/replication/session"
)

// TestServerCountsEmptyEventSections: a Server counts its client's empty
// event sections itself and hands the count to its Receiver when the
// Receiver's idle trim falls due or a section with events comes
// (readEvents, event.Receiver.SkipEmpty): Stats counts every section, and
// the Receiver's trims fall on the sections where reading each would have
// put them, every trimSections (32) from its first — also for a Receiver
// made at the client's first event (Server.receiver), after empty
// sections it never saw.
func TestServerCountsEmptyEventSections(t *testing.T) {
	const trimEvery = 32 // event's trimSections
	p := newPairN(t, 0)
	held := 0
	for i := 1; i <= 300; i++ {
		p.step(t) // a packet from the client; an event in every tenth round
		st := p.srv.Stats()
		n := st.Moves.Sections // the data packets read: each has an event section
		if got := st.EventsRecv.Sections; got != n {
			t.Fatalf("round %d: %d event sections counted in %d data packets", i, got, n)
		}
		if !session.HasReceiver(p.srv) {
			// No event from the client yet: no Receiver to count for
			// (Server.receiver), and nothing held for one.
			if quiet, until, _ := session.EmptyEventsHeld(p.srv); quiet != 0 || until != 0 {
				t.Fatalf("round %d: no Receiver, yet %d empty sections held, its trim reckoned %d on", i, quiet, until)
			}
			continue
		}
		quiet, until, trimIn := session.EmptyEvents(p.srv)
		want := trimEvery - int(n%trimEvery)
		if until != want || trimIn != want+quiet {
			t.Fatalf("round %d: the Server reckons the trim %d sections on and holds %d, its Receiver %d; reading every section puts it %d on",
				i, until, quiet, trimIn, want)
		}
		if quiet > 0 {
			held++
		}
	}
	if held < 200 {
		t.Fatalf("the Server held a count of empty sections after %d of 300 rounds: the test no longer exercises it", held)
	}
}

// TestNewNumberingFromTheUsualPacket: a new client's first data packet
// carries no event base, so the Server numbers the player's events
// afresh, under the connection id (readBase's absent base), also when
// the packet's event sections are read in one peek (readSections' usual
// rest: no base, no events).
func TestNewNumberingFromTheUsualPacket(t *testing.T) {
	p := newPairN(t, 0)
	p.step(t) // no event from either side in the first round
	id := p.srv.ID()
	if got, want := p.srv.EventGen(), binary.LittleEndian.Uint64(id[:]); got != want || got == 0 {
		t.Fatalf("numbering generation %#x after the first packet, want the connection id's %#x", got, want)
	}
}
