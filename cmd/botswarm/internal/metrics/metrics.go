package metrics

import (
	"sync"
	"time"
)

// Counters are the swarm's cumulative counts. Every field only grows except
// Connected, a gauge. Workers add to their shard's copy; the collector sums
// the shards.
type Counters struct {
	// Bots.
	Sessions     uint64 `json:"sessions"`      // connection attempts (a churning bot makes many)
	Connects     uint64 `json:"connects"`      // handshakes completed
	ConnectFails uint64 `json:"connect_fails"` // handshakes that failed (timeout, denied)
	// Disconnects: sessions that were up and ended without the bot asking —
	// unexpected disconnects. They split by cause into the five below.
	Disconnects uint64 `json:"disconnects"`
	// DisconnectsShutdown: the server said ServerShutdown (it stopped, and
	// its drain failed or was skipped).
	DisconnectsShutdown uint64 `json:"disconnects_shutdown"`
	// DisconnectsKicked: the server said Kicked (an operator or the game).
	DisconnectsKicked uint64 `json:"disconnects_kicked"`
	// DisconnectsTimeout: silence — the bot heard nothing for the token's
	// timeout (a dead or paused server), or the server said Timeout.
	DisconnectsTimeout uint64 `json:"disconnects_timeout"`
	// DisconnectsSuperseded: the server said Duplicate — another session
	// connected with the bot's player id and took the player over: a
	// second swarm with an overlapping --player-base range, or another
	// client of the same player. Not the server refusing a returning
	// player: a player id whose earlier session has ended resumes from its
	// record.
	DisconnectsSuperseded uint64 `json:"disconnects_superseded"`
	// DisconnectsOther: any other reason (a protocol error, a reason this
	// botswarm does not know).
	DisconnectsOther uint64 `json:"disconnects_other"`
	// ReconnectAttempts: sessions started by a bot that had been connected
	// before — after a disconnect, or churn's planned return.
	ReconnectAttempts uint64 `json:"reconnect_attempts"`
	// ReconnectFails: ConnectFails of those reconnects (the server went
	// away, or would not take the bot back); the SLO calls them
	// failed_reconnects.
	ReconnectFails uint64 `json:"reconnect_fails"`
	// Redirects: sessions a server moved to another gateway with a
	// Redirect that the bot followed (reconnecting there as the same
	// player) — a drain working as designed, so no disconnect; a follow
	// whose reconnect then fails counts as a failed reconnect.
	Redirects uint64 `json:"redirects"`
	// Quits: sessions the bot ended itself — planned disconnects, never
	// counted as unexpected: the end of the run (or Ctrl-C), and QuitsChurn.
	Quits uint64 `json:"quits"`
	// QuitsChurn: the part of Quits that the churn scenario's session
	// lifetimes ended before the run did.
	QuitsChurn uint64 `json:"quits_churn"`
	Connected  int64  `json:"connected"` // gauge: sessions up right now

	// Traffic on the bots' sockets.
	PacketsIn  uint64 `json:"packets_in"`
	PacketsOut uint64 `json:"packets_out"`
	BytesIn    uint64 `json:"bytes_in"`
	BytesOut   uint64 `json:"bytes_out"`
	// NetDropped: packets the simulated network (--loss …) threw away, both directions.
	NetDropped uint64 `json:"net_dropped"`
	// NetSent: packets offered to the simulated network, both directions.
	NetSent uint64 `json:"net_sent"`

	// Protocol view of loss (notify): fates of the packets the bots sent,
	// and the server's packets the bots received or gave up on.
	FatesDelivered uint64 `json:"fates_delivered"`
	FatesDropped   uint64 `json:"fates_dropped"`
	InReceived     uint64 `json:"in_received"`
	InAbandoned    uint64 `json:"in_abandoned"`

	// Moves (invariant: every move acknowledged exactly once and in order).
	MovesSent  uint64 `json:"moves_sent"`
	MovesAcked uint64 `json:"moves_acked"`
	MovesLost  uint64 `json:"moves_lost"` // dropped from a full window: the server never got them
	// InputHeld: input samples not taken because the move window was full
	// (nothing acknowledged for 2.1 s: a zone failing over, an outage). The
	// player stood still for them; no move was lost. Reported, not judged.
	InputHeld    uint64 `json:"input_held"`
	MovesUnacked uint64 `json:"moves_unacked"` // still unacknowledged when the session ended while connected
	// SessionsUnplaced: sessions that were up for UnplacedAfter or more and
	// never heard their player's state from the server: the gateway took
	// the connection but no zone took the player (a join or a restore
	// from the player's record refused). MovesUnplaced are the moves those
	// sessions sent: no zone could acknowledge them, so they are counted
	// here and not as unacknowledged (the move protocol did not fail).
	SessionsUnplaced uint64 `json:"sessions_unplaced"`
	MovesUnplaced    uint64 `json:"moves_unplaced"`
	// MovesRedirected: moves still unacknowledged when a Redirect moved the
	// session to another gateway. The new session continues the move
	// stream: they go again and the player's zone drops the ones it had
	// applied (docs/protocol.md §7.19); their acknowledgement is judged
	// like any other move's. Informative.
	MovesRedirected uint64 `json:"moves_redirected"`
	StaleAcks       uint64 `json:"stale_acks"`      // control sections older than one already applied (reordering; not an error)
	ControlUpdates  uint64 `json:"control_updates"` // packets whose ack advanced
	Corrections     uint64 `json:"corrections"`     // authoritative states that moved the prediction

	// Guaranteed events echoed by the zone (invariant: intact, in order).
	EventsSent       uint64 `json:"events_sent"`
	EventsEchoed     uint64 `json:"events_echoed"`
	EventsCorrupt    uint64 `json:"events_corrupt"`      // payload changed on the way
	EventsOutOfOrder uint64 `json:"events_out_of_order"` // times an echo skipped ahead (the skipped ones count as lost)
	EventsDuplicate  uint64 `json:"events_duplicate"`    // echo of a counter already echoed
	EventsLost       uint64 `json:"events_lost"`         // never echoed though the session stayed up: skipped mid-stream, or missing at the end
	EventsForeign    uint64 `json:"events_foreign"`      // echoes of another bot's or session's events: misrouted
	EventsOther      uint64 `json:"events_other"`        // lane-0 events that are no echo at all (the game's own)
	EventsRefused    uint64 `json:"events_refused"`      // the session's queue was full (not sent, not counted as sent)

	// View accuracy.
	ViewSamples  uint64 `json:"view_samples"`  // ghost positions of peer bots compared
	ViewPeers    uint64 `json:"view_peers"`    // ghost updates that were peer bots
	ViewOthers   uint64 `json:"view_others"`   // ghosts that were not bots of this swarm (NPCs)
	ViewNoTruth  uint64 `json:"view_no_truth"` // peer ghosts whose true position was no longer known
	ViewBySeq    uint64 `json:"view_by_seq"`   // judged exactly: the ghost carried the move seq it reflects
	ViewByTime   uint64 `json:"view_by_time"`  // judged by server time: ± one server tick
	GhostsHeld   uint64 `json:"ghosts_held"`   // sum over samples of ghosts held (mean = /ghost_samples)
	GhostSamples uint64 `json:"ghost_samples"` // bots sampled for GhostsHeld

	// Handoffs: zone-border crossings of the bots' authoritative positions.
	Handoffs  uint64 `json:"handoffs"`
	Teleports uint64 `json:"teleports"`

	// Errors.
	Errors         uint64 `json:"errors"`          // every error below
	SocketErrors   uint64 `json:"socket_errors"`   // send/receive failures
	ProtocolErrors uint64 `json:"protocol_errors"` // Receive rejected a datagram
	SessionErrors  uint64 `json:"session_errors"`  // Poll/Input/SendEvent failed
}

