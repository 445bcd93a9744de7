package zone

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"

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
// So a passed-on Input goes to a zone actor of this process wrapped at
// zonePriority (passedInput), in step with the Forwards, which keep the
// order they were sent in among themselves. It also goes ahead of the
// inputs the owner has queued from the player's connection: those came
// after the connection's Route, and the passed-on ones before it.
//
// A zone served by another process is reached through its proxy
// (actors/cluster), which knows the plain Input: it gets that, as before
// (there the receiving bridge hands both to the zone and sets their
// priorities: the same overtaking remains across processes).

// passedInput is an Input passed on by the zone that handed its player
// away (passInputOn), at zonePriority.
type passedInput struct{ in *msg.Input }

// GetPriority implements actor.PriorityMessage.
func (*passedInput) GetPriority() int8 { return zonePriority }

// passInputOn sends in, an Input of a player this zone handed to zone
// peer, on to that zone: wrapped at zonePriority to a zone actor of this
// process, plain to a proxy (see above).
func (a *zoneActor) passInputOn(peer string, in *msg.Input) {
	a.ctx.Send(a.peer(peer), passedOn(a.root.ActorSystem(), peer, in))
}

// passedOn is what passInputOn sends zone peer of sys for in.
func passedOn(sys *actor.ActorSystem, peer string, in *msg.Input) any {
	if localZone(sys, peer) {
		return &passedInput{in: in}
	}
	return in
}

// onPassedInput takes an Input another zone passed on, as onInput takes
// one from a connection. It did not go through the mailbox's input count
// (inputMailbox counts a plain *msg.Input), which onInput takes it off.
func (a *zoneActor) onPassedInput(p *passedInput) {
	if a.inputs != nil {
		a.inputs.queued.Add(1)
	}
	a.onInput(p.in)
}

// localZones are the zone actors running in this process, by actor
// system and zone (registered from Started to Stopping): the zones a
// passed-on Input may go to wrapped. A zone that stops leaves it before
// a proxy can take its name.
var localZones sync.Map // localZoneKey → struct{}

type localZoneKey struct {
	sys  *actor.ActorSystem
	zone string
}

func setLocalZone(sys *actor.ActorSystem, zone string, on bool) {
	if on {
		localZones.Store(localZoneKey{sys, zone}, struct{}{})
	} else {
		localZones.Delete(localZoneKey{sys, zone})
	}
}

func localZone(sys *actor.ActorSystem, zone string) bool {
	_, ok := localZones.Load(localZoneKey{sys, zone})
	return ok
}
