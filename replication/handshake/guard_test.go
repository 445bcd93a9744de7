package handshake

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"runtime"
	"testing"
	"time"
)

func TestReplayGuard(t *testing.T) {
	g, err := NewReplayGuard(3)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	a, b, c, d := TokenID{1}, TokenID{2}, TokenID{3}, TokenID{4}
	ins := func(id TokenID, expires int64) error {
		return g.Insert(id, GuardEntry{Addr: testClient, Expires: expires}, now)
	}
	if err := ins(a, 1010); err != nil {
		t.Fatal(err)
	}
	if err := ins(a, 1010); !errors.Is(err, ErrTokenUsed) {
		t.Fatalf("second insert: %v", err)
	}
	if e := g.Lookup(a, now); e.State != GuardPending || e.Addr != testClient {
		t.Fatalf("lookup %+v", e)
	}
	g.Consume(a)
	if e := g.Lookup(a, now); e.State != GuardConsumed {
		t.Fatalf("after consume %v", e.State)
	}
	ins(b, 1005)
	ins(c, 1020)
	if err := ins(d, 1020); !errors.Is(err, ErrGuardFull) {
		t.Fatalf("full: %v", err)
	}
	if g.Lookup(a, now).State != GuardConsumed {
		t.Fatal("a full guard evicted a live entry")
	}
	// At 1005 b has expired: its slot frees, and a lookup no longer finds it.
	now = time.Unix(1005, 0)
	if g.Lookup(b, now).State != GuardAbsent {
		t.Fatal("expired entry still found")
	}
	if err := ins(d, 1030); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	if g.Len() != 3 {
		t.Fatalf("len %d", g.Len())
	}
	g.Consume(TokenID{99}) // unknown: ignored
	if _, err := NewReplayGuard(0); !errors.Is(err, ErrConfig) {
		t.Fatal(err)
	}
}

// heapNow is the live heap after a collection.
func heapNow() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// The guard's memory follows what it holds: an empty guard of the default
// capacity is small (it preallocated 4 MB, 4 KB a player at 1,000 players),
// and after a burst of connects has expired the room is given back while the
// capacity bound still holds. A size check, not a timing one.
func TestReplayGuardMemoryFollowsUse(t *testing.T) {
	heapNow() // settle what earlier tests left to the collector
	base := heapNow()
	g, err := NewReplayGuard(DefaultGuardCapacity)
	if err != nil {
		t.Fatal(err)
	}
	empty := int64(heapNow()) - int64(base)
	t.Logf("empty guard of capacity %d: %d B", DefaultGuardCapacity, empty)
	if empty > 64<<10 { // the heap moves by some KB between two reads
		t.Fatalf("an empty guard keeps %d B, want ≤ 64 KiB", empty)
	}

	// A burst fills it to capacity; one more is refused.
	now := time.Unix(1000, 0)
	id := func(i int) TokenID {
		var x TokenID
		binary.LittleEndian.PutUint32(x[:], uint32(i))
		return x
	}
	for i := range DefaultGuardCapacity {
		if err := g.Insert(id(i), GuardEntry{Addr: testClient, Expires: 1010}, now); err != nil {
			t.Fatalf("insert %d: %v", i, err)
		}
	}
	if err := g.Insert(id(-1), GuardEntry{Addr: testClient, Expires: 1010}, now); !errors.Is(err, ErrGuardFull) {
		t.Fatalf("past capacity: %v", err)
	}
	full := int64(heapNow()) - int64(base)

	// The burst expires; the next connect finds a guard sized for what it
	// holds, and the tokens it still holds are still bound.
	later := time.Unix(1010, 0)
	const kept = 100
	for i := range kept {
		if err := g.Insert(id(DefaultGuardCapacity+i), GuardEntry{Addr: testClient, Expires: 1100}, later); err != nil {
			t.Fatal(err)
		}
	}
	after := int64(heapNow()) - int64(base)
	t.Logf("full: %d B; after the burst expired, %d held: %d B", full, g.Len(), after)
	if g.Len() != kept {
		t.Fatalf("holds %d, want %d", g.Len(), kept)
	}
	if after > full/8 {
		t.Fatalf("after the burst expired the guard keeps %d B of the %d B it took", after, full)
	}
	for i := range kept {
		if err := g.Insert(id(DefaultGuardCapacity+i), GuardEntry{Addr: testClient, Expires: 1100}, later); !errors.Is(err, ErrTokenUsed) {
			t.Fatalf("token %d reopened after the shrink: %v", i, err)
		}
	}
	if g.Lookup(id(0), later).State != GuardAbsent {
		t.Fatal("an expired token is still held")
	}
	runtime.KeepAlive(g)
}

// maxConsumedBytes bounds the guard's memory per consumed token: every
// connected player's token stays consumed in the guard for the token's
// lifetime. Measured 37 B at the node's 2,000 tokens (a map slot of a
// guardKey and an 8-byte expiry, with the map's growth room), against 58 B
// with an expiry heap's 16-byte item for each as well, 123 B when both
// held the whole 24-byte id, and 268 B when a consumed token kept its
// whole 104-byte slot. A size check, not a timing one.
const maxConsumedBytes = 48