// Add adds o into c.
func (c *Counters) Add(o *Counters) {
	c.Sessions += o.Sessions
	c.Connects += o.Connects
	c.ConnectFails += o.ConnectFails
	c.Disconnects += o.Disconnects
	c.DisconnectsShutdown += o.DisconnectsShutdown
	c.DisconnectsKicked += o.DisconnectsKicked
	c.DisconnectsTimeout += o.DisconnectsTimeout
	c.DisconnectsSuperseded += o.DisconnectsSuperseded
	c.DisconnectsOther += o.DisconnectsOther
	c.ReconnectAttempts += o.ReconnectAttempts
	c.ReconnectFails += o.ReconnectFails
	c.Redirects += o.Redirects
	c.Quits += o.Quits
	c.QuitsChurn += o.QuitsChurn
	c.Connected += o.Connected
	c.PacketsIn += o.PacketsIn
	c.PacketsOut += o.PacketsOut
	c.BytesIn += o.BytesIn
	c.BytesOut += o.BytesOut
	c.NetDropped += o.NetDropped
	c.NetSent += o.NetSent
	c.FatesDelivered += o.FatesDelivered
	c.FatesDropped += o.FatesDropped
	c.InReceived += o.InReceived
	c.InAbandoned += o.InAbandoned
	c.MovesSent += o.MovesSent
	c.MovesAcked += o.MovesAcked
	c.MovesLost += o.MovesLost
	c.InputHeld += o.InputHeld
	c.MovesUnacked += o.MovesUnacked
	c.SessionsUnplaced += o.SessionsUnplaced
	c.MovesUnplaced += o.MovesUnplaced
	c.MovesRedirected += o.MovesRedirected
	c.StaleAcks += o.StaleAcks
	c.ControlUpdates += o.ControlUpdates
	c.Corrections += o.Corrections
	c.EventsSent += o.EventsSent
	c.EventsEchoed += o.EventsEchoed
	c.EventsCorrupt += o.EventsCorrupt
	c.EventsOutOfOrder += o.EventsOutOfOrder
	c.EventsDuplicate += o.EventsDuplicate
	c.EventsLost += o.EventsLost
	c.EventsForeign += o.EventsForeign
	c.EventsOther += o.EventsOther
	c.EventsRefused += o.EventsRefused
	c.ViewSamples += o.ViewSamples
	c.ViewPeers += o.ViewPeers
	c.ViewOthers += o.ViewOthers
	c.ViewNoTruth += o.ViewNoTruth
	c.ViewBySeq += o.ViewBySeq
	c.ViewByTime += o.ViewByTime
	c.GhostsHeld += o.GhostsHeld
	c.GhostSamples += o.GhostSamples
	c.Handoffs += o.Handoffs
	c.Teleports += o.Teleports
	c.Errors += o.Errors
	c.SocketErrors += o.SocketErrors
	c.ProtocolErrors += o.ProtocolErrors
	c.SessionErrors += o.SessionErrors
}

