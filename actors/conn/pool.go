package conn

import (
	"errors"
	"log/slog"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/udp"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/notify"
	"github.com/ghostwire/ghostwire/replication/prefetch"
	"github.com/ghostwire/ghostwire/replication/session"
)

// DefaultQuantum is the shortest time between two timer-driven rounds of a
// shard (PoolConfig.Quantum).
const DefaultQuantum = time.Millisecond

// Writer sends sealed datagrams: one per shard (udp.Socket.NewWriter), so
// the shards send in parallel.
type Writer interface {
	WriteBatch(ms []udp.Message) (int, error)
}

// PoolConfig configures a Pool.
type PoolConfig struct {
	Config // every connection's
	// Shards is the number of goroutines the connections are spread over
	// (0: GOMAXPROCS).
	Shards int
	// Quantum is the shortest time between two timer-driven rounds of one
	// shard: deadlines that fall within a quantum of each other are served
	// together and their datagrams leave in one sendmmsg (0:
	// DefaultQuantum). A datagram arriving wakes its shard at once.
	Quantum time.Duration
	// WriteBatch is the most datagrams one sendmmsg moves (default 64).
	WriteBatch int
	Sys        *actor.ActorSystem
	// Gateway receives Verified, Moved, Closed and, for a connection that
	// failed, actor.Terminated (nil: nobody; a closed connection stops
	// itself).
	Gateway *actor.PID
	// Now is the node's monotonic clock.
	Now func() time.Duration
	// NewWriter returns a shard's datagram writer.
	NewWriter func() Writer
	Counters  *Counters    // nil: a fresh one
	Log       *slog.Logger // nil: discard
}

// Pool runs a gateway's connections: a fixed set of shards, each one
// goroutine that owns its connections outright. A shard's round takes every
// event posted to it (datagrams from the gateway, messages from zones) in
// one swap, handles them, pumps every connection that had an event or a
// deadline due — sealing all of a connection's due datagrams at once — and
// sends the round's datagrams with one sendmmsg per WriteBatch. No actor
// mailbox, goroutine or timer per connection, and no message per packet
// where a batch will do: the gateway posts each read batch to a shard in
// one step.
type Pool struct {
	cfg      PoolConfig
	sys      *actor.ActorSystem
	counters *Counters
	log      *slog.Logger
	shards   []*shard
	next     int // round robin for Open (gateway goroutine only)
	ids      atomic.Uint64
	pids     connPIDs // the connections' PIDs (not in protoactor's registry)
	wg       sync.WaitGroup

	sent, bytes, dropped, errors atomic.Uint64
	// batches counts the WriteBatch calls that sent at least one datagram
	// (one sendmmsg each: a shard's batch is at most WriteBatch): sent ÷
	// batches is how well the rounds batch.
	batches atomic.Uint64
}

// RoundCause is what started a shard's round (Pool.Rounds).
type RoundCause int

const (
	// RoundPosted: a post woke the shard (a read batch's datagrams, a
	// zone's Controls, any message to a connection).
	RoundPosted RoundCause = iota
	// RoundTimer: the shard's timer fired for a deadline due.
	RoundTimer
	// RoundStraight: the round ran straight after the last one, with no
	// wait (deadlines were due already, or it was the first).
	RoundStraight
	roundCauses
)

// Rounds counts the shards' rounds by what started them: every round but
// a straight one follows a wake-up of its goroutine. Sent() ÷ Batches() is
// the datagrams a sendmmsg carries; Sent() ÷ rounds what a round sealed.
func (p *Pool) Rounds() [roundCauses]uint64 {
	var r [roundCauses]uint64
	for _, s := range p.shards {
		for i := range r {
			r[i] += s.rounds[i].Load()
		}
	}
	return r
}

