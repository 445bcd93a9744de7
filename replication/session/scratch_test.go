package session_test

import (
	"testing"

	"github.com/ghostwire/ghostwire/replication/session"
)

// TestSharedScratch: Servers of one goroutine sharing a Scratch (as a
// connection shard's do) open, decode and build in it, and every exchange
// comes out exactly as with a writer and buffers of each Server's own:
// same counters on both sides, same moves and events delivered.
func TestSharedScratch(t *testing.T) {
	const n, rounds = 3, 300
	sc := session.NewScratch()
	shared, own := make([]*pair, n), make([]*pair, n)
	for i := range n {
		shared[i], own[i] = newPairN(t, 0), newPairN(t, 0)
		shared[i].srv.ShareScratch(sc)
	}
	for range rounds {
		for i := range n { // interleaved: each Server finds the others' leftovers in sc
			shared[i].step(t)
			own[i].step(t)
		}
	}
	if session.ScratchSeq(sc) == 0 {
		t.Fatal("the shared Scratch's receive buffers were never used")
	}
	for i := range n {
		ss, so := shared[i].srv.Stats(), own[i].srv.Stats()
		cs, co := shared[i].cli.Stats(), own[i].cli.Stats()
		if ss.Counters != so.Counters || ss.Moves != so.Moves || cs.Counters != co.Counters {
			t.Errorf("pair %d: shared scratch\n server %+v\n client %+v\nown\n server %+v\n client %+v", i, ss, cs.Counters, so, co.Counters)
		}
		if shared[i].h.events != own[i].h.events || shared[i].h.events == 0 {
			t.Errorf("pair %d: %d events delivered with the shared scratch, %d without", i, shared[i].h.events, own[i].h.events)
		}
		if ss.Moves.Applied == 0 {
			t.Errorf("pair %d: no move applied", i)
		}
	}
}
