//go:build !unix

package metrics

import "time"

// ProcessCPU returns −1: this platform's CPU accounting is not wired up.
func ProcessCPU() time.Duration { return -1 }

// ProcessMaxRSS returns −1: not wired up on this platform.
func ProcessMaxRSS() int64 { return -1 }
