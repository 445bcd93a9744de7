package cluster

import (
	"log/slog"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/zone"
)

// A Commit whose record write decided nothing keeps what waits behind it
// for its next copy, which writes afresh (commitFor: commitNew, the items
// still behind it); with no copy by the end of the wait, they are dropped
// and counted, and a newer Commit's wait is not cut short by the older
// one's end.
func TestUndecidedCommitKeepsWhatWaitsBehindIt(t *testing.T) {
	b := &Bridge{m: new(Metrics), log: slog.New(slog.DiscardHandler), warned: map[string]bool{}}
	const player = 42
	at := time.Now()
	in := msg.NewInput()
	in.Player = player
	b.commits = map[uint64]recordCommit{player: {zone: "x1z0", epoch: 3, undecided: true, at: at, behind: []any{in}}}

	b.dropUndecided(player, "x1z0", 3, at.Add(-time.Second), nil) // an older wait's end
	if c := b.commits[player]; len(c.behind) != 1 || b.m.DroppedBehindCommit.Load() != 0 {
		t.Fatalf("an older wait's end dropped %d items, left %d behind", b.m.DroppedBehindCommit.Load(), len(c.behind))
	}
	env := &zone.HandoffEnvelope{}
	if got := b.commitFor(player, "x1z0", 3, env); got != commitNew {
		t.Fatalf("a copy of an undecided Commit: %d, want commitNew (written afresh)", got)
	}
	c := b.commits[player]
	if c.undecided || c.newest != env || len(c.behind) != 1 {
		t.Fatalf("after the copy: undecided %v, newest set %v, %d behind; want false, true, 1", c.undecided, c.newest == env, len(c.behind))
	}
	if got := b.commitFor(player, "x1z0", 3, &zone.HandoffEnvelope{}); got != commitInFlight {
		t.Fatalf("a second copy while the first's write is in flight: %d, want commitInFlight", got)
	}
	c.undecided, c.at = true, at
	b.commits[player] = c
	b.dropUndecided(player, "x1z0", 3, at, nil)
	if _, ok := b.commits[player]; ok || b.m.DroppedBehindCommit.Load() != 1 {
		t.Fatalf("no copy by the wait's end: entry kept %v, %d dropped; want gone, 1", ok, b.m.DroppedBehindCommit.Load())
	}
}
