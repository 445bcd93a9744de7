package msg

// ControlPort names a connection that takes its zone's Controls in
// batches (Join.Port): a zone tick's Controls for every connection of
// one ControlQueue — a connection shard — go in one PostControls, not one
// actor message each. A tick sent a Control a player, each a protoactor
// Send and a lock of the shard's inbox that the shard's goroutine takes
// on the other core (≈ 250 a zone tick at 1,000 players; 1.8 % of a
// loaded server's CPU, most of it cache misses on each player's PID and
// connection); a batch takes the lock once, and the zone reads only the
// Join it already holds.
type ControlPort struct {
	// Queue is the connection's shard's (nil: no batches, Send to
	// Join.Conn). It never changes.
	Queue *ControlQueue
	// Conn is the connection as Queue's taker knows it.
	Conn any
}

// ControlQueue is a connection shard's queue of Controls, shared by its
// connections. A zone groups its tick's Controls by the queue's address (one
// comparison: an interface's took runtime.ifaceeq, ≈ 20 instructions a
// Control). The zero ControlQueue takes nothing: set Taker.
type ControlQueue struct {
	Taker ControlTaker
}

// ControlTaker takes Controls for a queue's ports (a connection shard).
type ControlTaker interface {
	// PostControls hands each Control of cs to its connection, in order,
	// as a Send of each to the connection (Join.Conn) would: a connection's
	// Controls keep their order, each is delivered once (or released
	// unread when the connection is gone or the queue stopped),
	// and anything sent to the connection after the call is handled
	// after them. The taker takes the Controls; cs stays the caller's,
	// to reuse once the call returns.
	PostControls(cs []PortControl)
}

// PortControl is one Control for one connection (ControlPort.Conn).
type PortControl struct {
	Conn    any
	Control *Control
}

// ControlBatch groups a zone tick's Controls by their ports' queues and
// posts each queue's in one PostControls: every queue's waiting list once
// Wait Controls were added since the last posting of all (the tick goes
// on while the shards start on them), one that reaches MaxControlBatch at
// once, and the rest at Flush. The zero ControlBatch is ready; its room
// is kept between ticks (a list of MaxControlBatch, 1.5 KB, for each
// queue a tick had). Not safe for concurrent use: one zone's.
type ControlBatch struct {
	// Wait bounds a Control's wait for its post: at most Wait-1 Controls
	// are added after it before it is posted (0: DefaultControlWait).
	// Posting only full lists and the rest at the tick's end held the
	// first players of a 1,000-player tick for the whole tick's work
	// (RTT p99 +1.35 ms at the whole server).
	Wait int

	qs   []*queuedControls // qs[:n] are this tick's queues, the rest room
	n    int
	last *queuedControls // the queue of the last Add (nil: none this tick)
	left int             // Controls still to add before every queue's list is posted
}

type queuedControls struct {
	q *ControlQueue
	n int
	// next is the queue whose Control followed one of this queue's the
	// last time (Add): a zone's players come in the same order every
	// tick and connections go round robin over the shards (Pool.Open), so
	// it is the next Add's queue; a guess Add checks (its q), since a
	// queue of an earlier tick may serve another by now.
	next *queuedControls
	cs   [MaxControlBatch]PortControl
}

// MaxControlBatch is the most Controls one PostControls carries: a
// shard's round takes about a sendmmsg's worth (64) at once.
const MaxControlBatch = 64

// DefaultControlWait is ControlBatch.Wait's default: with a node's two
// shards, lists of ≈ 16, one lock a 16 Controls on each shard, and no
// Control held back behind more than 31 others' making.
const DefaultControlWait = 32

// Add queues c for p's connection, to go with the other Controls of p's
// queue (p.Queue not nil).
func (b *ControlBatch) Add(p *ControlPort, c *Control) {
	q := p.Queue
	// The queue that followed the last Add's the last time, not the last
	// Add's own: on a node's shards consecutive players alternate, and
	// the last one's queue sent almost every Add to queue's search (14.5
	// of Add's 58.7 instructions). BenchmarkControlBatchAdd.
	e, prev := b.last, b.last
	if e != nil {
		e = e.next
	}
	if e == nil || e.q != q {
		e = b.queue(q)
		if prev != nil {
			prev.next = e
		}
	}
	b.last = e
	e.cs[e.n] = PortControl{Conn: p.Conn, Control: c}
	if e.n++; e.n == MaxControlBatch {
		post(e)
	}
	if b.left--; b.left <= 0 {
		b.postAll()
	}
}

// queue is q's entry, found or made.
func (b *ControlBatch) queue(q *ControlQueue) *queuedControls {
	for _, e := range b.qs[:b.n] {
		if e.q == q {
			return e
		}
	}
	if b.n == 0 { // the tick's first: its wait starts
		b.left = b.wait()
	}
	if b.n == len(b.qs) {
		b.qs = append(b.qs, new(queuedControls))
	}
	e := b.qs[b.n]
	b.n++
	e.q = q
	return e
}

func (b *ControlBatch) wait() int {
	if b.Wait > 0 {
		return b.Wait
	}
	return DefaultControlWait
}

// postAll posts every queue's waiting Controls and starts the wait again;
// the queues stay for the tick's next Controls.
func (b *ControlBatch) postAll() {
	for _, e := range b.qs[:b.n] {
		if e.n > 0 {
			post(e)
		}
	}
	b.left = b.wait()
}

// Flush posts every queue's waiting Controls (the tick's end).
func (b *ControlBatch) Flush() {
	for _, e := range b.qs[:b.n] {
		if e.n > 0 {
			post(e)
		}
		e.q = nil // the queue may go (its pool closed): hold no reference
	}
	b.n, b.last = 0, nil
}

func post(e *queuedControls) {
	e.q.Taker.PostControls(e.cs[:e.n])
	clear(e.cs[:e.n]) // the Controls are the queue's now
	e.n = 0
}

// Len is the Controls waiting (tests).
func (b *ControlBatch) Len() int {
	n := 0
	for _, e := range b.qs[:b.n] {
		n += e.n
	}
	return n
}
