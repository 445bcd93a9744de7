package ghostmgr

import (
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/notify"
	"github.com/ghostwire/ghostwire/replication/prefetch"
	"github.com/ghostwire/ghostwire/replication/session"
)

// Stats counts what one ghost manager did.
type Stats struct {
	Views      uint64 // views applied to the table
	ViewErrors uint64 // views the table refused (ErrBadState, ErrUnknownClass; a zone bug)
	Sections   uint64 // ghost sections written with at least one record
	Empty      uint64 // sections written with nothing in them although something was pending (budget, rate limits)
	Fates      uint64
	Table      ghost.Stats
}

// tableMu serializes ghost.NewTable: it marks the shared Registry frozen
// with a plain write, which would race between connections starting on
// different goroutines.
var tableMu sync.Mutex

// Manager is one connection's ghost manager: its ghost.Table and the view
// slot the zone publishes into. It is the session.GhostWriter the
// connection hands its session.Server: every data packet's ghost section is
// packed at the moment the packet is built, within exactly the room left in
// it, and the packet's fate comes back through OnFate.
//
// Not safe for concurrent use: the connection that owns it calls every
// method (the zone only touches the ViewSlot, which is).
type Manager struct {
	table *ghost.Table
	// st is the State, where its owner keeps it (New): whether the table
	// is pending (its Pending as of its last change: every change comes
	// through the Manager — a view applied, a section written, a fate —
	// which reads it there, while the table is in the cache) and whether
	// a view waits.
	st *State

	views *msg.ViewSlot
	// snap is the snapshot the table reads (Table.HeldSnapshot), held
	// (Snapshot.Retain) so that its zone does not reuse it meanwhile.
	snap     *ghost.Snapshot
	tick     uint64        // the zone tick of the view applied last
	lastView time.Duration // when a view was last applied (meaningful once applied reports true)

	stats counts
}

// State is what a connection's pump reads of its Manager when it sends
// nothing: whether the table has anything to send (Pending, for its next
// deadline: session.Server.NextDeadlineWith) and whether a view waits for
// Apply (ViewWaiting). The Manager writes it at each change, where the
// owner asked (New): in a line the owner reads on every pump anyway, so
// that a pump after a datagram, most often with nothing to send, reads no
// line of the Manager (one a pump, cold on a loaded node: most of a
// thousand connections' state has left the cache by a connection's turn).
type State uint8

const (
	statePending State = 1 << iota // the table's Pending
	stateView                      // a view the zone nudged for waits in the slot for Apply
)

// Pending reports whether the table has anything to send (Manager.Pending).
func (s State) Pending() bool { return s&statePending != 0 }

// ViewWaiting reports whether a view waits for Apply (Manager.ViewWaiting).
func (s State) ViewWaiting() bool { return s&stateView != 0 }

// setPending records the table's Pending.
func (m *Manager) setPending(p bool) {
	st := *m.st &^ statePending
	if p {
		st |= statePending
	}
	*m.st = st
}

// counts are the manager's own counters of Stats. The table's (Stats.Table)
// are read from the table when asked: a copy kept here was 152 of the
// Manager's 256 bytes, per connection, and never read. 32 bits each (6.8
// years of a view a tick at 20 Hz; 6.5 of sections and fates at the
// default 21 packets a second): the Manager in the 80-byte size class, not
// 96 (16 bytes a connection). Stats widens them.
type counts struct {
	Views, ViewErrors, Sections, Fates, Empty uint32
}

// New returns the ghost manager of one connection. views is where the zone
// publishes the player's views (the connection's; Close closes it); st,
// where the Manager keeps its State for the owner to read (nil: in a byte
// of its own).
func New(reg *ghost.Registry, cfg ghost.Config, views *msg.ViewSlot, st *State) (*Manager, error) {
	if reg == nil || views == nil {
		return nil, errors.New("ghostmgr: Registry and Views are required")
	}
	tableMu.Lock()
	t, err := ghost.NewTable(reg, cfg)
	tableMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("ghostmgr: %w", err)
	}
	views.AcceptRefs()
	if st == nil {
		st = new(State)
	}
	*st = 0
	return &Manager{table: t, views: views, st: st}, nil
}

// Table is the ghost table (tests, inspection).
func (m *Manager) Table() *ghost.Table { return m.table }

// Stats returns the counters.
func (m *Manager) Stats() Stats {
	c := &m.stats
	return Stats{
		Views: uint64(c.Views), ViewErrors: uint64(c.ViewErrors),
		Sections: uint64(c.Sections), Empty: uint64(c.Empty), Fates: uint64(c.Fates),
		Table: m.table.Stats(),
	}
}

// TakeView takes the newest view out of the slot (the zone's ViewReady
// nudge) and applies it if the clock allows: Take, then Apply.
func (m *Manager) TakeView(now time.Duration) {
	m.Take()
	m.apply(now)
}

// Take notes the zone's nudge: a view waits in the slot for Apply (or the
// next Write), which takes the newest there. It touches the slot and the
// manager, not the table, so a connection learns of its view when the
// nudge comes (ViewTick tells at once which tick waits) and applies it in
// its pump, right before the packet reads the same ghosts (on a server
// with a thousand tables, each is cold by the time its turn comes; one
// visit instead of two). The view stays in the slot until then: a zone
// tick that comes first takes it back and reuses it for its own view
// (msg.ViewSlot.NewViewRefs), superseding it there. Taken out on the
// nudge, it was the manager's until its pump, and the zone's next view,
// finding neither it nor the slot's spare, came from the pools: a node
// behind held two views a player (1.5–1.7 a player at 2,000).
func (m *Manager) Take() { m.st.Take(m.views) }

