package ghostmgr

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/ghost"
)

// Params are what one ghost manager needs. Registry, Conn, Views and Now are
// required.
type Params struct {
	Registry *ghost.Registry
	Table    ghost.Config
	Conn     *actor.PID    // receives GhostSection
	Views    *msg.ViewSlot // the zone publishes here; the ghost manager closes it when it stops
	Now      func() time.Duration
	Player   uint64 // for logs and Stats
}

// Validate reports a missing or invalid parameter.
func (p Params) Validate() error {
	switch {
	case p.Registry == nil:
		return errors.New("ghostmgr: Registry is required")
	case p.Conn == nil:
		return errors.New("ghostmgr: Conn is required")
	case p.Views == nil:
		return errors.New("ghostmgr: Views is required")
	case p.Now == nil:
		return errors.New("ghostmgr: Now is required")
	}
	if err := p.Table.Validate(); err != nil {
		return fmt.Errorf("ghostmgr: %w", err)
	}
	return nil
}

// Stats counts what one ghost manager did. Read it with a StatsRequest
// (tests) or at the end of the connection.
type Stats struct {
	Views      uint64 // views applied to the table
	Deferred   uint64 // views held back because the clock had not advanced 1 ms since the previous one
	ViewErrors uint64 // views the table refused (ErrBadState, ErrUnknownClass; a zone bug)
	Sections   uint64 // sections packed and sent
	Empty      uint64 // credits that found something pending but packed no record (budget too small)
	Fates      uint64
	Table      ghost.Stats
}

// StatsRequest asks a ghost manager for its Stats; it answers the sender
// with a *Stats (use RequestFuture from tests or a non-actor goroutine, never
// inside another actor's Receive).
type StatsRequest struct{}

// Props returns the props of a ghost manager. The actor refuses to start
// (it stops at once, logging the error) when p does not validate.
func Props(p Params) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &manager{p: p} })
}

// tableMu serializes ghost.NewTable: it marks the shared Registry frozen
// with a plain write, which would race between ghost managers starting on
// different goroutines.
var tableMu sync.Mutex

func newTable(reg *ghost.Registry, cfg ghost.Config) (*ghost.Table, error) {
	tableMu.Lock()
	defer tableMu.Unlock()
	return ghost.NewTable(reg, cfg)
}

// manager is the actor. Everything here runs inside Receive, one message at
// a time.
type manager struct {
	p     Params
	table *ghost.Table
	w     bitstream.Writer

	credit bool // the connection granted one section
	budget int  // bits, with the credit
	seq    uint64

	pending  *msg.View // newest view not yet applied (clock did not advance 1 ms)
	lastView time.Duration
	applied  bool // a view was applied (lastView is meaningful)

	stats Stats
}

// Receive implements actor.Actor.
func (m *manager) Receive(ctx actor.Context) {
	switch v := ctx.Message().(type) {
	case *msg.ViewReady:
		if view := m.p.Views.Take(); view != nil {
			m.offerView(view)
		}
		m.step(ctx)
	case *msg.GhostFates:
		for _, f := range v.Fates {
			m.table.OnFate(f)
		}
		m.stats.Fates += uint64(len(v.Fates))
		if v.Want {
			m.credit = true
		}
		if m.credit {
			m.budget = v.Budget // every GhostFates carries the current budget
		}
		v.Release()
		m.step(ctx)
	case *StatsRequest:
		s := m.stats
		if m.table != nil {
			s.Table = m.table.Stats()
		}
		ctx.Respond(&s)
	case *actor.Started:
		if err := m.p.Validate(); err != nil {
			ctx.Logger().Error("ghost manager not started", "err", err)
			ctx.Stop(ctx.Self())
			return
		}
		t, err := newTable(m.p.Registry, m.p.Table)
		if err != nil {
			ctx.Logger().Error("ghost manager not started", "err", err)
			ctx.Stop(ctx.Self())
			return
		}
		m.table = t
	case *actor.Stopping:
		// Refuse further views and free the one held: the zone may keep
		// publishing until it learns the player left.
		m.p.Views.Close()
		if m.pending != nil {
			m.pending.Release()
			m.pending = nil
		}
	}
}

// offerView keeps v as the newest view; step applies it when the clock allows.
func (m *manager) offerView(v *msg.View) {
	if m.pending != nil {
		m.stats.Deferred++ // superseded while waiting for the clock
		m.pending.Release()
	}
	m.pending = v
}

// step applies a pending view and packs a section if the credit allows.
func (m *manager) step(ctx actor.Context) {
	if m.table == nil {
		return
	}
	now := m.p.Now()
	if m.pending != nil && (!m.applied || now >= m.lastView+time.Millisecond) {
		// The wire stamps states in milliseconds and the client orders them by
		// stamp, so the table takes at most one view per millisecond; a view
		// that comes sooner waits for the next message (the connection's next
		// fates or the zone's next tick), superseded if a newer one arrives.
		v := m.pending
		m.pending = nil
		if err := m.table.SetView(now, v.Entries); err != nil && !errors.Is(err, ghost.ErrTooManyGhosts) {
			m.stats.ViewErrors++
		} else {
			m.stats.Views++
		}
		m.lastView, m.applied = now, true
		v.Release()
	}
	if !m.credit || !m.table.Pending() {
		return
	}
	sec := msg.NewGhostSection()
	n := min(m.budget/8, len(sec.Data))
	m.w.Reset(sec.Data[:n])
	m.seq++
	records, err := m.table.Write(&m.w, m.seq, now)
	if err != nil || records == 0 {
		// No room for a record: keep the credit; the next fates bring a new budget.
		m.stats.Empty++
		sec.Release()
		return
	}
	sec.Seq, sec.Bits, sec.Records = m.seq, m.w.BitLen(), records
	m.credit = false
	m.stats.Sections++
	ctx.Send(m.p.Conn, sec)
}
