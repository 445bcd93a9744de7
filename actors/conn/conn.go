package conn

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/ghostmgr"
	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/session"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// Params are what the gateway gives one connection.
type Params struct {
	Handshake *handshake.Session // the session Grant.Session returned; the connection owns it
	Player    uint64
	Timeout   time.Duration // the token's idle timeout (0: Config.Session.Timeout)
	UserData  string        // the token's user data (msg.Join.UserData shares its bytes)
	Zone      *actor.PID    // receives Join, Input, Leave (nil: input is dropped and counted)
	// Inflight is the gateway's count of datagrams queued for this
	// connection; the connection decrements it as it takes each one.
	Inflight *atomic.Int32
}

// Conn is one client's connection: its session.Server (replay window +
// AEAD, notify, moves, events, control object, keepalive, timeout,
// graceful close) and its ghost manager. It lives on one shard of its
// Pool: every method runs on that shard's goroutine, one event at a time,
// so nothing here needs a lock. Everyone else addresses it by its PID
// (zones) or through a Stager (the gateway).
//
// The fields every datagram and every pump touch come first, in the first
// 128 bytes: a 256-byte object starts on a cache line (the size class's
// objects are 4 lines apart; 5 in the 320-byte class before), so they are
// two lines; the third is what a Control reads besides, and the fourth
// the view slot's and ctlPost's, which other goroutines write
// (TestConnLayout; a datagram read three lines while the unacked moves'
// capacity and the player sat in the third). By the time a player's next
// packet comes, its connection has left the cache, and each line read is
// a miss.
// What a pump reads is the first line alone: a round handles all its
// events before it pumps, and the events of the connections after this
// one (their sessions, the AEAD) have pushed this one's lines out of the
// L1 by its pump, which read all three again when they were spread over
// them (BenchmarkShardReceiveCold). The rest — per zone tick, per event,
// per lifecycle step — follows. The datagram's arrival time and the input
// collected from it are the shard's (shard.rxAt, shard.in), and the
// deadline sits in the shard's heap (deadlines), not here.
type Conn struct {
	// Per pump, and per datagram: the first line. (The pool is sh.pool.)
	sh  *shard
	srv *session.Server
	gm  *ghostmgr.Manager
	// heldCtl: a tick's Control waits here for the same tick's view, at
	// most viewWait after it arrived (ctlAt, its arrival, is the newest
	// Control's: a newer one hands the held one on first). The session
	// sends the tick's packet as soon as it has the control state, and
	// that packet should carry the tick's ghosts too, not the previous
	// tick's.
	heldCtl *msg.Control
	rare    *connRare // nil until a drain's Redirect, a rejoin, a relook or a zone's handoff
	hidx    int32     // index in the shard's deadline heap (which holds the deadline), -1: not in it
	resends uint8     // resends since the last progress (backoff), at most maxResendBackoff
	// foldSec is now/foldEvery, modulo 2^8, at the last fold of fates
	// (foldFates): a fold once the second changes, 8 bytes fewer than
	// the time itself (a connection not pumped for a multiple of 256 s
	// folds a second later; the counts lose nothing).
	foldSec  uint8
	joined   bool
	closed   bool // Closed sent (or the connection failed)
	stopped  bool // removed from its shard: every further event is dropped
	resuming bool // Config.Resume asked, not answered yet
	dirty    bool // in the shard's list of connections to pump this round
	// viewsFlow: views come with the controls: wait for them (off after
	// a wait timed out).
	viewsFlow bool
	flags     connFlags
	// gst is the ghost manager's State, kept here by the manager
	// (ghostmgr.New): a pump that sends nothing reads whether a view
	// waits and whether the table is pending from this line, not from
	// the manager's, cold on a loaded node.
	gst ghostmgr.State
	// supFolded is fates' third count (folded), here for the room.
	supFolded uint16

	// Per datagram: the second line, all of it (TestConnLayout). A
	// datagram reads nothing of the Conn past it: joinAt, which its tests
	// compare only once the newest Control is a second old (zoneQuiet) or
	// the resend wait has run (flushInput), is in the third, with what a
	// Control reads.
	inflight *atomic.Int32 // Params.Inflight
	zone     *actor.PID
	ctlAt    time.Duration // when the newest Control arrived (0: none yet, the Join has not taken)
	lastMove uint64        // the newest move handed to an Input
	// waitFrom is when the wait for a resend of unacked moves runs from
	// (resendStalled), with joinAt: the oldest move's handing on (no
	// earlier than) or the last resend, whichever came later — all that
	// was ever read of the two times, in one field.
	waitFrom time.Duration
	unacked  []keptMove // moves handed on, not yet reported applied (resent on a Rejoin)
	player   uint64     // every Input names it (flushInput)

	// Per Control.
	ctlEpoch uint64        // the newest Control epoch taken (a relook: the record's)
	applied  uint64        // the newest applied move a zone reported
	joinAt   time.Duration // when the newest Join went

	// Cold: lifecycle, events, views (a zone's goroutine writes the view
	// slot and ctlPost: away from the lines above).
	pid      *actor.PID
	hs       *handshake.Session // Params.Handshake: the session's until it is built
	userData string
	side     *connSide // input held during a lookup, events kept for a Rejoin (nil: none)
	// ctlPost is 1 + the index in its shard's inbox of the newest Control
	// posted to this connection (0: none since another message): the
	// next one is merged into it while it waits (shard.post). Guarded by
	// the shard's mu, written by the posting goroutine.
	ctlPost int32
	fates   folded // packet fates already added to the pool's counters
	views   msg.ViewSlot
}

// connFlags are five of a connection's states, a bit each: a byte where
// five bools took five, which the 256-byte size class had no room for.
type connFlags uint8

