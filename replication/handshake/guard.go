package handshake

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"net/netip"
	"time"
)

// Replay guard limits.
const (
	DefaultGuardCapacity = 1 << 14
	MinGuardCapacity     = 1
	MaxGuardCapacity     = 1 << 22
)

// GuardState is where a token stands in the replay guard.
type GuardState uint8

const (
	GuardAbsent   GuardState = iota // never seen (or expired and forgotten)
	GuardPending                    // a session was granted; it admits retries from its address only
	GuardConsumed                   // the session was verified or dropped; the token admits nothing
)

func (s GuardState) String() string {
	switch s {
	case GuardPending:
		return "pending"
	case GuardConsumed:
		return "consumed"
	}
	return "absent"
}

// GuardEntry is what the replay guard remembers about one token. Addr and
// Accepted are kept while the entry is pending only: a consumed token admits
// nothing, whatever the address.
type GuardEntry struct {
	State    GuardState
	Addr     netip.AddrPort     // the address the token was first granted to
	Expires  int64              // Unix seconds: the entry is forgotten from then on
	Accepted [AcceptedSize]byte // the Accepted packet sent, so a retry gets the same bytes
}

// ReplayGuard binds each connect token to one session (netcode advisory
// GHSA-v29p-3vj4-vg4f: a token that opened a session must never open another
// under the same keys). An entry is created pending when the server grants a
// session for a token it has not seen; a pending entry admits the same token
// again only from the same address (the client retrying a lost Accepted gets
// the same answer); Consume makes it admit nothing. Entries live until their
// token expires — no request with an expired token gets past the expiry check,
// so forgetting one then cannot reopen it — and memory is bounded: when every
// slot holds an unexpired token the guard refuses new tokens (ErrGuardFull)
// rather than evict one, because eviction would reopen a used token.
//
// Time is the server's wall clock in Unix seconds, the clock token expiry is
// written in. The zero ReplayGuard is not usable; call NewReplayGuard. Not safe
// for concurrent use; the gateway owns it.
//
// Memory follows use, not capacity: the guard grows with the tokens it
// holds and, once a burst of connects has expired, gives the room back (a Go
// map never shrinks by itself). A node that admits a few players a second
// holds a few hundred entries, not the 16,384 of the default capacity (about
// 4 MB preallocated, which was 4 KB a player at 1,000 players). A consumed
// token — every connected player's, for as long as its token lives — keeps
// only its expiry, under its guardKey: a 16-byte map slot, ≈ 38 B a player
// at 2,000 players with the map's room (123 B while the whole 24-byte id
// was its key and an expiry heap's item held both again; 104 bytes a slot
// before that); the few pending ones keep the rest.
type ReplayGuard struct {
	capacity int
	pending  map[guardKey]pendingEntry // granted, not verified yet: retries from Addr get Accepted again
	consumed map[guardKey]int64        // admit nothing: their Expires only
	// next is the earliest expiry held (noExpiry: none): expire sweeps the
	// maps once it has passed, so at most once a second of the tokens'
	// clock, on an Insert (a connect). A sweep walks what the guard
	// holds, a connected player's token each (≈ 40 µs at 2,000, 0.3 ms at
	// the default capacity's 16,384): a heap ordering every token by
	// expiry took 16 bytes of each for good instead.
	next int64
	peak int // most entries held since the maps were last rebuilt
}

// noExpiry is next of a guard that holds nothing.
const noExpiry = math.MaxInt64

// guardKey is what the guard files a token under: its id's three words
// folded into one. A consumed token is every connected player's for the
// token's life, so the key is what each of them costs. Two tokens under
// one key make the guard refuse the newer one as used (Lookup, Insert),
// never admit it: the guard errs only toward a refusal, and token ids
// are random nonces (or a backend's counter, which the rotations keep
// apart), so that is a chance of ≈ n/2⁶⁴ for a guard of n tokens.
type guardKey uint64

func keyOf(id *TokenID) guardKey {
	w0 := binary.LittleEndian.Uint64(id[0:])
	w1 := binary.LittleEndian.Uint64(id[8:])
	w2 := binary.LittleEndian.Uint64(id[16:])
	return guardKey(w0 ^ bits.RotateLeft64(w1, 21) ^ bits.RotateLeft64(w2, 42))
}

// pendingEntry is a pending token's entry with its whole id: a token
// under the same key that is not this one gets nothing of it (Lookup).
type pendingEntry struct {
	id TokenID
	GuardEntry
}

