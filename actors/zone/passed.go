package zone

import (
	"github.com/ghostwire/ghostwire/actors/msg"
)

// Passed-on Inputs and their order at the owner.
//
// A zone that has handed a player away passes on what the player's older
// connection still sends it (eventsAway): the Input's moves in a Forward
// (a HandoffEnvelope, at zonePriority) and, right behind it, the Input
// itself with its events. At the default priority that Input waited at
// the owner behind every queued input while the next Input's Forward
// went ahead of them: with two Inputs in flight the owner queued both
// Inputs' moves (and a tick could apply them) before it handled the
// first one's events. An event handler saw the player where it had not
// been when the client sent the event: an order a connection sending to
// the owner itself never gives (TestPassedOnInputsKeepTheirOrderAtTheOwner).
//
// So a passed-on Input goes wrapped at zonePriority (passedInput), in
// step with the Forwards, which keep the order they were sent in among
// themselves. It also goes ahead of the inputs the owner has queued from
// the player's connection: those came after the connection's Route, and
// the passed-on ones before it.
//
// A zone served by another process is reached through its proxy
// (actors/cluster), whose mailbox keeps the order it was sent in: the
// proxy takes the wrapper (PassedOn), marks the Input passed on on the
// wire (PlayerInput.passed_on), and the receiving node hands it to the
// zone wrapped again (PassOn), at zonePriority like the Forward ahead of
// it. (Sent plain, it was handed to the zone at the default priority, and
// a later Forward overtook its events there.)
//
// The wrapper also tells the owner that the Input is the handed
// connection's own, not a newer login's of the same event generation:
// one held before the player's Commit (holdEarly) is taken at the Commit
// (expectJoin), not kept for a Join that never comes (earlyInputs.handed).

// passedInput is an Input passed on by the zone that handed its player
// away (passInputOn), at zonePriority.
type passedInput struct{ in *msg.Input }

// GetPriority implements actor.PriorityMessage.
func (*passedInput) GetPriority() int8 { return zonePriority }

// passInputOn sends in, an Input of a player this zone handed to zone
// peer, on to that zone (or its proxy), wrapped (see above).
func (a *zoneActor) passInputOn(peer string, in *msg.Input) {
	a.ctx.Send(a.peer(peer), &passedInput{in: in})
}

// PassedOn reports whether m is an Input a zone passed on to the player's
// new owner (see above), and returns it: what a proxy of actors/cluster
// sends on marked passed_on.
func PassedOn(m any) (*msg.Input, bool) {
	if p, ok := m.(*passedInput); ok {
		return p.in, true
	}
	return nil, false
}

// PassOn is in, an Input a zone of another process passed on (marked
// passed_on), as a zone here takes it: at zonePriority, behind the
// Forward sent ahead of it, and told apart from a newer login's.
func PassOn(in *msg.Input) any { return &passedInput{in: in} }

// onPassedInput takes an Input another zone passed on, as onInput takes
// one from a connection. It did not go through the mailbox's input count
// (inputMailbox counts a plain *msg.Input), which onInput takes it off.
// While it is taken, passing tells holdEarly it is the handed
// connection's (earlyInputs.handed).
func (a *zoneActor) onPassedInput(p *passedInput) {
	if a.inputs != nil {
		a.inputs.queued.Add(1)
	}
	a.passing = true
	a.onInput(p.in)
	a.passing = false
}
