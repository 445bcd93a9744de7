package event

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/netsim"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// TestLostRoundResentOnFirstVerdict loses a whole round of one event — its
// first transmission and both redundant copies — over real notify and
// netsim (50 ms one way, 20 packets/s each way), and times the repair. The
// resend must follow the verdict on the round's first packet: B gives that
// packet up when the fourth later one arrives (t+300 ms for an event queued
// just after A's send at t), its next packet tells A (t+367), A's next slot
// resends (t+400), and the event arrives at t+450. Waiting for the verdict
// on the round's last copy instead — as every carrier's drop once had to
// arrive — costs the two intervals between first and last copy: t+550.
func TestLostRoundResentOnFirstVerdict(t *testing.T) {
	link := netsim.Config{Latency: 50 * ms, Seed: 1}
	cfg := DefaultConfig()
	n := newSim(t, notify.DefaultConfig(), cfg, link, link, 50*ms, 1200)
	var got time.Duration
	n.b.deliver = func(Event) { got = n.now }
	n.a.deliver = func(Event) {}
	for n.now < 2*time.Second { // warm up: RTT samples, the reorder timer armed
		must(t, n.step(0))
	}
	for before := n.sentA; n.sentA == before; { // stop right after one of A's sends
		must(t, n.step(0))
	}
	sent := n.now
	must(t, n.a.s.SendOrdered(3, []byte("lost three times")))
	dead := link
	dead.Loss = 1
	must(t, n.pipe.AtoB.SetConfig(dead))
	for lost := n.sentA; n.sentA < lost+3; {
		must(t, n.step(0))
	}
	must(t, n.pipe.AtoB.SetConfig(link))
	for got == 0 && n.now < sent+2*time.Second {
		must(t, n.step(0))
	}
	if got == 0 {
		t.Fatal("the event never arrived")
	}
	st := n.a.s.Stats()
	t.Logf("delivered %v after the send call (units %d, copies %d, requeued %d, resent %d)",
		got-sent, st.Units, st.Redundant, st.Requeued, st.Resent)
	if st.Redundant < 2 || st.Requeued != 1 {
		t.Fatalf("want the whole round (1 + 2 copies) lost and one requeue: %+v", st)
	}
	if d := got - sent; d > 500*ms {
		t.Fatalf("a lost round took %v to repair, want ≤ 500 ms (the first carrier's verdict, not the last's)", d)
	}
}

// TestAdaptiveRedundancy: the copy count follows the loss rate the fates
// report — the smallest r ≥ Redundancy with loss^(r+1) ≤ ResidualLoss —
// and stays at Redundancy when adaptation is off.
func TestAdaptiveRedundancy(t *testing.T) {
	for _, tc := range []struct {
		name     string
		every    int // one fate in every is a drop; 0: none
		residual float64
		floor    int
		want     int
	}{
		{name: "no loss keeps the floor", every: 0, residual: 1e-3, floor: 2, want: 2},
		{name: "5 % loss: 0.05³ ≤ 1e-3", every: 20, residual: 1e-3, floor: 2, want: 2},
		{name: "12.5 % loss: 0.125⁴ ≤ 1e-3 < 0.125³", every: 8, residual: 1e-3, floor: 2, want: 3},
		{name: "20 % loss: 0.2⁵ ≤ 1e-3 < 0.2⁴", every: 5, residual: 1e-3, floor: 2, want: 4},
		{name: "50 % loss: capped", every: 2, residual: 1e-3, floor: 2, want: MaxRedundancy},
		{name: "20 % loss, adaptation off", every: 5, residual: 0, floor: 2, want: 2},
		{name: "20 % loss, copies off", every: 5, residual: 1e-3, floor: 0, want: 0},
		{name: "20 % loss, floor above the need", every: 5, residual: 1e-3, floor: 6, want: 6},
		{name: "default, no loss keeps the floor", every: 0, residual: DefaultResidualLoss, floor: DefaultRedundancy, want: 2},
		{name: "default, 10 % loss: 0.1⁵ ≤ 2e-5 < 0.1⁴", every: 10, residual: DefaultResidualLoss, floor: DefaultRedundancy, want: 4},
		{name: "default, 20 % loss: 0.2⁷ ≤ 2e-5 < 0.2⁶", every: 5, residual: DefaultResidualLoss, floor: DefaultRedundancy, want: 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.ResidualLoss, c.Redundancy = tc.residual, tc.floor
			s, err := NewSender(c)
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i <= 10*lossWindow; i++ {
				s.OnFate(notify.Fate{Seq: uint64(i), Delivered: tc.every == 0 || i%tc.every != 0})
			}
			if got := s.Redundancy(); got != tc.want {
				t.Fatalf("Redundancy() = %d at loss estimate %.3f, want %d", got, s.LossEstimate(), tc.want)
			}
		})
	}
}

