//go:build unix

package metrics

import (
	"syscall"
	"time"
)

// ProcessCPU returns the user+system CPU time this process has used, or −1
// when the OS does not say.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ProcessMaxRSS returns the process's peak resident set in bytes, or −1.
func ProcessMaxRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return int64(ru.Maxrss) * 1024 // kilobytes on Linux
}
