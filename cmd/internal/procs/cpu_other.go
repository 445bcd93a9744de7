//go:build !unix

package procs

import "time"

// ProcessCPU has no source here: ErrNoCPUClock.
func ProcessCPU() (time.Duration, error) { return 0, ErrNoCPUClock }
