package gateway

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ghostwire/ghostwire/actors/conn"
)

// collector exports Stats as Prometheus metrics, reading one snapshot per
// scrape: the hot paths only touch their atomics.
type collector struct {
	g *Gateway

	datagrams, bytes, rejected, handshakes, denied, closed, conns, drops *prometheus.Desc
	events                                                               *prometheus.Desc
	packets, rtt                                                         *prometheus.Desc
	syscalls, waits                                                      *prometheus.Desc
	rounds                                                               *prometheus.Desc
	tokenKeys, keysHeld                                                  *prometheus.Desc
}

func (g *Gateway) registerMetrics(reg prometheus.Registerer) error {
	if err := reg.Register(newCollector(g)); err != nil {
		return fmt.Errorf("gateway: register metrics: %w", err)
	}
	return nil
}

func newCollector(g *Gateway) *collector {
	return &collector{
		g:          g,
		datagrams:  prometheus.NewDesc("ghostwire_gateway_datagrams_total", "Datagrams read (in) and sent (out).", []string{"dir"}, nil),
		bytes:      prometheus.NewDesc("ghostwire_gateway_bytes_total", "UDP payload bytes read (in) and sent (out).", []string{"dir"}, nil),
		rejected:   prometheus.NewDesc("ghostwire_gateway_rejected_total", "Datagrams dropped, by reason.", []string{"reason"}, nil),
		handshakes: prometheus.NewDesc("ghostwire_gateway_handshakes_total", "Handshake outcomes.", []string{"outcome"}, nil),
		denied:     prometheus.NewDesc("ghostwire_gateway_denied_total", "Connect requests denied, by reason.", []string{"reason"}, nil),
		closed:     prometheus.NewDesc("ghostwire_gateway_conns_closed_total", "Connections ended, by reason.", []string{"reason"}, nil),
		conns:      prometheus.NewDesc("ghostwire_gateway_conns", "Connection actors alive, by state.", []string{"state"}, nil),
		drops:      prometheus.NewDesc("ghostwire_gateway_queue_drops_total", "Datagrams dropped by a full bounded queue.", []string{"queue"}, nil),
		events:     prometheus.NewDesc("ghostwire_gateway_conn_events_total", "Connection-level events.", []string{"event"}, nil),
		packets: prometheus.NewDesc("ghostwire_gateway_packets_total",
			"Packets sent to clients whose fate is known: delivered (acknowledged) or lost (declared dropped); the packet loss clients see.", []string{"fate"}, nil),
		syscalls: prometheus.NewDesc("ghostwire_gateway_batch_syscalls_total",
			"Batched socket system calls that moved a datagram or more (recvmmsg, sendmmsg); datagrams_total ÷ this is the datagrams a call carried.", []string{"call"}, nil),
		waits: prometheus.NewDesc("ghostwire_gateway_read_waits_total",
			"Times the reader found the socket empty and waited for the poller (a wake-up each); batch_syscalls_total{call=\"recvmmsg\"} ÷ this is the batches a wake-up read.", nil, nil),
		rounds: prometheus.NewDesc("ghostwire_gateway_shard_rounds_total",
			"Rounds of the connection shards by what started them: posted (a post woke the shard), timer (its deadline timer fired), straight (no wait); all but straight are wake-ups.", []string{"cause"}, nil),
		tokenKeys: prometheus.NewDesc("ghostwire_gateway_token_key_grants_total",
			"Sessions granted, by the token key that opened the client's token (its fingerprint, as zoned's ready line names it); during a key rotation, the old key may go once its count stops rising.", []string{"key"}, nil),
		keysHeld: prometheus.NewDesc("ghostwire_gateway_token_keys",
			"The token keys this gateway holds (1 each), by fingerprint: role mint for the one its Redirect tokens are sealed with (also opened), open for the others of a rotation.", []string{"key", "role"}, nil),
		rtt: prometheus.NewDesc("ghostwire_gateway_rtt_seconds",
			"Smoothed round-trip time of the connections, each sampled about once a second.", nil, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.datagrams, c.bytes, c.rejected, c.handshakes, c.denied, c.closed, c.conns, c.drops, c.events, c.packets, c.rtt, c.syscalls, c.waits, c.rounds, c.tokenKeys, c.keysHeld} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.collectStats(ch, c.g.Stats())
	b, n, sum := c.g.RTT().Snapshot()
	ch <- prometheus.MustNewConstHistogram(c.rtt, n, sum, b)
}

// collectStats exports one snapshot of Stats: every field but Routed
// (Verified, Conns and Pending as the conns gauge's states), each under
// its own label (TestCollectorExportsEveryStat).
func (c *collector) collectStats(ch chan<- prometheus.Metric, s Stats) {
	counter := func(d *prometheus.Desc, v uint64, label string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), label)
	}
	counter(c.datagrams, s.DatagramsIn, "in")
	counter(c.datagrams, s.DatagramsOut, "out")
	counter(c.syscalls, s.ReadBatches, "recvmmsg")
	counter(c.syscalls, s.WriteBatches, "sendmmsg")
	ch <- prometheus.MustNewConstMetric(c.waits, prometheus.CounterValue, float64(s.ReadWaits))
	counter(c.rounds, s.ShardRounds[conn.RoundPosted], "posted")
	counter(c.rounds, s.ShardRounds[conn.RoundTimer], "timer")
	counter(c.rounds, s.ShardRounds[conn.RoundStraight], "straight")
	counter(c.bytes, s.BytesIn, "in")
	counter(c.bytes, s.BytesOut, "out")
	for reason, v := range map[string]uint64{
		"garbage": s.Garbage, "unexpected": s.Unexpected, "unknown_conn": s.UnknownConn,
		"handshake_rate_limited": s.HandshakeLimited, "auth_failed": s.AuthFailed, "replayed": s.Replayed,
		"wrong_conn": s.WrongConn, "bad_header": s.BadHeader, "after_close": s.AfterClose,
		"conn_garbage": s.ConnGarbage, "conn_unexpected": s.ConnUnexpected,
		"handshake_dropped": s.HandshakeDrop,
	} {
		counter(c.rejected, v, reason)
	}
	for outcome, v := range map[string]uint64{
		"handled": s.Handshakes, "granted": s.Granted, "verified": s.Verified, "replies": s.Replies,
		"spawn_failed": s.SpawnFailed,
	} {
		counter(c.handshakes, v, outcome)
	}
	for r, v := range s.Denied {
		counter(c.denied, v, r.String())
	}
	for r, v := range s.Closed {
		counter(c.closed, v, r.String())
	}
	for id, v := range s.TokenKeys {
		counter(c.tokenKeys, v, id)
	}
	for i, id := range s.KeysHeld {
		role := "open"
		if i == 0 {
			role = "mint"
		}
		ch <- prometheus.MustNewConstMetric(c.keysHeld, prometheus.GaugeValue, 1, id, role)
	}
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.Conns-s.Pending), "verified")
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.Pending), "pending")
	counter(c.packets, s.PacketsDelivered, "delivered")
	counter(c.packets, s.PacketsLost, "lost")
	counter(c.drops, s.InboundDropped, "inbound")
	counter(c.drops, s.WriteDropped, "write")
	counter(c.drops, s.ReadBackpressure, "read_backpressure")
	for ev, v := range map[string]uint64{
		"moved": s.Moved, "no_connection_suppressed": s.NoConnSuppressed, "superseded": s.Superseded, "no_connection_sent": s.NoConnSent,
		"redirected": s.Redirects, "passed_on": s.PassedOn,
		"protocol_errors": s.ProtocolErrors, "events_dropped": s.EventsDropped,
		"inputs_dropped": s.InputsDropped, "moves_resent": s.MovesResent, "events_resent": s.EventsResent, "events_stale": s.EventsStale, "relooks": s.Relooks, "write_errors": s.WriteErrors, "read_errors": s.ReadErrors,
		"controls_superseded": s.ControlsSuperseded, "far_accepted": s.FarAccepted, "window_evicted": s.WindowEvicted,
	} {
		counter(c.events, v, ev)
	}
}
