package main

import (
	"testing"

	"github.com/ghostwire/ghostwire/actors/node"
)

// The NATS rates are the differences of two readings over the window,
// bucket by bucket; a stored message's size is the later reading's.
func TestNATSRates(t *testing.T) {
	a := node.NATSWrites{Msgs: 100, Bytes: 10_000, Buckets: map[string]node.BucketWrites{
		"players": {Stored: 50, BytesEach: 280}, "zones": {Stored: 7}}}
	b := node.NATSWrites{Msgs: 2_100, Bytes: 410_000, Buckets: map[string]node.BucketWrites{
		"players": {Stored: 1_850, BytesEach: 293}, "zones": {Stored: 23, BytesEach: 149}}}
	var s Step
	natsRates(&s, a, b, 2)
	if s.NATSMsgsPerS != 1_000 || s.NATSBytesPerS != 200_000 {
		t.Fatalf("out: %v msgs/s, %v B/s; want 1,000 and 200,000", s.NATSMsgsPerS, s.NATSBytesPerS)
	}
	if p := s.NATSBuckets["players"]; p.StoredPerS != 900 || p.BytesEach != 293 {
		t.Fatalf("players bucket %+v, want 900 stored/s × 293 B", p)
	}
	if z := s.NATSBuckets["zones"]; z.StoredPerS != 8 {
		t.Fatalf("zones bucket %+v, want 8 stored/s", z)
	}
	const want = "NATS out 1000 msgs/s, 195.3 KB/s; players 900 stored/s × 293 B; zones 8 stored/s × 149 B"
	if got := natsLine(s); got != want {
		t.Fatalf("line %q\nwant %q", got, want)
	}
}
