package handshake

import (
	"container/heap"
	"fmt"
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

// GuardEntry is what the replay guard remembers about one token.
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
// 4 MB preallocated, which was 4 KB a player at 1,000 players).
type ReplayGuard struct {
	capacity int
	m        map[TokenID]GuardEntry
	exp      expiryHeap
	peak     int // most entries held since the map was last rebuilt
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
	return &ReplayGuard{capacity: capacity, m: make(map[TokenID]GuardEntry)}, nil
}

// Lookup returns the entry for id, GuardAbsent if there is none or it has
// expired at now.
func (g *ReplayGuard) Lookup(id TokenID, now time.Time) GuardEntry {
	e, ok := g.m[id]
	if !ok || now.Unix() >= e.Expires {
		return GuardEntry{}
	}
	return e
}

// Insert records a new pending entry for id. It fails with ErrGuardFull when
// every slot holds an unexpired token, and refuses to overwrite a live entry
// (ErrTokenUsed).
func (g *ReplayGuard) Insert(id TokenID, e GuardEntry, now time.Time) error {
	g.expire(now)
	if _, ok := g.m[id]; ok {
		return ErrTokenUsed
	}
	if len(g.m) >= g.capacity {
		return ErrGuardFull
	}
	e.State = GuardPending
	g.m[id] = e
	heap.Push(&g.exp, expiryItem{e.Expires, id})
	g.peak = max(g.peak, len(g.m))
	return nil
}

// Consume marks id's session verified or gone: from now on the token admits
// nothing, whatever the address. Unknown ids are ignored.
func (g *ReplayGuard) Consume(id TokenID) {
	if e, ok := g.m[id]; ok {
		e.State = GuardConsumed
		e.Accepted = [AcceptedSize]byte{}
		g.m[id] = e
	}
}

// Len is the number of entries held (expired ones included until the next
// Insert forgets them).
func (g *ReplayGuard) Len() int { return len(g.m) }

// expire forgets every entry whose token expired at now.
func (g *ReplayGuard) expire(now time.Time) {
	t := now.Unix()
	for len(g.exp) > 0 && g.exp[0].expires <= t {
		it := heap.Pop(&g.exp).(expiryItem)
		delete(g.m, it.id)
	}
	if g.peak >= guardShrinkMin && len(g.m) <= g.peak/4 {
		g.shrink()
	}
}

// shrink copies the entries into a map and a heap sized for what is held
// now, so the room a burst took is given back. Called when the guard holds a
// quarter of its peak or less, so its cost (one copy of what is left) is
// paid for by the three quarters expired since the last one.
func (g *ReplayGuard) shrink() {
	m := make(map[TokenID]GuardEntry, len(g.m))
	for id, e := range g.m {
		m[id] = e
	}
	g.m = m
	g.exp = append(make(expiryHeap, 0, 2*len(g.exp)), g.exp...) // still a heap: same order
	g.peak = len(g.m)
}

type expiryItem struct {
	expires int64
	id      TokenID
}

// expiryHeap is a min-heap on expiry; it grows with the guard (at most its
// capacity) and shrinks with it.
type expiryHeap []expiryItem

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].expires < h[j].expires }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiryItem)) }
func (h *expiryHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
