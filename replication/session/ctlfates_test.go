package session_test

import (
	"testing"

	"github.com/ghostwire/ghostwire/replication/session"
)

// TestIdleControlWriterSkipsFates drives two identical pairs, one whose
// Server hands fates to its ControlWriter only while its mirror says a
// full state is held (numCtlHeld, move.ControlWriter.FatesIdle) and one
// made to hand every fate over (ForgetControlIdle before each round), with
// forced full states and runs of lost server packets, some of them the
// forced state's: the same stats on both ends of both pairs after every
// round, with holds both delivered and lost, and the skip in use for most
// rounds.
func TestIdleControlWriterSkipsFates(t *testing.T) {
	a, b := newPairN(t, 0), newPairN(t, 0)
	idle := 0
	for round := 1; round <= 2400; round++ {
		session.ForgetControlIdle(b.srv)
		if round%37 == 0 {
			a.srv.ForceControl()
			b.srv.ForceControl()
		}
		// Every third packet of a while, and the forced state's packet
		// (the round it is forced) in every other of them.
		lost := round > 100 && round < 400 && round%3 == 0 || round%74 == 0
		stepBoth(t, round, a, b, lost)
		if !session.ControlHeld(a.srv) {
			idle++
		}
	}
	st := a.srv.Stats()
	if st.Notify.Dropped == 0 || st.Control.Forced < 30 || st.Control.Corrections < 10 || idle < 1500 {
		t.Fatalf("%d packets lost, %d forced and %d corrective full states, the writer idle after %d of 2400 rounds: the test no longer exercises the skip",
			st.Notify.Dropped, st.Control.Forced, st.Control.Corrections, idle)
	}
}

// TestHeldControlFateNotSkipped: a forced full state whose packet is lost
// is resent once its fate comes — the Server's mirror of the hold, set by
// the Write that sent it, lets the dropped fate through to the
// ControlWriter. The same rounds with the mirror cleared after that Write
// (a stale mirror: StaleControlIdle) skip the fate, and the state is not
// resent, so the first half fails if the mirror goes stale.
func TestHeldControlFateNotSkipped(t *testing.T) {
	for _, stale := range []bool{false, true} {
		p := newPairN(t, 0)
		for range 10 {
			stepDropping(t, p, false)
		}
		p.srv.ForceControl()
		stepDropping(t, p, true) // the forced state goes, and is lost
		if st := p.srv.Stats().Control; st.Forced != 1 || !session.ControlHeld(p.srv) {
			t.Fatalf("stale=%v: forced %d, held %v after the forced state went", stale, st.Forced, session.ControlHeld(p.srv))
		}
		if stale {
			session.StaleControlIdle(p.srv)
		}
		for range 5 { // its dropped fate comes with the next client packet; well within HoldTimeout and Period
			stepDropping(t, p, false)
		}
		got := p.srv.Stats().Control.Corrections
		switch {
		case !stale && got != 1:
			t.Fatalf("lost forced state resent %d times, want 1", got)
		case stale && got != 0:
			t.Fatalf("with a stale mirror the lost forced state was resent %d times: the test no longer sees a skipped fate", got)
		}
	}
}