// NewPool starts the shards.
func NewPool(cfg PoolConfig) (*Pool, error) {
	if err := cfg.Config.Validate(); err != nil {
		return nil, err
	}
	if cfg.Sys == nil || cfg.Now == nil || cfg.NewWriter == nil {
		return nil, errors.New("conn: pool needs Sys, Now and NewWriter")
	}
	if cfg.Shards <= 0 {
		cfg.Shards = runtime.GOMAXPROCS(0)
	}
	if cfg.Quantum <= 0 {
		cfg.Quantum = DefaultQuantum
	}
	if cfg.WriteBatch <= 0 {
		cfg.WriteBatch = 64
	}
	p := &Pool{cfg: cfg, sys: cfg.Sys, counters: cfg.Counters, log: cfg.Log}
	if p.counters == nil {
		p.counters = new(Counters)
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	p.pids.init(cfg.Sys)
	for i := range cfg.Shards {
		s := &shard{pool: p, id: i, w: cfg.NewWriter(), wake: make(chan struct{}, 1)}
		s.timer = time.AfterFunc(time.Hour, s.ring)
		s.timer.Stop()
		s.cq.Taker = s
		s.out = make([]byte, cfg.WriteBatch*udp.MaxDatagram)
		s.ms = make([]udp.Message, 0, cfg.WriteBatch)
		p.shards = append(p.shards, s)
	}
	for _, s := range p.shards {
		p.wg.Add(1)
		go s.run()
	}
	return p, nil
}

// Counters are the connections' shared counters.
func (p *Pool) Counters() *Counters { return p.counters }

// Sent, Bytes, Dropped and Errors count the datagrams the shards wrote.
func (p *Pool) Sent() uint64    { return p.sent.Load() }
func (p *Pool) Bytes() uint64   { return p.bytes.Load() }
func (p *Pool) Dropped() uint64 { return p.dropped.Load() }
func (p *Pool) Errors() uint64  { return p.errors.Load() }

// Batches counts the shards' WriteBatch calls that sent a datagram or more.
func (p *Pool) Batches() uint64 { return p.batches.Load() }

// Shard is the index of c's shard, fixed for c's life (Stager.StageOn).
func (c *Conn) Shard() int { return c.sh.id }

// Open creates a connection on the next shard and returns it; it starts
// (session, ghost table) on its shard. Call from one goroutine (the
// gateway's).
func (p *Pool) Open(prm Params) (*Conn, error) {
	if prm.Handshake == nil {
		return nil, errors.New("conn: Handshake is required")
	}
	s := p.shards[p.next%len(p.shards)]
	p.next++
	c := &Conn{
		sh: s, hs: prm.Handshake, inflight: prm.Inflight, zone: prm.Zone,
		player: prm.Player, userData: prm.UserData, hidx: -1,
	}
	c.pid = p.pids.add(c, p.ids.Add(1))
	s.post(c, startEvent{timeout: prm.Timeout})
	return c, nil
}

// Stager collects datagrams for connections and posts them to their shards
// in one step per shard (Flush): a whole read batch costs each shard one
// lock and at most one wake-up, not one per datagram. A Stager belongs to
// one goroutine; the gateway has one for its reader and one for its actor.
type Stager struct {
	p      *Pool
	staged [][]envelope // by shard
	// dc is the goroutine's stock of compact datagram copies (Datagrams):
	// the shards' caches (shard.dc) give back what it hands out.
	dc msg.DatagramCache
}

// Datagrams is the Stager's goroutine's cache of compact datagram copies
// (msg.Datagram.CompactWith): the connections' shards release them to
// caches of their own, and full magazines come back through msg's depot.
func (st *Stager) Datagrams() *msg.DatagramCache { return &st.dc }

// NewStager returns a Stager for one goroutine.
func (p *Pool) NewStager() *Stager {
	return &Stager{p: p, staged: make([][]envelope, len(p.shards))}
}

// Stage queues d for c until Flush.
func (st *Stager) Stage(c *Conn, d *msg.Datagram) {
	i := c.sh.id
	st.staged[i] = append(st.staged[i], envelope{c: c, m: d})
}

// StageOn is Stage for a caller that keeps c's shard (Shard) beside its
// pointer: it reads nothing of c, whose lines its shard's core owns (the
// gateway's reader stages every datagram in).
func (st *Stager) StageOn(shard int, c *Conn, d *msg.Datagram) {
	st.staged[shard] = append(st.staged[shard], envelope{c: c, m: d})
}

// Flush posts every staged datagram to its shard.
func (st *Stager) Flush() {
	for i, evs := range st.staged {
		if len(evs) > 0 {
			st.p.shards[i].postAll(evs)
			clear(evs)
			st.staged[i] = evs[:0]
		}
	}
}

// Close stops the shards after their current round; connections still open
// are dropped without a word (drain them first).
func (p *Pool) Close() {
	for _, s := range p.shards {
		s.quit.Store(true)
		s.signal()
	}
	p.wg.Wait()
}

// proc is a connection as an actor.Process: what zones and the gateway send
// its PID is posted to its shard (no mailbox, no goroutine). The Conn
// itself, under a type of its own (procOf): a struct holding a pointer to
// it was an allocation of 8 bytes a connection, and a load a message.
type proc Conn

// procOf is c as its actor.Process.
func procOf(c *Conn) *proc { return (*proc)(c) }

func (p *proc) conn() *Conn { return (*Conn)(p) }

func (p *proc) SendUserMessage(_ *actor.PID, m any) { p.sh.post(p.conn(), m) }

func (p *proc) SendSystemMessage(_ *actor.PID, m any) {
	if _, ok := m.(*actor.Stop); ok {
		p.sh.post(p.conn(), stopEvent{})
	}
}

func (p *proc) Stop(*actor.PID) { p.sh.post(p.conn(), stopEvent{}) }

type (
	startEvent struct{ timeout time.Duration } // the token's (Params.Timeout)
	stopEvent  struct{}
)

// envelope is one message for one connection.
type envelope struct {
	c *Conn
	m any
}

// shard is one goroutine and the connections it owns.
type shard struct {
	pool *Pool
	id   int

	mu       sync.Mutex
	inbox    []envelope
	stopping bool // quit: posts are released
	wake     chan struct{}
	// quit: Close wants the shard to end (it signals wake after). A flag
	// beside wake, not a channel of its own, so that a park receives from
	// one channel, not a select of two (≈ 400 instructions a park).
	quit atomic.Bool
	// rang: the timer fired since the shard last looked (ring).
	rang atomic.Bool

	// timer wakes the shard for its next deadline; timerAt is when it is
	// set for, on the pool's clock (0: not set). A function timer, not a
	// channel's: it stays in the runtime's heap while the shard runs its
	// rounds and the park selects on the wake channel alone (arm). Owned
	// by the shard goroutine.
	timer   *time.Timer
	timerAt time.Duration
	arms    int // the timer's settings (tests)

	// rounds counts the shard's rounds by cause (Pool.Rounds): written
	// by the shard, read by Stats.
	rounds [roundCauses]atomic.Uint64

	// Owned by the shard goroutine.
	work     []envelope
	workPeak int           // the most events a round took since trimAt
	trimAt   time.Duration // when trimWork last looked
	// trimNext: the peak trimWork sized the list in hand by at trimAt, for
	// the other list at the next round (0: none due).
	trimNext int
	heap     deadlines
	dirty    []*Conn
	w        Writer
	out      []byte // WriteBatch datagram buffers back to back
	ms       []udp.Message
	// rxAt is the time of the datagram being received (Conn.onDatagram;
	// Conn.Move runs inside it): the shard's, as it handles one at a time,
	// not 8 bytes of every connection's hot lines.
	rxAt time.Duration
	// in is the input the datagram being received collects (Conn.input;
	// nil between datagrams: Conn.flushInput hands it on at the end of
	// each, Conn.fail drops it after a panic): the shard's, as rxAt, not 8
	// bytes of every connection.
	in *msg.Input
	// gfates is the pump's scratch for a connection's ghost fates: one
	// per shard, not per connection (a connection's pump runs alone).
	gfates []notify.Fate
	// sc is the scratch every connection's session builds its packets
	// and opens its datagrams in (session.Server.ShareScratch): each is
	// used within one call, and a shard runs one connection at a time.
	// Made by the first connection's start.
	sc *session.Scratch
	// zin: the round's inputs waiting for their zones (toZone), one
	// entry per zone.
	zin []zoneInputs
	// dc takes the datagrams the shard's connections are done with
	// (onDatagram): the gateway's Stagers compacted them.
	dc msg.DatagramCache
	// inputs makes the Inputs of the shard's connections (Conn.input):
	// the zones' releases come back to it.
	inputs msg.InputCache
	// cq is the queue the zones post their ticks' Controls to, a batch
	// a shard (PostControls; Conn.port).
	cq msg.ControlQueue
}

// zoneInputs are the inputs a round has for one zone so far: the first
// alone, then (from the second) in a batch.
type zoneInputs struct {
	zone  *actor.PID
	first *msg.Input
	batch *msg.Inputs
}

// maxBatch bounds the inputs in one *msg.Inputs (a backlog after a stall
// goes as several): the zone looks up each event's Output among those of
// the batch so far.
const maxBatch = 64

// toZone sends m to zone. An Input waits for the end of the round's events
// (sendInputs), which sends each zone its round's inputs in one message;
// any other message first sends the inputs waiting for its zone, so a
// zone sees each connection's messages in the order it made them.
func (s *shard) toZone(zone *actor.PID, m any) {
	if in, ok := m.(*msg.Input); ok {
		s.inputToZone(zone, in)
		return
	}
	for i := range s.zin {
		if z := &s.zin[i]; z.zone == zone || z.zone.Equal(zone) {
			s.sendZone(i)
			break
		}
	}
	s.pool.sys.Root.Send(zone, m)
}

// inputToZone is toZone for an Input: a datagram's (Conn.flushInput)
// goes straight here, not through an interface and back (≈ 15
// instructions a datagram).
func (s *shard) inputToZone(zone *actor.PID, in *msg.Input) {
	for i := range s.zin {
		z := &s.zin[i]
		if z.zone != zone && !z.zone.Equal(zone) {
			continue
		}
		if z.batch == nil {
			z.batch = msg.NewInputs()
			z.batch.List = append(z.batch.List, z.first)
			z.first = nil
		}
		z.batch.List = append(z.batch.List, in)
		if len(z.batch.List) == maxBatch {
			s.pool.sys.Root.Send(z.zone, z.batch)
			z.batch = nil
			s.dropZone(i)
		}
		return
	}
	s.zin = append(s.zin, zoneInputs{zone: zone, first: in})
}

// sendInputs sends every zone its waiting inputs.
func (s *shard) sendInputs() {
	for len(s.zin) > 0 {
		s.sendZone(len(s.zin) - 1)
	}
}

// sendZone sends zin[i]'s inputs and forgets the entry.
func (s *shard) sendZone(i int) {
	z := &s.zin[i]
	if z.batch != nil {
		s.pool.sys.Root.Send(z.zone, z.batch)
	} else if z.first != nil {
		s.pool.sys.Root.Send(z.zone, z.first)
	}
	s.dropZone(i)
}

func (s *shard) dropZone(i int) {
	last := len(s.zin) - 1
	s.zin[i] = s.zin[last]
	s.zin[last] = zoneInputs{}
	s.zin = s.zin[:last]
}

// post queues one event and wakes the shard if it may be asleep. A
// Control is merged into one of the same connection's still waiting
// (mergeControl; policy: coalesce, counted as ControlsSuperseded).
func (s *shard) post(c *Conn, m any) {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		release(m)
		return
	}
	first := len(s.inbox) == 0
	switch m := m.(type) {
	case *msg.Control:
		merged := s.queueControl(c, m)
		s.mu.Unlock()
		if merged {
			s.pool.counters.ControlsSuperseded.Add(1)
		} else if first {
			s.signal()
		}
		return
	case *msg.Datagram:
	case *msg.Output:
		// The same owner's events (its zone sends them between its
		// ticks' Controls) may be handled after that owner's newer
		// control state: only a restore's epoch floor orders the two,
		// and it compares epochs, equal here.
		if o := s.waitingControl(c); o == nil || m.Epoch != 0 && m.Epoch != o.Epoch {
			c.ctlPost = 0
		}
	default:
		// Anything else orders after the waiting Control: a Rejoin, a
		// Redirect must see it handled before the next.
		c.ctlPost = 0
	}
	s.inbox = append(s.inbox, envelope{c: c, m: m})
	s.mu.Unlock()
	if first {
		s.signal()
	}
}

