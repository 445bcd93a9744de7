//go:build !race

package batchudp

const raceEnabled = false
