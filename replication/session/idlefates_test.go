package session_test

import (
	"reflect"
	"testing"

	"github.com/ghostwire/ghostwire/replication/session"
)

// TestIdleSenderSkipsDeliveredFates drives two identical pairs, one whose
// Server hands delivered fates to its event Sender only while the Sender
// is not idle (event.Sender.FatesIdle) and one whose Server is made to
// hand every fate over (ForgetEventsIdle before each round), with events
// both ways and a run of lost server packets (the loss estimate leaves
// 0, then comes back to it): the same stats on both ends of both pairs
// after every round, and the skip in use for most of them.
func TestIdleSenderSkipsDeliveredFates(t *testing.T) {
	a, b := newPairN(t, 0), newPairN(t, 0)
	idle := 0
	for round := 1; round <= 2400; round++ {
		session.ForgetEventsIdle(b.srv)
		lost := round > 100 && round < 160 && round%3 == 0
		stepBoth(t, round, a, b, lost)
		if session.EventsIdle(a.srv) {
			idle++
		}
	}
	if st := a.srv.Stats(); st.Notify.Dropped == 0 || st.EventsSent.Units == 0 || idle < 500 {
		t.Fatalf("%d packets lost, %d event units sent, the Sender idle after %d of 2400 rounds: the test no longer exercises the skip", st.Notify.Dropped, st.EventsSent.Units, idle)
	}
}

// stepBoth steps a (whose Server skips) and b (whose Server does not) the
// same way, and fails unless both ends of both pairs count the same.
func stepBoth(t *testing.T, round int, a, b *pair, lost bool) {
	t.Helper()
	for _, p := range []*pair{a, b} {
		stepDropping(t, p, lost)
	}
	if sa, sb := a.srv.Stats(), b.srv.Stats(); !reflect.DeepEqual(sa, sb) {
		t.Fatalf("round %d: server stats\n%+v skipping\n%+v without", round, sa, sb)
	}
	if ca, cb := a.cli.Stats(), b.cli.Stats(); !reflect.DeepEqual(ca, cb) {
		t.Fatalf("round %d: client stats\n%+v skipping\n%+v without", round, ca, cb)
	}
}

// stepDropping is pair.step with the server's packet lost when lost is set.
func stepDropping(t *testing.T, p *pair, lost bool) {
	t.Helper()
	p.receiveHalf(t)
	p.tick(t, !lost)
}
