//go:build !linux

package main

import "time"

// burstClock is 0 where there is no thread CPU clock: hostProbe counts
// its bursts' wall time instead.
func burstClock() time.Duration { return 0 }