const (
	verified  connFlags = 1 << iota // the gateway was told (Verified)
	redirect                        // a Redirect was sent: the client may be back elsewhere
	leaveSent                       // the Leave went
	zoneHolds                       // the zone answered the Leave(Redirected): it holds the player's events
	// redirWaits mirrors connRare.redirWait != nil, so every pump tells
	// whether a Redirect waits from the Conn's first line: most players
	// of a node have rare state (a handoff's epoch), and reading it each
	// pump was a miss (redirectDue, 0.9 % of the node at 2,000 players).
	redirWaits
)

func (c *Conn) is(f connFlags) bool { return c.flags&f != 0 }

func (c *Conn) set(f connFlags, on bool) {
	if on {
		c.flags |= f
	} else {
		c.flags &^= f
	}
}

// connSide is what a connection holds for a while now and then: the input
// that arrives while its player's record is looked up (the join, a
// relook), and the numbered events handed on until a zone reports them
// applied (a player sends one now and then). Made by the first of either,
// dropped when both are empty: one pointer in the Conn, not a slice and a
// pointer (32 bytes).
type connSide struct {
	held   []*msg.Input // input that arrived meanwhile (at most maxHeld)
	evKept []keptEvent  // numbered events handed on, not yet reported applied (resent on a Rejoin)
}

func (c *Conn) sideState() *connSide {
	if c.side == nil {
		c.side = new(connSide)
	}
	return c.side
}

// dropSide gives the side state back once it holds nothing.
func (c *Conn) dropSide() {
	if s := c.side; s != nil && len(s.held) == 0 && len(s.evKept) == 0 {
		c.side = nil
	}
}

// keptEvents are the events handed on, not yet reported applied.
func (c *Conn) keptEvents() []keptEvent {
	if c.side == nil {
		return nil
	}
	return c.side.evKept
}

// takeHeld returns the input held during a lookup and forgets it.
func (c *Conn) takeHeld() []*msg.Input {
	if c.side == nil {
		return nil
	}
	h := c.side.held
	c.side.held = nil
	c.dropSide()
	return h
}

// connRare is what a connection needs only in rare episodes — a drain's
// Redirect, a failover's rejoin, the lookup for a silent zone or for a
// Join that did not take, a zone's handoff (its Redirect's epoch: not a
// handshake's, a join's or the first views') — made at the first: 36
// bytes fewer in every Conn (with the
// token no longer copied and the pool read through the shard, the
// 352-byte size class, not 448), and the zone's epoch 8 more (256, not
// 320). The zero value is none of them.
type connRare struct {
	// A Redirect waits (redirWait, since redirAt) until the zone holds
	// the player's events (zoneHolds) and every event sent to the client
	// arrived (onRedirect); leaveSent: the zone was told already.
	redirWait *Redirect
	redirAt   time.Duration
	relookAt  time.Duration // when the newest lookup for a silent zone went
	// outFloor: Outputs at or below this epoch come from an owner the
	// player was restored away from (dropped), but for those of the
	// owner that wrote the restore's checkpoint (its epoch outFloor) whose
	// events the checkpoint covers (outFence): the restored zone never
	// applies those again, so that Output is their only answer. floorAt,
	// floorFence: a rejoin's checkpoint epoch and event fence, the floor
	// once a Control above it arrives.
	outFloor, floorAt    uint64
	outFence, floorFence handoff.EventFence
	zoneEpoch            uint64 // the newest handoff epoch of a zone's Redirect (msg.Redirect)
	lookups              int32  // Config.Resume asked again for a Join that did not take
	// farFolded, evictedFolded: the session's FarAccepted and WindowEvicted
	// already added to the pool's counters (foldRare).
	farFolded, evictedFolded uint64
}

func (c *Conn) rareState() *connRare {
	if c.rare == nil {
		c.rare = new(connRare)
	}
	return c.rare
}

func (c *Conn) redirWaiting() bool { return c.is(redirWaits) }

// setRedirWait makes m the waiting Redirect (nil: none), since now.
func (c *Conn) setRedirWait(m *Redirect, now time.Duration) {
	if m == nil && c.rare == nil {
		return
	}
	r := c.rareState()
	r.redirWait = m
	if m != nil {
		r.redirAt = now
	}
	c.set(redirWaits, m != nil)
}

func (c *Conn) zoneEpoch() uint64 {
	if c.rare == nil {
		return 0
	}
	return c.rare.zoneEpoch
}

func (c *Conn) relookAt() time.Duration {
	if c.rare == nil {
		return 0
	}
	return c.rare.relookAt
}

// PID is the connection's address: zones send it Control, Output,
// Redirect, Kick and ViewReady; the gateway Shutdown and Stop.
func (c *Conn) PID() *actor.PID { return c.pid }

// UserData is the connect token's user data (Params.UserData), fixed for
// the connection's life: the gateway reads it for a Redirect's token.
func (c *Conn) UserData() string { return c.userData }

// userBytes is the user data as a Join carries it, sharing its bytes (a
// Join's receivers only read them, as they did the Params' slice): the
// Conn holds a string, 8 bytes fewer than a slice.
func (c *Conn) userBytes() []byte {
	return unsafe.Slice(unsafe.StringData(c.userData), len(c.userData))
}

func (c *Conn) logger() *slog.Logger { return c.sh.pool.log }

// start builds the session and the ghost manager (on the shard).
func (c *Conn) start(now, timeout time.Duration) error {
	cfg := &c.sh.pool.cfg.Config
	srv, err := session.NewServer(c.hs, cfg.sessionConfig(timeout), c, now)
	if err != nil {
		return fmt.Errorf("conn: %w", err)
	}
	if c.sh.sc == nil {
		c.sh.sc = session.NewScratch()
	}
	srv.ShareScratch(c.sh.sc) // start runs on the shard, as every Poll and Receive does
	gm, err := ghostmgr.New(cfg.Registry, cfg.Ghosts, &c.views, &c.gst)
	if err != nil {
		return fmt.Errorf("conn: %w", err)
	}
	c.srv, c.gm = srv, gm
	return nil
}

