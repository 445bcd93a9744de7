package sim

import (
	"fmt"
	"time"

	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// Checkpoint is handoff.Checkpoint: a player's state for its record.
type Checkpoint = handoff.Checkpoint

// AppendCheckpoints appends a checkpoint of every owned player whose turn
// it is: each player's comes `every` ticks after its previous one (the
// previous periodic one, or the one CheckpointNow took when it joined or
// was acquired), so no two of a player's checkpoints are more than
// `every` ticks apart, and a player handed on often is not written more
// than that on top of its handoffs. Spread over the ticks (by slot, and
// CheckpointNow's offset), so a zone of 1,000 players writes about
// 1,000/every records a tick rather than 1,000 at once. every ≤ 1
// checkpoints everyone (and changes nobody's turn).
func (z *Zone) AppendCheckpoints(dst []Checkpoint, every uint64) []Checkpoint {
	due := z.cpDue[:len(z.ents)]
	for s := range z.ents {
		// An owned player by Zone.owned (in steady play every one: its
		// inputs fill it), whose slot is read only if due: the walk
		// reads 16 bytes a slot, not a line of every slot and another of
		// every player's.
		if z.owned[s] == nil {
			if e := &z.ents[s]; e.role != roleOwned || e.kind != KindPlayer {
				continue
			}
		}
		if every > 1 {
			if d := due[s]; d == 0 { // never checkpointed here: its slot's turn
				if uint64(s)%every != z.tick%every {
					continue
				}
			} else if d > z.tick {
				continue
			}
			due[s] = z.tick + every
		}
		dst = append(dst, z.checkpoint(&z.ents[s]))
	}
	return dst
}

// AppendSliceCheckpoints appends a checkpoint of every owned player whose
// handoff.CheckpointSlice is slice: one chunk of the zone's periodic checkpoints
// (actors/cluster.CheckpointChunk), each chunk taken once a checkpoint
// period (SlicesDue). Unlike AppendCheckpoints it keeps no turns: a chunk
// holds all of its slice's players each time, so it replaces the last.
func (z *Zone) AppendSliceCheckpoints(dst []Checkpoint, slices, slice uint64) []Checkpoint {
	for s := range z.ents {
		e := &z.ents[s]
		if z.owned[s] == nil && (e.role != roleOwned || e.kind != KindPlayer) {
			continue
		}
		if handoff.CheckpointSlice(e.id, slices) == slice {
			dst = append(dst, z.checkpoint(e))
		}
	}
	return dst
}

// SlicesDue is the chunks [from, to) of slices whose turn is tick when
// each is taken once every `every` ticks (every ≥ 1), spread evenly: one a
// tick when every is slices, several when every is fewer, none on some
// ticks when it is more.
func SlicesDue(tick, every, slices uint64) (from, to uint64) {
	ph := tick % every
	return (ph*slices + every - 1) / every, ((ph+1)*slices + every - 1) / every
}

// CheckpointOf returns an owned player's checkpoint now (a player leaving).
func (z *Zone) CheckpointOf(entity uint64) (Checkpoint, bool) {
	s, ok := z.byID.get(entity)
	if !ok || z.ents[s].role != roleOwned || z.ents[s].kind != KindPlayer {
		return Checkpoint{}, false
	}
	return z.checkpoint(&z.ents[s]), true
}

// CheckpointNow is CheckpointOf for a checkpoint that is written as one
// of the player's periodic ones (the one its join or acquisition writes
// with the record): AppendCheckpoints (with the same every) takes the
// player's next one between every/2 and every ticks later, by slot, not at
// its slot's next turn. So a handoff costs the record one write, not that
// and an extra checkpoint, while the checkpoints stay at most every ticks
// apart; and players restored or acquired in one tick do not all come
// due in one tick after.
func (z *Zone) CheckpointNow(entity uint64, every uint64) (Checkpoint, bool) {
	cp, ok := z.CheckpointOf(entity)
	if ok && every > 1 {
		s, _ := z.byID.get(entity)
		z.cpDue[s] = z.tick + every - uint64(s)%(every/2+1)
	}
	return cp, ok
}

// restoreSlot is what Restore and RestoreNPC share: it checks a restored
// entity's position (in the world: a checkpoint taken mid-crossing may
// stand in a neighbour zone, handed on by the next ticks' crossings),
// state and name, and makes it owned here, in its slot (a replica's
// taken over), at a handoff epoch above its old one, with that state and
// name. The caller sets the rest.
func (z *Zone) restoreSlot(now time.Duration, id uint64, kind uint8, ctl move.ControlState, name string, above handoff.Epoch) (*entity, error) {
	pos := ctl.Pos
	if _, ok := z.w.ZoneAt(float64(pos[0]), float64(pos[2])); !ok {
		return nil, fmt.Errorf("%w: [%g, %g] is outside world %s", ErrOutside, pos[0], pos[2], z.w.Name())
	}
	if err := ctl.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadState, err)
	}
	nm, err := ghost.MakeName(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadState, err)
	}
	epoch, err := z.hand.SpawnAbove(id, now, above)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrExists, err)
	}
	e := z.ownSlot(id, kind, epoch, now)
	e.state, e.name = ctl, nm
	return e, nil
}

