//go:build race

package event

// raceEnabled: the race detector is on. Its runtime keeps one more small
// allocation of a Sender's first write live (TestSenderInFlightFootprint
// reads 642–648 B under it against 618 without), so the footprint bounds
// that count bytes allow for it there.
const raceEnabled = true