// handle takes one event other than a datagram (those go straight to
// onDatagram: shard.handleOne). The shard pumps the connection afterwards.
func (c *Conn) handle(m any, now time.Duration) {
	var sender *actor.PID
	if env, ok := m.(*actor.MessageEnvelope); ok {
		m, sender = env.Message, env.Sender
	}
	if c.stopped {
		release(m)
		return
	}
	switch m := m.(type) {
	case *msg.ViewReady:
		if c.gm != nil {
			c.gst.Take(&c.views) // gm.Take from the Conn's lines; applied in the pump
			c.viewsFlow = true
			if c.heldCtl != nil {
				// A zone sends a tick's view after its control, so this
				// is the held tick's view (or a newer one).
				c.setControl(c.heldCtl)
			}
		}
	case *msg.Control:
		if m.View && c.gm != nil {
			// The tick's view came with its Control (Join.ViewWithControl):
			// take it first, even from a Control dropped below, or the
			// slot nudges no more. It is this tick's view or a newer one.
			// The pump applies it. (gm.Take, from the Conn's lines: the
			// slot and the state are the Conn's, New's.)
			c.gst.Take(&c.views)
			c.viewsFlow = true
		}
		if m.Epoch != 0 && m.Epoch < c.ctlEpoch {
			m.Release() // the previous owner's, arriving after the new owner's
			return
		}
		c.ctlEpoch = max(c.ctlEpoch, m.Epoch)
		if r := c.rare; r != nil && r.floorAt != 0 && m.Epoch > r.floorAt {
			// A zone restored the player (above the checkpoint's epoch):
			// the old owner's late Outputs are stale from now on.
			if r.floorAt >= r.outFloor {
				r.outFence = r.floorFence
			}
			r.outFloor, r.floorAt = max(r.outFloor, r.floorAt), 0
		}
		c.ctlAt = max(now, 1) // ≠ 0: a Control arrived
		if m.LastApplied > c.applied {
			c.resends = 0
		}
		c.applied = max(c.applied, m.LastApplied)
		c.ackMoves(c.applied, now)
		c.ackEvents(&m.Events)
		if c.heldCtl != nil {
			c.setControl(c.heldCtl) // the previous tick's view never came
		}
		if !m.View && c.viewsFlow && c.gm != nil && c.gm.ViewTick() != m.Tick {
			c.heldCtl = m // until ctlAt+viewWait (heldUntil)
			return
		}
		c.setControl(m)
	case *msg.Output:
		if r := c.rare; m.Epoch != 0 && r != nil && m.Epoch <= r.outFloor && (m.Epoch < r.outFloor || !r.outFence.Covers(m.Applied)) {
			c.sh.pool.counters.EventsStale.Add(uint64(len(m.Events)))
			m.Release() // the previous owner's, woken up after the player was restored elsewhere
			return
		}
		c.ackEvents(&m.Applied) // the events these answer, with them
		if len(m.Events) == 0 {
			// The zone's answer to this connection's Leave(Redirected)
			// (holdEvents): every Output it sent before has arrived.
			c.set(zoneHolds, true)
			m.Release()
			return
		}
		c.onOutput(m)
	case *resumed:
		switch {
		case m.relook:
			// The player's zone went silent: join again where the record
			// says it is now, if it says anything (else look again later).
			// Only the answer to the newest lookup (at), and only while
			// nothing newer came since it went: no Control (the zone spoke)
			// and no Join (a Rejoin from a zone that restored the player
			// read the record later, or as late).
			if m.cp != nil && m.zone != nil && c.joined && !c.closed && !c.is(redirect) && !c.resuming &&
				m.at == c.relookAt() && c.ctlAt < m.at && c.joinAt < m.at {
				c.zone = m.zone
				// The epoch is the record's, lower or not. A restore's
				// zone puts the player back above the checkpoint's epoch
				// (handoff.SpawnAbove) before its record write, which a
				// newer owner's record refuses; a connection that took
				// that restore's Control took its epoch, above the real
				// owner's, and dropped every Control of that owner as the
				// previous one's ("sent 70, acked 62"), silent to it for
				// good. The record's compare-and-set takes only newer
				// owners, so its epoch is the real one; and every Control
				// this connection took came before the lookup went, at
				// least zoneSilentAfter before (a Control since, or a
				// late answer to an older lookup, is dropped above), so
				// none is newer than what the record had when it was
				// read — an epoch above the record's then is a restore
				// that was refused or whose zone died before writing it.
				// Lowering on the zone's first Control instead, or on a
				// Rejoin, would take a late copy's older epoch over a
				// newer real one: Controls and Rejoins are resent and
				// reordered, this answer is matched to its lookup.
				c.ctlEpoch = uint64(m.cp.Epoch)
				c.views.Lower(c.ctlEpoch) // the real owner's views too
				// And the Redirects' epoch, for the same reason the other
				// way round: a record read while a Commit's write was
				// still pending (the players bucket electing a leader)
				// names the zone the player left, below the epoch of the
				// Redirect to its new owner that this connection took.
				// Kept, that epoch made the owner's Redirects (the same
				// epoch, resent every tick) stale: the connection's inputs
				// went to the old zone, which passed them on while it
				// remembered the handoff and dropped them after, while
				// the owner's Controls kept the connection from looking
				// again — by hand (`make chaos-nats-cluster`), 4 players'
				// moves and 28–30 events each lost until the session
				// ended, 20 s after an election (TestRelookTakesTheRecordsEpoch).
				if r := c.rare; r != nil && r.zoneEpoch > c.ctlEpoch {
					r.zoneEpoch = c.ctlEpoch
				}
				c.rejoin(m.cp, now)
			}
		case c.resuming && c.is(leaveSent):
			// Superseded by a newer login while its record was looked up
			// (Shutdown, Duplicate): a Join now would take the player from
			// the newer session's connection until this one's Leave.
			c.resuming = false
			for _, in := range c.takeHeld() {
				in.Release()
			}
		case c.resuming && !c.closed:
			if m.zone != nil {
				c.zone = m.zone
			}
			c.join(m.cp, now)
		}
	case *msg.Rejoin:
		// The player's zone restarted elsewhere without it: join it again
		// where its record left it. Moves the old owner applied after that
		// checkpoint are lost (at most a checkpoint period), never applied
		// twice: the fence is the newest this connection was told of.
		// A connection that redirected its client (drain) or is closing
		// no longer plays: its client resumes on another gateway, and a
		// Join from here would take the player back from that session.
		// Nor does one that told its zone it left (leaveSent) and waits
		// for no Redirect: superseded by a newer login (Shutdown,
		// Duplicate), or closing with its Redirect given up; it sends
		// no Leave after such a Join.
		if c.joined && c.zone != nil && m.Player == c.player && m.Restore != nil && !c.is(redirect) && !c.closed &&
			(!c.is(leaveSent) || c.redirWaiting()) {
			c.rejoin(m.Restore, now)
		}
	case *msg.Redirect:
		if m.Epoch > c.zoneEpoch() { // a zone's handoff: the rare state's first maker for most players
			moved := c.zone != nil && m.Zone != nil && !m.Zone.Equal(c.zone)
			c.zone = m.Zone
			c.rareState().zoneEpoch = m.Epoch
			if moved {
				c.resendToOwner(now)
			}
		}
	case *msg.Kick:
		reason := m.Reason
		if !reason.IsDisconnect() {
			reason = handshake.ReasonKicked
		}
		c.close(now, reason)
	case *Shutdown:
		if m.Reason == handshake.ReasonDuplicate && !c.is(leaveSent) && !c.is(redirect) {
			// Superseded by a newer login: tell the zone now, not after
			// the Disconnect copies, and join no more (leaveSent; a
			// lookup's answer is dropped). Should this connection's Join
			// have come after the newer one's (each joins after its
			// record lookup), the zone gives the player back to that one
			// at once (actors/zone reclaim).
			c.set(leaveSent, true)
			if c.joined && c.zone != nil {
				c.sh.toZone(c.zone, &msg.Leave{Player: c.player, Conn: c.pid, Reason: handshake.ReasonDuplicate})
			}
		}
		c.close(now, m.Reason)
	case *Redirect:
		c.onRedirect(m, now)
	case *StatsRequest:
		if sender != nil {
			var s Stats
			if c.srv != nil {
				s.Session = c.srv.Stats()
			}
			_, s.Addr = c.idAddr()
			c.sh.pool.sys.Root.Send(sender, &s)
		}
	}
}

