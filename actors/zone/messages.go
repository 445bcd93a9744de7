package zone

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// HandoffEnvelope carries a handoff message between zone actors in
// process. Join travels with the Offer and the Commit of a player, so the
// new owner can reach its connection; Began is when the source started the
// handoff (node clock), for the latency metric.
type HandoffEnvelope struct {
	Msg   handoff.Msg
	Join  *msg.Join
	Began time.Duration
	// Force (on a Commit) asks the new owner to send the player's control
	// state in full: the source teleported it into the new zone.
	Force bool
	// Remote: it came from a zone in another process (the cluster bridge).
	Remote bool
}

// ReplicaEnvelope carries one border replica batch between zone actors.
// A zone's own (replicaEnvelopes.get) go back to it once their receiver
// is done with them (MarkHandled): a zone here that copied the batch, or
// the cluster's proxy for a zone in another process once it encoded it.
type ReplicaEnvelope struct {
	Batch sim.ReplicaBatch

	// done: the receiver has handled it and holds nothing of it (set
	// last, MarkHandled): its sender may fill it again.
	done atomic.Bool
}

// MarkHandled tells the envelope's sender that its receiver is done with
// it and holds nothing of it, the batch released (a zone copied it, a
// proxy encoded it): the sender fills it again. The receiver must not
// touch it after. A receiver that does not call it (a dead letter) only
// costs its sender a new envelope.
func (e *ReplicaEnvelope) MarkHandled() { e.done.Store(true) }

// Handled reports whether the receiver called MarkHandled (tests).
func (e *ReplicaEnvelope) Handled() bool { return e.done.Load() }

// replicaEnvelopes are the envelopes a zone sent its neighbours, to reuse
// once their receivers are done: a zone sent a new one a neighbour a tick.
// Bounded (maxReplicaEnvelopes): one never done (a receiver that does not
// mark it, a dead letter) is dropped for a new one in turn. One zone's.
type replicaEnvelopes struct {
	sent []*ReplicaEnvelope
	next int // the entry a full list replaces next
}

// maxReplicaEnvelopes bounds a zone's envelopes in flight and kept: a few
// neighbours, each usually done before the next tick.
const maxReplicaEnvelopes = 16

// get returns an envelope no receiver holds: one of those sent before
// whose receiver is done, or a new one (kept to come back).
func (r *replicaEnvelopes) get() *ReplicaEnvelope {
	for _, e := range r.sent {
		if e.done.Load() {
			e.done.Store(false)
			return e
		}
	}
	e := new(ReplicaEnvelope)
	if len(r.sent) < maxReplicaEnvelopes {
		r.sent = append(r.sent, e)
	} else {
		r.sent[r.next] = e // the one it held may still be in flight: never reused
		r.next = (r.next + 1) % maxReplicaEnvelopes
	}
	return e
}

// Teleport moves a player or NPC at once (an admin command): the zone that
// owns it applies it (clamped to the world, with a forced full control
// state for a player), one that handed it away passes it on, one in the
// middle of handing it off applies it once that settles.
type Teleport struct {
	Entity uint64
	Pos    [3]float32
}

// Pause stops (Paused) or restarts the zone's ticks on behalf of the
// owners in By; messages are still handled. A zone ticks only while no
// owner holds it paused, so one owner's restart leaves a pause of another
// in place: a lease's let-go does not restart the ticks of a zone a test's
// census or a drain froze. Tests use it to take a consistent look at a
// world.
type Pause struct {
	Paused bool
	// By is who pauses or restarts; zero means PauseManual (the Pause
	// sent before pauses had owners).
	By PauseReason
}

// PauseReason is a set of the owners that hold a zone paused.
type PauseReason uint8

