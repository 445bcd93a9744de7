package handoff

import (
	"testing"
	"time"
)

// Expire runs every timer that ends something and resends nothing: an
// unanswered Offer is aborted at OfferTimeout (its Abort sent, the entity
// resumed) without a copy before; an unacknowledged Commit is given up
// on at CommitGiveUp without a copy; the forwarding record, the
// reservation and stashed moves expire as under Tick.
func TestExpireGivesUpWithoutResending(t *testing.T) {
	cfg := DefaultConfig()
	a, b := pair(t)
	for _, id := range []uint64{7, 8} {
		if _, err := a.Spawn(id, 0); err != nil {
			t.Fatal(err)
		}
	}
	var oa, ob Output
	// 7: offered, the Offer lost. 8: offered, accepted, its Commit lost.
	if _, err := a.Begin(0, &Snapshot{Entity: 7}, "b", nil); err != nil {
		t.Fatal(err)
	}
	offer8, err := a.Begin(0, &Snapshot{Entity: 8}, "b", nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Step(1*ms, offer8, &ob)
	a.Step(2*ms, only(t, &ob, KindAccept), &oa)
	only(t, &oa, KindCommit)
	oa.Reset()
	// Forwarded moves for an entity b knows nothing of: stashed.
	b.Step(3*ms, Msg{Kind: KindForward, Entity: 9, Epoch: 3, From: "a", To: "b", Sent: 3 * ms, Moves: moves(1)}, &ob)

	for now := cfg.RetryInterval; now < cfg.OfferTimeout; now += cfg.RetryInterval {
		a.Expire(now, &oa)
		if !oa.Empty() {
			t.Fatalf("Expire at %v before any timeout: %+v, want nothing (no resend)", now, oa)
		}
	}
	a.Expire(cfg.OfferTimeout, &oa)
	if len(oa.Resumed) != 1 || oa.Resumed[0].Entity != 7 {
		t.Fatalf("Expire at OfferTimeout resumed %+v, want entity 7", oa.Resumed)
	}
	if abort := only(t, &oa, KindAbort); abort.Entity != 7 {
		t.Fatalf("Abort for %d, want 7", abort.Entity)
	}
	oa.Reset()
	if ph, _, _ := a.Status(7); ph != PhaseOwned {
		t.Fatalf("entity 7 %v after its offer timed out, want owned", ph)
	}
	if n := a.InFlight(); n != 1 {
		t.Fatalf("%d in flight, want 1 (the Commit of 8)", n)
	}
	a.Expire(cfg.CommitGiveUp+2*ms, &oa)
	if !oa.Empty() {
		t.Fatalf("Expire at CommitGiveUp: %+v, want nothing (no Commit resent)", oa)
	}
	if ph, _, _ := a.Status(8); ph != PhaseForwarding || a.Stats().Stranded != 1 {
		t.Fatalf("entity 8 %v, %d stranded after CommitGiveUp, want forwarding, 1", ph, a.Stats().Stranded)
	}
	if a.Stats().Retries != 0 {
		t.Fatalf("%d resends under Expire, want 0", a.Stats().Retries)
	}
	a.Expire(cfg.CommitGiveUp+2*ms+cfg.ForwardTTL, &oa)
	if ph, _, _ := a.Status(8); ph != PhaseUnknown || a.InFlight() != 0 {
		t.Fatalf("entity 8 %v, %d in flight after ForwardTTL, want forgotten, 0", ph, a.InFlight())
	}
	b.Expire(cfg.ForwardTTL+1*ms, &ob)
	if _, ok := b.Reserved(8); ok || len(b.stash) != 0 {
		t.Fatalf("b after ForwardTTL: reservation kept %v, %d stashed, want none", ok, len(b.stash))
	}
	if err := a.checkTimed(); err != nil {
		t.Fatal(err)
	}
}

// Tick, by contrast, resends both within the same times.
func TestTickResendsWhereExpireDoesNot(t *testing.T) {
	cfg := DefaultConfig()
	for _, expire := range []bool{false, true} {
		a, _ := pair(t)
		if _, err := a.Spawn(7, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Begin(0, &Snapshot{Entity: 7}, "b", nil); err != nil {
			t.Fatal(err)
		}
		var o Output
		run := a.Tick
		if expire {
			run = a.Expire
		}
		sent := 0
		for now := time.Duration(0); now < cfg.OfferTimeout; now += cfg.RetryInterval {
			run(now, &o)
			sent += len(o.Send)
			o.Reset()
		}
		if want := map[bool]int{false: 9, true: 0}[expire]; sent != want {
			t.Errorf("expire %v: %d Offers resent before OfferTimeout, want %d", expire, sent, want)
		}
	}
}
