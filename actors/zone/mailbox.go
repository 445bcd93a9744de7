package zone

import (
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
)

// DefaultMaxQueuedInputs is Params.MaxQueuedInputs' default: about a
// second of a 30 Hz client's inputs per player.
const DefaultMaxQueuedInputs = 32

// minQueuedInputs is the least a zone's mailbox takes (a zone with few or
// no players yet: joins come before their first tick sets the bound).
const minQueuedInputs = 1024

// inputGauge counts the inputs waiting in one zone actor's mailbox (an
// *msg.Inputs counts its List) against the zone's bound. The mailbox adds
// what it accepts; the actor takes off what it handles.
type inputGauge struct {
	queued atomic.Int64
	max    atomic.Int64
}

// inputMailbox is the zone actor's priority mailbox with a count bound on
// its inputs. Every other message is the zone's own business (ticks,
// handoffs, replicas, joins) and passes as before.
//
// Policy when full: drop the newest, counted (Metrics.InputsShed,
// Metrics.MovesShed), and only inputs that carry no event. Their moves
// are not lost: the connection keeps every move the zone has not reported
// applied and sends them all again once the zone's Controls show no
// progress for a while (actors/conn resendStalled, 250 ms, well inside the
// move queue's gap timeout, which runs on the zone's ticks). Events are
// never dropped here: a connection resends its kept ordered events only on
// a rejoin, and the others not at all. Their inputs still count towards
// the bound, and the connections' own queues bound how fast they come.
//
// Without it the mailbox had no bound of its own: a zone that fell behind
// (a starved host, a stop-the-world pause) queued every input its
// connections took meanwhile, 30 a player a second, each with its moves.
type inputMailbox struct {
	actor.Mailbox
	g     *inputGauge
	m     *Metrics
	early msg.Early
}

// RegisterHandlers implements actor.Mailbox: the zone is reached by name,
// so what comes before its handlers waits for them (msg.Early).
func (b *inputMailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	b.early.Register(b.Mailbox, invoker, dispatcher)
}

// PostSystemMessage implements actor.Mailbox.
func (b *inputMailbox) PostSystemMessage(m any) {
	if b.early.Park(m, true) {
		return
	}
	b.Mailbox.PostSystemMessage(m)
}

func newInputMailbox(g *inputGauge, m *Metrics) actor.MailboxProducer {
	inner := actor.UnboundedPriorityMpsc() // see zonePriority
	return func() actor.Mailbox { return &inputMailbox{Mailbox: inner(), g: g, m: m} }
}

// PostUserMessage implements actor.Mailbox.
func (b *inputMailbox) PostUserMessage(m any) {
	switch v := actor.UnwrapEnvelopeMessage(m).(type) {
	case *msg.Input:
		if b.g.queued.Load() >= b.g.max.Load() && len(v.Events) == 0 {
			b.shed(v)
			return
		}
		b.g.queued.Add(1)
	case *msg.Inputs:
		room := b.g.max.Load() - b.g.queued.Load()
		if room >= int64(len(v.List)) { // the usual case: room for all
			b.g.queued.Add(int64(len(v.List)))
			break
		}
		kept := v.List[:0]
		for _, in := range v.List {
			if in == nil {
				continue
			}
			if room <= 0 && len(in.Events) == 0 {
				b.shed(in)
				continue
			}
			room--
			kept = append(kept, in)
		}
		clear(v.List[len(kept):])
		v.List = kept
		if len(kept) == 0 {
			v.Release()
			return
		}
		b.g.queued.Add(int64(len(kept)))
	}
	if b.early.Park(m, false) {
		return
	}
	b.Mailbox.PostUserMessage(m)
}

func (b *inputMailbox) shed(in *msg.Input) {
	b.m.InputsShed.Add(1)
	b.m.MovesShed.Add(uint64(len(in.Moves)))
	in.Release()
}