// ownSlot makes id owned here at epoch from now, in its slot (a replica's
// taken over) or a new one: what a join and a restore share.
func (z *Zone) ownSlot(id uint64, kind uint8, epoch handoff.Epoch, now time.Duration) *entity {
	s, ok := z.byID.get(id)
	if !ok {
		s = z.slotAlloc(id)
	}
	e := &z.ents[s]
	e.kind, e.role, e.epoch, e.since, z.cpDue[s] = kind, roleOwned, epoch, now, 0
	e.rp = nil // a replica's slot taken over: no longer one
	return e
}

func (z *Zone) checkpoint(e *entity) Checkpoint {
	p := e.p()
	return Checkpoint{Entity: e.id, Epoch: e.epoch, Control: e.state, LastApplied: p.queue.LastApplied(),
		Health: e.health, Flags: e.flags, Name: e.name.String(), Extra: e.extra, Conn: z.conn(e), Events: p.events}
}

// Restore adds a player owned by this zone from its checkpoint: where it
// was, as it was, at a handoff epoch above the checkpoint's (the
// connection drops controls older than the newest epoch it saw). Moves
// start after lastApplied: the connection's, which is never older than
// the checkpoint's for the same session, or 0 for a new session.
func (z *Zone) Restore(now time.Duration, cp Checkpoint, conn string, lastApplied uint64) error {
	if IsNPC(cp.Entity) {
		return fmt.Errorf("%w: %#x", ErrBadID, cp.Entity)
	}
	if s, ok := z.byID.get(cp.Entity); ok && z.ents[s].role != roleReplica {
		return fmt.Errorf("%w: %d", ErrExists, cp.Entity)
	}
	// A checkpoint taken mid-crossing may stand in a neighbour zone (the
	// player had crossed, its handoff not committed when the owner died):
	// it is put back here anyway, where it stood, and handed on by the
	// next ticks' crossings. Only a position outside the world is refused.
	e, err := z.restoreSlot(now, cp.Entity, KindPlayer, cp.Control, cp.Name, cp.Epoch)
	if err != nil {
		return err
	}
	e.health, e.flags, e.extra = cp.Health, cp.Flags, cp.Extra
	p := z.pl(e)
	p.hasConn, p.events, p.evNew = conn != "", cp.Events, true
	p.queue.Reset(lastApplied)
	z.seqExtra(e)
	p.credit, p.owed, p.burst = z.cfg.MaxCredit, 0, true
	e.correct = true // the client learns where it is now
	z.hand.SetConn(cp.Entity, conn)
	z.stats.Joins++
	z.stats.Restores++
	return nil
}
