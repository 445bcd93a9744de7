package notify

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// TestForcedAny: ForcedAny is false until WriteHeader force-drops a record
// (MaxInFlight reached, the peer silent), and the fate that drop resolved
// is waiting for PopFate then: the one a caller that pops after every
// AcceptHeader would otherwise never see.
func TestForcedAny(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxInFlight = MinMaxInFlight
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	for i := range MinMaxInFlight {
		if c.ForcedAny() {
			t.Fatalf("ForcedAny after %d headers, before MaxInFlight", i)
		}
		if _, ok := c.PopFate(); ok {
			t.Fatalf("a fate waits after %d headers and no ack", i)
		}
		w := bitstream.NewWriter(buf)
		if _, err := c.WriteHeader(w, TypeData, time.Duration(i)*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if !c.ForcedAny() {
		t.Fatal("MaxInFlight headers in flight and ForcedAny is false")
	}
	if f, ok := c.PopFate(); !ok || f.Seq != 0 || f.Delivered {
		t.Fatalf("PopFate = %+v, %v after the forced drop; want sequence 0 dropped", f, ok)
	}
}
