package msg

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/ghostwire/ghostwire/replication/event"
)

func TestEventListKeepsPayloadsAcrossArenaGrowth(t *testing.T) {
	var l EventList
	var want [][]byte
	src := make([]byte, 64)
	for i := range 200 {
		p := bytes.Repeat([]byte{byte(i)}, i%37+1)
		copy(src, p)
		l.Add(event.Ordered, uint8(i%8), uint16(i), src[:len(p)])
		clear(src) // the caller's buffer is reused at once
		want = append(want, p)
	}
	if l.Len() != len(want) {
		t.Fatalf("Len = %d, want %d", l.Len(), len(want))
	}
	for i, e := range l.Events {
		if !bytes.Equal(e.Payload, want[i]) {
			t.Fatalf("event %d payload = %v, want %v", i, e.Payload, want[i])
		}
		if e.Lane != uint8(i%8) || e.Key != uint16(i) || e.Class != event.Ordered {
			t.Fatalf("event %d header = %+v", i, e)
		}
	}
	// Appending to one payload must not clobber the next (capacity clipped).
	_ = append(l.Events[0].Payload, 0xFF)
	if !bytes.Equal(l.Events[1].Payload, want[1]) {
		t.Fatal("append to a payload overwrote its neighbour")
	}
	l.Reset()
	if l.Len() != 0 || l.Bytes() != 0 {
		t.Fatalf("after Reset: Len %d Bytes %d", l.Len(), l.Bytes())
	}
}

func TestEventListSteadyStateAllocatesNothing(t *testing.T) {
	var l EventList
	p := []byte("hello, zone")
	fill := func() {
		l.Reset()
		for range 16 {
			l.Add(event.Unordered, 0, 0, p)
		}
	}
	fill()
	if n := testing.AllocsPerRun(100, fill); n != 0 {
		t.Fatalf("allocs per refill = %v, want 0", n)
	}
}

func TestPooledMessagesComeBackEmpty(t *testing.T) {
	for i := range 50 {
		in := NewInput()
		if !in.Empty() || in.Player != 0 {
			t.Fatalf("round %d: pooled Input not empty: %+v", i, in)
		}
		in.Player = 7
		in.Add(event.Unguaranteed, 0, 0, []byte(fmt.Sprint(i)))
		in.Release()

		o := NewOutput()
		if o.Len() != 0 || o.Player != 0 {
			t.Fatalf("round %d: pooled Output not empty", i)
		}
		o.Add(event.Ordered, 1, 0, []byte("x"))
		o.Player = 3
		o.Release()

		c := NewControl()
		if *c != (Control{}) {
			t.Fatalf("round %d: pooled Control not zero", i)
		}
		c.LastApplied, c.Force = 9, true
		c.Release()
	}
}
