//go:build race

package event

// raceEnabled: the race detector is on. Its runtime keeps one more small
// allocation of a Sender's first write live (TestSenderInFlightFootprint
// reads 680 B under it against 656 without), so the footprint bounds
// that count bytes allow for it there.
const raceEnabled = true
