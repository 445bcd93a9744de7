package session_test

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/session"
)

// stillPending is a GhostWriter that always has more to send (a table with
// more dirty ghosts than one packet holds): each section gets one record of
// three bits a client skipping ghosts passes over, as oneGhostRecord's.
type stillPending struct{}

func (stillPending) Pending() bool { return true }

func (stillPending) Write(w *bitstream.Writer, seq uint64, now time.Duration) (int, error) {
	return 1, w.WriteBits(5, 3)
}

// TestNoDeadlineNowWhileGhostsWaitForTheTick: ghosts pending between ticks
// wait for the next tick's packet until tickGrace past the send slot
// (holdUntil), and an ack the client is owed waits with them (Poll sends no
// ack alone while it holds content). NextDeadlineFor must then say the
// hold's end, not now: a driver woken at a deadline ≤ now at which Poll
// sends nothing pumps the connection again at once (the shard files it a
// microsecond on), until the hold ends. checkDeadlines, run after every
// step, fails on it.
func TestNoDeadlineNowWhileGhostsWaitForTheTick(t *testing.T) {
	w := newWorld(t, withZone(), withClientConfig(func(c *session.ClientConfig) { c.SkipGhosts = true }))
	w.ghosts = stillPending{}
	w.connect(5 * time.Second)
	input := func(i int) {
		if _, err := w.cli.Input(move.Move{Forward: 100, Yaw: uint16(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		input(i)
		w.step(50 * time.Millisecond) // a move, the zone's tick, the tick's packet
	}
	if w.z.applied == 0 {
		t.Fatal("no move applied: the zone does not tick")
	}
	last := w.now // the last tick's packet
	var sent []time.Duration
	w.capture = func(dir string, _ []byte) {
		if dir == "s2c" {
			sent = append(sent, w.now-last)
		}
	}
	w.z = nil // the ticks stop (a late one); the client keeps sending moves: an ack owed
	for i := range 300 {
		if i%33 == 0 {
			input(i)
		}
		w.step(time.Millisecond)
	}
	// The scenario held: nothing left in the hold (the slot at 50 ms, the
	// hold's end at 75), the ghosts and the ack left at its end.
	if len(sent) == 0 || sent[0] != 75*time.Millisecond {
		t.Fatalf("server packets after the last tick at %v, want the first at 75ms (the hold's end)", sent)
	}
}
