//go:build race

package batchudp

// raceEnabled: under -race sync.Pool drops a share of what is put back, so
// x/net's pooled sendmmsg headers are sometimes made afresh.
const raceEnabled = true
