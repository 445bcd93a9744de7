package session

import (
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
