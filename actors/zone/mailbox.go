package zone

import (
	"math/bits"
	"runtime"
	"sync"
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
	return func() actor.Mailbox { return &inputMailbox{Mailbox: newQueueMailbox(), g: g, m: m} }
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

// queueMailbox is protoactor's unbounded priority mailbox
// (actor.UnboundedPriorityMpsc: the same order, eight priority levels,
// system messages first, suspension, throughput and failures) on queues
// that keep their room: protoactor's lock-free queue allocated a node for
// every message (mpsc.Queue.Push, ≈ 270 of its ≈ 320 instructions a
// post in BenchmarkZoneInputMailbox), and its mailbox a func value for
// every run it scheduled. Its queue type is unexported, so the mailbox
// cannot be given another. Here a post takes a mutex held for an append,
// and the mailbox's run takes it for a pop; a zone's posters are its
// node's connection shards, its neighbours and its timer, so it is seldom
// contended.
type queueMailbox struct {
	mu   sync.Mutex
	sys  fifo                            // under mu
	user [actor.DefaultPriority * 2]fifo // by priority; under mu
	has  uint8                           // bit p: user[p] is not empty; under mu

	sysN, userN atomic.Int32
	status      atomic.Int32 // mailboxIdle or mailboxRunning
	suspended   atomic.Bool

	invoker    actor.MessageInvoker
	dispatcher actor.Dispatcher
	process    func() // processMessages, made once, not a func value a run
}

const (
	mailboxIdle int32 = iota
	mailboxRunning
)

func newQueueMailbox() *queueMailbox {
	m := &queueMailbox{}
	m.process = m.processMessages
	return m
}

// PostUserMessage implements actor.Mailbox, as protoactor's default
// mailbox does: a batch's messages each, then the batch itself.
func (m *queueMailbox) PostUserMessage(message any) {
	if batch, ok := message.(actor.MessageBatch); ok {
		for _, msg := range batch.GetMessages() {
			m.PostUserMessage(msg)
		}
	}
	if env, ok := message.(*actor.MessageEnvelope); ok {
		if batch, ok := env.Message.(actor.MessageBatch); ok {
			for _, msg := range batch.GetMessages() {
				m.PostUserMessage(msg)
			}
		}
	}
	p := actor.DefaultPriority
	if pm, ok := message.(actor.PriorityMessage); ok {
		p = min(max(pm.GetPriority(), 0), int8(len(m.user)-1))
	}
	m.mu.Lock()
	m.user[p].push(message)
	m.has |= 1 << p
	m.mu.Unlock()
	m.userN.Add(1)
	m.schedule()
}

// PostSystemMessage implements actor.Mailbox.
func (m *queueMailbox) PostSystemMessage(message any) {
	m.mu.Lock()
	m.sys.push(message)
	m.mu.Unlock()
	m.sysN.Add(1)
	m.schedule()
}

// RegisterHandlers implements actor.Mailbox.
func (m *queueMailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	m.invoker, m.dispatcher = invoker, dispatcher
}

// Start implements actor.Mailbox.
func (m *queueMailbox) Start() {}

// UserMessageCount implements actor.Mailbox.
func (m *queueMailbox) UserMessageCount() int { return int(m.userN.Load()) }

func (m *queueMailbox) schedule() {
	if m.status.CompareAndSwap(mailboxIdle, mailboxRunning) {
		m.dispatcher.Schedule(m.process)
	}
}

// processMessages is protoactor's: run, then again if something came
// after the run ended and nobody scheduled it.
func (m *queueMailbox) processMessages() {
	for {
		m.run()
		m.status.Store(mailboxIdle)
		sys, user := m.sysN.Load(), m.userN.Load()
		if !(sys > 0 || (!m.suspended.Load() && user > 0)) || !m.status.CompareAndSwap(mailboxIdle, mailboxRunning) {
			return
		}
	}
}

func (m *queueMailbox) run() {
	var msg any
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
		}
	}()
	i, t := 0, m.dispatcher.Throughput()
	for {
		if i > t {
			i = 0
			runtime.Gosched()
		}
		i++
		var sys bool
		if msg, sys = m.pop(); msg == nil {
			return
		}
		if sys {
			m.sysN.Add(-1)
			switch msg.(type) {
			case *actor.SuspendMailbox:
				m.suspended.Store(true)
			case *actor.ResumeMailbox:
				m.suspended.Store(false)
			default:
				m.invoker.InvokeSystemMessage(msg)
			}
			continue
		}
		m.userN.Add(-1)
		m.invoker.InvokeUserMessage(msg)
	}
}

// pop takes the next message: a system message, else (unless suspended)
// the oldest user message of the highest priority; nil if none.
func (m *queueMailbox) pop() (msg any, sys bool) {
	m.mu.Lock()
	if msg = m.sys.pop(); msg != nil {
		m.mu.Unlock()
		return msg, true
	}
	if m.has != 0 && !m.suspended.Load() {
		p := bits.Len8(m.has) - 1
		q := &m.user[p]
		msg = q.pop()
		if q.empty() {
			m.has &^= 1 << p
		}
	}
	m.mu.Unlock()
	return msg, false
}

// fifo is a queue in a slice that keeps its room: taken from the front,
// the taken part moved out once it is half the slice.
type fifo struct {
	buf  []any
	head int
}

// fifoKept is the most room a fifo keeps once empty: what a zone that
// fell behind queued beyond it goes.
const fifoKept = 4096

func (q *fifo) push(v any) { q.buf = append(q.buf, v) }

func (q *fifo) empty() bool { return q.head == len(q.buf) }

func (q *fifo) pop() any {
	if q.head == len(q.buf) {
		return nil
	}
	v := q.buf[q.head]
	q.buf[q.head] = nil
	q.head++
	switch {
	case q.head == len(q.buf):
		q.buf, q.head = q.buf[:0], 0
		if cap(q.buf) > fifoKept {
			q.buf = nil
		}
	case q.head >= 64 && 2*q.head >= len(q.buf):
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf, q.head = q.buf[:n], 0
	}
	return v
}
