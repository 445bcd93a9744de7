package session

import (
	"math/rand/v2"
	"testing"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/event"
)

// TestServerNumberingLanesOnUse: the server keeps per-lane numbering only
// for the lanes it used, whatever order they came in, and its report
// still lists them in lane order (the wire's rule, which the client
// checks): zone reports for lanes 5, 2 and 7 reach the client as such.
func TestServerNumberingLanesOnUse(t *testing.T) {
	var n serverNumbering
	n.init(event.DefaultLanes)
	if n.lanes != nil {
		t.Fatal("per-lane state made before any lane was used")
	}
	if got := n.number(3); got != 1 {
		t.Fatalf("first event on lane 3 numbered %d", got)
	}
	n.setApplied(5, 40)
	n.setApplied(2, 7)
	n.setApplied(7, 0) // nothing applied: no state
	n.setApplied(7, 9)
	n.setApplied(event.DefaultLanes, 1) // no such lane
	if len(n.lanes) != 4 {
		t.Fatalf("%d lanes kept, want 4 (2, 3, 5, 7)", len(n.lanes))
	}
	buf := make([]byte, 64)
	w := bitstream.NewWriter(buf)
	if err := n.writeReport(w, 10); err != nil {
		t.Fatal(err)
	}
	var c clientNumbering
	c.init(event.DefaultLanes)
	if err := c.readReport(bitstream.NewReader(w.Bytes())); err != nil {
		t.Fatalf("client refused the report: %v", err)
	}
	if c.applied[2] != 7 || c.applied[5] != 40 || c.applied[7] != 9 || c.applied[3] != 0 {
		t.Fatalf("client read %v", c.applied)
	}
	n.onFate(10, true)
	if n.reportDue() {
		t.Fatal("a delivered report still due")
	}
}

// TestServerNumberingDueFlags: reportDue and reportNew, kept as flags where
// the lanes change, say what the lanes say (a report due: a lane the zone
// applied past what the client acknowledged; new: and past what the report
// in flight says) through random zone reports, reports written (some
// without room) and their fates, delivered, lost or not the report's.
func TestServerNumberingDueFlags(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	var n serverNumbering
	n.init(event.DefaultLanes)
	applied := make([]uint64, event.DefaultLanes)
	buf := make([]byte, 64)
	var pkt uint64
	checks := [2]int{}
	for i := range 20000 {
		switch op := rng.IntN(4); {
		case op == 0:
			l := rng.IntN(event.DefaultLanes + 1) // one past the last: ignored
			if l < event.DefaultLanes {
				applied[l] += uint64(rng.IntN(3))
				n.setApplied(l, applied[l])
			} else {
				n.setApplied(l, 1)
			}
		case op == 1:
			pkt++
			room := 64
			if rng.IntN(4) == 0 {
				room = 1 // no room: nothing reported
			}
			w := bitstream.NewWriter(buf[:room])
			_ = n.writeReport(w, pkt)
		default:
			seq := pkt - uint64(rng.IntN(2)) // the report's packet, or an older one
			n.onFate(seq, rng.IntN(3) != 0)
		}
		var due, fresh bool
		for _, l := range n.lanes {
			due = due || l.applied > l.acked
			fresh = fresh || l.applied > l.acked && (!n.is(numRptAny) || l.applied > l.rpt)
		}
		if n.reportDue() != due || n.reportNew() != fresh {
			t.Fatalf("step %d: reportDue %v reportNew %v, the lanes say %v %v", i, n.reportDue(), n.reportNew(), due, fresh)
		}
		if due {
			checks[0]++
		}
		if fresh {
			checks[1]++
		}
	}
	if checks[0] < 1000 || checks[1] < 1000 {
		t.Fatalf("due in %d steps, new in %d: the test checked little", checks[0], checks[1])
	}
}
