package msg

import "github.com/ghostwire/ghostwire/replication/event"

// Event is one game event travelling between a connection and a zone.
// Payload aliases the owning message's arena: valid until that message is
// released.
type Event struct {
	Class   event.Class // Unguaranteed, Unordered, Ordered or Staggered
	Lane    uint8       // Ordered: the lane
	Key     uint16      // Staggered: the key
	Payload []byte
	// Seq is an ordered event's per-player number (docs/protocol.md
	// §7.20; 0: not numbered). Client → zone only.
	Seq uint64
}

// EventList is a list of events whose payloads share one arena, so a batch of
// events costs no allocation per event once the arena has grown to its
// working size. The zero EventList is empty and ready to use.
type EventList struct {
	Events []Event
	arena  []byte
}

// Add appends an event, copying payload (the caller's buffer may be reused
// at once, as event.Receiver's are).
func (l *EventList) Add(class event.Class, lane uint8, key uint16, payload []byte) {
	old := l.arena
	off := len(l.arena)
	l.arena = append(l.arena, payload...)
	if len(l.Events) > 0 && cap(old) != cap(l.arena) {
		// The arena moved: repoint the payloads already handed out.
		l.rebase()
	}
	l.Events = append(l.Events, Event{Class: class, Lane: lane, Key: key, Payload: l.arena[off:len(l.arena):len(l.arena)]})
}

// AddSeq is Add for a numbered ordered event (Event.Seq).
func (l *EventList) AddSeq(class event.Class, lane uint8, key uint16, payload []byte, seq uint64) {
	l.Add(class, lane, key, payload)
	l.Events[len(l.Events)-1].Seq = seq
}

// rebase repoints every payload into the current arena. Payloads were
// appended back to back, so their offsets are the running sum of lengths.
func (l *EventList) rebase() {
	off := 0
	for i := range l.Events {
		n := len(l.Events[i].Payload)
		l.Events[i].Payload = l.arena[off : off+n : off+n]
		off += n
	}
}

// trim drops the room of an empty list beyond events events and arena
// bytes of payload (the next Add makes it again).
func (l *EventList) trim(events, arena int) {
	if cap(l.Events) > events {
		l.Events = nil
	}
	if cap(l.arena) > arena {
		l.arena = nil
	}
}

// Len is the number of events.
func (l *EventList) Len() int { return len(l.Events) }

// Bytes is the total payload size.
func (l *EventList) Bytes() int { return len(l.arena) }

// Reset empties the list, keeping its storage.
func (l *EventList) Reset() {
	clear(l.Events) // drop payload references into the arena
	l.Events = l.Events[:0]
	l.arena = l.arena[:0]
}
