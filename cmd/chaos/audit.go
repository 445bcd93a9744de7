package main

import (
	"fmt"
	"sort"
	"time"
)

// Actions the driver takes.
const (
	ActKill        = "kill"         // SIGKILL, then restart under the same node id
	ActTerm        = "term"         // SIGTERM (a drain, or a clean stop), then restart
	ActStop        = "stop"         // SIGSTOP for longer than the lease TTL, then SIGCONT
	ActNATSRestart = "nats-restart" // stop the standalone nats-server and start it again (--external-nats)
	ActNATSKill    = "nats-kill"    // SIGKILL the server leading the zones bucket, start it again (--nats-cluster)
)

// Event is one thing the driver did to the cluster.
type Event struct {
	N      int       `json:"n"`
	Action string    `json:"action"`
	Node   string    `json:"node"`
	At     time.Time `json:"at"` // the signal was sent
	// Held: the zones (→ lease epoch) the node owned when the signal went.
	Held map[string]uint64 `json:"held"`
	// Gone: the process exited (kill, term) or was resumed (stop: SIGCONT).
	Gone   time.Time `json:"gone"`
	Status string    `json:"status,omitempty"` // how a killed or stopped process exited
	Back   time.Time `json:"back"`             // ready again (restart), resumed (SIGCONT), NATS accepting again
	Err    string    `json:"err,omitempty"`
}

// Failover is how one zone of a killed, stopped or drained node came back.
type Failover struct {
	Event    int    `json:"event"`
	Action   string `json:"action"`
	Node     string `json:"node"`
	Zone     string `json:"zone"`
	OldEpoch uint64 `json:"old_epoch"`
	NewEpoch uint64 `json:"new_epoch,omitempty"`
	NewNode  string `json:"new_node,omitempty"`
	// Owned: signal → the first lease write at a newer epoch (-1: never).
	Owned time.Duration `json:"owned_ns"`
	// Moving: signal → the first checkpoint by the new owner showing one of
	// the zone's players with a move applied after the last checkpoint
	// before the signal (-1: none seen). Checkpoints come about once a
	// second, so this is an upper bound by up to a second.
	Moving time.Duration `json:"moving_ns"`
	// Players: the zone's online players in their records at the signal;
	// Moved: how many of them the new owner checkpointed with a new move.
	Players int `json:"players"`
	Moved   int `json:"moved"`
}

// Audit is the verdict on a recording.
type Audit struct {
	LeaseWrites  int        `json:"lease_writes"`
	RecordWrites int        `json:"record_writes"`
	Failovers    []Failover `json:"failovers"`
	// RecordsWhileUnowned: player records written while their zone had no
	// lease at all (between an expiry and the next claim). Counted, not
	// judged: the writer may have lost the lease only on the server's clock.
	RecordsWhileUnowned int `json:"records_while_unowned"`
	// FencedWrites: lease or record writes by a node for a zone another
	// node had claimed since (by server time). Each is also a violation.
	FencedWrites int      `json:"fenced_writes"`
	Violations   []string `json:"violations"`
}

// maxListed bounds how many violations of one kind are spelled out.
const maxListed = 10

