package zone

import (
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// quietSystem is an actor system that logs warnings only.
func quietSystem() *actor.ActorSystem {
	lvl := slog.LevelWarn
	if os.Getenv("GW_DEBUG") != "" {
		lvl = slog.LevelDebug
	}
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	}))
}

// clock is the node clock the tests give the zones.
type clock struct{ start time.Time }

func newClock() *clock              { return &clock{start: time.Now()} }
func (c *clock) Now() time.Duration { return time.Since(c.start) }

// driver stands in for many players' connection and ghost manager actors:
// it sends their moves to whatever zone each is routed to, follows
// Redirects (epoch-fenced, as actors/conn does), records Controls and takes
// the views the zones publish.
type driver struct {
	mu      sync.Mutex
	players map[uint64]*dplayer
	order   []uint64
	events  chan uint64 // player ids, one per Redirect taken
	walk    func(id uint64, tick int) (fwd int8, yaw uint16)
	ticks   int
	bad     []string
	// resendAfter, when set, makes each step resend a player's
	// unacknowledged moves as actors/conn's resendStalled does: when a
	// Control came that long after the oldest went (or the last resend)
	// without acknowledging it (doubling, up to 8×, while no progress is
	// reported). A zone that sends no Controls (behind, starved) is not
	// sent its moves again. Without it every move is sent once.
	resendAfter time.Duration
	// batch, when set, makes each step send a zone its players' inputs
	// in *msg.Inputs of at most that many, as a connection shard sends a
	// round's (actors/conn maxBatch, 64). Without it each Input goes
	// alone.
	batch   int
	batches []zoneBatch // a step's, one a zone
}

// zoneBatch is the inputs a step has for one zone so far.
type zoneBatch struct {
	zone *actor.PID
	b    *msg.Inputs
}

type dplayer struct {
	route       *actor.PID
	epoch       uint64
	sent        uint64
	applied     uint64
	controls    int
	redirects   int
	views       msg.ViewSlot
	viewsTaken  int
	snapViews   int // views that came as snapshot references
	viewEntries int
	teleportAt  time.Time
	latency     []time.Duration
	kicked      bool
	echoes      []msg.Event          // copies of the events zones sent this player
	outFences   []handoff.EventFence // each Output's event fence (msg.Output.Applied), in order
	holdsAt     []int                // len(echoes) at each empty Output (a zone's answer to a Leave(Redirected))
	forced      [][3]float32
	lastView    []ghost.ViewEntry
	// advanced: the scheduled tick time of every Control that moved
	// LastApplied on, with how many Redirects the player had taken then.
	advanced []ctlMark
	// With driver.resendAfter: every move sent (Seq i+1 at i) and when,
	// when the newest Control came, the last resend and how many since
	// the last progress.
	moves    []move.Move
	sentAt   []time.Time
	ctlAt    time.Time
	resentAt time.Time
	resends  uint
	resent   uint64 // moves sent again
}

// ctlMark is one Control that acknowledged new moves.
type ctlMark struct {
	at        time.Duration
	redirects int
}

// driverStep asks the driver to send one move per player (Dt units of
// 1/960 s each).
type driverStep struct{ dt uint8 }

// hitches returns, for every Redirect a player took, the time between the
// last Control before it that acknowledged new moves and the first one
// after it that did (scheduled tick times: one period when the handoff
// costs the player no update). Redirects without acknowledged moves on
// both sides are skipped.
func (p pstat) hitches() []time.Duration {
	var out []time.Duration
	for i := 1; i < len(p.advanced); i++ {
		a, b := p.advanced[i-1], p.advanced[i]
		if b.redirects != a.redirects {
			out = append(out, b.at-a.at)
		}
	}
	return out
}

// driverSync is answered once the driver has handled every message before
// it (every step it was asked for has been sent).
type driverSync struct{}

// driverTeleport asks the driver to teleport a player through its route.
type driverTeleport struct {
	id  uint64
	pos [3]float32
}

func newDriver(walk func(id uint64, tick int) (int8, uint16)) *driver {
	return &driver{players: map[uint64]*dplayer{}, events: make(chan uint64, 1<<16), walk: walk}
}

func (d *driver) add(id uint64, zone *actor.PID) *dplayer {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := &dplayer{route: zone}
	d.players[id] = p
	d.order = append(d.order, id)
	return p
}

