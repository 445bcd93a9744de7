package event

// Class is an event's delivery contract (checklist RL-1). Its value is the
// 2-bit class tag on the wire.
type Class uint8

const (
	// Unguaranteed events are written once, only if there is room after the
	// guaranteed ones, carry no transmission record and are never resent:
	// under bandwidth pressure they are the first data dropped (RL-4).
	Unguaranteed Class = 0
	// Unordered events are guaranteed: resent when the packet that carried them
	// is reported dropped, delivered exactly once, in arrival order (RL-3).
	Unordered Class = 1
	// Ordered events are guaranteed and delivered exactly once in send order
	// within their lane; lanes are independent (RL-2, RL-14).
	Ordered Class = 2
	// Staggered events are unguaranteed state updates repeated on the seed-001
	// schedule (0, 100, 300 ms); the receiver delivers a key's update only if
	// it is newer than the last one delivered for that key (RL-8, RL-9).
	Staggered Class = 3
)

func (c Class) String() string {
	switch c {
	case Unguaranteed:
		return "unguaranteed"
	case Unordered:
		return "unordered"
	case Ordered:
		return "ordered"
	case Staggered:
		return "staggered"
	}
	return "class(?)"
}

// Event is one delivered event. Payload is only valid during the deliver
// callback: it points into the Receiver's buffers, which are reused.
type Event struct {
	Class   Class
	Lane    int    // Ordered: the lane, [0, Lanes)
	Key     uint16 // Staggered: the key, [0, StaggerKeys)
	Payload []byte
	// Seq is the event's number in its lane's per-player numbering, which
	// outlives a connection (Ordered only; 0 when the layer above does not
	// number events). The event layer neither sets nor reads it: the
	// session does (docs/protocol.md §7.20).
	Seq uint64
}