// Take is Manager.Take for the owner that keeps the State and the slot
// the Manager was made with (New): the same note, without reading the
// Manager's line — cold on a loaded node when a tick's Control or nudge
// comes (1.2 % of the node's samples at 2,000 players: the load of the
// slot's address from it).
func (s *State) Take(views *msg.ViewSlot) {
	if views.Waiting() {
		*s |= stateView
	}
}

// ViewWaiting reports whether a view the zone nudged for waits for Apply.
func (m *Manager) ViewWaiting() bool { return m.st.ViewWaiting() }

// Apply applies the view Take took if the clock allows (see apply).
func (m *Manager) Apply(now time.Duration) { m.apply(now) }

// ViewTick is the zone tick of the newest view nudged for (0: none yet):
// the slot's newest while one waits (a newer view than the nudge's
// supersedes it in the slot without a nudge), else the one applied last.
// The connection sends a tick's control state with that tick's view.
func (m *Manager) ViewTick() uint64 {
	if m.st.ViewWaiting() {
		return m.views.Tick()
	}
	return m.tick
}

// apply applies the slot's newest view, if one waits, unless the previous
// one was applied less than a millisecond ago: the wire stamps states in
// milliseconds and the client orders them by stamp, so the table takes at
// most one view per millisecond; a view that comes sooner waits in the
// slot for the next call (the next packet or nudge), superseded if a newer
// one arrives.
func (m *Manager) apply(now time.Duration) {
	if !m.st.ViewWaiting() || (m.applied() && now < m.lastView+time.Millisecond) {
		return
	}
	v := m.views.Take()
	if v == nil {
		// The zone took it back for its next view, whose Publish finds
		// the slot empty and nudges again.
		*m.st &^= stateView
		return
	}
	m.tick = v.Tick
	var err error
	if v.Snap != nil {
		err = m.table.SetSnapshotView(now, v.Snap, v.Refs)
	} else {
		err = m.table.SetView(now, v.Entries)
	}
	// The view taken and the table's Pending, in one store.
	st := *m.st &^ (stateView | statePending)
	if m.table.Pending() {
		st |= statePending
	}
	*m.st = st
	if err != nil && !errors.Is(err, ghost.ErrTooManyGhosts) {
		m.stats.ViewErrors++
	} else {
		m.stats.Views++
	}
	if held := m.table.HeldSnapshot(); held != nil && held != m.snap && held == v.Snap {
		// The view's reference becomes the manager's (no count change).
		if m.snap != nil {
			m.snap.Release()
		}
		m.snap, v.Snap = held, nil
	} else {
		m.hold(held) // before v lets its reference go
	}
	m.lastView = now
	v.Release()
}

// applied reports whether a view was applied (taken by the table or
// refused by it): every one is counted, so the counts say it, and the
// Manager keeps no flag for it (which took it from 104 bytes, the 112-byte
// size class, to 96). The sum in 64 bits: a 32-bit one would read 0 again
// when the two counts add up to 2^32.
func (m *Manager) applied() bool { return uint64(m.stats.Views)+uint64(m.stats.ViewErrors) != 0 }

// hold keeps a reference to s, the snapshot the table reads now, and lets
// the previous one go.
func (m *Manager) hold(s *ghost.Snapshot) {
	if s == m.snap {
		return
	}
	if s != nil {
		s.Retain()
	}
	if m.snap != nil {
		m.snap.Release()
	}
	m.snap = s
}

// Pending reports whether the table has anything to send
// (session.GhostWriter): the table's count as of its last change (State),
// read without touching the table.
func (m *Manager) Pending() bool { return m.st.Pending() }

// Write packs the ghost section of packet seq into what is left of w
// (session.GhostWriter): a view waiting for the clock goes in first.
func (m *Manager) Write(w *bitstream.Writer, seq uint64, now time.Duration) (int, error) {
	if m.st.ViewWaiting() { // apply's first test, inlined: most packets come with no view waiting
		m.apply(now)
	}
	pend := m.st.Pending()
	n, err := m.table.Write(w, seq, now)
	m.setPending(m.table.Pending())
	switch {
	case n > 0:
		m.stats.Sections++
	case pend:
		m.stats.Empty++
	}
	return n, err
}

// OnFate applies the fate of a packet that carried a ghost section
// (session.Server.PopGhostFates).
func (m *Manager) OnFate(f notify.Fate) {
	m.table.OnFate(f)
	m.setPending(m.table.Pending())
	m.stats.Fates++
}

// Close refuses further views and frees the one waiting: the zone may
// keep publishing until it learns the player left. It lets the table's
// snapshot go too: the manager may not write after Close.
func (m *Manager) Close() {
	m.views.Close()
	*m.st &^= stateView
	if m.snap != nil {
		m.snap.Release()
		m.snap = nil
	}
}

var _ session.GhostWriter = (*Manager)(nil)

// PrefetchManager asks the CPU for the Manager's line, PrefetchTable for
// its table's, PrefetchRecords for the table's per-record arrays: each
// reads what the one before fetched, so a driver calls them a turn or
// more apart, ahead of the pump that uses them (hints: none waits).
func (m *Manager) PrefetchManager() { prefetch.Lines(unsafe.Pointer(m), unsafe.Sizeof(*m)) }

// PrefetchTable: see PrefetchManager.
func (m *Manager) PrefetchTable() { m.table.PrefetchHeader() }

// PrefetchRecords: see PrefetchManager.
func (m *Manager) PrefetchRecords() { m.table.PrefetchRecords() }
