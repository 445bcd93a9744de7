package zone

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Metrics are counters shared by the zone actors of a node (safe for
// concurrent use). The node exports them; tests and benchmarks read them.
type Metrics struct {
	Ticks       atomic.Uint64
	MissedTicks atomic.Uint64
	// GatewayGoneLeaves: players taken out because their gateway node died
	// or started again (GatewayGone).
	GatewayGoneLeaves atomic.Uint64
	// LateTicks: ticks posted when their slot had already passed, at the
	// default priority behind the inputs queued before them (lateTickMsg):
	// a zone whose ticks cost more than their period.
	LateTicks atomic.Uint64
	// Fenced: times a zone found its node might no longer run it
	// (Params.Acting) before the node's hold reached it, and paused
	// itself (paused.go): a node that woke from a pause past its lease.
	Fenced        atomic.Uint64
	Views         atomic.Uint64
	Controls      atomic.Uint64
	Redirects     atomic.Uint64
	Joins         atomic.Uint64
	JoinsRejected atomic.Uint64
	// Unplaced: players restored from a record that had moved on to
	// another owner meanwhile, dropped again (Params.Restored).
	Unplaced atomic.Uint64
	Leaves   atomic.Uint64
	// LeftUnacked: players whose Leave came while their Commit was
	// unacknowledged and whose forwarding record expired with no
	// CommitAck (the new owner never took them): ended here, as a Leave
	// ends a player (unackedCommit). Counted in Leaves too.
	LeftUnacked atomic.Uint64
	Inputs      atomic.Uint64
	// InputsDropped: input for a player this zone does not know, or of a
	// login another took the player over from (park).
	InputsDropped atomic.Uint64
	// HeldInputsDropped: inputs a zone held for a player it was taking
	// over (reserved, or just taken) for a login whose Join had not come
	// (earlyInputs), dropped: past the bound, superseded by a third
	// login's, refused with their Join, or no Join by the grace's end.
	// HeldInputsReturned: such inputs passed on to where the player is
	// when the offer ended without a Commit (the offerer) or the player
	// went on.
	HeldInputsDropped  atomic.Uint64
	HeldInputsReturned atomic.Uint64
	// InputsShed: inputs the zone's mailbox refused, full (Params.
	// MaxQueuedInputs; inputMailbox), and MovesShed the moves they
	// carried, which their connections send again.
	InputsShed atomic.Uint64
	MovesShed  atomic.Uint64
	Events     atomic.Uint64 // client events received (each goes to Params.Events)
	EventsOut  atomic.Uint64 // events the game sent to clients
	// EventsOutDropped: events the game sent beyond a player's byte
	// budget for the tick, or to a player without a connection here.
	EventsOutDropped atomic.Uint64
	EventsMalformed  atomic.Uint64 // events the game could not parse (ignored)
	// EventsDuplicate: numbered ordered events the player's fence already
	// covered (resent after a Redirect or a restore; docs/protocol.md §7.20).
	EventsDuplicate atomic.Uint64
	// EventsEarlyDropped: events (any class) of a player this zone had
	// reserved but did not own yet that reached the game's handler past
	// holdEarly: dropped, never applied before the Commit brings the
	// player's fence (sim.Zone.TakeEvent). 0 unless a hold was missed.
	EventsEarlyDropped atomic.Uint64
	// EventsPausedDropped: events that came while the zone was paused and
	// were not applied here: the zone stopped (handed over: the client
	// sends the numbered ones again to the next owner), or more inputs
	// brought events during the pause than it keeps (maxPausedEvents).
	EventsPausedDropped atomic.Uint64
	// EventsAwayDropped: events (any class) of a player this zone
	// neither owns nor knows where it went (never here, a neighbour's
	// replica, or its forwarding record forgotten): dropped, never
	// applied outside the owner (a numbered one outside its fence). The
	// client resends a numbered one on its next connection
	// (docs/protocol.md §7.20); an unnumbered or unordered one is lost,
	// as its class allows. Those of a player it handed away go on to the
	// owner (Forwarded).
	EventsAwayDropped atomic.Uint64
	Teleports         atomic.Uint64 // teleports applied (admin and game)
	TeleportsDropped  atomic.Uint64 // teleports for an entity no zone here knows
	HandoffsIn        atomic.Uint64 // entities acquired
	HandoffsInRemote  atomic.Uint64 // of those, from a zone in another process
	Forwarded         atomic.Uint64 // Leave/Teleport passed on to a new owner
	TickNanos         atomic.Uint64 // total measured tick cost
	// Panics: zone actors that panicked (each restarted empty by its
	// supervisor: a bug, and an outage of that zone).
	Panics atomic.Uint64
	// TickCost samples every tick's measured cost (the overload signal;
	// the node exports its p50/p99).
	TickCost Latency
	// ZoneTicks is the tick cost per zone (the node exports it labelled).
	ZoneTicks ZoneTicks

	// HandoffLatency samples, per acquired entity, the time from the
	// source's Offer to the target's acquisition (node clock).
	HandoffLatency Latency
}

// Latency keeps the most recent samples of a duration in a fixed ring.
// The zero value is ready; safe for concurrent use.
//
// A sample is kept in microseconds as a uint32 (up to 71 minutes; longer
// ones are kept as that): the node's one TickCost ring (every zone's
// ticks, 120 a second at four zones) held 65,536 time.Durations, 512 KB
// once full, and HandoffLatency as much again, ≈ 0.5 KB a player of a
// 2,000-player node for two quantiles. Both are read in milliseconds.
type Latency struct {
	mu      sync.Mutex
	samples []uint32 // microseconds
	next    int
	count   uint64
}

// latencyKeep bounds the ring (quantiles over the last this many samples:
// 2.3 minutes of four zones' ticks at 30 Hz, 64 KB).
const latencyKeep = 1 << 14

// latencyMax is the longest sample kept as itself.
const latencyMax = time.Duration(math.MaxUint32) * time.Microsecond

// Add records one sample.
func (l *Latency) Add(d time.Duration) {
	us := uint32(min(max(d, 0), latencyMax) / time.Microsecond)
	l.mu.Lock()
	if len(l.samples) < latencyKeep {
		if len(l.samples) == cap(l.samples) {
			// Grown by doubling to the bound and no further: append's
			// growth past 256 elements is not to a power of two.
			grown := make([]uint32, len(l.samples), min(max(2*cap(l.samples), 64), latencyKeep))
			copy(grown, l.samples)
			l.samples = grown
		}
		l.samples = append(l.samples, us)
	} else {
		l.samples[l.next] = us
		l.next = (l.next + 1) % latencyKeep
	}
	l.count++
	l.mu.Unlock()
}

// Count returns how many samples were ever added.
func (l *Latency) Count() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count
}

// Quantiles returns the given quantiles (0..1) of the kept samples (zero
// without samples), to the microsecond.
func (l *Latency) Quantiles(qs ...float64) []time.Duration {
	l.mu.Lock()
	s := slices.Clone(l.samples)
	l.mu.Unlock()
	out := make([]time.Duration, len(qs))
	if len(s) == 0 {
		return out
	}
	slices.Sort(s)
	for i, q := range qs {
		k := int(q * float64(len(s)-1))
		out[i] = time.Duration(s[min(max(k, 0), len(s)-1)]) * time.Microsecond
	}
	return out
}

// Reset drops the samples.
func (l *Latency) Reset() {
	l.mu.Lock()
	l.samples, l.next, l.count = l.samples[:0], 0, 0
	l.mu.Unlock()
}