// guardShrinkMin: below this many entries at its peak the guard keeps its
// map (rebuilding a small one saves too little to be worth the copy).
const guardShrinkMin = 256

// NewReplayGuard returns a guard holding at most capacity unexpired tokens
// ([MinGuardCapacity, MaxGuardCapacity]).
func NewReplayGuard(capacity int) (*ReplayGuard, error) {
	if capacity < MinGuardCapacity || capacity > MaxGuardCapacity {
		return nil, fmt.Errorf("%w: guard capacity %d outside [%d, %d]", ErrConfig, capacity, MinGuardCapacity, MaxGuardCapacity)
	}
	return &ReplayGuard{capacity: capacity, pending: make(map[guardKey]pendingEntry), consumed: make(map[guardKey]int64), next: noExpiry}, nil
}

// Lookup returns the entry for id, GuardAbsent if there is none or it has
// expired at now. Another token pending under id's key makes id consumed:
// it is refused, and never gets that token's Accepted (guardKey).
func (g *ReplayGuard) Lookup(id TokenID, now time.Time) GuardEntry {
	t := now.Unix()
	k := keyOf(&id)
	if exp, ok := g.consumed[k]; ok {
		if t >= exp {
			return GuardEntry{}
		}
		return GuardEntry{State: GuardConsumed, Expires: exp}
	}
	p, ok := g.pending[k]
	if !ok || t >= p.Expires {
		return GuardEntry{}
	}
	if p.id != id {
		return GuardEntry{State: GuardConsumed, Expires: p.Expires}
	}
	return p.GuardEntry
}

// Insert records a new pending entry for id. It fails with ErrGuardFull when
// every slot holds an unexpired token, and refuses to overwrite a live entry
// (ErrTokenUsed).
func (g *ReplayGuard) Insert(id TokenID, e GuardEntry, now time.Time) error {
	g.expire(now)
	k := keyOf(&id)
	if g.holds(k) {
		return ErrTokenUsed
	}
	if g.Len() >= g.capacity {
		return ErrGuardFull
	}
	e.State = GuardPending
	g.pending[k] = pendingEntry{id, e}
	g.next = min(g.next, e.Expires)
	g.peak = max(g.peak, g.Len())
	return nil
}

// holds reports whether a token under k has an entry, expired or not.
func (g *ReplayGuard) holds(k guardKey) bool {
	if _, ok := g.consumed[k]; ok {
		return true
	}
	_, ok := g.pending[k]
	return ok
}

// Consume marks id's session verified or gone: from now on the token admits
// nothing, whatever the address. Unknown ids are ignored.
func (g *ReplayGuard) Consume(id TokenID) {
	k := keyOf(&id)
	if p, ok := g.pending[k]; ok && p.id == id {
		delete(g.pending, k)
		g.consumed[k] = p.Expires
	}
}

// Len is the number of entries held (expired ones included until the next
// Insert forgets them).
func (g *ReplayGuard) Len() int { return len(g.pending) + len(g.consumed) }

// expire forgets every entry whose token expired at now.
func (g *ReplayGuard) expire(now time.Time) {
	if t := now.Unix(); t >= g.next {
		g.sweep(t)
	}
	if g.peak >= guardShrinkMin && g.Len() <= g.peak/4 {
		g.shrink()
	}
}

// sweep forgets every entry expired at t and finds the earliest expiry
// left.
func (g *ReplayGuard) sweep(t int64) {
	next := int64(noExpiry)
	for k, p := range g.pending {
		if p.Expires <= t {
			delete(g.pending, k)
		} else {
			next = min(next, p.Expires)
		}
	}
	for k, exp := range g.consumed {
		if exp <= t {
			delete(g.consumed, k)
		} else {
			next = min(next, exp)
		}
	}
	g.next = next
}

// shrink copies the entries into maps sized for what is held
// now, so the room a burst took is given back. Called when the guard holds a
// quarter of its peak or less, so its cost (one copy of what is left) is
// paid for by the three quarters expired since the last one.
func (g *ReplayGuard) shrink() {
	p := make(map[guardKey]pendingEntry, len(g.pending))
	for k, e := range g.pending {
		p[k] = e
	}
	c := make(map[guardKey]int64, len(g.consumed))
	for k, e := range g.consumed {
		c[k] = e
	}
	g.pending, g.consumed = p, c
	g.peak = g.Len()
}