func TestConsumedTokensKeepOnlyTheirExpiry(t *testing.T) {
	const n = 2000
	heapNow()
	base := heapNow()
	g, err := NewReplayGuard(DefaultGuardCapacity)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	id := func(i int) TokenID {
		var x TokenID
		binary.LittleEndian.PutUint32(x[:], uint32(i))
		return x
	}
	for i := range n {
		if err := g.Insert(id(i), GuardEntry{Addr: testClient, Expires: 2000}, now); err != nil {
			t.Fatal(err)
		}
		g.Consume(id(i))
	}
	per := (int64(heapNow()) - int64(base)) / n
	t.Logf("%d consumed tokens: %d B each", n, per)
	if per > maxConsumedBytes {
		t.Fatalf("a consumed token keeps %d B in the guard, want ≤ %d", per, maxConsumedBytes)
	}
	for i := range n {
		if e := g.Lookup(id(i), now); e.State != GuardConsumed || e.Expires != 2000 {
			t.Fatalf("token %d: %+v, want consumed until 2000", i, e)
		}
		if err := g.Insert(id(i), GuardEntry{Addr: testClient, Expires: 2000}, now); !errors.Is(err, ErrTokenUsed) {
			t.Fatalf("consumed token %d admitted again: %v", i, err)
		}
	}
	if e := g.Lookup(id(0), time.Unix(2000, 0)); e.State != GuardAbsent {
		t.Fatalf("an expired consumed token: %+v", e)
	}
	runtime.KeepAlive(g)
}

// Two tokens under one guardKey: the second is refused (never admitted,
// never given the first's Accepted), and the first keeps its entry.
func TestTokensSharingAKeyAreRefusedNotAdmitted(t *testing.T) {
	g, err := NewReplayGuard(DefaultGuardCapacity)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	var a TokenID
	for i := range a {
		a[i] = byte(3*i + 1)
	}
	// b differs from a in its first two words, by x and by x rotated
	// back: the fold cancels the two.
	b := a
	const x = 0x0123_4567_89ab_cdef
	binary.LittleEndian.PutUint64(b[0:], binary.LittleEndian.Uint64(a[0:])^x)
	binary.LittleEndian.PutUint64(b[8:], binary.LittleEndian.Uint64(a[8:])^bits.RotateLeft64(x, -21))
	if a == b || keyOf(&a) != keyOf(&b) {
		t.Fatal("the test's tokens do not share a key")
	}
	first := GuardEntry{Addr: testClient, Expires: 2000}
	first.Accepted[0] = 0xa5
	if err := g.Insert(a, first, now); err != nil {
		t.Fatal(err)
	}
	if e := g.Lookup(b, now); e.State != GuardConsumed || e.Accepted != ([AcceptedSize]byte{}) {
		t.Fatalf("a token sharing a pending token's key: %+v, want consumed with no Accepted", e)
	}
	if err := g.Insert(b, GuardEntry{Addr: testClient, Expires: 2000}, now); !errors.Is(err, ErrTokenUsed) {
		t.Fatalf("a token sharing a pending token's key inserted: %v", err)
	}
	g.Consume(b) // not a's: a stays pending
	if e := g.Lookup(a, now); e.State != GuardPending || e.Accepted != first.Accepted {
		t.Fatalf("the first token after the second's Consume: %+v, want pending with its Accepted", e)
	}
	g.Consume(a)
	if e := g.Lookup(b, now); e.State != GuardConsumed {
		t.Fatalf("a token sharing a consumed token's key: %+v, want consumed", e)
	}
}

// TestGuardForgetsInExpiryOrder: tokens inserted out of expiry order are
// each forgotten once theirs passes (an Insert sweeps), and not before.
func TestGuardForgetsInExpiryOrder(t *testing.T) {
	g, err := NewReplayGuard(DefaultGuardCapacity)
	if err != nil {
		t.Fatal(err)
	}
	id := func(i int) TokenID {
		var x TokenID
		x[23] = byte(i + 1)
		return x
	}
	for i, exp := range []int64{3000, 2000, 2500} {
		if err := g.Insert(id(i), GuardEntry{Addr: testClient, Expires: exp}, time.Unix(1000, 0)); err != nil {
			t.Fatal(err)
		}
		if i != 1 {
			g.Consume(id(i))
		}
	}
	for _, c := range []struct {
		at   int64
		held int
	}{{1999, 3}, {2000, 2}, {2499, 2}, {2500, 1}, {3000, 0}} {
		if err := g.Insert(id(10), GuardEntry{Addr: testClient, Expires: 1}, time.Unix(c.at, 0)); err != nil {
			t.Fatal(err)
		}
		// id(10) expired at once: the next Insert forgets it with the rest.
		if got := g.Len() - 1; got != c.held {
			t.Fatalf("at %d the guard holds %d tokens, want %d", c.at, got, c.held)
		}
	}
}
