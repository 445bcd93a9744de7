package session_test

import (
	"reflect"
	"testing"

	"github.com/ghostwire/ghostwire/replication/move"
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
		for _, p := range []*pair{a, b} {
			stepDropping(t, p, lost)
		}
		if sa, sb := a.srv.Stats(), b.srv.Stats(); !reflect.DeepEqual(sa, sb) {
			t.Fatalf("round %d: server stats\n%+v skipping\n%+v without", round, sa, sb)
		}
		if ca, cb := a.cli.Stats(), b.cli.Stats(); !reflect.DeepEqual(ca, cb) {
			t.Fatalf("round %d: client stats\n%+v skipping\n%+v without", round, ca, cb)
		}
		if session.EventsIdle(a.srv) {
			idle++
		}
	}
	if st := a.srv.Stats(); st.Notify.Dropped == 0 || st.EventsSent.Units == 0 || idle < 500 {
		t.Fatalf("%d packets lost, %d event units sent, the Sender idle after %d of 2400 rounds: the test no longer exercises the skip", st.Notify.Dropped, st.EventsSent.Units, idle)
	}
}

// stepDropping is pair.step with the server's packet lost when lost is set.
func stepDropping(t *testing.T, p *pair, lost bool) {
	t.Helper()
	p.now += p.dt
	p.round++
	for p.cli.InputDue(p.now) {
		if _, err := p.cli.Input(move.Move{Forward: 100, Yaw: uint16(p.round * 7)}); err != nil {
			t.Fatal(err)
		}
	}
	if p.round%10 == 0 {
		p.cli.SendEvent(0, p.event)
	}
	out, err := p.cli.Poll(p.now, p.cbuf[:0])
	if err != nil || len(out) == 0 {
		t.Fatalf("client sent nothing in round %d: %v", p.round, err)
	}
	if _, err := p.srv.Receive(p.now, out, clientAddr); err != nil {
		t.Fatal(err)
	}
	for _, m := range p.h.moves {
		p.state = move.Walk(p.state, m, m.Seconds())
	}
	if n := len(p.h.moves); n > 0 {
		p.srv.SetControl(p.h.moves[n-1].Seq, p.state)
		p.h.moves = p.h.moves[:0]
	}
	if p.round%10 == 5 {
		p.srv.SendEvent(1, p.event)
	}
	sout, err := p.srv.Poll(p.now, p.sbuf[:0], nil)
	if err != nil || len(sout) == 0 {
		t.Fatalf("server sent nothing: %v", err)
	}
	if !lost {
		if err := p.cli.Receive(p.now, sout); err != nil {
			t.Fatal(err)
		}
	}
}
