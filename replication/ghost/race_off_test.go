//go:build !race

package ghost

// raceEnabled: the race detector is on (its sync.Pool drops a quarter of
// what it is given).
const raceEnabled = false
