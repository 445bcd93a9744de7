package node

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ghostwire/ghostwire/actors/zone"
)

// registerZoneMetrics exports the zone actors' counters on /metrics: the
// node-wide counters of zone.Metrics, and per zone (label zone) the tick
// cost histogram and the player and NPC counts, so a hot zone can be
// found. The zone label is bounded by the world map (a handful of zones,
// at most world.MaxZones); nothing is labelled by player.
func registerZoneMetrics(reg prometheus.Registerer, zones *zone.World) error {
	m := zones.Metrics()
	counters := []struct {
		name, help string
		v          func() uint64
	}{
		{"ticks_total", "Zone ticks run, all zones of this node.", m.Ticks.Load},
		{"missed_ticks_total", "Zone ticks skipped because the actor fell a whole period behind.", m.MissedTicks.Load},
		{"late_ticks_total", "Zone ticks posted after their slot had passed (the last tick ran long), behind the inputs already queued.", m.LateTicks.Load},
		{"fenced_total", "Times a zone paused itself because its lease's renewal was overdue (a node woken from a pause past its lease), before the node's hold reached it: nothing applied until the lease is good again or the zone is lost.", m.Fenced.Load},
		{"views_total", "View updates sent to ghost managers.", m.Views.Load},
		{"controls_total", "Control-object updates sent to connections.", m.Controls.Load},
		{"joins_total", "Players joined.", m.Joins.Load},
		{"joins_rejected_total", "Player joins a zone refused (the connection is kicked).", m.JoinsRejected.Load},
		{"leaves_total", "Players left.", m.Leaves.Load},
		{"gateway_gone_leaves_total", "Players taken out of a zone because the cluster node holding their connections died (no heartbeat for 10 s) or started again: nobody else would end them.", m.GatewayGoneLeaves.Load},
		{"inputs_total", "Input batches received from connections.", m.Inputs.Load},
		{"inputs_dropped_total", "Input batches for a player the zone does not know.", m.InputsDropped.Load},
		{"held_inputs_dropped_total", "Inputs a zone held for a player it was taking over, for a login whose Join had not come, dropped (past 64 a player, superseded, refused with their Join, or no Join within 10 s).", m.HeldInputsDropped.Load},
		{"held_inputs_returned_total", "Inputs a zone held for a player it was taking over, passed on to where the player is (the Offer ended without a Commit, or the player went on).", m.HeldInputsReturned.Load},
		{"inputs_shed_total", "Inputs without events a zone's full mailbox refused (their moves are sent again).", m.InputsShed.Load},
		{"events_total", "Client events received.", m.Events.Load},
		{"events_out_total", "Events sent to clients.", m.EventsOut.Load},
		{"events_out_dropped_total", "Events to clients dropped by the per-tick budget.", m.EventsOutDropped.Load},
		{"events_malformed_total", "Client events with a malformed payload.", m.EventsMalformed.Load},
		{"events_duplicate_total", "Client ordered events dropped at the player's event fence: applied before, resent after a redirect or a restore.", m.EventsDuplicate.Load},
		{"events_early_dropped_total", "Client events of a player a zone had reserved but did not own yet that reached the game's handler: dropped, never applied before the Commit brings the player's fence (0 unless a hold was missed).", m.EventsEarlyDropped.Load},
		{"events_paused_dropped_total", "Client events that came while a zone was frozen for a handover to another node and were not applied there: the client resends the ordered ones to the next owner.", m.EventsPausedDropped.Load},
		{"events_away_dropped_total", "Client events of a player a zone neither owns nor knows where it went: dropped (the client resends numbered ordered ones on its next connection; others are lost).", m.EventsAwayDropped.Load},
		{"handoffs_in_total", "Entities acquired from a neighbouring zone.", m.HandoffsIn.Load},
		{"redirects_total", "Connections redirected to a new owning zone.", m.Redirects.Load},
		{"panics_total", "Zone actors that panicked and were restarted empty (a bug: see the error log).", m.Panics.Load},
		{"tick_seconds_total", "Measured zone tick cost, summed over all zones of this node.", func() uint64 { return m.TickNanos.Load() }},
	}
	for _, c := range counters {
		v := c.v
		f := func() float64 { return float64(v()) }
		if c.name == "tick_seconds_total" {
			f = func() float64 { return float64(v()) / 1e9 }
		}
		if err := reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "ghostwire", Subsystem: "zone", Name: c.name, Help: c.help,
		}, f)); err != nil {
			return fmt.Errorf("zone metrics: %w", err)
		}
	}
	if err := reg.Register(&zoneCollector{zones: zones}); err != nil {
		return fmt.Errorf("zone metrics: %w", err)
	}
	return nil
}

var (
	zoneTickDesc = prometheus.NewDesc("ghostwire_zone_tick_cost_seconds",
		"Measured cost of one zone tick, per zone running on this node.", []string{"zone"}, nil)
	zonePlayersDesc = prometheus.NewDesc("ghostwire_zone_players",
		"Players owned by the zone (reported by the zone about once a second), per zone running on this node.", []string{"zone"}, nil)
	zoneNPCsDesc = prometheus.NewDesc("ghostwire_zone_npcs",
		"NPCs owned by the zone (reported by the zone about once a second), per zone running on this node.", []string{"zone"}, nil)
)

// zoneCollector exports the per-zone series of the zones that run here now:
// a zone that moved to another node disappears from this node's /metrics
// and appears on the new owner's.
type zoneCollector struct{ zones *zone.World }

func (c *zoneCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- zoneTickDesc
	ch <- zonePlayersDesc
	ch <- zoneNPCsDesc
}

func (c *zoneCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.zones.Metrics()
	// The map is immutable; Load is safe to call while zones come and go
	// (IDs is not).
	for _, zn := range c.zones.Map().Zones() {
		players, npcs, ok := c.zones.Load(zn.ID)
		if !ok {
			continue
		}
		ch <- prometheus.MustNewConstMetric(zonePlayersDesc, prometheus.GaugeValue, float64(players), zn.ID)
		ch <- prometheus.MustNewConstMetric(zoneNPCsDesc, prometheus.GaugeValue, float64(npcs), zn.ID)
		if b, n, sum, ok := m.ZoneTicks.Histogram(zn.ID); ok {
			ch <- prometheus.MustNewConstHistogram(zoneTickDesc, n, sum, b, zn.ID)
		}
	}
}

// registerBuildInfo exports ghostwire_build_info, the conventional constant
// 1 whose labels say what runs: the module version ("(devel)" for a source
// build), the Go version and the VCS revision ("unknown" when not built
// from a checkout).
func registerBuildInfo(reg prometheus.Registerer) error {
	version, revision := buildVersion()
	return reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "ghostwire", Name: "build_info",
		Help:        "A constant 1 labelled with the zoned build's version, Go version and VCS revision.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version(), "revision": revision},
	}, func() float64 { return 1 }))
}

// buildVersion reads the module version and VCS revision from the binary
// (debug.ReadBuildInfo); a dirty tree's revision ends in "-dirty".
func buildVersion() (version, revision string) {
	version, revision = "unknown", "unknown"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return version, revision
	}
	if bi.Main.Version != "" {
		version = bi.Main.Version
	}
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && revision != "unknown" {
		revision += "-dirty"
	}
	return version, revision
}
