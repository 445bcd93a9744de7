package session_test

import (
	"reflect"
	"testing"

	"github.com/ghostwire/ghostwire/replication/session"
)

// TestPrefetchChangesNothing: the Server's prefetch hints are hints. A
// pair whose server is asked for its lines before every round (ghost
// packets in flight, fates waiting, events both ways) ends with the same
// counters, on both ends, as a pair that never is; a zero Server takes
// the hints without a read.
func TestPrefetchChangesNothing(t *testing.T) {
	var zero session.Server
	zero.PrefetchServer()
	zero.PrefetchParts()
	zero.PrefetchSealKey()
	var pairs [2]*pair
	for i := range pairs {
		pairs[i] = newPairN(t, 0)
		pairs[i].ghosts = oneGhostRecord{}
	}
	fates := 0
	for range 400 {
		for i, p := range pairs {
			if i == 1 {
				p.srv.PrefetchServer()
				p.srv.PrefetchParts()
				p.srv.PrefetchSealKey()
			}
			p.step(t)
		}
		if a, b := len(pairs[0].fates), len(pairs[1].fates); a != b {
			t.Fatalf("round %d: %d and %d ghost fates popped", pairs[0].round, a, b)
		}
		fates += len(pairs[1].fates)
	}
	if fates == 0 {
		t.Fatal("no ghost fate was popped: the ghost rings' hints went untried")
	}
	if a, b := pairs[0].srv.Stats(), pairs[1].srv.Stats(); !reflect.DeepEqual(a, b) {
		t.Fatalf("server stats differ:\n%+v\n%+v", a, b)
	}
	if a, b := pairs[0].cli.Stats(), pairs[1].cli.Stats(); !reflect.DeepEqual(a, b) {
		t.Fatalf("client stats differ:\n%+v\n%+v", a, b)
	}
	if pairs[1].srv.Stats().Counters == (session.Counters{}) {
		t.Fatal("the pair sent nothing")
	}
}