// TestAdaptiveRedundancyBoundsRounds runs the latency scenario at 20 % loss
// each way (50 ms one way, 20 packets/s): with the fixed two copies about
// loss³ = 0.8 % of the events lose their whole first round and wait for a
// loss verdict, an ack's trip and a resend — more than 300 ms, which no
// event delivered by one of its first five packets takes. The adaptive
// copies (six at 20 % with the default ResidualLoss) make a lost round
// about loss⁷, and an event needing a sixth packet about loss⁵.
func TestAdaptiveRedundancyBoundsRounds(t *testing.T) {
	run := func(residual float64) (slow float64, copies float64) {
		c := DefaultConfig()
		c.ResidualLoss = residual
		lat, st := latencyRun{loss: 0.20, rtt: 100 * ms, interval: 50 * ms, rate: 20, duration: 120 * time.Second,
			cfg: c, ncfg: notify.DefaultConfig(), seed: 7}.run(t)
		n := 0
		for _, d := range lat {
			if d > 300*ms {
				n++
			}
		}
		return float64(n) / float64(len(lat)), float64(st.Units+st.Redundant+st.Resent) / float64(st.Units)
	}
	fixedSlow, fixedCopies := run(0)
	adSlow, adCopies := run(DefaultResidualLoss)
	t.Logf("events slower than 300 ms: fixed %.4f (%.2f copies/event), adaptive %.4f (%.2f copies/event)", fixedSlow, fixedCopies, adSlow, adCopies)
	if adSlow > fixedSlow/3 {
		t.Fatalf("adaptive redundancy leaves %.4f of the events slower than 300 ms, fixed %.4f: want at most a third", adSlow, fixedSlow)
	}
}

// TestHasRedundant: copies are due while the previous packet's units have no
// fate and copies left, so a connection with nothing else to say still sends
// them in its next slots.
func TestHasRedundant(t *testing.T) {
	c := DefaultConfig()
	c.ResidualLoss = 0
	p := newPair(t, c)
	if p.s.HasRedundant() {
		t.Fatal("copies due before anything was sent")
	}
	must(t, p.s.SendOrdered(0, []byte("x")))
	p1 := p.write(0, 100)
	if !p.s.HasRedundant() {
		t.Fatal("no copy due after the first transmission")
	}
	p.write(50*ms, 100)
	if !p.s.HasRedundant() {
		t.Fatal("no second copy due")
	}
	p.write(100*ms, 100)
	if p.s.HasRedundant() {
		t.Fatal("a copy due beyond Redundancy")
	}
	q := newPair(t, c)
	must(t, q.s.SendOrdered(0, []byte("y")))
	q1 := q.write(0, 100)
	q.fate(q1, true)
	if q.s.HasRedundant() {
		t.Fatal("a copy due after the ack")
	}
	_ = p1
}

// TestAckDeliveredStopsASpuriousResend: a unit's round is packets 1–3; 1 and
// 2 are lost, 3 arrives. Fates pop in send order, so 1's drop verdict comes
// while 3's delivered fate still waits behind 2's: on its own, the verdict
// requeues the unit — a duplicate. Told early that 3 was delivered, the
// sender acknowledges the unit and resends nothing, and it still frees the
// unit when the fates arrive.
func TestAckDeliveredStopsASpuriousResend(t *testing.T) {
	for _, early := range []bool{false, true} {
		c := DefaultConfig()
		c.ResidualLoss = 0
		p := newPair(t, c)
		must(t, p.s.SendOrdered(0, []byte("x")))
		p1, p2, p3 := p.write(0, 100), p.write(50*ms, 100), p.write(100*ms, 100)
		p.deliver(p3)
		if early {
			p.s.AckDelivered(func(seq uint64) bool { return seq == p3 })
		}
		p.fate(p1, false)
		p.write(150*ms, 100)
		st := p.s.Stats()
		if early != (st.Resent == 0) {
			t.Fatalf("early %v: resent %d", early, st.Resent)
		}
		p.fate(p2, false)
		p.fate(p3, true)
		if p.s.InFlight(0) != 0 && early {
			t.Fatalf("lane holds %d after every fate", p.s.InFlight(0))
		}
	}
}

// TestHasRedundantSeesTheCarry: a unit the copy budget left out of the
// last packet is still due a copy, also when every unit that packet
// carried is acknowledged.
func TestHasRedundantSeesTheCarry(t *testing.T) {
	c := DefaultConfig()
	c.ResidualLoss = 0
	c.RedundancyBytes = 12 // one copy a packet
	p := newPair(t, c)
	for _, x := range []string{"aaaaaaaa", "bbbbbbbb", "cccccccc"} {
		must(t, p.s.SendOrdered(1, []byte(x)))
	}
	p.write(0, 200)
	p2 := p.write(50*ms, 200) // a copy of one unit; the other two wait in carry
	if len(p.s.prev) != 1 || len(p.s.carry) != 2 {
		t.Fatalf("prev %d, carry %d entries; want 1 and 2", len(p.s.prev), len(p.s.carry))
	}
	p.s.AckDelivered(func(seq uint64) bool { return seq == p2 }) // acknowledges prev's unit
	if !p.s.HasRedundant() {
		t.Fatal("no copy due with two units in carry")
	}
}
