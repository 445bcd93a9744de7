package msg

import (
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// Early holds what is posted to a mailbox before its handlers are
// registered. protoactor's spawner puts a new actor in the process
// registry before it registers the mailbox's handlers, and ghostwire's
// zones and zone proxies are reached by name (peers, the node, the cluster
// bridge), so a sender can find one that is still being spawned: the inner
// mailbox's post would then schedule on a dispatcher not yet set (a data
// race, or a nil dispatcher's panic in the sender). Such messages wait
// here, in order, and Register posts them; after it, a post costs one
// atomic load. The zero value is ready.
type Early struct {
	ready atomic.Bool
	mu    sync.Mutex
	msgs  []earlyMsg
}

type earlyMsg struct {
	m   any
	sys bool
}

// Park keeps m if the handlers are not registered yet (it reports whether
// it did). Checked again under the lock, so a message never lands in the
// queue after Register has taken it.
func (e *Early) Park(m any, sys bool) bool {
	if e.ready.Load() {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ready.Load() {
		return false
	}
	e.msgs = append(e.msgs, earlyMsg{m, sys})
	return true
}

// Register registers inner's handlers, then posts to it what came early,
// in order. Posts that come meanwhile wait for the lock and then go
// straight through, after them.
func (e *Early) Register(inner actor.Mailbox, invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	inner.RegisterHandlers(invoker, dispatcher)
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, m := range e.msgs {
		if m.sys {
			inner.PostSystemMessage(m.m)
		} else {
			inner.PostUserMessage(m.m)
		}
	}
	e.msgs = nil
	e.ready.Store(true)
}

// EarlyPosts wraps the mailboxes inner makes so that posts before their
// handlers are registered wait for them (see Early): the mailbox of an
// actor spawned under a name others may already send to.
func EarlyPosts(inner actor.MailboxProducer) actor.MailboxProducer {
	return func() actor.Mailbox { return &earlyMailbox{Mailbox: inner()} }
}

type earlyMailbox struct {
	actor.Mailbox
	early Early
}

func (b *earlyMailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	b.early.Register(b.Mailbox, invoker, dispatcher)
}

func (b *earlyMailbox) PostUserMessage(m any) {
	if !b.early.Park(m, false) {
		b.Mailbox.PostUserMessage(m)
	}
}

func (b *earlyMailbox) PostSystemMessage(m any) {
	if !b.early.Park(m, true) {
		b.Mailbox.PostSystemMessage(m)
	}
}
