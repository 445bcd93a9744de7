package msg

import (
	"sync"
	"time"

	"github.com/ghostwire/ghostwire/actors/udp"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// GhostFates carries packet fates and a packing credit from a connection to
// its ghost manager (conn → ghost manager; replication/session's GhostRelay
// flow). Fates are keyed by the ghost manager's own section numbers
// (session.GhostRelay translates), in the order the relay resolved them.
// Pooled: NewGhostFates / Release (the ghost manager releases it).
type GhostFates struct {
	Fates []notify.Fate
	// Want grants one credit: the relay holds no section and none is on its
	// way, so the ghost manager may pack one (now, or as soon as it has
	// something to send) and answer with exactly one GhostSection.
	Want bool
	// Budget is the room for the next ghost section, in bits
	// (session.Server.GhostBudget at Now). Meaningful with Want.
	Budget int
	Now    time.Duration
}

var fatesPool = sync.Pool{New: func() any { return new(GhostFates) }}

// NewGhostFates returns an empty GhostFates from the pool.
func NewGhostFates() *GhostFates { return fatesPool.Get().(*GhostFates) }

// Release returns f to the pool; f may not be used afterwards.
func (f *GhostFates) Release() {
	f.Fates = f.Fates[:0]
	f.Want, f.Budget, f.Now = false, 0, 0
	fatesPool.Put(f)
}

// GhostSection is one packed ghost section (ghost manager → conn), answering
// one GhostFates credit: Bits bits at the start of Data, numbered Seq in the
// ghost manager's own sequence (1, 2, 3, …). The connection offers it to its
// session.GhostRelay (which copies it) and releases the message. Pooled:
// NewGhostSection / Release.
type GhostSection struct {
	Seq     uint64
	Bits    int
	Records int // ghost records in the section; 0 never travels (no credit is spent on nothing)
	Data    [udp.MaxDatagram]byte
}

var sectionPool = sync.Pool{New: func() any { return new(GhostSection) }}

// NewGhostSection returns a section from the pool (Data holds garbage).
func NewGhostSection() *GhostSection { return sectionPool.Get().(*GhostSection) }

// Bytes is the packed section, Data[:⌈Bits/8⌉].
func (s *GhostSection) Bytes() []byte { return s.Data[:(s.Bits+7)/8] }

// Release returns s to the pool; s may not be used afterwards.
func (s *GhostSection) Release() { sectionPool.Put(s) }