// heldUntil is when the held Control (heldCtl) goes without its view: it
// arrived at ctlAt, and no Control came since (one would have handed it
// on first).
func (c *Conn) heldUntil() time.Duration { return c.ctlAt + viewWait }

// idAddr is the connection's id and the client's address: the session's
// once the client proved its address, the handshake's before.
func (c *Conn) idAddr() (handshake.ConnID, netip.AddrPort) {
	switch {
	case c.srv != nil:
		return c.srv.ID(), c.srv.Addr()
	case c.hs != nil:
		return c.hs.ID(), c.hs.Addr()
	}
	return handshake.ConnID{}, netip.AddrPort{}
}

// viewWait bounds how long a tick's Control waits for the same tick's
// view: a zone sends a tick's controls, then its views, so the view is
// usually there within a millisecond; a tenth of a 20 Hz tick when it is
// not (a zone late with its views, or one that sends none).
const viewWait = 5 * time.Millisecond

// setControl hands a tick's control state to the session, which sends it
// at once (session.Server.SetControl).
func (c *Conn) setControl(m *msg.Control) {
	if c.heldCtl == m {
		c.heldCtl = nil
	}
	if c.srv != nil {
		c.srv.SetControl(m.LastApplied, m.State)
		if m.Force {
			c.srv.ForceControl()
		}
	}
	m.Release()
}

// release returns a pooled message an ended connection will not handle.
func release(m any) {
	switch m := m.(type) {
	case *msg.Datagram:
		m.Release()
	case *msg.Control:
		m.Release()
	case *msg.Output:
		m.Release()
	}
}

// onDatagram hands d to the session and reports whether the session
// rejected it (quiet): a rejection other than a protocol error (which
// closes the connection) changes nothing but the session's counters — no
// state a pump reads, nothing due — so the pump after it would only find
// the deadline the last one filed, which the shard's heap serves
// anyway. Skipping it spares a forged, replayed or stale datagram the
// pump's lines (its Conn line, the session's deadline state, the heap).
func (c *Conn) onDatagram(d *msg.Datagram, now time.Duration) (quiet bool) {
	if c.inflight != nil {
		c.inflight.Add(-1)
	}
	if c.srv == nil {
		d.Release()
		return false
	}
	from := c.srv.Addr()
	c.sh.rxAt = now
	moved, err := c.srv.Receive(now, d.Bytes(), d.Addr)
	c.sh.dc.Release(d)
	if err != nil {
		if c.sh.pool.counters.count(err) != session.RejectProtocol {
			c.flushInput(now) // none (a rejected datagram changes nothing): the shard's is free again
			return true
		}
	}
	if moved {
		c.sh.pool.counters.Moved.Add(1)
		c.tellGateway(&Moved{ID: c.srv.ID(), From: from, To: c.srv.Addr()})
	}
	if !c.is(verified) && c.srv.State() >= handshake.StateConnected {
		c.set(verified, true)
		c.tellGateway(&Verified{PID: c.pid, ID: c.srv.ID(), Player: c.player})
		if c.zone != nil {
			if c.sh.pool.cfg.Resume != nil {
				c.lookup()
			} else {
				c.join(nil, now)
			}
		}
	}
	c.checkZone(now)
	c.flushInput(now)
	return false
}

// checkZone looks the player's record up again when its zone does not
// answer: a Join that brought no Control within lookupAgainAfter, or a
// zone that answered before and has been silent for zoneSilentAfter. It
// runs at the end of each datagram, and the shard's round runs its test
// for each connection whose deadline woke it (the session's keepalive
// files one at least every KeepAlive, 1 s, even for a client that sends
// nothing), so a quiet client (idle, or its datagrams lost) is not left
// unplaced until it sends again. The timer costs nothing per datagram:
// it runs only in the rounds that wake the connection for its deadline.
func (c *Conn) checkZone(now time.Duration) {
	if c.zoneQuiet(now) {
		c.lookUpAgain(now)
	}
}

