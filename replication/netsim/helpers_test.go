package netsim

import (
	"encoding/binary"
	"testing"
	"time"
)

// delivery is one observed delivery: which packet (its send index) and when.
type delivery struct {
	id uint64
	at time.Duration
}

// payload writes packet id into the first 8 bytes of b and a pattern derived from id after it,
// so a delivery can be traced to its send and checked byte for byte.
func payload(b []byte, id uint64) []byte {
	if len(b) >= 8 {
		binary.LittleEndian.PutUint64(b, id)
	}
	for k := 8; k < len(b); k++ {
		b[k] = byte(id*31 + uint64(k))
	}
	return b
}

// checkPayload reports whether p is exactly what payload(make([]byte, size), id) wrote.
func checkPayload(p []byte, size int) (uint64, bool) {
	if len(p) != size || size < 8 {
		return 0, false
	}
	id := binary.LittleEndian.Uint64(p)
	for k := 8; k < len(p); k++ {
		if p[k] != byte(id*31+uint64(k)) {
			return id, false
		}
	}
	return id, true
}

// drive sends n packets of size bytes, packet i at i×interval, and delivers every packet at
// exactly its due time (jumping the clock with NextDelivery). It returns the deliveries in order
// and fails the test on a corrupted payload, a delivery before its due time or a broken
// conservation invariant.
func drive(t *testing.T, l *Link, n int, interval time.Duration, size int) []delivery {
	t.Helper()
	buf := make([]byte, size)
	out := make([]delivery, 0, n)
	var last time.Duration
	corrupt := 0
	i := 0
	for i < n || l.Pending() > 0 {
		ts := time.Duration(i) * interval
		if at, ok := l.NextDelivery(); ok && (i >= n || at <= ts) {
			if at < last {
				t.Fatalf("NextDelivery %v went back before %v", at, last)
			}
			last = at
			got := l.Deliver(at, func(p []byte) {
				id, ok := checkPayload(p, size)
				if !ok {
					corrupt++
				}
				out = append(out, delivery{id: id, at: at})
			})
			if got == 0 {
				t.Fatalf("Deliver(%v) delivered nothing although NextDelivery said %v", at, at)
			}
			continue
		}
		l.Send(ts, payload(buf, uint64(i)))
		i++
	}
	if corrupt > 0 {
		t.Fatalf("%d deliveries with corrupted payload", corrupt)
	}
	checkConservation(t, l)
	return out
}

func checkConservation(t *testing.T, l *Link) {
	t.Helper()
	s := l.Stats()
	if in, out := s.Sent+s.Duplicated, s.Delivered+s.Dropped.Total()+uint64(l.Pending()); in != out {
		t.Fatalf("conservation broken: Sent+Duplicated = %d, Delivered+Dropped+Pending = %d (%+v)", in, out, s)
	}
}

func mustLink(t testing.TB, cfg Config) *Link {
	t.Helper()
	l, err := NewLink(cfg)
	if err != nil {
		t.Fatalf("NewLink(%+v): %v", cfg, err)
	}
	return l
}
