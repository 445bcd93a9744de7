package gateway

import (
	"reflect"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/ghostwire/ghostwire/actors/conn"
	"github.com/ghostwire/ghostwire/replication/handshake"
)

// statSeries is the metrics page's contract for Stats: each exported
// series (name and label) and the field it reads. docs/operations.md
// lists the same names for operators.
var statSeries = map[string]string{
	"ghostwire_gateway_datagrams_total/in":                         "DatagramsIn",
	"ghostwire_gateway_datagrams_total/out":                        "DatagramsOut",
	"ghostwire_gateway_bytes_total/in":                             "BytesIn",
	"ghostwire_gateway_bytes_total/out":                            "BytesOut",
	"ghostwire_gateway_batch_syscalls_total/recvmmsg":              "ReadBatches",
	"ghostwire_gateway_batch_syscalls_total/sendmmsg":              "WriteBatches",
	"ghostwire_gateway_read_waits_total/":                          "ReadWaits",
	"ghostwire_gateway_rejected_total/garbage":                     "Garbage",
	"ghostwire_gateway_rejected_total/unexpected":                  "Unexpected",
	"ghostwire_gateway_rejected_total/unknown_conn":                "UnknownConn",
	"ghostwire_gateway_rejected_total/handshake_rate_limited":      "HandshakeLimited",
	"ghostwire_gateway_rejected_total/auth_failed":                 "AuthFailed",
	"ghostwire_gateway_rejected_total/replayed":                    "Replayed",
	"ghostwire_gateway_rejected_total/wrong_conn":                  "WrongConn",
	"ghostwire_gateway_rejected_total/bad_header":                  "BadHeader",
	"ghostwire_gateway_rejected_total/after_close":                 "AfterClose",
	"ghostwire_gateway_rejected_total/conn_garbage":                "ConnGarbage",
	"ghostwire_gateway_rejected_total/conn_unexpected":             "ConnUnexpected",
	"ghostwire_gateway_rejected_total/handshake_dropped":           "HandshakeDrop",
	"ghostwire_gateway_handshakes_total/handled":                   "Handshakes",
	"ghostwire_gateway_handshakes_total/granted":                   "Granted",
	"ghostwire_gateway_handshakes_total/verified":                  "Verified",
	"ghostwire_gateway_handshakes_total/replies":                   "Replies",
	"ghostwire_gateway_handshakes_total/spawn_failed":              "SpawnFailed",
	"ghostwire_gateway_packets_total/delivered":                    "PacketsDelivered",
	"ghostwire_gateway_packets_total/lost":                         "PacketsLost",
	"ghostwire_gateway_queue_drops_total/inbound":                  "InboundDropped",
	"ghostwire_gateway_queue_drops_total/write":                    "WriteDropped",
	"ghostwire_gateway_queue_drops_total/read_backpressure":        "ReadBackpressure",
	"ghostwire_gateway_conn_events_total/moved":                    "Moved",
	"ghostwire_gateway_conn_events_total/no_connection_suppressed": "NoConnSuppressed",
	"ghostwire_gateway_conn_events_total/superseded":               "Superseded",
	"ghostwire_gateway_conn_events_total/no_connection_sent":       "NoConnSent",
	"ghostwire_gateway_conn_events_total/redirected":               "Redirects",
	"ghostwire_gateway_conn_events_total/passed_on":                "PassedOn",
	"ghostwire_gateway_conn_events_total/protocol_errors":          "ProtocolErrors",
	"ghostwire_gateway_conn_events_total/events_dropped":           "EventsDropped",
	"ghostwire_gateway_conn_events_total/inputs_dropped":           "InputsDropped",
	"ghostwire_gateway_conn_events_total/moves_resent":             "MovesResent",
	"ghostwire_gateway_conn_events_total/events_resent":            "EventsResent",
	"ghostwire_gateway_conn_events_total/events_stale":             "EventsStale",
	"ghostwire_gateway_conn_events_total/relooks":                  "Relooks",
	"ghostwire_gateway_conn_events_total/write_errors":             "WriteErrors",
	"ghostwire_gateway_conn_events_total/read_errors":              "ReadErrors",
	"ghostwire_gateway_conn_events_total/controls_superseded":      "ControlsSuperseded",
	"ghostwire_gateway_conn_events_total/far_accepted":             "FarAccepted",
	"ghostwire_gateway_conn_events_total/window_evicted":           "WindowEvicted",
}

