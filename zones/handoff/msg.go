package handoff

import (
	"fmt"
	"time"

	"github.com/ghostwire/ghostwire/replication/move"
)

// Epoch fences ownership: each handoff gives the new owner the old
// owner's epoch plus one. Entities start at epoch 1.
type Epoch uint64

// Kind is a message type.
type Kind uint8

// Message kinds. Zone to zone: Offer … Forward. Zone to connection: Route.
const (
	KindOffer     Kind = iota + 1 // S→T: take this entity? (epoch e, snapshot)
	KindAccept                    // T→S: yes (epoch e)
	KindReject                    // T→S: no (epoch e, reason)
	KindCommit                    // S→T: it is yours (epoch e, snapshot, buffered moves)
	KindCommitAck                 // T→S: got it (epoch e)
	KindAbort                     // S→T: forget the offer (epoch e)
	KindForward                   // S→T: moves that reached the old owner (new epoch e+1)
	KindRoute                     // T→connection: send this entity's input to zone From (epoch e+1)
)

var kindNames = [...]string{"?", "offer", "accept", "reject", "commit", "commit-ack", "abort", "forward", "route"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Reason says why a target rejected an offer.
type Reason uint8

// Reject reasons.
const (
	ReasonNone     Reason = iota
	ReasonStale           // the offer's epoch is not newer than what the target knows
	ReasonOwned           // the target already owns the entity
	ReasonRefused         // the target does not take entities now (draining, full)
	ReasonBusy            // too many handoffs pending at the target
	ReasonWrongArg        // malformed offer
)

var reasonNames = [...]string{"none", "stale", "owned", "refused", "busy", "malformed"}

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", r)
}

// Msg is one handoff message. Which fields matter depends on Kind (see the
// constants). Slices and the snapshot are owned by the message: the
// machine copies what it keeps and never changes a message it returned.
type Msg struct {
	Kind   Kind
	Entity uint64
	Epoch  Epoch
	From   string // sending zone
	To     string // receiving zone; for Route, the connection address (Snapshot.Conn)
	// Sent is the sender's clock when it sent the message; a receiver
	// drops messages older than Config.MaxAge. Within one process all
	// zones share a clock; across processes clocks must agree to well
	// within MaxAge.
	Sent   time.Duration
	Reason Reason
	State  *Snapshot   // Offer, Commit
	Moves  []move.Move // Commit, Forward; in sequence order
}

func (m *Msg) String() string {
	return fmt.Sprintf("%s entity=%d epoch=%d %s→%s", m.Kind, m.Entity, m.Epoch, m.From, m.To)
}

// Snapshot is everything the new owner needs to continue an entity exactly
// where the old one stopped.
type Snapshot struct {
	Entity uint64
	Kind   uint8 // the zone's entity kind (player, NPC, …)
	// Control is the authoritative state right after move LastApplied.
	Control     move.ControlState
	LastApplied uint64 // newest applied move sequence (0: none; NPCs: 0)
	Health      int32
	Flags       uint32
	Name        string
	Extra       [4]uint32
	// NPC wander state, so an NPC walks on identically after a handoff.
	Rng     [2]uint64
	Heading float32
	Speed   float32
	TurnIn  uint32 // ticks until the next change of heading
	// Conn addresses the player's connection (in process: the connection
	// actor's PID; in a cluster: its subject). Empty for NPCs.
	Conn string
	// Interest lists the entity ids in the player's interest set, so
	// hysteresis continues at the new owner instead of dropping what is
	// between the radii (which would pop ghosts on the client).
	Interest []uint64
	// Events is the player's ordered-event fence: the new owner drops
	// events the old one applied.
	Events EventFence
}

// clone returns a deep copy.
func (s *Snapshot) clone() *Snapshot {
	c := *s
	c.Interest = append([]uint64(nil), s.Interest...)
	return &c
}

// Route is a connection's view of where its entity lives. The zero Route
// points nowhere.
type Route struct {
	Zone  string
	Epoch Epoch
}

// Apply takes a Route message if it is newer than r and reports whether r
// changed. Older and equal epochs are ignored: a late message never points
// the connection back at a previous owner.
func (r *Route) Apply(m Msg) bool {
	if m.Kind != KindRoute || m.Epoch <= r.Epoch {
		return false
	}
	r.Zone, r.Epoch = m.From, m.Epoch
	return true
}