// zoneQuiet reports whether a lookup may be due (lookUpAgain decides): both
// wait at least a second with no Control since the newest Join (ctlAt is
// 0 before the first). One test, inlined in onDatagram as the one it
// replaced was; the lookups are out of line.
func (c *Conn) zoneQuiet(now time.Duration) bool {
	// now-max(ctlAt, joinAt) ≥ lookupAgainAfter, tested one time at a
	// time: joinAt (the Conn's third line) is read only once the newest
	// Control is a second old, which it is not on a playing connection.
	return c.joined && now-c.ctlAt >= lookupAgainAfter && now-c.joinAt >= lookupAgainAfter
}

// lookUpAgain looks the player's record up again if a lookup is due
// (zoneQuiet: the zone has said nothing for a second at least).
func (c *Conn) lookUpAgain(now time.Duration) {
	if c.resuming || c.closed || c.sh.pool.cfg.Resume == nil {
		return
	}
	if c.ctlAt == 0 { // no Control yet: the Join did not take
		if c.rare == nil || c.rare.lookups < maxLookups {
			// The Join went to a zone that never answered: its node was
			// stopping (the client followed a drain's Redirect here while
			// the player's zone moved on). Look the record up again: it
			// names the zone's new owner once there is one.
			c.rareState().lookups++
			c.lookup()
		}
	} else if !c.is(redirect) && now-max(c.ctlAt, c.joinAt, c.relookAt()) >= zoneSilentAfter {
		c.relook(now)
	}
}

// relook asks Config.Resume for the record of a player whose zone
// answered before and has been silent since: its node died or was paused,
// and the Rejoin of whoever restored the zone did not reach this
// connection (this node was paused, or busy), or the restore that took
// the player was refused by its record (a newer owner). The record names
// the zone's owner: join it there, or the player stands still for good
// while its client stays connected. The answer names the lookup (at).
func (c *Conn) relook(now time.Duration) {
	c.rareState().relookAt = now
	c.sh.pool.counters.Relooks.Add(1)
	pid, root := c.pid, c.sh.pool.sys.Root
	c.sh.pool.cfg.Resume(c.player, func(zone *actor.PID, cp *handoff.Checkpoint) {
		root.Send(pid, &resumed{zone: zone, cp: cp, relook: true, at: now})
	})
}

// zoneSilentAfter is how long a playing connection's zone may send no
// Control (one comes every tick) before the connection looks the player's
// record up again: longer than a NATS outage the leases ride out and a
// cross-process handoff, shorter than a failover's restore window.
const zoneSilentAfter = 3 * time.Second

// lookupAgainAfter and maxLookups: a Join that brought no Control within
// this time (a zone answers within a tick or two) is sent again after a
// fresh record lookup, at most this many times.
const (
	lookupAgainAfter = time.Second
	maxLookups       = 10
)

// rejoin joins the player again in c.zone from cp, a checkpoint of its
// record: the zone restarted elsewhere without it. Moves the old owner
// applied after that checkpoint are lost (at most a checkpoint period),
// never applied twice: the fence is the newest this connection was told of.
func (c *Conn) rejoin(cp *handoff.Checkpoint, now time.Duration) {
	fence := max(c.applied, cp.LastApplied)
	r := c.rareState()
	r.floorAt, r.floorFence = max(uint64(cp.Epoch), 1), cp.Events
	c.joinAt = now
	c.sh.toZone(c.zone, &msg.Join{
		Player: c.player, Conn: c.pid, Ghosts: c.pid, Views: &c.views, ViewWithControl: true, Port: c.port(),
		LastApplied: fence, UserData: c.userBytes(), Restore: cp, EventGen: c.srv.EventGen(),
	})
	// The moves the old owner never reported applied go again: the client
	// will not resend what this connection already took.
	in := msg.NewInput()
	in.Player, in.Received = c.player, now
	for _, k := range c.unacked {
		if mv := c.unkeep(k); mv.Seq > fence {
			in.Moves = append(in.Moves, mv)
		}
	}
	if len(in.Moves) > 0 && in.Moves[0].Seq > fence+1 {
		in.LostBefore = in.Moves[0].Seq - fence - 1 // older than the connection kept
	}
	// So do the ordered events it never reported applied: the restored
	// fence (the checkpoint's) drops those the old owner had checkpointed.
	c.resendEvents(in)
	if len(in.Moves) > 0 || len(in.Events) > 0 {
		c.sh.toZone(c.zone, in)
	} else {
		in.Release()
	}
	if c.redirWaiting() {
		// A Redirect waits for the zone's hold: the zone that restored
		// the player must hold its events too (onRedirect).
		c.holdEvents(now)
	}
	c.sh.pool.counters.Rejoins.Add(1)
}

// lookup asks Config.Resume for the player's record (off the shard): it
// resumes where it was, in the zone it was in. Input waits meanwhile.
func (c *Conn) lookup() {
	c.resuming = true
	pid, root := c.pid, c.sh.pool.sys.Root
	c.sh.pool.cfg.Resume(c.player, func(zone *actor.PID, cp *handoff.Checkpoint) {
		root.Send(pid, &resumed{zone: zone, cp: cp})
	})
}

// resumed is the answer of Config.Resume, back on the connection's shard.
type resumed struct {
	zone   *actor.PID
	cp     *handoff.Checkpoint
	relook bool          // for a playing connection whose zone went silent
	at     time.Duration // a relook's: when it went (connRare.relookAt)
}

// maxHeld bounds the inputs a connection holds while its player's record
// is looked up (Config.Resume answers within a second: at 30 Hz, 30).
const maxHeld = 64

