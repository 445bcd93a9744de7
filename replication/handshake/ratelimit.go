package handshake

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"net/netip"
	"time"
)

// Rate limiter defaults and limits.
const (
	DefaultLimitInterval       = 10 * time.Millisecond // 100 packets/s per prefix
	DefaultLimitBurst          = 100                   // one second's worth
	DefaultLimitGlobalInterval = 50 * time.Microsecond // 20 000 packets/s in all
	DefaultLimitGlobalBurst    = 2000                  // 100 ms worth
	DefaultLimitCapacity       = 1 << 14               // prefixes tracked at most: 16384 × 32 B = 512 KiB
	limitInitial               = 64                    // slots at start (2 KiB); doubled on demand up to Capacity
	DefaultLimitPrefixV4       = 24
	DefaultLimitPrefixV6       = 48
	limitWays                  = 4 // entries per hash set
	MaxLimitCapacity           = 1 << 22
)

// RateLimitConfig configures a RateLimiter: a token bucket per source prefix
// (Interval between packets on average, Burst packets at once) and one global
// bucket over everything allowed.
type RateLimitConfig struct {
	Interval       time.Duration // per prefix: one packet per Interval on average, > 0
	Burst          int           // per prefix: packets allowed at once, ≥ 1
	GlobalInterval time.Duration // all prefixes together, > 0
	GlobalBurst    int           // ≥ 1
	// PrefixV4 and PrefixV6 are the prefix lengths sources are grouped by
	// (default /24 and /48: one network, one budget, however many addresses or
	// ports it spoofs).
	PrefixV4, PrefixV6 int
	// Capacity is the number of prefixes tracked at once, rounded up to a power
	// of two ≥ 4: [4, MaxLimitCapacity]. Memory is 32 bytes each; the table
	// starts at 64 slots (or Capacity if smaller) and doubles when a new prefix
	// finds its set full, never past Capacity.
	Capacity int
}

// DefaultRateLimitConfig returns the defaults: 100 packets/s (burst 100) per
// /24 or /48, 20 000 packets/s (burst 2000) in total, 16384 prefixes.
func DefaultRateLimitConfig() RateLimitConfig {
	return RateLimitConfig{
		Interval: DefaultLimitInterval, Burst: DefaultLimitBurst,
		GlobalInterval: DefaultLimitGlobalInterval, GlobalBurst: DefaultLimitGlobalBurst,
		PrefixV4: DefaultLimitPrefixV4, PrefixV6: DefaultLimitPrefixV6,
		Capacity: DefaultLimitCapacity,
	}
}

// Validate reports the first field out of range, wrapped around ErrConfig.
func (c RateLimitConfig) Validate() error {
	switch {
	case c.Interval <= 0 || c.GlobalInterval <= 0:
		return fmt.Errorf("%w: Interval %v and GlobalInterval %v must be > 0", ErrConfig, c.Interval, c.GlobalInterval)
	case c.Burst < 1 || c.GlobalBurst < 1 || c.Burst > 1<<20 || c.GlobalBurst > 1<<30:
		return fmt.Errorf("%w: Burst %d, GlobalBurst %d outside [1, 2^20], [1, 2^30]", ErrConfig, c.Burst, c.GlobalBurst)
	case c.PrefixV4 < 0 || c.PrefixV4 > 32 || c.PrefixV6 < 0 || c.PrefixV6 > 128:
		return fmt.Errorf("%w: PrefixV4 %d or PrefixV6 %d out of range", ErrConfig, c.PrefixV4, c.PrefixV6)
	case c.Capacity < limitWays || c.Capacity > MaxLimitCapacity:
		return fmt.Errorf("%w: Capacity %d outside [%d, %d]", ErrConfig, c.Capacity, limitWays, MaxLimitCapacity)
	}
	return nil
}

// RateLimitStats counts the limiter's decisions.
type RateLimitStats struct {
	Allowed     uint64
	Limited     uint64 // the prefix's bucket was empty
	GlobalLimit uint64 // the global bucket was empty
	TableFull   uint64 // no slot free for a new prefix: every slot in its set still owes
}

// limitEntry is one prefix's bucket as GCRA state: tat is the theoretical
// arrival time of the next packet; the bucket is full (the entry carries no
// information and may be reused) once tat ≤ now.
type limitEntry struct {
	k0, k1 uint64 // the masked prefix's 16 bytes
	tat    time.Duration
	fam    uint8 // 4 or 6; 0 = slot unused
}

// RateLimiter is a token bucket per source prefix with bounded memory, for
// every reply the server sends to an unproven source: Challenge, Denied,
// NoConnection. A table of 4-way sets, indexed by a keyed hash (seeded from
// the injected randomness, so senders cannot aim collisions): a new prefix
// takes a free slot or one whose bucket has refilled; when all four of its set
// still owe, the table doubles (moving every entry, so no prefix loses its
// state) until it has Capacity slots, and past that the packet is refused and
// counted (TableFull) — a flood of distinct sources fills no more than
// Capacity×32 bytes and never evicts a prefix that is being limited. The table
// starts small because a quiet server sees a handful of unproven prefixes. The global bucket bounds the total whatever
// the sources. Buckets use GCRA (one timestamp each, exact, no refill loop).
//
// Time is virtual monotonic time (now since an arbitrary epoch), as elsewhere
// in replication/. The zero RateLimiter is not usable; call NewRateLimiter.
// Not safe for concurrent use; the gateway owns it.
type RateLimiter struct {
	cfg      RateLimitConfig
	tol      time.Duration // (Burst−1)·Interval
	gtol     time.Duration
	gtat     time.Duration
	seed0    uint64
	seed1    uint64
	mask     uint64 // set index mask
	entries  []limitEntry
	stats    RateLimitStats
	occupied int
}