// statsUnexported are the counters of Stats the metrics page leaves out
// on purpose: Routed is DatagramsIn less what was rejected or dropped.
var statsUnexported = map[string]bool{"Routed": true}

// Every counter of Stats is on the metrics page under its own series and
// reads its own field: each field set to a value of its own, each series
// must carry its field's value and no field may go missing (a counter
// added to Stats without a series fails here, as does a label that reads
// the wrong field). The connection-level labels were tested only through
// the pool's counters before.
func TestCollectorExportsEveryStat(t *testing.T) {
	var s Stats
	sv := reflect.ValueOf(&s).Elem()
	value := map[string]float64{}
	next := uint64(1000)
	for i := range sv.NumField() {
		f, ft := sv.Field(i), sv.Type().Field(i)
		switch f.Kind() {
		case reflect.Uint64:
			next += 7
			f.SetUint(next)
			value[ft.Name] = float64(next)
		case reflect.Int64:
			next += 7
			f.SetInt(int64(next))
		}
	}
	s.Pending = s.Conns / 3
	s.ShardRounds = [3]uint64{11, 22, 33}
	s.Denied = map[handshake.Reason]uint64{handshake.ReasonServerFull: 44}
	s.Closed = map[handshake.Reason]uint64{handshake.ReasonTimeout: 55}
	s.TokenKeys = map[string]uint64{"0a1b2c3d": 66, "4e5f6a7b": 0}
	s.KeysHeld = []string{"4e5f6a7b", "0a1b2c3d"}

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(statsOnly{c: newCollector(nil), s: s})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			label := ""
			for i, l := range m.GetLabel() {
				if i > 0 {
					label += ","
				}
				label += l.GetValue()
			}
			key := mf.GetName() + "/" + label
			if _, dup := got[key]; dup {
				t.Fatalf("%s exported twice", key)
			}
			got[key] = metricValue(m)
		}
	}
	seen := map[string]bool{}
	for key, field := range statSeries {
		v, ok := got[key]
		if !ok {
			t.Errorf("%s (Stats.%s) not exported", key, field)
			continue
		}
		if want := value[field]; v != want {
			t.Errorf("%s = %v, want Stats.%s = %v", key, v, field, want)
		}
		seen[field] = true
	}
	for field := range value {
		if !seen[field] && !statsUnexported[field] {
			t.Errorf("Stats.%s is on no series of the metrics page", field)
		}
	}
	for key, want := range map[string]float64{
		"ghostwire_gateway_conns/verified":                                         float64(s.Conns - s.Pending),
		"ghostwire_gateway_conns/pending":                                          float64(s.Pending),
		"ghostwire_gateway_shard_rounds_total/posted":                              float64(s.ShardRounds[conn.RoundPosted]),
		"ghostwire_gateway_shard_rounds_total/timer":                               float64(s.ShardRounds[conn.RoundTimer]),
		"ghostwire_gateway_shard_rounds_total/straight":                            float64(s.ShardRounds[conn.RoundStraight]),
		"ghostwire_gateway_denied_total/" + handshake.ReasonServerFull.String():    44,
		"ghostwire_gateway_conns_closed_total/" + handshake.ReasonTimeout.String(): 55,
		"ghostwire_gateway_token_key_grants_total/0a1b2c3d":                        66,
		"ghostwire_gateway_token_keys/4e5f6a7b,mint":                               1,
		"ghostwire_gateway_token_keys/0a1b2c3d,open":                               1,
		"ghostwire_gateway_token_key_grants_total/4e5f6a7b":                        0,
	} {
		if got[key] != want {
			t.Errorf("%s = %v, want %v", key, got[key], want)
		}
	}
}

// statsOnly is the gateway's collector over a fixed Stats.
type statsOnly struct {
	c *collector
	s Stats
}

func (o statsOnly) Describe(ch chan<- *prometheus.Desc) { o.c.Describe(ch) }

func (o statsOnly) Collect(ch chan<- prometheus.Metric) { o.c.collectStats(ch, o.s) }

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	}
	return -1
}