// queueControl files m for c: merged into c's Control still waiting
// (true), or appended to the inbox. Under mu, the shard not stopping.
func (s *shard) queueControl(c *Conn, m *msg.Control) (merged bool) {
	if o := s.waitingControl(c); o != nil && (m.Epoch == o.Epoch || m.Epoch != 0 && m.Epoch < o.Epoch) {
		mergeControl(o, m)
		return true
	}
	c.ctlPost = int32(len(s.inbox) + 1)
	s.inbox = append(s.inbox, envelope{c: c, m: m})
	return false
}

// port is c as its Joins name it (msg.Join.Port): its Controls come
// through its shard's queue.
func (c *Conn) port() msg.ControlPort { return msg.ControlPort{Queue: &c.sh.cq, Conn: c} }

// PostControls implements msg.ControlTaker (the shard's queue, cq): each Control is filed for its
// connection as post files it (merged into one still waiting, or queued
// in order), the lot under one lock and with one wake-up. A stopping
// shard releases them; a stopped connection's are released when handled
// (Conn.handle), as a Send's.
func (s *shard) PostControls(cs []msg.PortControl) {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		for _, pc := range cs {
			pc.Control.Release()
		}
		return
	}
	first := len(s.inbox) == 0
	merged := 0
	for _, pc := range cs {
		if s.queueControl(pc.Conn.(*Conn), pc.Control) {
			merged++
		}
	}
	first = first && len(s.inbox) > 0
	s.mu.Unlock()
	if merged > 0 {
		s.pool.counters.ControlsSuperseded.Add(uint64(merged))
	}
	if first {
		s.signal()
	}
}

