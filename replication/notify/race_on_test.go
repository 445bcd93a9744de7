//go:build race

package notify

const raceEnabled = true