// audit judges a recording against the events. limit is how soon a dead or
// paused owner's zones must be owned again; final says whether writes
// holds the end state (so player records can be checked against the
// owners).
func audit(writes []Write, events []Event, limit time.Duration, final bool) Audit {
	var a Audit
	listed := map[string]int{}
	violate := func(kind, format string, args ...any) {
		listed[kind]++
		switch n := listed[kind]; {
		case n <= maxListed:
			a.Violations = append(a.Violations, kind+": "+fmt.Sprintf(format, args...))
		case n == maxListed+1:
			a.Violations = append(a.Violations, kind+": … more left out")
		}
	}

	var leases, records []Write
	for _, w := range writes {
		switch w.Bucket {
		case bucketZones:
			leases = append(leases, w)
		case bucketPlayers:
			records = append(records, w)
		}
	}
	sort.SliceStable(leases, func(i, j int) bool { return leases[i].Rev < leases[j].Rev })
	sort.SliceStable(records, func(i, j int) bool { return records[i].Rev < records[j].Rev })
	a.LeaseWrites, a.RecordWrites = len(leases), len(records)

	// Leases: one owner per (zone, epoch), epochs never going back.
	byZone := map[string][]Write{}
	for _, w := range leases {
		byZone[w.Zone] = append(byZone[w.Zone], w)
	}
	for zone, ws := range byZone {
		owner := map[uint64]string{}
		var top Write
		for _, w := range ws {
			if w.Deleted {
				continue
			}
			if n, ok := owner[w.Epoch]; ok && n != w.Node {
				violate("two owners", "zone %s epoch %d: %s and %s (rev %d)", zone, w.Epoch, n, w.Node, w.Rev)
			}
			owner[w.Epoch] = w.Node
			if w.Epoch < top.Epoch {
				a.FencedWrites++
				violate("fenced lease write", "zone %s: %s wrote epoch %d (rev %d, %s) after %s claimed epoch %d",
					zone, w.Node, w.Epoch, w.Rev, w.Created.Format(time.StampMilli), top.Node, top.Epoch)
				continue
			}
			top = w
		}
	}

	// claimed: when each zone's epoch was first written (its claim).
	claimed := map[string]map[uint64]time.Time{}
	for zone, ws := range byZone {
		claimed[zone] = map[uint64]time.Time{}
		for _, w := range ws {
			if _, ok := claimed[zone][w.Epoch]; !ok && !w.Deleted {
				claimed[zone][w.Epoch] = w.Created
			}
		}
	}
	// ownerAt: the lease of zone at server time t (ok false: no owner).
	ownerAt := func(zone string, t time.Time) (Write, bool) {
		ws := byZone[zone]
		i := sort.Search(len(ws), func(i int) bool { return ws[i].Created.After(t) })
		if i == 0 {
			return Write{}, false
		}
		w := ws[i-1]
		return w, !w.Deleted
	}
	// Player records: only the zone's owner of the moment writes them.
	for _, r := range records {
		if r.Deleted || r.Zone == "" {
			continue
		}
		o, ok := ownerAt(r.Zone, r.Created)
		switch {
		case !ok:
			a.RecordsWhileUnowned++
		case o.Node != r.Node:
			a.FencedWrites++
			violate("record by a non-owner", "player %d zone %s written by %s at %s (rev %d, checkpoint %v, last applied %d) while %s owned the zone at epoch %d (claimed %s)",
				r.Player, r.Zone, r.Node, r.Created.Format(time.StampMilli), r.Rev, r.Checkpoint, r.LastApplied,
				o.Node, o.Epoch, claimed[r.Zone][o.Epoch].Format(time.StampMilli))
		}
	}

	// Failovers.
	for _, ev := range events {
		if ev.Action != ActKill && ev.Action != ActStop && ev.Action != ActTerm {
			continue
		}
		zones := make([]string, 0, len(ev.Held))
		for z := range ev.Held {
			zones = append(zones, z)
		}
		sort.Strings(zones)
		for _, z := range zones {
			f := Failover{Event: ev.N, Action: ev.Action, Node: ev.Node, Zone: z, OldEpoch: ev.Held[z], Owned: -1, Moving: -1}
			var claim Write
			for _, w := range byZone[z] {
				if !w.Deleted && w.Epoch > f.OldEpoch && !w.Created.Before(ev.At) {
					claim = w
					break
				}
			}
			if claim.Rev != 0 {
				f.NewEpoch, f.NewNode, f.Owned = claim.Epoch, claim.Node, claim.Created.Sub(ev.At)
			}
			// The zone's players at the signal, and the move each had applied.
			before := map[uint64]uint64{}
			for _, r := range records {
				if r.Created.After(ev.At) {
					break
				}
				if r.Player == 0 {
					continue
				}
				if r.Chunk && (r.Zone != z || r.Node != ev.Node) {
					continue // another zone's chunk: late, maybe, and not where the player is
				}
				if r.Zone == z && r.Node == ev.Node && !r.Offline {
					before[r.Player] = r.LastApplied
				} else {
					delete(before, r.Player)
				}
			}
			f.Players = len(before)
			if claim.Rev != 0 {
				moved := map[uint64]bool{}
				for _, r := range records {
					if r.Created.Before(claim.Created) || r.Node != claim.Node || !r.Checkpoint || moved[r.Player] {
						continue
					}
					if la, ok := before[r.Player]; ok && r.LastApplied > la {
						moved[r.Player] = true
						if f.Moving < 0 {
							f.Moving = r.Created.Sub(ev.At)
						}
					}
				}
				f.Moved = len(moved)
			}
			switch {
			case f.Owned < 0:
				violate("not owned again", "event %d (%s %s): zone %s (epoch %d) never owned again", ev.N, ev.Action, ev.Node, z, f.OldEpoch)
			case f.Owned > limit:
				violate("slow failover", "event %d (%s %s): zone %s owned again by %s after %v (limit %v)", ev.N, ev.Action, ev.Node, z, f.NewNode, f.Owned.Round(time.Millisecond), limit)
			}
			a.Failovers = append(a.Failovers, f)
		}
	}

	// The end state: every online player's record names its zone's owner.
	if final {
		last := map[string]Write{}
		for _, r := range records {
			last[r.Key] = r
		}
		keys := make([]string, 0, len(last))
		for k := range last {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			r := last[k]
			if r.Deleted || r.Offline || r.Zone == "" || r.Chunk {
				continue
			}
			ws := byZone[r.Zone]
			if len(ws) == 0 || ws[len(ws)-1].Deleted || ws[len(ws)-1].Node != r.Node {
				owner := "nobody"
				if len(ws) > 0 && !ws[len(ws)-1].Deleted {
					owner = ws[len(ws)-1].Node
				}
				violate("stale record", "player %d online in zone %s on %s at the end, but %s owns the zone", r.Player, r.Zone, r.Node, owner)
			}
		}
	}
	return a
}

// percentile of ds (nearest rank); -1 for none.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return -1
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s))+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}
