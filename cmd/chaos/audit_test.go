package main

import (
	"strings"
	"testing"
	"time"
)

func TestAudit(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	lease := func(rev uint64, ms int, node string, epoch uint64) Write {
		return Write{Bucket: bucketZones, Key: "z", Zone: "z", Rev: rev, Created: at(ms), Node: node, Epoch: epoch}
	}
	expiry := func(rev uint64, ms int) Write {
		return Write{Bucket: bucketZones, Key: "z", Zone: "z", Rev: rev, Created: at(ms), Deleted: true}
	}
	rec := func(rev uint64, ms int, node string, la uint64) Write {
		return Write{Bucket: bucketPlayers, Key: "p.7", Player: 7, Zone: "z", Rev: rev, Created: at(ms), Node: node, Checkpoint: true, LastApplied: la}
	}
	chunk := func(rev uint64, ms int, node string, la uint64) Write {
		return Write{Bucket: bucketPlayers, Key: "c:p.7", Player: 7, Zone: "z", Rev: rev, Created: at(ms), Node: node, Checkpoint: true, LastApplied: la, Chunk: true}
	}
	kill := []Event{{N: 1, Action: ActKill, Node: "a", At: at(1000), Held: map[string]uint64{"z": 1}}}
	// A clean failover: a holds z at epoch 1, is killed at 1 s, its lease
	// expires, b claims at 2.5 s, and b's checkpoint shows a new move.
	clean := []Write{lease(1, 0, "a", 1), lease(2, 500, "a", 1), rec(1, 900, "a", 10), expiry(3, 2000),
		lease(4, 2500, "b", 4), rec(2, 3100, "b", 30)}
	for _, tc := range []struct {
		name   string
		writes []Write
		events []Event
		want   string // a substring of the first violation; "" none
	}{
		{name: "clean failover", writes: clean, events: kill},
		{name: "two owners at one epoch", writes: []Write{lease(1, 0, "a", 1), lease(2, 100, "b", 1)}, want: "two owners"},
		{name: "lease write at an old epoch after a new claim", writes: []Write{lease(1, 0, "a", 1), lease(4, 100, "b", 4), lease(5, 200, "a", 1)}, want: "fenced lease write"},
		{name: "record by the old owner after the new claim", writes: append(clean[:len(clean):len(clean)], rec(3, 3200, "a", 11)), events: kill, want: "record by a non-owner"},
		{name: "zone never owned again", writes: clean[:4], events: kill, want: "not owned again"},
		{name: "slow failover", writes: []Write{lease(1, 0, "a", 1), expiry(3, 2000), lease(4, 7000, "b", 4)}, events: kill, want: "slow failover"},
		{name: "chunk by the old owner after the new claim", writes: append(clean[:len(clean):len(clean)], chunk(5, 3200, "a", 11)), events: kill, want: "record by a non-owner"},
		// The player left z (its record offline); a chunk taken before, written after, is no stale record.
		{name: "late chunk after the player left", writes: []Write{lease(1, 0, "a", 1), rec(1, 100, "a", 1),
			{Bucket: bucketPlayers, Key: "p.7", Player: 7, Zone: "z", Rev: 2, Created: at(200), Node: "a", Offline: true}, chunk(3, 210, "a", 1), lease(4, 300, "b", 4)}},
		{name: "stale record at the end", writes: []Write{lease(1, 0, "a", 1), rec(1, 100, "a", 1), lease(4, 200, "b", 4)}, want: "stale record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := audit(tc.writes, tc.events, 5*time.Second, true)
			if tc.want == "" {
				if len(a.Violations) > 0 {
					t.Fatalf("violations: %v", a.Violations)
				}
				return
			}
			if len(a.Violations) == 0 || !strings.Contains(a.Violations[0], tc.want) {
				t.Fatalf("violations %v, want one with %q", a.Violations, tc.want)
			}
		})
	}
	a := audit(clean, kill, 5*time.Second, true)
	if len(a.Failovers) != 1 {
		t.Fatalf("failovers %+v", a.Failovers)
	}
	f := a.Failovers[0]
	if f.Owned != 1500*time.Millisecond || f.Moving != 2100*time.Millisecond || f.NewNode != "b" || f.Players != 1 || f.Moved != 1 {
		t.Fatalf("failover %+v: want owned 1.5s by b, moving 2.1s, 1 of 1 player moved", f)
	}
	// The same failover with the periodic checkpoints in chunks: a's chunk
	// at 950 ms raises the move the player had applied to 20, b's restore
	// at 3.1 s (its record, move 20) is no move yet, b's chunk at 3.3 s
	// (move 30) is.
	chunked := []Write{lease(1, 0, "a", 1), lease(2, 500, "a", 1), rec(1, 900, "a", 10), chunk(2, 950, "a", 20), expiry(3, 2000),
		lease(4, 2500, "b", 4), rec(5, 3100, "b", 20), chunk(6, 3300, "b", 30)}
	a = audit(chunked, kill, 5*time.Second, true)
	if len(a.Violations) > 0 || len(a.Failovers) != 1 {
		t.Fatalf("violations %v, failovers %+v", a.Violations, a.Failovers)
	}
	if f := a.Failovers[0]; f.Moving != 2300*time.Millisecond || f.Players != 1 || f.Moved != 1 {
		t.Fatalf("failover %+v: want moving 2.3s (b's chunk), 1 of 1 player moved", f)
	}
}

// A NATS event's leases: renewed when the owner wrote its lease again at
// its epoch after the server came back and nothing moved it until
// renewSettle after; lost when an expiry or another epoch came in that
// time, also after a renewal had landed (a cluster's new stream leader
// expiring the lease it found stale), and when nothing was written.
func TestNATSRestartJudgesEachLease(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	ev := Event{N: 1, Action: ActNATSKill, At: t0.Add(10 * time.Second), Back: t0.Add(15 * time.Second)}
	lease := func(zone, node string, epoch uint64, at time.Duration, deleted bool) Write {
		return Write{Bucket: bucketZones, Zone: zone, Node: node, Epoch: epoch, Created: t0.Add(at), Deleted: deleted}
	}
	writes := []Write{
		lease("a", "n1", 1, time.Second, false), lease("b", "n2", 2, time.Second, false),
		lease("c", "n3", 3, time.Second, false), lease("d", "n1", 4, time.Second, false),
		lease("e", "n2", 5, time.Second, false), lease("e", "n2", 5, 30*time.Second, false), // renewed, seen late (a re-listed recorder)
		lease("a", "n1", 1, 16*time.Second, false),                                          // renewed
		lease("b", "n2", 2, 16*time.Second, false), lease("b", "", 0, 17*time.Second, true), // renewed, then expired
		lease("c", "n1", 9, 18*time.Second, false),  // claimed at another epoch
		lease("a", "n2", 12, 40*time.Second, false), // long after: not this event's
	}
	nr := natsRestart(ev, writes, &BotReport{Started: t0})
	if len(nr.Renewed) != 2 || !strings.HasPrefix(nr.Renewed[0], "a ") || !strings.HasPrefix(nr.Renewed[1], "e ") {
		t.Errorf("renewed %q, want a and e", nr.Renewed)
	}
	if len(nr.Lost) != 3 || !strings.HasPrefix(nr.Lost[0], "b ") || !strings.HasPrefix(nr.Lost[1], "c ") || !strings.HasPrefix(nr.Lost[2], "d ") {
		t.Errorf("lost %q, want b (expired after its renewal), c (claimed), d (no write)", nr.Lost)
	}
}