// waitingControl is c's Control still in the inbox that a newer one may
// be merged into (c.ctlPost), or nil. Under mu.
func (s *shard) waitingControl(c *Conn) *msg.Control {
	if i := int(c.ctlPost) - 1; i >= 0 && i < len(s.inbox) && s.inbox[i].c == c {
		o, _ := s.inbox[i].m.(*msg.Control)
		return o
	}
	return nil
}

// mergeControl folds n, a newer Control for the same connection and
// owner (epoch), into o, which still waits in the shard's inbox, and
// releases n: a shard that falls behind (an overloaded node) then holds
// one Control per connection, not one per zone tick it is behind, and
// handles one. The result is what handling both in turn within one round
// would leave — no pump runs between two events of a round, and only
// datagrams and the same owner's Outputs came between the two (post): n's
// control state supersedes o's (the session would have replaced it
// unsent: ControlsSuperseded); a view nudge is taken if either carried
// one; a Control of an older epoch than o (the previous owner's, late) is
// dropped, its nudge kept; the newest applied move and Force are the
// larger or either.
func mergeControl(o, n *msg.Control) {
	o.View = o.View || n.View
	if n.Epoch != 0 && n.Epoch < o.Epoch {
		n.Release()
		return
	}
	o.LastApplied = max(o.LastApplied, n.LastApplied)
	o.State, o.Force = n.State, o.Force || n.Force
	o.Tick, o.At, o.Epoch = n.Tick, n.At, max(o.Epoch, n.Epoch)
	if n.Events.Gen != 0 {
		o.Events = n.Events
	}
	n.Release()
}

