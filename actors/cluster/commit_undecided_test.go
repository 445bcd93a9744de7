package cluster

import (
	"log/slog"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/zone"
)

// A Commit whose record write decided nothing keeps what waits behind it:
// its next copy writes afresh (commitFor: commitNew, the items still
// behind it); with no copy, the bridge writes its newest copy again
// itself (retryUndecided) — the source stops resending at its
// CommitGiveUp, 5 s, and a NATS cluster electing the players bucket's
// leader answers no write for 4–9 s —, and only past refusedKeep after the
// first failure are the items dropped, counted. A retry or drop scheduled
// for an older failure does nothing.
func TestUndecidedCommitKeepsWhatWaitsBehindIt(t *testing.T) {
	type write struct {
		player uint64
		zone   string
		epoch  uint64
	}
	var writes []write
	b := &Bridge{m: new(Metrics), log: slog.New(slog.DiscardHandler), warned: map[string]bool{},
		writeCommit: func(player uint64, zone string, epoch uint64, _ func(bool)) {
			writes = append(writes, write{player, zone, epoch})
		}}
	const player = 42
	at := time.Now()
	in := msg.NewInput()
	in.Player = player
	env := &zone.HandoffEnvelope{}
	undecided := func(since time.Time) {
		b.commits = map[uint64]recordCommit{player: {zone: "x1z0", epoch: 3, undecided: true, at: at, since: since, newest: env, behind: []any{in}}}
	}

	undecided(at)
	b.retryUndecided(player, "x1z0", 3, at.Add(-time.Second), nil) // an older failure's
	if c := b.commits[player]; !c.undecided || len(c.behind) != 1 || len(writes) != 0 {
		t.Fatalf("an older failure's retry: undecided %v, %d behind, %d writes; want true, 1, 0", c.undecided, len(c.behind), len(writes))
	}
	if got := b.commitFor(player, "x1z0", 3, &zone.HandoffEnvelope{}); got != commitNew {
		t.Fatalf("a copy of an undecided Commit: %d, want commitNew (written afresh)", got)
	}
	if c := b.commits[player]; c.undecided || len(c.behind) != 1 {
		t.Fatalf("after the copy: undecided %v, %d behind; want false, 1", c.undecided, len(c.behind))
	}
	if got := b.commitFor(player, "x1z0", 3, &zone.HandoffEnvelope{}); got != commitInFlight {
		t.Fatalf("a second copy while the first's write is in flight: %d, want commitInFlight", got)
	}

	undecided(at)
	b.retryUndecided(player, "x1z0", 3, at, nil) // no copy came
	if c := b.commits[player]; c.undecided || len(c.behind) != 1 || len(writes) != 1 || writes[0] != (write{player, "x1z0", 3}) ||
		b.m.CommitsRetried.Load() != 1 {
		t.Fatalf("a retry with no copy: undecided %v, %d behind, writes %v, %d retried; want false, 1, the Commit's, 1",
			c.undecided, len(c.behind), writes, b.m.CommitsRetried.Load())
	}

	undecided(at.Add(-refusedKeep))
	b.retryUndecided(player, "x1z0", 3, at, nil) // undecided for refusedKeep
	if _, ok := b.commits[player]; ok || b.m.DroppedBehindCommit.Load() != 1 || len(writes) != 1 {
		t.Fatalf("undecided past refusedKeep: entry kept %v, %d dropped, %d writes; want gone, 1, no new write", ok, b.m.DroppedBehindCommit.Load(), len(writes))
	}
}
