package conn

import (
	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/event"
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
	if len(c.evKept) == maxKeptEvents {
		copy(c.evKept, c.evKept[1:])
		c.evKept = c.evKept[:maxKeptEvents-1]
	}
	c.evKept = append(c.evKept, keptEvent{lane: uint8(e.Lane), seq: e.Seq, payload: append([]byte(nil), e.Payload...)})
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
	n := 0
	for _, k := range c.evKept {
		if int(k.lane) < len(f.Last) && k.seq <= f.Last[k.lane] {
			continue
		}
		c.evKept[n] = k
		n++
	}
	clear(c.evKept[n:])
	c.evKept = c.evKept[:n]
}

// resendEvents puts the kept events into in, ahead of any it carries
// (lane order is number order).
func (c *Conn) resendEvents(in *msg.Input) {
	if len(c.evKept) == 0 || c.srv == nil {
		return
	}
	in.EventGen = c.srv.EventGen()
	for _, k := range c.evKept {
		in.AddSeq(event.Ordered, k.lane, 0, k.payload, k.seq)
	}
	c.pool.counters.EventsResent.Add(uint64(len(c.evKept)))
}