func (s *shard) postAll(evs []envelope) {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		for _, ev := range evs {
			release(ev.m)
		}
		return
	}
	first := len(s.inbox) == 0
	s.inbox = append(s.inbox, evs...)
	s.mu.Unlock()
	if first {
		s.signal()
	}
}

func (s *shard) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *shard) run() {
	defer s.pool.wg.Done()
	q := s.pool.cfg.Quantum
	now := s.pool.cfg.Now
	cause := RoundStraight
	for {
		start := now()
		s.rounds[cause].Add(1)
		s.round(start)
		// Sleep until a post, the next deadline (not sooner than a quantum
		// after this round started: deadlines close together are one
		// round), or the end.
		if s.rang.Swap(false) {
			s.timerAt = 0 // fired while the round ran: no longer armed
		}
		if c, at := s.heap.min(); c != nil {
			at = max(at, start+q)
			t := now()
			if at <= t { // the round took a quantum and more is due
				if s.quit.Load() {
					s.stopTimer()
					s.shutdown()
					return
				}
				cause = RoundStraight
				continue
			}
			s.arm(at, t)
		} else {
			s.stopTimer()
		}
		<-s.wake
		if s.quit.Load() {
			s.stopTimer()
			s.shutdown()
			return
		}
		cause = RoundPosted
		if s.rang.Swap(false) {
			cause, s.timerAt = RoundTimer, 0
		}
	}
}

// arm makes the shard's timer ring at at (on the pool's clock), unless it
// is set for at already. The timer stays set across the rounds that posts
// start: nearly every park finds the same next deadline as the last (a
// connection's tick-driven one, moved when its zone's tick comes: ≈ 95 %
// of the parks at 1,000 players), and a channel timer reset before every
// park, selected on beside the wake channel and stopped after it cost
// ≈ 1,500 instructions of the runtime's a park (BenchmarkShardWakes).
func (s *shard) arm(at, now time.Duration) {
	if at == s.timerAt {
		return
	}
	s.timer.Reset(at - now)
	s.timerAt = at
	s.arms++
}

// stopTimer disarms the shard's timer (no deadline, or the end).
func (s *shard) stopTimer() {
	if s.timerAt != 0 {
		s.timer.Stop()
		s.timerAt = 0
	}
}

// ring is the shard's timer firing (its own goroutine, the runtime's
// AfterFunc): a wake-up the shard counts as the timer's.
func (s *shard) ring() {
	s.rang.Store(true)
	s.signal()
}

