package conn

import (
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// keptEvent is a numbered ordered event the connection handed to a zone
// that has not reported it applied: if the zone dies, the connection sends
// it again to whoever restores the player (docs/protocol.md §7.20).
type keptEvent struct {
	lane    uint8
	seq     uint64
	payload []byte
}

// maxKeptEvents bounds the events a connection keeps for a Rejoin: many
// seconds of chat-rate events, more than a failover takes. Beyond it the
// oldest are forgotten (their client still keeps them for a reconnect).
const maxKeptEvents = 256

func (c *Conn) keepEvent(e event.Event) {
	s := c.sideState()
	if len(s.evKept) == maxKeptEvents {
		copy(s.evKept, s.evKept[1:])
		s.evKept = s.evKept[:maxKeptEvents-1]
	}
	s.evKept = append(s.evKept, keptEvent{lane: uint8(e.Lane), seq: e.Seq, payload: append([]byte(nil), e.Payload...)})
}

// ackEvents takes a zone's event fence: the client hears of it (it stops
// keeping those events), and the connection forgets them too. A fence of
// another numbering (a zone that has not seen this connection's events
// yet, restored from an older session's record) says nothing about ours.
func (c *Conn) ackEvents(f *handoff.EventFence) {
	if c.srv == nil || f.Gen == 0 || f.Gen != c.srv.EventGen() {
		return
	}
	for l, s := range f.Last {
		if s != 0 {
			c.srv.SetEventsApplied(l, s)
		}
	}
	s := c.side
	if s == nil {
		return
	}
	n := 0
	for _, k := range s.evKept {
		if int(k.lane) < len(f.Last) && k.seq <= f.Last[k.lane] {
			continue
		}
		s.evKept[n] = k
		n++
	}
	clear(s.evKept[n:])
	s.evKept = s.evKept[:n]
	if n == 0 {
		// All applied (the usual case a tick after an event): keep no
		// room. A player sends an event now and then, and the room kept
		// from the first was 48 bytes a connection for good.
		s.evKept = nil
		c.dropSide()
	}
}

// resendEvents puts the kept events into in, ahead of any it carries
// (lane order is number order).
func (c *Conn) resendEvents(in *msg.Input) {
	kept := c.keptEvents()
	if len(kept) == 0 || c.srv == nil {
		return
	}
	in.EventGen = c.srv.EventGen()
	c.sh.inputs.Room(in)
	for _, k := range kept {
		in.AddSeq(event.Ordered, k.lane, 0, k.payload, k.seq)
	}
	c.sh.pool.counters.EventsResent.Add(uint64(len(kept)))
}

// resendToOwner sends the player's new owner, right after the handoff's
// Redirect, the events this connection handed the old owner that no fence
// reported applied, with the moves not reported applied ahead of them, in
// an Input ahead of any it sends there from now on. The old owner passes
// on what reaches it after its Commit, but the new owner may take the next
// Input from here first (the old one busy, a loaded host): its fence then
// moved past the event still on its way, and refused that event when it
// came — an echo lost in a load test, the one after it echoed
// (TestRedirectResendsTheEventsTheOldOwnerHasNotApplied). Sent again here,
// the event is ahead of every later one; the copy that comes second,
// whichever it is, the fence refuses. The moves go along so that an event
// applied from here still acts after its packet's moves (the owner drops
// the moves it has).
func (c *Conn) resendToOwner(now time.Duration) {
	if len(c.keptEvents()) == 0 || c.srv == nil || !c.joined || c.resuming || c.closed ||
		c.is(leaveSent) && !c.is(redirect) && !c.redirWaiting() {
		return
	}
	in := msg.NewInput()
	in.Player, in.Received = c.player, now
	for _, k := range c.unacked {
		if mv := c.unkeep(k); mv.Seq > c.applied {
			in.Moves = append(in.Moves, mv)
		}
	}
	if len(in.Moves) > 0 {
		c.sh.pool.counters.MovesResent.Add(uint64(len(in.Moves)))
	}
	c.resendEvents(in)
	c.sh.toZone(c.zone, in)
}

// A drain's Redirect would cut off the events the player's zone is sending
// the client: the ones the session has not had acknowledged (a
// redirecting session sends nothing more) and the ones still on their way
// from the zone. So the connection first tells the zone (the Leave a
// followed Redirect sends, ReasonRedirected, only sooner): the zone keeps
// the player for its client's new connection, holds the player's events
// for it from then on, and answers with an empty Output (msg.Output). That
// answer comes the way the zone's Outputs come, after every one the zone
// sent before it took the Leave. The connection redirects once it came and
// every event it sent arrived, or after maxRedirectHold at most (a zone
// that does not answer). It used to wait until no Output came for 50 ms
// instead: when the Leave took longer than that to reach the zone (a zone
// on another node, a loaded host), the zone's last Outputs came after the
// Redirect and were lost (40 bots in TestZonedDrainedMidRunRedirectsTheBots:
// the Leave 41 ms on its way, the echo it overtook 40 ms after the Redirect).
const maxRedirectHold = time.Second

func (c *Conn) onRedirect(m *Redirect, now time.Duration) {
	if c.srv == nil || c.is(redirect) || c.redirWaiting() {
		return
	}
	if (c.joined || c.resuming) && c.zone != nil && !c.closed && c.srv.State() == handshake.StateConnected {
		c.setRedirWait(m, now)
		if !c.resuming {
			c.holdEvents(now)
		} // else once the lookup joined the player (join)
		return
	}
	c.startRedirect(m, now)
}

// holdEvents tells the player's zone to hold its events for the client's
// next connection (the Leave a followed Redirect sends).
func (c *Conn) holdEvents(now time.Duration) {
	// A zone that restored the player meanwhile (rejoin) must answer too.
	c.set(leaveSent, true)
	c.set(zoneHolds, false)
	c.sh.toZone(c.zone, &msg.Leave{Player: c.player, Conn: c.pid, Reason: handshake.ReasonRedirected})
}

func (c *Conn) startRedirect(m *Redirect, now time.Duration) {
	c.setRedirWait(nil, now)
	if err := c.srv.Redirect(now, m.To, m.Token); err != nil {
		c.close(now, handshake.ReasonServerShutdown)
		return
	}
	c.set(redirect, true)
	c.sh.pool.counters.Redirects.Add(1)
}

// redirectDue starts a waiting Redirect when its events are settled and
// returns when to look again (maxDeadline: nothing waits).
func (c *Conn) redirectDue(now time.Duration) time.Duration {
	r := c.rare
	if !c.is(redirWaits) || r == nil || r.redirWait == nil {
		return maxDeadline
	}
	if c.srv.State() != handshake.StateConnected {
		c.setRedirWait(nil, now) // closing anyway (a timeout, the client quit)
		return maxDeadline
	}
	// The zone's answer and the client's acks arrive as messages and
	// datagrams, each followed by a pump: only the bound needs a deadline.
	settled := c.is(leaveSent) && c.is(zoneHolds) && !c.srv.EventsInFlight()
	if settled || now-r.redirAt >= maxRedirectHold {
		c.startRedirect(r.redirWait, now)
		return maxDeadline
	}
	return r.redirAt + maxRedirectHold
}
