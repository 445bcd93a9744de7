package session_test

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/notify"
	"github.com/ghostwire/ghostwire/replication/session"
)

// TestSilentClientsForcedDropsArePopped: while the client says nothing at
// all (no datagram, so no receive pops a fate), the Server's packets (a
// zone tick's each, with a forced full state) fill
// notify's MaxInFlight and the oldest are force-dropped; Poll pops those
// fates itself (notify.Conn.ForcedAny: Poll skips the pop only when no
// record was ever resolved but by an ack). Left in the ring they would
// hold the oldest record, and every later header would be refused
// (ErrFatesPending): the Server would go silent, its events never resent.
func TestSilentClientsForcedDropsArePopped(t *testing.T) {
	w := newWorld(t, withServerConfig(func(c *session.ServerConfig) { c.Notify.MaxInFlight = notify.MinMaxInFlight }))
	w.connect(5 * time.Second)
	for i := range 8 {
		if err := w.srv.SendEvent(0, payload("s2c", 0, i)); err != nil {
			t.Fatal(err)
		}
	}
	before := w.srv.Stats()
	var st move.ControlState
	for range 60 { // 3 s of 20 Hz ticks, each forcing a full state: the client hears nothing and sends nothing
		w.now += 50 * time.Millisecond
		st.Pos[0] += 0.1
		w.srv.SetControl(0, st)
		w.srv.ForceControl()
		for {
			out, err := w.srv.Poll(w.now, w.buf[:0], nil)
			if err != nil {
				t.Fatalf("poll at %v: %v", w.now, err)
			}
			if len(out) == 0 {
				break
			}
		}
	}
	after := w.srv.Stats()
	if after.Notify.ForcedDrops == 0 {
		t.Fatalf("no record force-dropped (%d packets sent): MaxInFlight was not reached", after.PacketsOut-before.PacketsOut)
	}
	if n := after.PacketsOut - before.PacketsOut; n < 2*notify.MinMaxInFlight {
		t.Fatalf("%d packets in 3 s of a silent client after %d forced drops: the Server stalled on fates it did not pop", n, after.Notify.ForcedDrops)
	}
	if after.Notify.Dropped == before.Notify.Dropped {
		t.Fatalf("no dropped fate reached the Server's counters: %+v", after.Notify)
	}
}
