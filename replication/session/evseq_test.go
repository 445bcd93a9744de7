package session_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/netsim"
	"github.com/ghostwire/ghostwire/replication/session"
)

// fencedZone plays the player's zone for ordered events (docs/protocol.md
// §7.20): per lane the newest number applied, events at or below it
// dropped; a new generation starts the lanes again.
type fencedZone struct {
	gen     uint64
	last    [8]uint64
	applied [8][]string
	dropped int
}

func (z *fencedZone) take(gen uint64, e event.Event) {
	if e.Class != event.Ordered {
		return
	}
	if gen != z.gen {
		z.gen, z.last = gen, [8]uint64{}
	}
	if e.Seq <= z.last[e.Lane] {
		z.dropped++
		return
	}
	z.last[e.Lane] = e.Seq
	z.applied[e.Lane] = append(z.applied[e.Lane], string(e.Payload))
}

// feed hands the zone what w's server delivered since the last call and
// reports back what the zone applied (the connection's part).
func (z *fencedZone) feed(w *world, seen *int) {
	if w.srv == nil {
		return
	}
	for _, e := range w.srvH.events[*seen:] {
		z.take(w.srv.EventGen(), e)
	}
	*seen = len(w.srvH.events)
	if w.srv.EventGen() == z.gen {
		for l, s := range z.last {
			w.srv.SetEventsApplied(l, s)
		}
	}
}

// A Redirect in the middle of two lanes' event streams, at 20 % loss each
// way: the client continues its numbering on the new connection and sends
// again what the zone had not reported applied; the zone drops what it
// applied already. Every event is applied exactly once, in order.
// Without the numbering the events in flight at the switch are lost (the
// old connection's unacknowledged ones) or applied twice (resent ones).
func TestRedirectMidStreamEventsExactlyOnce(t *testing.T) {
	lossy := netsim.Config{Loss: 0.2, Latency: 40 * time.Millisecond, Jitter: 10 * time.Millisecond}
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			a := newWorld(t, withLink(lossy, lossy), withSeed(seed))
			a.connect(5 * time.Second)
			var z fencedZone
			var seenA, seenB int
			sent := [2]int{}
			send := func(c *session.Client) {
				for l := range 2 {
					if err := c.SendEvent(l, fmt.Appendf(nil, "%d/%04d", l, sent[l])); err != nil {
						t.Fatalf("send: %v", err)
					}
					sent[l]++
				}
			}
			var b *world
			for i := 0; i < 400; i++ {
				cur := a
				if b != nil {
					cur = b
				}
				if b == nil || b.cli.State() <= handshake.StateConnected {
					send(cur.cli)
				}
				if i == 150 {
					if err := a.srv.Redirect(a.now, targetAddr, redirectToken(t, seed)); err != nil {
						t.Fatal(err)
					}
				}
				a.step(10 * time.Millisecond)
				z.feed(a, &seenA)
				if _, ok := a.cli.Redirect(); ok && b == nil {
					b = newWorld(t, withLink(lossy, lossy), withSeed(seed+100))
					b.now = a.now
					nc, err := session.NewClient(b.token, serverAddr, session.DefaultClientConfig(), &b.cliH, t0.Add(b.now), b.now)
					if err != nil {
						t.Fatal(err)
					}
					nc.ContinueMoves(a.cli)
					nc.ContinueEvents(a.cli)
					b.cli = nc
				}
				if b != nil {
					b.step(10 * time.Millisecond)
					z.feed(b, &seenB)
				}
			}
			if b == nil {
				t.Fatal("the client never took the Redirect")
			}
			for i := 0; i < 300 && (len(z.applied[0]) < sent[0] || len(z.applied[1]) < sent[1] || b.cli.EventsApplied(0) < uint64(sent[0])); i++ {
				a.step(10 * time.Millisecond)
				b.step(10 * time.Millisecond)
				z.feed(a, &seenA)
				z.feed(b, &seenB)
			}
			for l := range 2 {
				if len(z.applied[l]) != sent[l] {
					t.Errorf("lane %d: %d of %d events applied", l, len(z.applied[l]), sent[l])
				}
				for i, p := range z.applied[l] {
					if want := fmt.Sprintf("%d/%04d", l, i); p != want {
						t.Fatalf("lane %d: event %d applied is %q, want %q (lost, reordered or twice)", l, i, p, want)
					}
				}
			}
			t.Logf("resent %d, dropped at the fence %d", b.cli.Stats().EventsResent, z.dropped)
			if b.cli.EventsApplied(0) != uint64(sent[0]) {
				t.Errorf("client: lane 0 reported applied up to %d, want %d", b.cli.EventsApplied(0), sent[0])
			}
		})
	}
}
