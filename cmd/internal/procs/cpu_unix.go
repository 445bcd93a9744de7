//go:build unix

package procs

import (
	"syscall"
	"time"
)

// ProcessCPU is the process's user and system CPU time so far, every
// thread's (getrusage RUSAGE_SELF): the kernel's work on its behalf, a
// loopback send's delivery included, counts as the load it is.
func ProcessCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
