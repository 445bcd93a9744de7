package zone

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/zones/sim"
)

// TestPauseHasOwners: a zone ticks only while no owner holds it paused;
// an owner's restart takes off its own pause only, and a restart by an
// owner that did not pause it changes nothing. A Pause with By zero is
// PauseManual's (World.Pause's).
func TestPauseHasOwners(t *testing.T) {
	sys := quietSystem()
	defer sys.Shutdown()
	var now time.Duration
	a, z := timedZoneActor(t, sys, &now)
	// ticks reports whether a tick due now runs.
	ticks := func() bool {
		before := z.Tick()
		now = max(now+z.Period(), a.nextAt)
		a.tickDue()
		return z.Tick() != before
	}
	steps := []struct {
		name  string
		pause *Pause
		ticks bool
	}{
		{"running", nil, true},
		{"a census pauses", &Pause{Paused: true}, false},
		{"the lease holds too", &Pause{Paused: true, By: PauseLease}, false},
		{"the lease lets go: the census's pause stays", &Pause{Paused: false, By: PauseLease}, false},
		{"a handover's restart it never paused", &Pause{Paused: false, By: PauseHandover}, false},
		{"the census restarts", &Pause{Paused: false, By: PauseManual}, true},
		{"the lease and a handover pause at once", &Pause{Paused: true, By: PauseLease | PauseHandover}, false},
		{"a manual restart it never paused", &Pause{Paused: false}, false},
		{"the handover lets go: the lease's stays", &Pause{Paused: false, By: PauseHandover}, false},
		{"the lease lets go", &Pause{Paused: false, By: PauseLease}, true},
	}
	for _, s := range steps {
		if s.pause != nil {
			a.setPaused(s.pause)
		}
		if got := ticks(); got != s.ticks {
			t.Fatalf("%s: the zone ticks %v, want %v (held by %03b)", s.name, got, s.ticks, a.paused)
		}
	}
}

// timedZoneActor is syncZoneActor with a timer that never fires on its
// own (the test runs the ticks, tickDue) and the first tick's slot one
// period on; the timer is stopped at the test's end.
func timedZoneActor(t *testing.T, sys *actor.ActorSystem, now *time.Duration) (*zoneActor, *sim.Zone) {
	t.Helper()
	a, z := syncZoneActor(t, sys, now)
	a.timer = time.AfterFunc(time.Hour, func() {})
	t.Cleanup(func() { a.timer.Stop() })
	a.nextAt = z.Period()
	return a, z
}
