package session_test

import (
	"testing"

	"github.com/ghostwire/ghostwire/replication/session"
)

// TestServerCountsEmptyEventSections: a Server counts its client's empty
// event sections itself and hands the count to its Receiver when the
// Receiver's idle trim falls due or a section with events comes
// (readEvents, event.Receiver.SkipEmpty): Stats counts every section, and
// the Receiver's trims fall on the sections where reading each would have
// put them, every trimSections (32) from its first.
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
