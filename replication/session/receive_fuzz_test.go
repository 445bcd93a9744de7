package session_test

import (
	"bytes"
	"testing"

	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/session"
)

// fuzzWarm is how many round trips the fixture runs before the fuzzed
// datagram arrives; the fixture is deterministic, so a seed holding the
// genuine next packet authenticates and reaches the section decoders.
const fuzzWarm = 12

// checkCounters asserts every datagram was counted once: accepted or
// rejected.
func checkCounters(t *testing.T, who string, c session.Counters) {
	t.Helper()
	if c.PacketsIn != c.Accepted+c.Rejected() {
		t.Fatalf("%s: %d datagrams in, %d accepted + %d rejected", who, c.PacketsIn, c.Accepted, c.Rejected())
	}
}

func FuzzServerReceive(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, pkt []byte) {
		p := newPairN(t, fuzzWarm)
		before := p.srv.Stats().Counters
		moved, err := p.srv.Receive(p.now, pkt, clientAddr)
		st := p.srv.Stats()
		checkCounters(t, "server", st.Counters)
		if err != nil && st.Accepted != before.Accepted && !bytes.Contains([]byte(err.Error()), []byte("protocol")) {
			t.Fatalf("rejected (%v) but counted accepted", err)
		}
		if moved {
			t.Fatal("moved to the address it already had")
		}
		// The connection still works — unless the input was the client's
		// genuine next packet (a seed), whose sequence the client reuses now.
		if p.srv.State() == handshake.StateConnected && st.Accepted == before.Accepted {
			p.step(t)
			checkCounters(t, "server", p.srv.Stats().Counters)
		}
	})
}

func FuzzClientReceive(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, pkt []byte) {
		p := newPairN(t, fuzzWarm)
		before := p.cli.Stats().Accepted
		p.cli.Receive(p.now, pkt)
		checkCounters(t, "client", p.cli.Stats().Counters)
		if p.cli.State() == handshake.StateConnected && p.cli.Stats().Accepted == before {
			p.step(t)
			checkCounters(t, "client", p.cli.Stats().Counters)
		}
	})
}

// TestGenerateReceiveSeeds writes, with -gen-seeds, the genuine next
// datagrams of the fixture (short form, long form, Disconnect) and a few
// corruptions as seeds of the Receive fuzzers; without it, it checks that the
// genuine ones are accepted, so the committed seeds keep reaching the
// decoders.
func TestGenerateReceiveSeeds(t *testing.T) {
	next := func() (*pair, []byte, []byte) {
		p := newPairN(t, fuzzWarm)
		p.now += p.dt
		p.cli.SendEvent(3, []byte("seed event"))
		c, err := p.cli.Poll(p.now, nil)
		if err != nil || len(c) == 0 {
			t.Fatalf("client: %v", err)
		}
		p.srv.SendEvent(2, []byte("seed event"))
		p.srv.SetControl(p.srv.LastApplied(), p.state)
		p.srv.ForceControl()
		s, err := p.srv.Poll(p.now, nil, nil)
		if err != nil || len(s) == 0 {
			t.Fatalf("server: %v", err)
		}
		return p, c, s
	}
	p, c, s := next()
	if _, err := p.srv.Receive(p.now, c, clientAddr); err != nil {
		t.Fatalf("genuine client packet refused: %v", err)
	}
	if err := p.cli.Receive(p.now, s); err != nil {
		t.Fatalf("genuine server packet refused: %v", err)
	}
	long := append(handshake.AppendRouted(nil, p.cli.ID()), c...)
	p2 := newPairN(t, fuzzWarm)
	p2.cli.Close(p2.now)
	disc, _ := p2.cli.Poll(p2.now, nil)
	p3 := newPairN(t, fuzzWarm)
	p3.srv.Close(p3.now, handshake.ReasonKicked)
	sdisc, _ := p3.srv.Poll(p3.now, nil, nil)
	p4 := newPairN(t, fuzzWarm)
	if err := p4.srv.Redirect(p4.now, targetAddr, redirectToken(t, 9)); err != nil {
		t.Fatal(err)
	}
	sredir, _ := p4.srv.Poll(p4.now, nil, nil)
	if err := p4.cli.Receive(p4.now, sredir); err != nil {
		t.Fatalf("genuine redirect refused: %v", err)
	}
	if _, ok := p4.cli.Redirect(); !ok {
		t.Fatal("genuine redirect not taken")
	}
	if !session.GenSeeds() {
		return
	}
	flip := func(b []byte, i int) []byte { b = bytes.Clone(b); b[i%len(b)] ^= 0x10; return b }
	for _, seed := range [][]byte{c, long, disc, flip(c, 5), c[:len(c)-1], {0x1F, 0, 0, 0, 0, 0, 0, 0, 0}} {
		session.WriteSeed(t, "FuzzServerReceive", seed)
	}
	for _, seed := range [][]byte{s, sdisc, flip(s, 7), s[:3], {0x1F, 0, 0, 0, 0, 0, 0, 0, 0}, append([]byte{0x13}, make([]byte, 24)...),
		sredir, flip(sredir, 40)} {
		session.WriteSeed(t, "FuzzClientReceive", seed)
	}
}