// join sends the player's Join (restored from cp when set), then whatever
// input arrived while the record was looked up. A Join after one that
// brought no Control (lookUpAgain: it went to a zone that never answered,
// as a zone its node had just lost) sends the events the connection
// keeps again, ahead of the held input: they went with and after the
// Join that did not take, to the same zone. The zone's fence drops any
// it has. (By hand, `make chaos`: a session that reconnected to a
// gateway within a second of its wake from a 7 s SIGSTOP sent its first
// event to the zone that node was losing; the second Join went to the
// zone's new owner without it, and the event was never applied — 8 lost
// of 17,868.)
func (c *Conn) join(cp *handoff.Checkpoint, now time.Duration) {
	again := c.joinAt != 0
	c.joinAt = now
	c.sh.toZone(c.zone, &msg.Join{
		Player: c.player, Conn: c.pid, Ghosts: c.pid, Views: &c.views, ViewWithControl: true, Port: c.port(),
		UserData: c.userBytes(), Restore: cp, EventGen: c.srv.EventGen(),
	})
	c.joined, c.resuming = true, false
	if again {
		in := msg.NewInput()
		in.Player, in.Received = c.player, now
		c.resendEvents(in)
		if len(in.Events) > 0 {
			c.sh.toZone(c.zone, in)
		} else {
			in.Release()
		}
	}
	for _, in := range c.takeHeld() { // the lookup is over: no room kept for the next
		c.sh.toZone(c.zone, in)
	}
	if c.redirWaiting() && !c.is(leaveSent) {
		c.holdEvents(now) // a Redirect came during the lookup
	}
}

func (c *Conn) tellGateway(m any) {
	if g := c.sh.pool.cfg.Gateway; g != nil {
		c.sh.pool.sys.Root.Send(g, m)
	}
}

// Move implements session.ServerHandler: called inside Receive for each new
// move, in order.
func (c *Conn) Move(m move.Move) {
	in := c.input()
	if len(in.Moves) == 0 && c.lastMove > 0 && m.Seq > c.lastMove+1 {
		in.LostBefore = m.Seq - c.lastMove - 1 // the client lost them: the zone must not wait
	}
	if len(c.unacked) > 0 && m.Seq-c.unackedSeq(0) >= 1<<16 {
		// A jump no client makes (its moves are numbered one by one, and
		// 2^16 moves is 36 minutes of 30 Hz input, against maxUnacked's
		// 8 s): the moves kept are too far behind to be named by 16 bits
		// of sequence (keptMove), and too old to be worth a resend.
		c.unacked = c.unacked[:0]
	}
	c.lastMove = m.Seq
	in.Moves = append(in.Moves, m)
	if len(c.unacked) == 0 {
		c.waitFrom = max(c.waitFrom, c.sh.rxAt)
		if c.unacked == nil {
			c.unacked = make([]keptMove, 0, minUnackedRoom)
		}
	}
	if len(c.unacked) == maxUnacked {
		copy(c.unacked, c.unacked[1:]) // an outage longer than that: the oldest cannot be resent
		c.unacked = c.unacked[:maxUnacked-1]
	}
	c.unacked = append(c.unacked, keep(m))
}

// keptMove is a move kept in unacked until a zone reports it applied: 12
// bytes instead of a move.Move's 32, so the eight a connection keeps room
// for are the 96-byte size class (128 with the client's CRC in it, 16
// bytes each; 160 with a 32-bit sequence as well). It keeps the low 16
// bits of the sequence number; the connection's newest move (lastMove)
// gives the rest, every kept move being less than 2^16 behind it (Move).
// It keeps what a zone reads of a move, not the client's CRC of its
// predicted state: the session compares those (session.Server.SetControl
// against the CRCs it keeps itself), a zone never does, so a move sent
// again goes without it (HasCRC false).
type keptMove struct {
	seq             uint16
	yaw             uint16
	pitch           int16
	buttons         uint16
	dt              uint8
	forward, strafe int8
}

func keep(m move.Move) keptMove {
	return keptMove{seq: uint16(m.Seq), yaw: m.Yaw, pitch: m.Pitch, buttons: m.Buttons,
		dt: m.Dt, forward: m.Forward, strafe: m.Strafe}
}

// seqOf is k's whole sequence number: less than 2^16 behind lastMove.
func (c *Conn) seqOf(k keptMove) uint64 { return c.lastMove - uint64(uint16(c.lastMove)-k.seq) }

// unackedSeq is the sequence number of unacked[i].
func (c *Conn) unackedSeq(i int) uint64 { return c.seqOf(c.unacked[i]) }

// unkeep is the move k keeps, without a CRC (keptMove).
func (c *Conn) unkeep(k keptMove) move.Move {
	return move.Move{Seq: c.seqOf(k), Yaw: k.yaw, Pitch: k.pitch, Buttons: k.buttons,
		Dt: k.dt, Forward: k.forward, Strafe: k.strafe}
}

// maxUnacked bounds the moves a connection keeps until a zone reports them
// applied: about 8 s of 30 Hz input, longer than a zone's failover.
const maxUnacked = 256

// ackMoves forgets the moves a zone reported applied.
func (c *Conn) ackMoves(applied uint64, now time.Duration) {
	// Kept moves at or below applied are d or more behind lastMove; each
	// is less than 2^16 behind it, so 16 bits of distance tell.
	i := len(c.unacked)
	if applied < c.lastMove {
		d, lo := c.lastMove-applied, uint16(c.lastMove)
		i = 0
		for i < len(c.unacked) && uint64(lo-c.unacked[i].seq) >= d {
			i++
		}
	}
	if i > 0 {
		c.unacked = c.unacked[:copy(c.unacked, c.unacked[i:])]
		c.waitFrom = max(c.waitFrom, now) // the new oldest went no earlier
		if n := len(c.unacked); cap(c.unacked) > minUnackedRoom && n <= cap(c.unacked)/8 {
			// A backlog (a slow zone, a failover, the join's lookup) is
			// over: give its room back instead of keeping up to
			// maxUnacked moves (3 KB) per connection for good. A zone
			// keeping up leaves two or three moves here.
			c.unacked = append(make([]keptMove, 0, max(minUnackedRoom, 2*n)), c.unacked...)
		}
	}
}