// Histogram ranges, in recording units.
const (
	maxMicros     = int64(120 * time.Second / time.Microsecond) // RTT, latencies, hitches
	maxMicrometre = int64(10_000 * 1e6)                         // view error: 10 km
)

// Hists are the swarm's distributions.
type Hists struct {
	RTT     *Hist // each connected bot's smoothed RTT, sampled once a second
	Ack     *Hist // input sampled → move acknowledged
	Echo    *Hist // event sent → echo received
	ViewErr *Hist // |ghost position − that bot's true position at the ghost's server tick|
	Hitch   *Hist // longest gap between control updates around a handoff
	// Gap is the same measure away from handoffs: the longest gap between
	// control updates in each hitch-window-long stretch of ordinary play,
	// the baseline a hitch is judged against.
	Gap     *Hist
	Connect *Hist // session start → connected
	// Placed: connected → the player's first state from the server (its
	// zone placed it: a join, or a restore from its record when the player
	// id played before). A returning player held back shows here.
	Placed *Hist
}

// NewHists returns empty histograms.
func NewHists() Hists {
	ms := func() *Hist { return NewHist(maxMicros, 1000, "ms") }
	return Hists{
		RTT: ms(), Ack: ms(), Echo: ms(), Hitch: ms(), Gap: ms(), Connect: ms(), Placed: ms(),
		ViewErr: NewHist(maxMicrometre, 1e6, "m"),
	}
}

func (h Hists) each(f func(name string, x *Hist)) {
	f("rtt", h.RTT)
	f("ack", h.Ack)
	f("echo", h.Echo)
	f("view_err", h.ViewErr)
	f("handoff_hitch", h.Hitch)
	f("control_gap", h.Gap)
	f("connect", h.Connect)
	f("placed", h.Placed)
}

// Merge adds o into h.
func (h Hists) Merge(o Hists) {
	h.RTT.Merge(o.RTT)
	h.Ack.Merge(o.Ack)
	h.Echo.Merge(o.Echo)
	h.ViewErr.Merge(o.ViewErr)
	h.Hitch.Merge(o.Hitch)
	h.Gap.Merge(o.Gap)
	h.Connect.Merge(o.Connect)
	h.Placed.Merge(o.Placed)
}

// Reset empties every histogram.
func (h Hists) Reset() { h.each(func(_ string, x *Hist) { x.Reset() }) }

// Shard is one worker's metrics. The worker holds Mu while it updates C
// and H (once per loop turn, not per sample); the collector holds it
// while it reads them once a second.
type Shard struct {
	Mu sync.Mutex
	C  Counters
	H  Hists // samples since the collector last took them
}

// NewShard returns an empty shard.
func NewShard() *Shard { return &Shard{H: NewHists()} }
