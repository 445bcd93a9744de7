package procs

import "github.com/prometheus/client_golang/prometheus"

// Collectors are the sizer's changes as metrics, for a registry. The Ps
// themselves are the Go collector's go_sched_gomaxprocs_threads.
func Collectors(st *Stats) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ghostwire_gomaxprocs_raises_total",
			Help: "Times the GOMAXPROCS sizer raised the Ps (the load filled them)."},
			func() float64 { return float64(st.Raises.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ghostwire_gomaxprocs_lag_raises_total",
			Help: "Of the GOMAXPROCS sizer's raises, those its probe's wake lag made (ready work waited for a P: a busy host, or the Ps full)."},
			func() float64 { return float64(st.LagRaises.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ghostwire_gomaxprocs_lowers_total",
			Help: "Times the GOMAXPROCS sizer lowered the Ps (the load fitted fewer for its hold)."},
			func() float64 { return float64(st.Lowers.Load()) }),
	}
}
