package session

import (
	"testing"
	"time"
)

// TestLimitsShared: endpoints of one config share one endpointLimits;
// another config (here: another send rate) gets its own, and each keeps
// reading its own values.
func TestLimitsShared(t *testing.T) {
	a := endpointLimits{keepAlive: time.Second, timeout: 10 * time.Second, discCopies: 5, lanes: 8,
		srv: serverLimits{Bandwidth: 16000, MaxPacketSize: 1200, MinPacketSize: 200, interval: 50 * time.Millisecond}}
	b := a
	b.srv.interval = 20 * time.Millisecond
	pa, pa2, pb := epLimits.Get(a), epLimits.Get(a), epLimits.Get(b)
	if pa != pa2 {
		t.Fatal("two endpoints of one config got separate copies")
	}
	if pa == pb || *pa != a || *pb != b {
		t.Fatalf("configs mixed up: %+v, %+v", *pa, *pb)
	}
}
