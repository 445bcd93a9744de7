package conn

import (
	"reflect"
	"testing"

	"github.com/ghostwire/ghostwire/actors/ghostmgr"
)

// TestPrefetchNeverFailsAConnection: the round's prefetches run over
// every list a round can hold — connections not started (no session, no
// ghost manager), one whose state says a view waits without a manager,
// one with a manager and no session,
// started ones, events of no connection — without a panic (the round's
// recover would blame the connection handled before) and without
// changing what a started connection's session or ghost manager counts.
func TestPrefetchNeverFailsAConnection(t *testing.T) {
	x := record(t, 4)
	s, cs := benchShard(t, x, 3)
	bare := &Conn{}
	flagged := &Conn{gst: ghostmgr.State(0xff)}
	// a view waiting and a manager, no session yet: the last stage's
	// seal key must not be asked of a nil Server
	half := &Conn{gst: ghostmgr.State(0xff), gm: cs[0].gm}
	for _, c := range cs {
		c.gst = ghostmgr.State(0xff) // a view waiting: every stage runs
	}
	type counts struct {
		srv any
		gm  any
	}
	before := make([]counts, len(cs))
	for i, c := range cs {
		before[i] = counts{c.srv.Stats(), c.gm.Stats()}
	}
	s.dirty = []*Conn{bare, cs[0], flagged, cs[1], half, cs[2], flagged, half, bare}
	s.work = []envelope{{}, {c: bare}, {c: cs[0]}, {c: flagged}, {}, {c: cs[1]}, {c: cs[2]}}
	for i := range s.dirty {
		s.prefetchPumps(i)
	}
	for i := range s.work {
		s.prefetchEvents(i)
	}
	for i, c := range cs {
		if got := (counts{c.srv.Stats(), c.gm.Stats()}); !reflect.DeepEqual(got, before[i]) {
			t.Fatalf("connection %d: the prefetches changed its counts: %+v, was %+v", i, got, before[i])
		}
	}
}
