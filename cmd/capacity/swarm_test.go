package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReadSwarmGhostsInTheWindow: the ghosts a bot held are the mean of
// the series' seconds inside the measurement window, not the ramp's, nor
// the seconds after it or the draining ones (the run's last ten seconds
// read 2–3 % low: the crowd walked apart after the heap was taken).
func TestReadSwarmGhostsInTheWindow(t *testing.T) {
	report := `{"metrics": {"rtt_p50": 0.02, "rtt_p99": 0.05, "lost_moves": 0, "lost_events": 0, "cpu_per_bot": 0.0001},
"series": [
 {"t": 1, "ghosts_per_bot": 5},
 {"t": 9.5, "ghosts_per_bot": 70},
 {"t": 10.5, "ghosts_per_bot": 80},
 {"t": 11.5, "ghosts_per_bot": 82},
 {"t": 12.5, "ghosts_per_bot": 84},
 {"t": 14.5, "ghosts_per_bot": 60},
 {"t": 12.9, "ghosts_per_bot": 1, "draining": true},
 {"t": 13, "ghosts_per_bot": null}
]}`
	path := filepath.Join(t.TempDir(), "swarm.json")
	if err := os.WriteFile(path, []byte(report), 0o600); err != nil {
		t.Fatal(err)
	}
	var st Step
	if err := readSwarm(path, [2]float64{10, 13}, &st); err != nil {
		t.Fatal(err)
	}
	if st.GhostsPerBot != 82 {
		t.Errorf("ghosts per bot %v, want 82 (the mean of 80, 82 and 84: the seconds inside the window, not draining)", st.GhostsPerBot)
	}
	if st.RTTP99Ms != 50 || st.SwarmCPUMs != 0.1 {
		t.Errorf("RTT p99 %v ms, CPU %v ms a bot-second: want 50 and 0.1", st.RTTP99Ms, st.SwarmCPUMs)
	}
}
