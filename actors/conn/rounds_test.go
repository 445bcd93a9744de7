package conn

import (
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// TestRoundsCountedByCause: a shard's first round runs straight; a post
// to a sleeping shard wakes it for a round counted as posted; a
// connection's deadline (its idle timeout) wakes it for one counted as
// timer.
func TestRoundsCountedByCause(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	defer sys.Shutdown()
	start := time.Now()
	cfg := DefaultConfig()
	cfg.Session = benchSessionConfig()
	p, err := NewPool(PoolConfig{Config: cfg, Shards: 1, Sys: sys, Now: func() time.Duration { return time.Since(start) },
		NewWriter: func() Writer { return nowhere{} }})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	waitFor := func(what string, ok func(r [roundCauses]uint64) bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(p.Rounds()); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: rounds %v after 10 s", what, p.Rounds())
			}
		}
	}
	waitFor("the first round", func(r [roundCauses]uint64) bool { return r[RoundStraight] == 1 })
	if r := p.Rounds(); r != [roundCauses]uint64{RoundStraight: 1} {
		t.Fatalf("rounds %v before anything was posted, want only the first, straight", r)
	}
	// The shard has nothing to do: the Open's post wakes it.
	x := record(t, 1)
	sess, _ := grantFor(t, x.req)
	if _, err := p.Open(Params{Handshake: sess, Player: 7, Timeout: 30 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	waitFor("the Open's round", func(r [roundCauses]uint64) bool { return r[RoundPosted] >= 1 })
	// Its client never speaks: the idle timeout's deadline wakes the shard.
	waitFor("the timeout's round", func(r [roundCauses]uint64) bool { return r[RoundTimer] >= 1 })
	if r := p.Rounds(); r[RoundStraight] != 1 || r[RoundPosted] < 1 {
		t.Fatalf("rounds %v, want one straight and one posted at least", r)
	}
}
