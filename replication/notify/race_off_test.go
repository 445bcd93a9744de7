//go:build !race

package notify

const raceEnabled = false