// minUnackedRoom is the room unacked keeps (96 B): a zone that keeps up
// reports each tick's moves applied the next tick, which leaves two to
// five 30 Hz moves here at a 20 Hz tick.
const minUnackedRoom = 8

// Event implements session.ServerHandler: e.Payload is valid during the call
// only, so it is copied into the Input's arena.
func (c *Conn) Event(e event.Event) {
	in := c.input()
	c.sh.inputs.Room(in) // an Input gets events now and then: room from one released with some
	in.AddSeq(e.Class, uint8(e.Lane), e.Key, e.Payload, e.Seq)
	if e.Seq != 0 {
		c.keepEvent(e)
	}
}

// input is the Input the datagram being received collects its moves and
// events into: the shard's (shard.in), as it receives one datagram at a
// time and flushInput hands it on at the end of each.
func (c *Conn) input() *msg.Input {
	if c.sh.in == nil {
		c.sh.in = c.sh.inputs.Get()
	}
	return c.sh.in
}

func (c *Conn) flushInput(now time.Duration) {
	in := c.sh.in
	if in == nil {
		return
	}
	c.sh.in = nil
	if in.Empty() {
		in.Release()
		return
	}
	in.Player = c.player
	in.Received = now
	if c.srv != nil {
		in.EventGen = c.srv.EventGen()
	}
	if c.resuming && (c.side == nil || len(c.side.held) < maxHeld) {
		s := c.sideState()
		s.held = append(s.held, in)
		return
	}
	if c.zone == nil || !c.joined || c.is(leaveSent) && !c.is(redirect) && !c.redirWaiting() {
		// (The last: superseded by a newer login, Shutdown Duplicate. Its
		// input would act on the player the newer connection plays.)
		c.sh.pool.counters.InputsDropped.Add(1)
		in.Release()
		return
	}
	if c.ctlAt-c.waitFrom >= moveResendAfter {
		// resendStalled's wait at its least, inlined: nearly every
		// datagram's Input stops here (its zone reported progress
		// within the last tick), ≈ 25 instructions of a call a datagram.
		// Without joinAt, which resendStalled takes into account: a
		// test that lets more through, not fewer, and reads only the
		// Conn's first two lines.
		c.resendStalled(in, now)
	}
	c.sh.inputToZone(c.zone, in)
}

// resendStalled puts every move the zone has not reported applied into in
// when the zone's Controls have not reported the oldest of them for a
// while: an Input lost on the way (NATS is at most once: a batch in
// flight when the server restarts is gone) would otherwise leave a gap the
// zone skips after its gap timeout, a move never applied. The zone drops
// what it already has. Backs off while the zone reports no progress.
//
// The zone's word decides, not the shard's clock: the time runs from the
// oldest move's handing on (or the last progress, or resend) to the
// newest Control. A shard running behind takes a backlog's datagrams in
// a round before the Controls queued with them, which report those moves
// applied: judged by its clock, each such round resent every move kept,
// in an Input that waited in the zone's mailbox — load and memory on a
// node already overloaded (at 2,000 players, 1.6 KB a player). A zone
// that says nothing (a failover) is not sent resends either: the Rejoin
// resends then, and a zone silent for zoneSilentAfter is looked up again.
func (c *Conn) resendStalled(in *msg.Input, now time.Duration) {
	if len(c.unacked) == 0 || c.unackedSeq(0) <= c.applied {
		return
	}
	wait := moveResendAfter << c.resends
	if c.ctlAt-max(c.waitFrom, c.joinAt) < wait {
		return
	}
	if len(in.Moves) > 0 && in.Moves[0].Seq == c.unackedSeq(0) {
		return // nothing older to add
	}
	in.Moves = in.Moves[:0]
	for _, k := range c.unacked {
		in.Moves = append(in.Moves, c.unkeep(k))
	}
	in.LostBefore = 0 // the zone heard of those gaps with the moves' first copies
	c.waitFrom = now
	c.resends = min(c.resends+1, maxResendBackoff)
	c.sh.pool.counters.MovesResent.Add(uint64(len(c.unacked)))
}

// maxResendBackoff bounds the backoff of resends without progress: the
// wait doubles from moveResendAfter up to 2^3 times it (2 s).
const maxResendBackoff = 3

// moveResendAfter is how long a zone's Controls may go without reporting
// progress before a connection sends its unacknowledged moves again: a
// few ticks, well inside the zone's gap timeout (handoff.DefaultGapTimeout,
// 1 s).
const moveResendAfter = 250 * time.Millisecond

func (c *Conn) onOutput(o *msg.Output) {
	if c.srv != nil {
		for i := range o.Events {
			e := &o.Events[i]
			var err error
			switch e.Class {
			case event.Ordered:
				err = c.srv.SendEvent(int(e.Lane), e.Payload)
			case event.Unordered:
				err = c.srv.SendUnordered(e.Payload)
			case event.Unguaranteed:
				err = c.srv.SendUnguaranteed(e.Payload)
			default:
				err = errStaggered
			}
			if err != nil {
				c.sh.pool.counters.EventsDropped.Add(1)
			}
		}
	}
	o.Release()
}

var errStaggered = errors.New("conn: staggered events are not offered to zones")

func (c *Conn) close(now time.Duration, r handshake.Reason) {
	if c.srv != nil && c.srv.State() < handshake.StateDraining {
		c.srv.Close(now, r)
	}
}

