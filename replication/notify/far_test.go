package notify

import (
	"errors"
	"testing"
	"time"
)

// blackout runs a link where B stops hearing A (a paused host: A keeps
// sending, every packet lost) for n packets, then hears A again. It returns
// the error of B's first packet after the blackout and the pair.
func blackout(t *testing.T, cfg Config, n int) (a, b *endpoint, now time.Duration, err error) {
	t.Helper()
	a = newEndpoint(t, "A", cfg, 0, 0)
	b = newEndpoint(t, "B", cfg, 0, 0)
	link(a, b)
	exchange := func() error {
		now += 33 * ms
		_, p := a.send(t, now, TypeData)
		if _, err := b.recv(t, now, p); err != nil {
			return err
		}
		b.c.Tick(now)
		_, p = b.send(t, now, TypeData)
		if _, err := a.recv(t, now, p); err != nil {
			return err
		}
		a.pop(t)
		b.pop(t)
		mustInvariants(t, a, b)
		return nil
	}
	for i := 0; i < 20; i++ {
		if err := exchange(); err != nil {
			t.Fatalf("before the blackout: %v", err)
		}
	}
	for i := 0; i < n; i++ { // lost: B does not read them
		now += 33 * ms
		a.send(t, now, TypeData)
		a.pop(t)
	}
	return a, b, now, exchange()
}

// TestBlackoutLongerThanWindowWedgesWithoutAcceptFar: the documented limit
// of version 1 (protocol.md § 3.11), which AcceptFar lifts.
func TestBlackoutLongerThanWindowWedgesWithoutAcceptFar(t *testing.T) {
	_, b, _, err := blackout(t, DefaultConfig(), DefaultAckWindow+1)
	if !errors.Is(err, ErrTooFar) {
		t.Fatalf("first packet after %d losses: %v, want ErrTooFar", DefaultAckWindow+1, err)
	}
	if st := b.c.Stats(); st.TooFar != 1 || st.FarAccepted != 0 {
		t.Fatalf("TooFar %d, FarAccepted %d; want 1, 0", st.TooFar, st.FarAccepted)
	}
}

// TestAcceptFarSurvivesABlackout: with AcceptFar the first packet after a
// blackout of any length is taken, the skipped sequences are given up (the
// sender learns each as dropped, none delivered), and the link carries on:
// every later packet is accepted and acknowledged. The lengths cross the
// window, the receive ring (a jump of a ring's length or more clears it
// whole), the sender's MaxInFlight (forced drops) and the 16-bit sequence
// width (the sender's 32-bit form).
func TestAcceptFarSurvivesABlackout(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window int
		n      int
	}{
		{"just past the window", 256, 257},
		{"past the window, within the ring", 300, 400}, // ring of 512
		{"a ring's length", 256, 600},
		{"past MaxInFlight", 256, 3000},
		{"past the 16-bit width", 256, 40000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.AckWindow = tc.window
			cfg.AcceptFar = true
			a, b, now, err := blackout(t, cfg, tc.n)
			if err != nil {
				t.Fatalf("first packet after %d losses: %v, want it accepted", tc.n, err)
			}
			st := b.c.Stats()
			if st.FarAccepted != 1 || st.TooFar != 0 {
				t.Fatalf("FarAccepted %d, TooFar %d; want 1, 0", st.FarAccepted, st.TooFar)
			}
			// One accepted sequence left the window unconfirmed: A's last
			// before the blackout (A's next header, which would have told B
			// that A knows, was lost). Nothing past it was accepted.
			if st.WindowEvicted != 1 {
				t.Fatalf("WindowEvicted %d, want 1", st.WindowEvicted)
			}
			// The packet threshold gives up all but the last K−1 at once;
			// the time threshold those (below).
			k := uint64(cfg.ReorderThreshold)
			if st.Abandoned != uint64(tc.n)+1-k {
				t.Fatalf("Abandoned %d, want %d of the %d skipped", st.Abandoned, uint64(tc.n)+1-k, tc.n)
			}
			// The link carries on: each packet is accepted and, a round trip
			// later, known delivered at A.
			for i := 0; i < 10; i++ {
				now += 33 * ms
				_, p := a.send(t, now, TypeData)
				if _, err := b.recv(t, now, p); err != nil {
					t.Fatalf("packet %d after the blackout: %v", i, err)
				}
				_, p = b.send(t, now, TypeData)
				if _, err := a.recv(t, now, p); err != nil {
					t.Fatalf("B's packet %d after the blackout: %v", i, err)
				}
				b.c.Tick(now)
				a.pop(t)
				b.pop(t)
				mustInvariants(t, a, b)
			}
			if st := b.c.Stats(); st.Abandoned != uint64(tc.n) {
				t.Fatalf("Abandoned %d after ten rounds, want the %d skipped", st.Abandoned, tc.n)
			}
			if a.c.InFlight() > 1 {
				t.Fatalf("A has %d packets in flight after ten clean rounds", a.c.InFlight())
			}
			var lost, delivered int
			for _, f := range a.fates {
				if f.Delivered {
					delivered++
				} else {
					lost++
				}
			}
			if lost != tc.n || delivered != len(a.fates)-tc.n {
				t.Fatalf("A's fates: %d dropped, %d delivered; want the %d lost dropped and the rest delivered", lost, delivered, tc.n)
			}
			checkAgreement(t, a, b)
			checkAgreement(t, b, a)
		})
	}
}

// TestAcceptFarFirstPacket: a receiver that has accepted nothing yet takes
// a first packet past its window, as it takes a later one.
func TestAcceptFarFirstPacket(t *testing.T) {
	cfg := DefaultConfig()
	cfg.AcceptFar = true
	a := newEndpoint(t, "A", cfg, 0, 0)
	b := newEndpoint(t, "B", cfg, 0, 0)
	var p []byte
	for i := 0; i <= 2*DefaultAckWindow; i++ {
		_, p = a.send(t, time.Duration(i)*ms, TypeData)
		a.pop(t)
	}
	if _, err := b.recv(t, 600*ms, p); err != nil {
		t.Fatalf("first packet at %d: %v", 2*DefaultAckWindow, err)
	}
	k := uint64(cfg.ReorderThreshold)
	if st := b.c.Stats(); st.FarAccepted != 1 || st.Abandoned != 2*DefaultAckWindow+1-k || st.Received != 1 {
		t.Fatalf("stats %+v; want FarAccepted 1, Abandoned %d (all but the last K−1), Received 1", st, 2*DefaultAckWindow+1-k)
	}
	mustInvariants(t, a, b)
}