// round handles every posted event, pumps every connection that had one or
// whose deadline is due, and sends what they sealed.
func (s *shard) round(now time.Duration) {
	s.mu.Lock()
	s.work, s.inbox = s.inbox, s.work[:0]
	s.mu.Unlock()
	for i := 0; i < len(s.work); {
		i = s.handleFrom(i, now)
	}
	s.sendInputs() // the round's inputs, one message per zone, before the sends
	clear(s.work)
	s.trimWork(len(s.work), now)
	for c, at := s.heap.min(); c != nil && at <= now; c, at = s.heap.min() {
		s.heap.remove(c)
		if c.zoneQuiet(now) {
			s.lookUpAgain(c, now) // its zone lost while its client is quiet (Conn.checkZone)
		}
		s.markDirty(c)
	}
	for i := 0; i < len(s.dirty); {
		i = s.pumpFrom(i, now)
	}
	s.dirty = s.dirty[:0]
	s.sendInputs() // none, unless a pump made some
	s.flush()
}

// trimWork gives a backlog's room back. The inbox and the round's work
// list trade places every round, so both keep the capacity of the largest
// round since the shard started — tens of thousands of events after a
// stall, 24 bytes each, for good. Once a second, the one in hand shrinks
// to half again the largest round of that second when that is under half
// its room. A shard whose rounds peak about as high every second does not
// allocate: the inbox's appends grow it by a quarter (growslice, past 256
// entries), to under twice the peak. (Shrunk only below a quarter, to
// twice the peak, each list kept up to four times its rounds' peak, and
// the whole of a join burst's or a stall's rounds while later seconds
// peaked above a quarter of those: 364 B a player of the two lists at
// 2,000, a node a little behind, in cmd/capacity's heap profile
// (shard.postAll's appends 256, trimWork's 108).)
//
// The other list is sized at the next round, when it is in hand: sizing
// only the one in hand each second, a shard whose rounds came in even
// numbers a second looked at the same list every time and never at the
// other.
func (s *shard) trimWork(n int, now time.Duration) {
	s.workPeak = max(s.workPeak, n)
	if now-s.trimAt < time.Second {
		if s.trimNext > 0 { // the round after: the other list
			s.trimList(max(s.trimNext, n))
			s.trimNext = 0
		}
		return
	}
	s.trimList(s.workPeak)
	s.trimAt, s.trimNext, s.workPeak = now, max(1, s.workPeak), 0
}

// trimList shrinks the work list in hand to half again peak when peak is
// under half its room (trimWork).
func (s *shard) trimList(peak int) {
	if c := cap(s.work); c > minWork && peak < c/2 {
		s.work = make([]envelope, 0, max(minWork, peak+peak/2))
	}
}

// minWork is the least room trimWork leaves.
const minWork = 256

func (s *shard) markDirty(c *Conn) {
	if !c.dirty {
		c.dirty = true
		s.dirty = append(s.dirty, c)
	}
}

// handleFrom handles the round's events from work[i] on and returns
// len(work), or, when an event panics, the index after it: the panic ends
// only that event's connection (fail), and round calls again for the
// rest. One deferred recover for a round's events instead of one an event
// (≈ 60 instructions each, with pumpFrom ≈ 120 a datagram: its event and
// its pump).
func (s *shard) handleFrom(i int, now time.Duration) (next int) {
	defer func() {
		if v := recover(); v != nil {
			s.work[next].c.fail(v)
			next++
		}
	}()
	for next = i; next < len(s.work); next++ {
		s.prefetchEvents(next)
		ev := &s.work[next]
		s.handleOne(ev.c, ev.m, now)
	}
	return next
}

// pumpFrom pumps the round's dirty connections from dirty[i] on, as
// handleFrom handles its events: it returns len(dirty), or the index
// after a pump that panicked (that connection failed).
func (s *shard) pumpFrom(i int, now time.Duration) (next int) {
	var c *Conn
	defer func() {
		if v := recover(); v != nil {
			c.fail(v)
			next++
		}
	}()
	for next = i; next < len(s.dirty); next++ {
		s.prefetchPumps(next)
		c = s.dirty[next]
		s.dirty[next] = nil
		c.dirty = false
		if c.stopped {
			continue
		}
		s.pump(c, now)
	}
	return next
}

