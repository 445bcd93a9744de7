package procs

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// The sizer's counters read its Stats and pass `promtool check metrics`.
func TestCollectorsExportTheChanges(t *testing.T) {
	reg := prometheus.NewRegistry()
	st := &Stats{}
	register := func() error {
		for _, c := range Collectors(st) {
			if err := reg.Register(c); err != nil {
				return err
			}
		}
		return nil
	}
	if err := register(); err != nil {
		t.Fatal(err)
	}
	st.Raises.Add(2)
	st.Lowers.Add(3)
	st.LagRaises.Add(1)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		got[f.GetName()] = f.GetMetric()[0].GetCounter().GetValue()
	}
	if got["ghostwire_gomaxprocs_raises_total"] != 2 || got["ghostwire_gomaxprocs_lowers_total"] != 3 || got["ghostwire_gomaxprocs_lag_raises_total"] != 1 {
		t.Fatalf("exported %v, want raises 2, lowers 3 and lag raises 1", got)
	}
	problems, err := promlint.NewWithMetricFamilies(fams).Lint()
	if err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
	if err := register(); err == nil {
		t.Fatal("the counters registered twice on the same registry")
	}
}