// NewRateLimiter returns a limiter for cfg; rand seeds the table's hash.
func NewRateLimiter(cfg RateLimitConfig, rand io.Reader) (*RateLimiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var seed [16]byte
	if _, err := io.ReadFull(rand, seed[:]); err != nil {
		return nil, fmt.Errorf("%w: rate limiter seed: %v", ErrRand, err)
	}
	n := min(1<<bits.Len(uint(cfg.Capacity-1)), limitInitial)
	return &RateLimiter{
		cfg:     cfg,
		tol:     time.Duration(cfg.Burst-1) * cfg.Interval,
		gtol:    time.Duration(cfg.GlobalBurst-1) * cfg.GlobalInterval,
		gtat:    -1 << 62,
		seed0:   binary.LittleEndian.Uint64(seed[:8]),
		seed1:   binary.LittleEndian.Uint64(seed[8:]),
		mask:    uint64(n/limitWays - 1),
		entries: make([]limitEntry, n),
	}, nil
}

// Stats returns the counters.
func (l *RateLimiter) Stats() RateLimitStats { return l.stats }

// Len is the number of table slots in use (bounded by Capacity).
func (l *RateLimiter) Len() int { return l.occupied }

// Cap is the table's size now: it grows up to Capacity rounded up to a power of two.
func (l *RateLimiter) Cap() int { return len(l.entries) }

// maxSlots is Capacity rounded up to a power of two: the table's bound.
func (l *RateLimiter) maxSlots() int { return 1 << bits.Len(uint(l.cfg.Capacity-1)) }

// grow doubles the table. Set index bits are the hash's low bits, so an entry
// of set s moves to s or s+old sets: each new set takes at most the four
// entries of one old set, and every entry keeps its place in the new table.
func (l *RateLimiter) grow() {
	old := l.entries
	sets := uint64(len(old) / limitWays)
	l.entries = make([]limitEntry, 2*len(old))
	l.mask = 2*sets - 1
	for s := range sets {
		var w [2]int // next free way in set s and s+sets
		for _, e := range old[s*limitWays : s*limitWays+limitWays] {
			if e.fam == 0 {
				continue
			}
			h := l.hash(e.k0, e.k1, e.fam) & l.mask
			half := h / sets // 0 or 1
			l.entries[h*limitWays+uint64(w[half])] = e
			w[half]++
		}
	}
}

// hash is the keyed hash of a prefix; its low bits pick the set.
func (l *RateLimiter) hash(k0, k1 uint64, fam uint8) uint64 {
	return mix64(mix64(k0^l.seed0) ^ k1 ^ l.seed1 ^ uint64(fam))
}

// key masks src to its prefix.
func (l *RateLimiter) key(src netip.Addr) (k0, k1 uint64, fam uint8) {
	src = src.Unmap()
	var b [16]byte
	if src.Is4() {
		p, _ := src.Prefix(l.cfg.PrefixV4)
		a := p.Addr().As4()
		copy(b[:], a[:])
		fam = 4
	} else {
		p, _ := src.WithZone("").Prefix(l.cfg.PrefixV6)
		b = p.Addr().As16()
		fam = 6
	}
	return binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:]), fam
}

// mix64 is the SplitMix64 finalizer: a bijection that spreads every input bit.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// Allow reports whether one more packet from src may be answered at now, and
// if so charges it to src's prefix and to the global bucket. 0 allocations.
func (l *RateLimiter) Allow(src netip.Addr, now time.Duration) bool {
	if !src.IsValid() {
		l.stats.Limited++
		return false
	}
	k0, k1, fam := l.key(src)
	h := l.hash(k0, k1, fam)
find:
	set := h & l.mask
	ways := l.entries[set*limitWays : set*limitWays+limitWays]
	var e *limitEntry
	for i := range ways {
		if ways[i].fam == fam && ways[i].k0 == k0 && ways[i].k1 == k1 {
			e = &ways[i]
			break
		}
	}
	if e == nil {
		for i := range ways {
			if ways[i].fam == 0 || ways[i].tat <= now {
				e = &ways[i]
				break
			}
		}
		if e == nil {
			if len(l.entries) < l.maxSlots() {
				l.grow()
				goto find
			}
			l.stats.TableFull++
			return false
		}
		if e.fam == 0 {
			l.occupied++
		}
		*e = limitEntry{k0: k0, k1: k1, tat: now, fam: fam}
	}
	tat := max(e.tat, now)
	if tat-now > l.tol {
		l.stats.Limited++
		return false
	}
	gtat := max(l.gtat, now)
	if gtat-now > l.gtol {
		l.stats.GlobalLimit++
		return false
	}
	e.tat = tat + l.cfg.Interval
	l.gtat = gtat + l.cfg.GlobalInterval
	l.stats.Allowed++
	return true
}