// prefetchPumps asks the CPU for the state of the connections pumped
// after dirty[i], in stages a pump apart: each stage reads the lines the
// one before fetched (a Conn's pointers, then its Server's and Manager's
// and its view slot's, then its Table's and the waiting view's, then its
// records, the view's references and the sending AEAD's key), so none
// waits on memory, and by its turn a connection's lines have come while
// the pumps before it worked. The ghost table only for a connection with a view waiting: its pump
// applies the view and sends the tick's packet; the pump after a
// datagram mostly finds nothing due and reads none of it. It reads only
// fields that are set or nil, never panics (pumpFrom would blame the
// connection pumped before), and changes nothing.
func (s *shard) prefetchPumps(i int) {
	d := s.dirty
	if k := i + 4; k < len(d) {
		prefetch.Lines(unsafe.Pointer(d[k]), connHotBytes)
	}
	if k := i + 3; k < len(d) {
		if c := d[k]; c.srv != nil {
			c.srv.PrefetchServer()
			if c.gst.ViewWaiting() && c.gm != nil {
				c.gm.PrefetchManager()
				c.views.PrefetchSlot()
			}
		}
	}
	if k := i + 2; k < len(d) {
		if c := d[k]; c.srv != nil {
			c.srv.PrefetchParts()
			if c.gst.ViewWaiting() && c.gm != nil {
				c.gm.PrefetchTable()
				c.views.PrefetchWaiting()
			}
		}
		s.heap.prefetch(d[k])
	}
	if k := i + 1; k < len(d) {
		if c := d[k]; c.gst.ViewWaiting() && c.gm != nil {
			c.gm.PrefetchRecords()
			c.views.PrefetchWaitingRefs()
			// The tick's packet is sealed: the sending AEAD's key
			// (read from the crypto session's line, fetched a pump
			// ago), its first read a miss otherwise (0.9 % of the
			// node's samples at 2,000).
			if c.srv != nil {
				c.srv.PrefetchSealKey()
			}
		}
	}
}

// prefetchEvents is prefetchPumps for the connections of the round's
// events after work[i], most of them datagrams: a Conn; then its Server,
// its crypto session (the Conn holds the session's address too, in its
// third line) and its kept moves; then the notify state and the
// ControlWriter the Server points to and the receiving AEAD's key the
// session points to. A datagram's first touches
// of these were most of Conn.onDatagram's time on a loaded node (the
// session's address alone, its first read of the crypto session, 1.4 %
// of the node's samples; the AEAD's first read of its key, 1.1 %). Three
// stages: a round's events are few (≈ 8 a shard), and a fourth (the key
// from the Server's session) left more of each round's first events
// unfetched (BenchmarkShardReceiveCold 1,019 → 1,073 ns a datagram).
func (s *shard) prefetchEvents(i int) {
	w := s.work
	if k := i + 3; k < len(w) {
		e := &w[k]
		prefetch.Lines(unsafe.Pointer(e.c), connHotBytes)
		// A tick's Control or nudge reads the Conn's view slot too (past
		// the hot lines: the zone's goroutine writes it), at an address
		// the Conn's own gives without reading it.
		switch e.m.(type) {
		case *msg.Control, *msg.ViewReady:
			if e.c != nil {
				prefetch.Lines(unsafe.Pointer(&e.c.views), unsafe.Sizeof(e.c.views))
			}
		}
	}
	if k := i + 2; k < len(w) {
		if c := w[k].c; c != nil && c.srv != nil {
			c.srv.PrefetchServer()
			if c.hs != nil {
				c.hs.PrefetchSession()
			}
			// The moves kept for resending (their own allocation): a
			// datagram's moves are appended to them, a Control trims them.
			if u := c.unacked; cap(u) > 0 {
				prefetch.Lines(unsafe.Pointer(unsafe.SliceData(u)), min(uintptr(cap(u))*unsafe.Sizeof(u[0]), 128))
			}
		}
	}
	if k := i + 1; k < len(w) {
		if c := w[k].c; c != nil && c.srv != nil {
			c.srv.PrefetchParts()
			if c.hs != nil {
				c.hs.PrefetchOpenKey()
			}
			s.heap.prefetch(c)
		}
	}
}

// connHotBytes is the Conn's first lines: what every datagram and pump reads.
const connHotBytes = 192

// handle runs one event for c, a panic ending only c (round handles its
// events with handleFrom).
func (s *shard) handle(c *Conn, m any, now time.Duration) {
	defer func() {
		if v := recover(); v != nil {
			c.fail(v)
		}
	}()
	s.handleOne(c, m, now)
}

