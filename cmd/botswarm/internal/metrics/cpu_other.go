//go:build !unix

package metrics

import "time"

// ProcessCPU returns −1: this platform's CPU accounting is not wired up.
func ProcessCPU() time.Duration { return -1 }