// pump seals every datagram the session has due into the shard's output
// batch, with the ghost fates and the view applied first, and reports the
// end. It returns the next deadline (maxDeadline: none).
//
// The ghost table is visited once a send: the fates of the datagrams
// received since (they wait in the session while no send is due), then
// the view handle took (Manager.Take), then the packet's Write, back to
// back on the same ghosts' slots. Applied as they came — the fates in the
// pump after each datagram, the view in handle, before any connection
// of the round was pumped — each pass found the table cold again on a
// server with a thousand of them. Every fate known before a write is
// still applied before it (those of the datagrams handled in the same
// round, before it now), and a view taken in a round before that
// round's write.
func (c *Conn) pump(now time.Duration) time.Duration {
	if c.srv == nil || c.closed {
		if c.gm != nil && c.gst.ViewWaiting() {
			c.gm.Apply(now) // as when the view was applied on its nudge (it frees the view)
		}
		return maxDeadline
	}
	if c.heldCtl != nil && now >= c.heldUntil() {
		c.viewsFlow = false // no view came: stop waiting until views show up again
		c.setControl(c.heldCtl)
	}
	// Most pumps (one after each datagram, 30 a second, besides the
	// ticks') come before the send slot opens: Due tells without the
	// Poll (notify's receive tick, the fate pass, the content checks).
	due := c.srv.Due(now)
	// The fates wait while no send is due, unless a view is to be applied
	// (fates before the view, in the order they came); a view is applied
	// in every pump, as it was on its nudge (Pending must count it for the
	// next deadline).
	if c.gst.ViewWaiting() {
		if c.srv.GhostFatesWaiting() {
			c.applyFates()
		}
		c.gm.Apply(now)
	} else if due && c.srv.GhostFatesWaiting() {
		c.applyFates()
	}
	if due {
		c.send(now)
		if c.srv.GhostFatesWaiting() {
			c.applyFates() // what Poll's own fate pass resolved, while the table is warm
		}
	}
	if foldSecond(now) != c.foldSec { // inlined: the fold's call once a second, not every pump
		c.foldFates(now, false)
	}
	redirNext := maxDeadline
	if c.is(redirWaits) { // inlined: the rare state only when a Redirect waits
		redirNext = c.redirectDue(now)
	}
	if c.srv.Done() {
		c.finish(c.srv.Reason())
		return maxDeadline
	}
	next := min(c.srv.NextDeadlineWith(now, c.gst.Pending()), redirNext)
	if c.srv.GhostFatesWaiting() {
		// A lost record's fate would make the table pending: its data
		// slot is a deadline too (at that slot, Due is true and the
		// fates are applied before the Poll). Not as if the table were
		// pending: while it is not, an owed ack keeps its own slot.
		next = min(next, c.srv.GhostSlot(now))
	}
	if c.heldCtl != nil {
		next = min(next, c.heldUntil())
	}
	return max(next, now+time.Microsecond)
}

// send seals every datagram the session has due.
func (c *Conn) send(now time.Duration) {
	for due := true; due; due = c.srv.Due(now) {
		buf := c.sh.outSlot()
		pkt, err := c.srv.Poll(now, buf, c.gm)
		if err != nil || len(pkt) == 0 {
			break
		}
		if &pkt[0] != &buf[:1][0] {
			// Poll grew the buffer (cannot happen with a full-size one): drop.
			c.sh.pool.counters.OutDropped.Add(1)
			continue
		}
		c.sh.commit(len(pkt), c.srv.Addr()) // a second Poll would find nothing unless Due: most pumps send one packet
	}
}

const maxDeadline = time.Duration(1<<63 - 1)

// applyFates applies the ghost fates waiting in the session (call it only
// when some wait: the session gives a backlog's room back after enough
// pops that found few).
func (c *Conn) applyFates() {
	c.sh.gfates = c.srv.PopGhostFates(c.sh.gfates[:0])
	for _, f := range c.sh.gfates {
		c.gm.OnFate(f)
	}
}

// finish reports the end once: Leave to the zone, Closed to the gateway.
// Without a gateway the connection stops itself.
func (c *Conn) finish(r handshake.Reason) {
	if c.closed {
		return
	}
	c.closed = true
	if c.joined && c.zone != nil && !c.is(leaveSent) {
		lr := r
		if c.is(redirect) {
			// Whether or not its acknowledgement came, the client may
			// already play through another gateway: the zone must not
			// take that connection's player for this one's (it ignores
			// a Redirected Leave of a player another connection took over).
			lr = handshake.ReasonRedirected
		}
		c.sh.toZone(c.zone, &msg.Leave{Player: c.player, Conn: c.pid, Reason: lr})
	}
	var st session.ServerStats
	if c.srv != nil {
		c.foldFates(0, true)
		st = c.srv.Stats()
	}
	id, addr := c.idAddr()
	if c.sh.pool.cfg.Gateway != nil {
		c.tellGateway(&Closed{
			PID: c.pid, ID: id, Addr: addr, Player: c.player, Reason: r,
			Verified: c.is(verified), Stats: st,
		})
	} else {
		c.sh.stop(c)
	}
}

// fail ends a connection whose handling panicked: it is stopped, never
// restarted (a restarted session would reuse its keys from a fresh state),
// and the gateway learns it as a Terminated child.
func (c *Conn) fail(v any) {
	c.logger().Error("connection failed", "player", c.player, "panic", fmt.Sprint(v))
	if in := c.sh.in; in != nil {
		// Its datagram panicked half-way: the input it collected is
		// neither handed on nor the next datagram's.
		in.Release()
		c.sh.in = nil
	}
	if !c.closed {
		c.closed = true
		if c.hs != nil {
			c.hs.Close(handshake.ReasonServerShutdown)
		}
		if g := c.sh.pool.cfg.Gateway; g != nil {
			c.sh.pool.sys.Root.Send(g, &actor.Terminated{Who: c.pid})
		}
	}
	c.sh.stop(c)
}

// stopped: the shard forgot the connection.
func (c *Conn) onStop() {
	if c.stopped {
		return
	}
	c.stopped = true
	for _, in := range c.takeHeld() {
		in.Release()
	}
	c.resuming = false
	if c.heldCtl != nil {
		c.heldCtl.Release()
		c.heldCtl = nil
	}
	if c.gm != nil {
		c.gm.Close()
	} else {
		c.views.Close()
	}
	c.sh.pool.pids.remove(c.pid)
}