const (
	// PauseManual: tests and admin views (World.Pause), a Pause with By
	// zero.
	PauseManual PauseReason = 1 << iota
	// PauseLease: the node's hold of a zone whose lease's renewal is
	// overdue (actors/node membership.hold).
	PauseLease
	// PauseHandover: a drain's freeze of a zone it hands to another node.
	PauseHandover
	// pauseFence: the zone's own hold while Params.Acting says its node
	// may no longer run it (paused.go); it lets go by itself.
	pauseFence
)

func (p *Pause) owners() PauseReason {
	if p.By == 0 {
		return PauseManual
	}
	return p.By
}

// Inspect runs Fn on the zone's simulation inside the actor (read-only use)
// and answers struct{}{} when done: for tests and admin views. Sent with
// RequestInspect it keeps its mailbox priority and runs before the inputs
// the zone has queued (a crowded zone on a loaded host: seconds of them).
// Sent with RequestFuture (or Context.Request) it travels in an
// *actor.MessageEnvelope, which the priority mailbox files at the default
// priority: it runs after everything sent before it (World.Inspect, the
// tests' barrier).
type Inspect struct {
	Fn func(z *sim.Zone)
	// Reply, when set, gets the answer (RequestInspect sets it to its
	// future); otherwise the sender of a request does.
	Reply *actor.PID
}

// Answer sends the Inspect's answer from inside the actor that took it: to
// Reply, or to the request's sender; a plain Send without Reply gets none.
func (m *Inspect) Answer(ctx actor.Context) {
	switch {
	case m.Reply != nil:
		ctx.Send(m.Reply, struct{}{})
	case ctx.Sender() != nil:
		ctx.Respond(struct{}{})
	}
}

// RequestInspect sends zone pid an Inspect running fn and returns the
// future of its answer. The Inspect travels unwrapped, so it keeps its
// priority (zonePriority) and runs before the zone's queued inputs.
func RequestInspect(root *actor.RootContext, pid *actor.PID, fn func(z *sim.Zone), timeout time.Duration) *actor.Future {
	f := actor.NewFuture(root.ActorSystem(), timeout)
	root.Send(pid, &Inspect{Fn: fn, Reply: f.PID()})
	return f
}

// tickMsg is the timer's nudge: run the tick due now. It goes at
// zonePriority, ahead of the inputs queued.
type tickMsg struct{}

var theTick = &tickMsg{}

// lateTickMsg is the timer's nudge for a tick that was already due when
// the timer was armed (the tick before it cost more than a period, or
// came late itself). It goes at the default priority, behind the inputs
// queued before it: at zonePriority a zone whose ticks cost more than
// their period ran them back to back, and its inputs got only the gaps.
// Handoffs, replicas and on-time ticks keep their priority.
type lateTickMsg struct{}

var theLateTick = &lateTickMsg{}

// zonePriority is the mailbox priority of the messages that keep zones in
// step with each other and with the clock: handoffs, border replicas and
// the tick that comes on time (a late one: lateTickMsg). A zone's mailbox also carries every input its players send
// (tens of thousands a second in a crowded zone); at the default priority
// an Accept or Commit queued behind them held a crossing player frozen for
// extra ticks. Among themselves these stay in arrival order, so a zone
// still sees a neighbour's handoffs and replicas in the order it sent them.
const zonePriority = actor.DefaultPriority + 2

// GetPriority implements actor.PriorityMessage.
func (*HandoffEnvelope) GetPriority() int8 { return zonePriority }

// GetPriority implements actor.PriorityMessage.
func (*ReplicaEnvelope) GetPriority() int8 { return zonePriority }

// GetPriority implements actor.PriorityMessage.
func (*tickMsg) GetPriority() int8 { return zonePriority }

// GetPriority implements actor.PriorityMessage: a look inside a busy zone
// must not wait behind its inputs. It applies only to an Inspect sent
// unwrapped (RequestInspect, Send), not to one in a request's envelope.
func (*Inspect) GetPriority() int8 { return zonePriority }

// GetPriority implements actor.PriorityMessage.
func (*Pause) GetPriority() int8 { return zonePriority }