// handleOne runs one event for c; the caller recovers from a panic.
func (s *shard) handleOne(c *Conn, m any, now time.Duration) {
	switch m := m.(type) {
	case *msg.Datagram: // most events: straight in, not through Conn.handle's switch (≈ 30 instructions)
		if c.stopped {
			m.Release()
			return
		}
		if c.onDatagram(m, now) {
			return // rejected: nothing changed, no pump (Conn.onDatagram)
		}
	case startEvent:
		if err := c.start(now, m.timeout); err != nil {
			c.logger().Error("connection not started", "err", err)
			c.hs.Close(handshake.ReasonServerShutdown)
			c.finish(handshake.ReasonServerShutdown)
			return
		}
	case stopEvent:
		s.stop(c)
		return
	default:
		c.handle(m, now)
	}
	if !c.stopped {
		s.markDirty(c)
	}
}

// lookUpAgain runs c.lookUpAgain for a connection its deadline woke
// (round: Conn.checkZone), a panic (of Config.Resume) ending only c, as
// in handleFrom.
func (s *shard) lookUpAgain(c *Conn, now time.Duration) {
	defer func() {
		if v := recover(); v != nil {
			c.fail(v)
		}
	}()
	c.lookUpAgain(now)
}

// pumpOne pumps c, a panic ending only c (round pumps with pumpFrom).
func (s *shard) pumpOne(c *Conn, now time.Duration) {
	defer func() {
		if v := recover(); v != nil {
			c.fail(v)
		}
	}()
	s.pump(c, now)
}

// pump pumps c and files its next deadline; the caller recovers from a
// panic.
func (s *shard) pump(c *Conn, now time.Duration) {
	next := c.pump(now)
	if c.stopped || next == maxDeadline {
		s.heap.remove(c)
		return
	}
	s.heap.move(c, next)
}

// stop forgets c: out of the heap, its PID unregistered, its views closed.
func (s *shard) stop(c *Conn) {
	s.heap.remove(c)
	c.onStop()
}

// outSlot is the next free datagram buffer of the round's batch (empty,
// MaxDatagram of capacity); commit takes the n bytes written to it as a
// datagram to addr. A full batch is sent at once.
func (s *shard) outSlot() []byte {
	i := len(s.ms)
	return s.out[i*udp.MaxDatagram : i*udp.MaxDatagram : (i+1)*udp.MaxDatagram]
}

func (s *shard) commit(n int, addr netip.AddrPort) {
	i := len(s.ms)
	// In place, not an append of a composite (a 64-byte Message built on
	// the stack and copied): the room is the batch's, len < cap here.
	s.ms = s.ms[:i+1]
	m := &s.ms[i]
	m.Buf, m.N, m.Addr = s.out[i*udp.MaxDatagram:(i+1)*udp.MaxDatagram], n, addr
	if len(s.ms) == cap(s.ms) {
		s.flush()
	}
}

// flush sends the batch; one bad destination does not sink the rest.
func (s *shard) flush() {
	done := 0
	for done < len(s.ms) {
		n, err := s.w.WriteBatch(s.ms[done:])
		var bytes uint64
		for i := range s.ms[done : done+n] {
			bytes += uint64(s.ms[done+i].N) // by index: a range copied each Message
		}
		// One add per system call: the counters are the pool's, shared by
		// every shard.
		s.pool.bytes.Add(bytes)
		s.pool.sent.Add(uint64(n))
		if n > 0 {
			s.pool.batches.Add(1)
		}
		done += n
		if err != nil {
			if errors.Is(err, udp.ErrClosed) {
				s.pool.dropped.Add(uint64(len(s.ms) - done))
				break
			}
			s.pool.errors.Add(1)
			done++ // skip the datagram the kernel refused
			continue
		}
		if n == 0 {
			s.pool.dropped.Add(uint64(len(s.ms) - done))
			break
		}
	}
	s.ms = s.ms[:0]
}

// shutdown ends the shard: what is posted from now on is released, and the
// connections it still owns are forgotten.
func (s *shard) shutdown() {
	s.mu.Lock()
	s.stopping = true
	evs := s.inbox
	s.inbox = nil
	s.mu.Unlock()
	for _, ev := range evs {
		release(ev.m)
	}
	for _, z := range s.zin {
		if z.batch != nil {
			z.batch.Release()
		} else if z.first != nil {
			z.first.Release()
		}
	}
	clear(s.zin)
	s.zin = s.zin[:0]
	s.flush()
	for c, _ := s.heap.min(); c != nil; c, _ = s.heap.min() {
		s.stop(c)
	}
}
