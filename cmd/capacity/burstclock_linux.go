package main

import (
	"time"

	"golang.org/x/sys/unix"
)

// burstClock is the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID),
// or 0 when the clock cannot be read.
func burstClock() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
