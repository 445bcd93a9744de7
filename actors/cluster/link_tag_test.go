package cluster

import (
	"testing"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/handshake"
)

// A zone's Control, Output, Redirect and Kick sent to a connection's
// tagged PID of a link reach the link actor carrying that connection's
// tag in the message itself (no wrapper: nothing allocated on the way),
// and one sent to the link's plain PID carries none, whatever a reused
// message held before.
func TestLinkProcessTagsTheMessageItself(t *testing.T) {
	sys := quietSystem()
	t.Cleanup(sys.Shutdown)
	got := &captured{}
	capPID, ok := sys.ProcessRegistry.Add(got, "cap")
	if !ok {
		t.Fatal("cap")
	}
	lpid, ok := sys.ProcessRegistry.Add(&linkProcess{sys: sys, actor: capPID}, linkPrefix+"n2")
	if !ok {
		t.Fatal("link name")
	}
	l := &link{pid: lpid}
	tagOf := func(m any) (uint32, bool) {
		switch x := m.(type) {
		case *msg.Control:
			return x.ConnTag, true
		case *msg.Output:
			return x.ConnTag, true
		case *msg.Redirect:
			return x.ConnTag, true
		case *msg.Kick:
			return x.ConnTag, true
		}
		return 0, false
	}
	for _, tc := range []struct {
		name string
		m    func() any
	}{
		{"Control", func() any { return msg.NewControl() }},
		{"Output", func() any { return msg.NewOutput() }},
		{"Redirect", func() any { return &msg.Redirect{Player: 3} }},
		{"Kick", func() any { return &msg.Kick{Player: 3, Reason: handshake.ReasonKicked} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.m()
			sys.Root.Send(l.connPID(7), m)
			ms := got.take(nil)
			if len(ms) != 1 || ms[0] != m {
				t.Fatalf("the link actor got %v, want the %s itself", ms, tc.name)
			}
			if tag, _ := tagOf(ms[0]); tag != 7 {
				t.Fatalf("sent to connection 7's PID, the %s carries tag %d", tc.name, tag)
			}
			// The same message again (as a pooled one comes back), now to
			// the plain PID: no connection named.
			sys.Root.Send(l.connPID(0), m)
			if tag, _ := tagOf(got.take(nil)[0]); tag != 0 {
				t.Fatalf("sent to the link's plain PID, the %s carries tag %d", tc.name, tag)
			}
		})
	}
	pid, c, buf := l.connPID(9), msg.NewControl(), make([]any, 0, 4)
	if n := testing.AllocsPerRun(100, func() { sys.Root.Send(pid, c); buf = got.take(buf) }); n != 0 {
		t.Errorf("a tagged Control allocates %v objects on its way to the link actor, want 0", n)
	}
}
