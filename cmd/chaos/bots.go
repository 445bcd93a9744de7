package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"time"
)

// BotReport is the part of botswarm's JSON report the driver judges
// (cmd/botswarm/internal/metrics.Report; decoded here because that
// package is internal to botswarm).
type BotReport struct {
	Started    time.Time          `json:"started"`
	Duration   float64            `json:"duration_s"`
	Totals     map[string]float64 `json:"totals"`
	Invariants []struct {
		Name    string `json:"name"`
		OK      bool   `json:"ok"`
		Checked bool   `json:"checked"`
		Detail  string `json:"detail"`
	} `json:"invariants"`
	Series []struct {
		T           float64  `json:"t"`
		Connected   int64    `json:"connected"`
		RTTP50      *float64 `json:"rtt_p50_ms"`
		Disconnects uint64   `json:"disconnects"`
	} `json:"series"`
}

func readBotReport(path string) (*BotReport, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r BotReport
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// total is a counter from the report's totals (0 when absent).
func (r *BotReport) total(k string) uint64 { return uint64(r.Totals[k]) }

// failures: botswarm's invariants other than the disconnect one (nodes
// die on purpose here), and — with a drain that redirects — any session a
// drain ended (disconnects_shutdown).
func (r *BotReport) failures(expectRedirects bool) []string {
	var out []string
	for _, inv := range r.Invariants {
		if inv.Checked && !inv.OK && !isDisconnectInvariant(inv.Name) {
			out = append(out, "botswarm invariant "+inv.Name+": "+inv.Detail)
		}
	}
	if expectRedirects && r.total("disconnects_shutdown") > 0 {
		out = append(out, fmt.Sprintf("drains disconnected %d sessions (disconnects_shutdown; want 0 with --expect-redirects)", r.total("disconnects_shutdown")))
	}
	return out
}

func isDisconnectInvariant(name string) bool { return strings.Contains(name, "disconnect") }

// moveFailures: the move invariants under chaos, judged whatever
// JudgeBots says. No client drops a move from a full window (a client
// holds input while its zone fails over); every move of a session that
// lived to the end is acknowledged; and the only moves never acknowledged
// are those of sessions a killed or paused gateway cut off (players of a
// killed node), at most a window each: what their client sent while
// nothing answered.
func (r *BotReport) moveFailures(window uint64) []string {
	var out []string
	if n := r.total("moves_lost"); n > 0 {
		out = append(out, fmt.Sprintf("%d moves dropped from full client windows", n))
	}
	if n := r.total("moves_unacked"); n > 0 {
		out = append(out, fmt.Sprintf("%d moves unacknowledged at the end of sessions that lived", n))
	}
	if cut, bound := r.MovesCut(), window*r.total("disconnects_timeout"); cut > bound {
		out = append(out, fmt.Sprintf("%d moves never acknowledged, more than a %d-move window for each of the %d sessions cut off by a dead or paused gateway",
			cut, window, r.total("disconnects_timeout")))
	}
	return out
}

// MovesCut: moves sent that were never acknowledged, other than those
// still in flight when the run ended or when a Redirect moved the session
// (botswarm's moves_redirected): the moves of sessions a dead or paused
// gateway cut off (the bot reconnects as a new player) and of windows that
// overflowed while a zone was down.
func (r *BotReport) MovesCut() uint64 {
	s, a, u := r.total("moves_sent"), r.total("moves_acked"), r.total("moves_unacked")+r.total("moves_redirected")
	if a+u >= s {
		return 0
	}
	return s - a - u
}

// natsRestart judges one restart of the standalone NATS: which leases
// were renewed at their old epoch after it came back, which were lost,
// and whether the bots kept getting acknowledgements during the outage.
func natsRestart(ev Event, writes []Write, br *BotReport) NATSRestart {
	nr := NATSRestart{Event: ev.N}
	// The owners just before the outage.
	before := map[string]Write{}
	for _, w := range writes {
		if w.Bucket != bucketZones || w.Created.After(ev.At) {
			continue
		}
		if w.Deleted {
			delete(before, w.Zone)
		} else {
			before[w.Zone] = w
		}
	}
	zones := make([]string, 0, len(before))
	for z := range before {
		zones = append(zones, z)
	}
	sort.Strings(zones)
	for _, z := range zones {
		b := before[z]
		// Renewed: a write of the same owner and epoch after the server
		// came back, and none that moved the lease (an expiry, a claim)
		// from the event until renewSettle after that: a lease the new
		// leader of a cluster's stream expired just after a renewal had
		// landed was counted renewed. Past renewSettle the first write
		// decides alone (the buckets keep one revision a key: a recorder
		// that re-listed after the outage sees only the newest).
		renewed, lost := false, ""
		for _, w := range writes {
			if w.Bucket != bucketZones || w.Zone != z || w.Created.Before(ev.At) {
				continue
			}
			moved := w.Deleted || w.Epoch != b.Epoch || w.Node != b.Node
			late := w.Created.After(ev.Back.Add(renewSettle))
			if moved && (!late || !renewed) {
				lost = fmt.Sprintf("%s (%s epoch %d → %s)", z, b.Node, b.Epoch, describe(w))
				break
			}
			if !moved && !w.Created.Before(ev.Back) {
				renewed = true
			}
			if late {
				break
			}
		}
		switch {
		case lost != "":
			nr.Lost = append(nr.Lost, lost)
		case renewed:
			nr.Renewed = append(nr.Renewed, fmt.Sprintf("%s (%s epoch %d)", z, b.Node, b.Epoch))
		default:
			nr.Lost = append(nr.Lost, z+" (no write after the restart)")
		}
	}
	// Seconds of the outage in which bots still measured round trips.
	from, to := ev.At.Sub(br.Started).Seconds(), ev.Back.Sub(br.Started).Seconds()
	nr.OutageSeconds = to - from
	for _, p := range br.Series {
		if p.T > from && p.T <= math.Ceil(to) && p.RTTP50 != nil {
			nr.PlaySeconds++
		}
	}
	return nr
}

// renewSettle is how long after a NATS server came back a lease counts
// as lost when it moves (natsRestart): a cluster's new stream leader
// expires leases it finds stale within a second or two of its election.
const renewSettle = 10 * time.Second

func describe(w Write) string {
	if w.Deleted {
		return "expired/deleted"
	}
	return fmt.Sprintf("%s epoch %d", w.Node, w.Epoch)
}
