//go:build !unix

package procs

import "time"

func processCPU() (time.Duration, error) { return 0, ErrNoCPUClock }
