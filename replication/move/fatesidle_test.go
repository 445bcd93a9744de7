package move

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// TestFatesIdleMeansOnFateIsANoOp walks a ControlWriter through writes
// (initial, forced, corrective, deferred), mismatches, hold
// timeouts and fates both ways, and at every step where FatesIdle is true
// hands it a fate of each kind: the writer must be unchanged. It also
// checks FatesIdle turns false only in Write, which is what lets a caller
// mirror it after Write and OnFate alone.
func TestFatesIdleMeansOnFateIsANoOp(t *testing.T) {
	c, err := NewControlWriter(ControlConfig{Period: 300 * time.Millisecond, HoldTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s := &ControlState{Pos: [3]float32{1, 2, 3}}
	buf := make([]byte, 256)
	held, idleSeen := 0, 0
	probe := func(step int, pkt uint64) {
		t.Helper()
		if !c.FatesIdle() {
			held++
			return
		}
		idleSeen++
		for _, f := range []notify.Fate{{Seq: pkt, Delivered: true}, {Seq: pkt, Delivered: false}, {Seq: pkt + 100}} {
			before := *c
			c.OnFate(f)
			if *c != before {
				t.Fatalf("step %d: OnFate(%+v) changed an idle writer", step, f)
			}
		}
	}
	var pkt uint64
	for step := range 600 {
		now := time.Duration(step) * 20 * time.Millisecond
		idle := c.FatesIdle()
		switch {
		case step%17 == 0:
			c.Force()
		case step%11 == 0:
			c.Check(Move{Seq: uint64(step), CRC: 1, HasCRC: true}, s)
		}
		if c.FatesIdle() != idle {
			t.Fatalf("step %d: Force or Check changed FatesIdle", step)
		}
		if step%5 != 0 {
			_, ok := c.AckOnly(now, uint64(step))
			if idle && !c.FatesIdle() {
				t.Fatalf("step %d: AckOnly turned FatesIdle false", step)
			}
			if !ok {
				room := len(buf)
				if step%23 == 0 {
					room = (AckOnlyBits + 8) / 8 // too small for the state: deferred
				}
				w := bitstream.NewWriter(buf[:room])
				pkt++
				if _, err := c.Write(w, pkt, now, uint64(step), s); err != nil {
					t.Fatal(err)
				}
			}
		}
		probe(step, pkt)
		if step%3 == 0 && pkt > 0 {
			c.OnFate(notify.Fate{Seq: pkt, Delivered: step%6 == 0})
		}
		probe(step, pkt)
	}
	if st := c.Stats(); held < 50 || idleSeen < 300 || st.Deferred == 0 || st.Corrections == 0 || st.Held == 0 {
		t.Fatalf("held at %d probes, idle at %d, %+v: the walk no longer covers them all", held, idleSeen, st)
	}
}
