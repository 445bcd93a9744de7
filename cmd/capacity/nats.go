package main

import (
	"fmt"
	"sort"

	"github.com/ghostwire/ghostwire/actors/node"
)

// BucketStats is one KV bucket's writes over the window.
type BucketStats struct {
	StoredPerS float64 `json:"stored_per_s"`
	BytesEach  float64 `json:"stored_bytes_each"`
}

// natsRates fills s's NATS fields from two readings w seconds apart.
func natsRates(s *Step, a, b node.NATSWrites, w float64) {
	s.NATSMsgsPerS = float64(b.Msgs-a.Msgs) / w
	s.NATSBytesPerS = float64(b.Bytes-a.Bytes) / w
	s.NATSBuckets = make(map[string]BucketStats, len(b.Buckets))
	for name, x := range b.Buckets {
		s.NATSBuckets[name] = BucketStats{StoredPerS: float64(x.Stored-a.Buckets[name].Stored) / w, BytesEach: x.BytesEach}
	}
}

// natsLine says what the node wrote to NATS a second.
func natsLine(s Step) string {
	names := make([]string, 0, len(s.NATSBuckets))
	for n := range s.NATSBuckets {
		names = append(names, n)
	}
	sort.Strings(names)
	out := fmt.Sprintf("NATS out %.0f msgs/s, %.1f KB/s", s.NATSMsgsPerS, s.NATSBytesPerS/1024)
	for _, n := range names {
		b := s.NATSBuckets[n]
		out += fmt.Sprintf("; %s %.0f stored/s × %.0f B", n, b.StoredPerS, b.BytesEach)
	}
	return out
}
