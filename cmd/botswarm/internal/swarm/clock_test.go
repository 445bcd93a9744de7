package swarm

import "testing"

// TestBlindBotClockIsLocal: a bot that skips the ghost section never
// learns the server's clock (the mirror learns it from the sections'
// stamps), so serverTime may skip the mirror for it and take the local
// clock — the time its acknowledgements are published at. Fails if the
// session starts reading a clock for such a bot, or serverTime's shortcut
// gives another time than the mirror would.
func TestBlindBotClockIsLocal(t *testing.T) {
	r := newBotRig(t, 20, 0)
	for range 30 {
		r.round(t)
	}
	for _, b := range r.w.bots {
		if b.observer || !b.connected {
			t.Fatalf("bot %d: observer %v, connected %v; want a connected bot skipping ghosts", b.idx, b.observer, b.connected)
		}
		mir := b.client.Mirror()
		if s := mir.Stats().Sections; s != 0 {
			t.Errorf("bot %d: its mirror read %d ghost sections", b.idx, s)
		}
		now := r.now + 1234567
		st, ok := b.serverTime(now)
		want := mir.ServerTime(now)
		if !ok || st != want+b.shift {
			t.Errorf("bot %d: serverTime(%v) = %v, %v; the mirror's clock gives %v", b.idx, now, st, ok, want+b.shift)
		}
	}
}
