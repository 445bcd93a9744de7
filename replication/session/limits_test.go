package session

import (
	"testing"
	"time"
)

// TestLimitsShared: Servers of one config share one serverLimits; another
// config gets its own, and Servers keep reading their own values.
func TestLimitsShared(t *testing.T) {
	a := serverLimits{Bandwidth: 16000, MaxPacketSize: 1200, MinPacketSize: 200, interval: 50 * time.Millisecond}
	b := a
	b.interval = 20 * time.Millisecond
	pa, pa2, pb := internLimits(a), internLimits(a), internLimits(b)
	if pa != pa2 {
		t.Fatal("two Servers of one config got separate copies")
	}
	if pa == pb || *pa != a || *pb != b {
		t.Fatalf("configs mixed up: %+v, %+v", *pa, *pb)
	}
}
