//go:build race

package node

// raceEnabled: the race detector slows code 5–20×, so load tests scale down
// under it; `make test` also runs them at full scale without it.
const raceEnabled = true
