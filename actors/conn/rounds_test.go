package conn

import (
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
)

// quietPool is a pool of shards on a real actor system, its writes going
// nowhere and its clock real time since it was made; the system shuts
// down after the test (and after the test's own p.Close).
func quietPool(tb testing.TB, shards int) *Pool {
	tb.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	tb.Cleanup(sys.Shutdown)
	start := time.Now()
	cfg := DefaultConfig()
	cfg.Session = benchSessionConfig()
	p, err := NewPool(PoolConfig{Config: cfg, Shards: shards, Sys: sys, Now: func() time.Duration { return time.Since(start) },
		NewWriter: func() Writer { return nowhere{} }})
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// TestRoundsCountedByCause: a shard's first round runs straight; a post
// to a sleeping shard wakes it for a round counted as posted; a
// connection's deadline (its idle timeout) wakes it for one counted as
// timer.
func TestRoundsCountedByCause(t *testing.T) {
	p := quietPool(t, 1)
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

// TestShardTimerSetOnceForTheSameDeadline: a shard whose next deadline
// stays where it is (a pending connection's timeout, an hour away) sets
// its timer once however many posts wake it; the timer is not set and
// stopped around every park.
func TestShardTimerSetOnceForTheSameDeadline(t *testing.T) {
	p := quietPool(t, 1)
	x := record(t, 1)
	sess, _ := grantFor(t, x.req)
	if _, err := p.Open(Params{Handshake: sess, Player: 7, Timeout: time.Hour}); err != nil {
		t.Fatal(err)
	}
	idle := &Conn{sh: p.shards[0], stopped: true, hidx: -1} // its posts' rounds do nothing
	const posts = 50
	for i := range posts {
		for deadline := time.Now().Add(10 * time.Second); p.Rounds()[RoundPosted] < uint64(i+1); time.Sleep(100 * time.Microsecond) {
			if time.Now().After(deadline) {
				t.Fatalf("post %d: rounds %v after 10 s", i, p.Rounds())
			}
		}
		idle.sh.post(idle, msg.ViewReadyMsg)
	}
	for deadline := time.Now().Add(10 * time.Second); p.Rounds()[RoundPosted] < posts+1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("rounds %v after 10 s, want %d posted", p.Rounds(), posts+1)
		}
	}
	p.Close() // the shard's count is its own until then
	if r := p.Rounds(); r[RoundPosted] < posts+1 || r[RoundTimer] != 0 {
		t.Fatalf("rounds %v, want %d posted at least and none by the timer", r, posts+1)
	}
	if a := p.shards[0].arms; a != 1 {
		t.Fatalf("the timer was set %d times over %d posted rounds with the deadline unchanged, want once", a, p.Rounds()[RoundPosted])
	}
}