func (d *driver) Receive(ctx actor.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch m := ctx.Message().(type) {
	case *msg.Control:
		if p := d.players[m.Player]; p != nil {
			if m.LastApplied < p.applied {
				d.bad = append(d.bad, "LastApplied went backwards")
			}
			if m.LastApplied > p.applied {
				p.advanced = append(p.advanced, ctlMark{at: m.At, redirects: p.redirects})
				p.resends = 0
			}
			p.applied = m.LastApplied
			p.controls++
			if d.resendAfter > 0 {
				p.ctlAt = time.Now()
			}
			if m.Force {
				p.forced = append(p.forced, m.State.Pos)
			}
		}
		m.Release()
	case *msg.Redirect:
		if p := d.players[m.Player]; p != nil && m.Epoch > p.epoch {
			p.route, p.epoch = m.Zone, m.Epoch
			p.redirects++
			if !p.teleportAt.IsZero() {
				p.latency = append(p.latency, time.Since(p.teleportAt))
				p.teleportAt = time.Time{}
			}
			select {
			case d.events <- m.Player:
			default:
			}
		}
	case *msg.ViewReady:
		for _, p := range d.players {
			if v := p.views.Take(); v != nil {
				p.viewsTaken++
				if v.Snap != nil { // the slot asked for references (AcceptRefs)
					p.snapViews++
					p.lastView = v.Snap.AppendEntries(p.lastView[:0], v.Refs)
				} else {
					p.lastView = append(p.lastView[:0], v.Entries...)
				}
				p.viewEntries = len(p.lastView)
				v.Release()
			}
		}
	case *msg.Output:
		if p := d.players[m.Player]; p != nil {
			if len(m.Events) == 0 {
				p.holdsAt = append(p.holdsAt, len(p.echoes))
			}
			p.outFences = append(p.outFences, m.Applied)
			for _, e := range m.Events {
				e.Payload = append([]byte(nil), e.Payload...) // valid until Release
				p.echoes = append(p.echoes, e)
			}
		} else {
			d.bad = append(d.bad, "output for an unknown player")
		}
		m.Release()
	case *msg.Kick:
		if p := d.players[m.Player]; p != nil {
			p.kicked = true
		}
	case *driverStep:
		d.ticks++
		for _, id := range d.order {
			p := d.players[id]
			p.sent++
			in := msg.NewInput()
			in.Player = id
			fwd, yaw := int8(0), uint16(0)
			if d.walk != nil {
				fwd, yaw = d.walk(id, d.ticks)
			}
			mv := move.Move{Seq: p.sent, Dt: m.dt, Forward: fwd, Yaw: yaw}
			in.Moves = append(in.Moves[:0], mv)
			if d.resendAfter > 0 {
				now := time.Now()
				p.moves, p.sentAt = append(p.moves, mv), append(p.sentAt, now)
				if p.applied+1 < p.sent && p.ctlAt.Sub(maxTime(p.sentAt[p.applied], p.resentAt)) >= d.resendAfter<<min(p.resends, 3) {
					// Every unacknowledged move, in order: one contiguous
					// batch (a gap inside a batch means moves lost at the
					// client). The zone drops those it has.
					in.Moves = append(in.Moves[:0], p.moves[p.applied:]...)
					p.resentAt = now
					p.resends++
					p.resent += p.sent - p.applied - 1
				}
			}
			if d.batch == 0 {
				ctx.Send(p.route, in)
				continue
			}
			d.addToBatch(ctx, p.route, in)
		}
		for _, z := range d.batches {
			if len(z.b.List) == 0 {
				z.b.Release()
				continue
			}
			ctx.Send(z.zone, z.b)
		}
		d.batches = d.batches[:0]
	case *driverSync:
		ctx.Respond(struct{}{})
	case *driverTeleport:
		p := d.players[m.id]
		p.teleportAt = time.Now()
		ctx.Send(p.route, &Teleport{Entity: m.id, Pos: m.pos})
	}
}

// addToBatch adds in to the step's batch for zone, sent once full.
func (d *driver) addToBatch(ctx actor.Context, zone *actor.PID, in *msg.Input) {
	i := slices.IndexFunc(d.batches, func(z zoneBatch) bool { return z.zone.Equal(zone) })
	if i < 0 {
		i = len(d.batches)
		d.batches = append(d.batches, zoneBatch{zone: zone, b: msg.NewInputs()})
	}
	z := &d.batches[i]
	if z.b.List = append(z.b.List, in); len(z.b.List) == d.batch {
		ctx.Send(z.zone, z.b)
		z.b = msg.NewInputs()
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// pstat is a copy of a player's counters.
type pstat struct {
	route                                        *actor.PID
	epoch, sent, applied, resent                 uint64
	controls, redirects, viewsTaken, viewEntries int
	kicked                                       bool
	latency                                      []time.Duration
	echoes                                       []msg.Event
	holdsAt                                      []int
	forced                                       [][3]float32
	lastView                                     []ghost.ViewEntry
	advanced                                     []ctlMark
}

// snapshot copies what the test needs, under the lock.
func (d *driver) snapshot() map[uint64]pstat {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[uint64]pstat{}
	for id, p := range d.players {
		out[id] = pstat{route: p.route, epoch: p.epoch, sent: p.sent, applied: p.applied, resent: p.resent, controls: p.controls,
			redirects: p.redirects, viewsTaken: p.viewsTaken, viewEntries: p.viewEntries, kicked: p.kicked,
			latency: append([]time.Duration(nil), p.latency...), echoes: append([]msg.Event(nil), p.echoes...), holdsAt: append([]int(nil), p.holdsAt...),
			forced: append([][3]float32(nil), p.forced...), lastView: append([]ghost.ViewEntry(nil), p.lastView...),
			advanced: append([]ctlMark(nil), p.advanced...)}
	}
	return out
}

func (d *driver) problems() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.bad...)
}

// waitFor polls cond until it holds or the timeout passes; a why (at most
// one) says, on a timeout, what was still wrong.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool, why ...func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			if len(why) > 0 {
				t.Fatalf("timed out after %v waiting for %s: %s", timeout, what, why[0]())
			}
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// verifyNoLeaks notes the goroutines running when a test starts and
// returns the check that the test left none behind: defer
// verifyNoLeaks(t)(). protoactor's dead-letter log throttle is exempt: a
// library goroutine that ends by itself a second after the last dead
// letter. A world's zones are spawned one after another, and on a slow
// host the first one's first tick can send its border replicas to a
// neighbour not spawned yet (TestEventHandlerIsPluggable: 1 of 60 runs
// under load, "[DeadLetter] zone-x1z0 … ReplicaEnvelope Tick:1"); the
// batch is dropped and the next tick's replaces it. The throttle of
// another test's actor system (a dead letter there after that test
// ended) can start while a test that spawns no actor runs, so those use
// this check too (TestRunnerKeepsOneGoroutine, with goleak alone:
// 1 failure in CI, shuffled, the goroutine not its own).
func verifyNoLeaks(t *testing.T) func() {
	before := goleak.IgnoreCurrent()
	return func() {
		goleak.VerifyNone(t, before,
			goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
	}
}
