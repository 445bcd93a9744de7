package zone

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// syncDispatcher runs a mailbox's run where it is scheduled, on the
// poster's goroutine (nested schedules are queued and run after).
type syncDispatcher struct {
	through int
	pending []func()
	running bool
}

func (d *syncDispatcher) Schedule(fn func()) {
	d.pending = append(d.pending, fn)
	if d.running {
		return
	}
	d.running = true
	for i := 0; i < len(d.pending); i++ {
		d.pending[i]()
		d.pending[i] = nil
	}
	d.pending, d.running = d.pending[:0], false
}
func (d *syncDispatcher) Throughput() int { return d.through }

// qInvoker records what a mailbox hands it.
type qInvoker struct {
	user, sys []any
	failed    []any
	onUser    func(any)
}

func (r *qInvoker) InvokeSystemMessage(m any) { r.sys = append(r.sys, m) }
func (r *qInvoker) InvokeUserMessage(m any) {
	r.user = append(r.user, m)
	if r.onUser != nil {
		r.onUser(m)
	}
}
func (r *qInvoker) EscalateFailure(reason, m any) { r.failed = append(r.failed, reason) }

type prioMsg struct {
	p  int8
	id int
}

func (m *prioMsg) GetPriority() int8 { return m.p }

type plainMsg struct{ id int }

type sysMsg struct{ id int }

// TestQueueMailboxOrder holds queueMailbox to protoactor's priority
// mailbox's order: system messages first, then user messages by priority
// (clamped to 0–7), each level in the order posted; nothing handled while
// suspended but system messages, everything after the resume; a panic
// escalated with the mailbox still running what comes next.
func TestQueueMailboxOrder(t *testing.T) {
	for _, name := range []string{"protoactor", "queue"} {
		t.Run(name, func(t *testing.T) {
			var mb actor.Mailbox
			if name == "queue" {
				mb = newQueueMailbox()
			} else {
				mb = actor.UnboundedPriorityMpsc()()
			}
			inv := &qInvoker{}
			d := &syncDispatcher{through: 300}
			mb.RegisterHandlers(inv, d)
			// Posted from inside a run, so they queue up before any is handled.
			posts := []any{&plainMsg{1}, &prioMsg{zonePriority, 2}, &prioMsg{-3, 3}, &plainMsg{4},
				&prioMsg{100, 5}, &prioMsg{zonePriority, 6}, &prioMsg{0, 7}}
			first := true
			inv.onUser = func(any) {
				if first {
					first = false
					for _, m := range posts {
						mb.PostUserMessage(m)
					}
					mb.PostSystemMessage(&sysMsg{8})
				}
			}
			mb.PostUserMessage(&plainMsg{0})
			got := ids(inv.user)
			want := []int{0, 5, 2, 6, 1, 4, 3, 7}
			if !equalInts(got, want) || len(inv.sys) != 1 {
				t.Fatalf("handled %v (system %d), want %v (system 1)", got, len(inv.sys), want)
			}
			if n := mb.UserMessageCount(); n != 0 {
				t.Fatalf("%d user messages counted after all were handled", n)
			}
			inv.user = nil
			mb.PostSystemMessage(&actor.SuspendMailbox{})
			mb.PostUserMessage(&plainMsg{9})
			mb.PostSystemMessage(&sysMsg{10})
			if len(inv.user) != 0 || len(inv.sys) != 2 || mb.UserMessageCount() != 1 {
				t.Fatalf("suspended: handled %v, system %d, counted %d; want none, 2, 1", ids(inv.user), len(inv.sys), mb.UserMessageCount())
			}
			mb.PostSystemMessage(&actor.ResumeMailbox{})
			if got := ids(inv.user); !equalInts(got, []int{9}) {
				t.Fatalf("resumed: handled %v, want [9]", got)
			}
			inv.user = nil
			inv.onUser = func(m any) {
				if p, ok := m.(*plainMsg); ok && p.id == 11 {
					panic("boom")
				}
			}
			mb.PostUserMessage(&plainMsg{11})
			mb.PostUserMessage(&plainMsg{12})
			if len(inv.failed) != 1 || !equalInts(ids(inv.user), []int{11, 12}) {
				t.Fatalf("after a panic: failures %v, handled %v; want one, [11 12]", inv.failed, ids(inv.user))
			}
		})
	}
}

func ids(ms []any) []int {
	var out []int
	for _, m := range ms {
		switch m := m.(type) {
		case *plainMsg:
			out = append(out, m.id)
		case *prioMsg:
			out = append(out, m.id)
		}
	}
	return out
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestFifoKeepsOrderAcrossCompaction: a queue that never empties (a zone
// taking its mailbox as fast as it fills) keeps its order through the
// compactions of its slice, and holds at most twice what is queued plus
// the compaction's threshold.
func TestFifoKeepsOrderAcrossCompaction(t *testing.T) {
	var q fifo
	next, want := 0, 0
	for round := range 200 {
		for range 7 {
			q.push(next)
			next++
		}
		for range 5 + round%3 {
			v := q.pop()
			if v == nil {
				break
			}
			if v.(int) != want {
				t.Fatalf("popped %d, want %d", v, want)
			}
			want++
		}
		if queued := len(q.buf) - q.head; len(q.buf) > 2*queued+64 {
			t.Fatalf("round %d: slice of %d holds %d queued", round, len(q.buf), queued)
		}
	}
	for v := q.pop(); v != nil; v = q.pop() {
		if v.(int) != want {
			t.Fatalf("popped %d, want %d", v, want)
		}
		want++
	}
	if want != next {
		t.Fatalf("popped %d, pushed %d", want, next)
	}
}

// BenchmarkZoneMailboxPost (informative): a message posted to a zone's
// kind of mailbox and handled (a dispatcher that runs the mailbox where it
// is scheduled, an invoker that does nothing): protoactor's unbounded
// priority mailbox against queueMailbox. Run under callgrind to compare.
func BenchmarkZoneMailboxPost(b *testing.B) {
	for _, name := range []string{"protoactor", "queue"} {
		b.Run(name, func(b *testing.B) {
			var mb actor.Mailbox
			if name == "queue" {
				mb = newQueueMailbox()
			} else {
				mb = actor.UnboundedPriorityMpsc()()
			}
			inv := &nopInvoker{}
			mb.RegisterHandlers(inv, &syncDispatcher{through: 300})
			m := &plainMsg{1}
			for range 100 { // the type assertions' caches (runtime.typeAssert fills one in ≈ 1,000)
				for range 64 {
					mb.PostUserMessage(m)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				mb.PostUserMessage(m)
			}
			if inv.n == 0 {
				b.Fatal("nothing handled")
			}
		})
	}
}

type nopInvoker struct{ n int }

func (r *nopInvoker) InvokeSystemMessage(any)  {}
func (r *nopInvoker) InvokeUserMessage(any)    { r.n++ }
func (r *nopInvoker) EscalateFailure(any, any) {}
