package handshake

import (
	"errors"
	"net/netip"
	"testing"
	"time"
)

func newLimiter(t *testing.T, mod func(*RateLimitConfig)) *RateLimiter {
	t.Helper()
	cfg := DefaultRateLimitConfig()
	if mod != nil {
		mod(&cfg)
	}
	l, err := NewRateLimiter(cfg, detRand(1))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestRateLimiterBucket(t *testing.T) {
	l := newLimiter(t, func(c *RateLimitConfig) { c.Interval, c.Burst = 100*time.Millisecond, 5 })
	src := netip.MustParseAddr("198.51.100.1")
	now := time.Duration(0)
	for i := range 5 {
		if !l.Allow(src, now) {
			t.Fatalf("burst packet %d refused", i)
		}
	}
	if l.Allow(src, now) {
		t.Fatal("6th packet of a burst of 5 allowed")
	}
	if l.Allow(src, now+99*time.Millisecond) {
		t.Fatal("allowed before one interval passed")
	}
	if !l.Allow(src, now+100*time.Millisecond) {
		t.Fatal("refused after one interval")
	}
	// Sustained: one per interval over 10 s.
	allowed := 0
	for ms := 200; ms <= 10_200; ms++ {
		if l.Allow(src, time.Duration(ms)*time.Millisecond) {
			allowed++
		}
	}
	if allowed < 99 || allowed > 101 {
		t.Fatalf("%d packets allowed in 10 s at 10/s", allowed)
	}
}

func TestRateLimiterPrefixes(t *testing.T) {
	l := newLimiter(t, func(c *RateLimitConfig) { c.Burst = 1; c.Interval = time.Hour })
	tests := []struct {
		name string
		src  string
		want bool
	}{
		{"first of 198.51.100.0/24", "198.51.100.1", true},
		{"same /24, other host", "198.51.100.200", false},
		{"same /24 written as ipv4-mapped ipv6", "::ffff:198.51.100.3", false},
		{"next /24", "198.51.101.1", true},
		{"first of 2001:db8:1::/48", "2001:db8:1::1", true},
		{"same /48", "2001:db8:1:ffff::2", false},
		{"next /48", "2001:db8:2::1", true},
		{"ipv6 whose top bytes equal an ipv4 prefix", "c633:6400::", true},
		{"invalid address", "", false},
	}
	for _, tc := range tests {
		var a netip.Addr
		if tc.src != "" {
			a = netip.MustParseAddr(tc.src)
		}
		if got := l.Allow(a, 0); got != tc.want {
			t.Errorf("%s: Allow = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestRateLimiterFlood: a flood of distinct spoofed sources grows the table
// to Capacity and no further, allocates nothing once there, stays under the
// global bound, and does not evict a prefix that is being limited — neither
// while the table grows nor once it is full.
func TestRateLimiterFlood(t *testing.T) {
	l := newLimiter(t, func(c *RateLimitConfig) {
		c.Capacity = 1024
		c.Interval, c.Burst = time.Second, 2
		c.GlobalInterval, c.GlobalBurst = time.Millisecond, 100
	})
	victim := netip.MustParseAddr("203.0.113.50")
	l.Allow(victim, 0)
	l.Allow(victim, 0)
	if l.Allow(victim, 0) {
		t.Fatal("victim prefix not limited")
	}
	if l.Cap() != limitInitial {
		t.Fatalf("a new limiter has %d slots, want %d", l.Cap(), limitInitial)
	}
	now := time.Duration(0)
	i := uint32(0)
	flood := func() {
		i++
		src := netip.AddrFrom4([4]byte{byte(i >> 16), byte(i >> 8), byte(i), 1}) // a new /24 each time
		now += time.Microsecond
		l.Allow(src, now)
		if l.Len() > l.Cap() || l.Cap() > 1024 {
			t.Fatalf("table holds %d in %d slots, Capacity 1024", l.Len(), l.Cap())
		}
	}
	allowedBefore := l.Stats().Allowed
	// Growing: the victim stays limited after every doubling.
	for l.Cap() < 1024 {
		c := l.Cap()
		for l.Cap() == c {
			flood()
		}
		if l.Allow(victim, now) {
			t.Fatalf("the victim prefix was let through after the table grew to %d", l.Cap())
		}
	}
	const n = 500_000
	allocs := testing.AllocsPerRun(n, flood)
	if allocs != 0 {
		t.Errorf("%v allocations per packet", allocs)
	}
	if l.Cap() != 1024 {
		t.Errorf("capacity %d after the flood, want 1024", l.Cap())
	}
	st := l.Stats()
	allowed := st.Allowed - allowedBefore
	if bound := uint64(100 + now/time.Millisecond + 1); allowed > bound {
		t.Errorf("%d allowed during the flood, global bound %d", allowed, bound)
	}
	if st.TableFull == 0 || st.GlobalLimit == 0 {
		t.Errorf("flood never hit the table or the global limit: %+v", st)
	}
	if l.Allow(victim, now) {
		t.Error("the flood evicted the limited victim prefix")
	}
}

// TestRateLimiterGrowKeepsEveryPrefix: doubling the table moves every entry
// (none lost, none duplicated): prefixes limited before stay limited after,
// whichever set they land in.
func TestRateLimiterGrowKeepsEveryPrefix(t *testing.T) {
	l := newLimiter(t, func(c *RateLimitConfig) {
		c.Capacity = 1 << 12
		c.Interval, c.Burst = time.Hour, 1
		c.GlobalInterval, c.GlobalBurst = time.Nanosecond, 1<<30
	})
	src := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 1}) }
	const n = 2000
	var admitted []int // refused ones found their set full at Capacity
	for i := range n {
		if l.Allow(src(i), 0) {
			admitted = append(admitted, i)
		}
	}
	if len(admitted) < 400 || l.Len() != len(admitted) || l.Cap() != 1<<12 {
		t.Fatalf("%d of %d prefixes admitted, %d in %d slots, want ≥ 400 in 4096", len(admitted), n, l.Len(), l.Cap())
	}
	for _, i := range admitted {
		if l.Allow(src(i), time.Second) {
			t.Fatalf("prefix %d let through twice in an hour after the table grew to %d", i, l.Cap())
		}
	}
	if st := l.Stats(); st.Limited != uint64(len(admitted)) || st.TableFull != uint64(n-len(admitted)) {
		t.Fatalf("stats %+v, want %d limited, %d refused for room", st, len(admitted), n-len(admitted))
	}
}

// TestRateLimiterStartsSmall: a new limiter holds 64 slots (2 KiB), not Capacity.
func TestRateLimiterStartsSmall(t *testing.T) {
	if c := newLimiter(t, nil).Cap(); c != limitInitial {
		t.Fatalf("default limiter starts at %d slots, want %d", c, limitInitial)
	}
	if c := newLimiter(t, func(c *RateLimitConfig) { c.Capacity = 5 }).Cap(); c != 8 {
		t.Fatalf("Capacity 5 starts at %d slots, want 8", c)
	}
}

func TestRateLimitConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*RateLimitConfig)
	}{
		{"zero interval", func(c *RateLimitConfig) { c.Interval = 0 }},
		{"zero global interval", func(c *RateLimitConfig) { c.GlobalInterval = 0 }},
		{"zero burst", func(c *RateLimitConfig) { c.Burst = 0 }},
		{"v4 prefix 33", func(c *RateLimitConfig) { c.PrefixV4 = 33 }},
		{"v6 prefix -1", func(c *RateLimitConfig) { c.PrefixV6 = -1 }},
		{"capacity 2", func(c *RateLimitConfig) { c.Capacity = 2 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultRateLimitConfig()
			tc.mod(&c)
			if _, err := NewRateLimiter(c, detRand(1)); !errors.Is(err, ErrConfig) {
				t.Fatalf("err = %v", err)
			}
		})
	}
	if err := DefaultRateLimitConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}
