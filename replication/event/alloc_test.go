package event

import "testing"

// TestSteadyStateAllocs: once every high-water mark was reached, a packet's
// whole event path (queue, Write, Read with reordering and reassembly,
// OnFate with drops) allocates nothing.
func TestSteadyStateAllocs(t *testing.T) {
	l := newSectionLoop(t)
	for range 2000 {
		l.packet(t)
	}
	before := l.count
	if a := testing.AllocsPerRun(500, func() { l.packet(t) }); a != 0 {
		t.Fatalf("%.2f allocations per packet, want 0", a)
	}
	if l.count == before {
		t.Fatal("nothing delivered: the loop is not exercising the path")
	}
	if st := l.s.Stats(); st.Resent == 0 || st.Fragments == 0 || l.r.Stats().Buffered == 0 {
		t.Fatalf("sender %+v, receiver %+v: resends, fragments or buffering not exercised", st, l.r.Stats())
	}
}
