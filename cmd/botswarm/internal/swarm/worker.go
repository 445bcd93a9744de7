package swarm

import (
	"math/rand/v2"
	"time"

	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/metrics"
)

// worker owns a share of the bots: their sessions, sockets (one transport)
// and a min-heap of wake-up times — no goroutine or timer per bot. The heap
// holds each bot's wake-up beside its slot, and where each slot sits in it
// is kept apart (pos), so ordering it reads and writes two small arrays,
// not the bots: with thousands of bots each one's struct is a cache miss,
// and ordering by the wake-up kept in the bot was ≈ 8 % of botswarm's
// CPU (pprof, 2,000 bots). Its loop:
// service every bot whose time has come, then block in the transport until
// the earliest next wake-up or a datagram, and hand datagrams to their bots.
type worker struct {
	sw    *Swarm
	id    int
	tr    transport
	bots  []*bot
	heap  []wakeup                   // min-heap on wake
	pos   []int32                    // by slot: the bot's index in heap, -1 when not in it
	held  bool                       // onDatagram took shard.Mu for the rest of this wait
	onDgm func(int32, []byte, error) // onDatagram, bound once (a method value per wait is garbage)
	shard *metrics.Shard
	rng   *rand.Rand
	buf   []byte        // Poll's destination
	ebuf  [echoLen]byte // event payloads
	due   []*bot        // scratch: bots popped this turn
	spins uint64        // turns that found a bot due again at once (diagnostic)
	stop  bool
}

// wakeup is a heap entry: when the bot in slot is next due.
type wakeup struct {
	wake time.Duration
	slot int32
}

// maxWait bounds one block in the transport, so a stop request is noticed.
const maxWait = 50 * time.Millisecond

func (w *worker) now() time.Duration { return time.Since(w.sw.epoch) }

// run is the worker's goroutine.
func (w *worker) run() {
	defer w.tr.shutdown()
	hardStop := w.sw.runEnd + w.sw.cfg.Drain + 2*time.Second
	w.onDgm = w.onDatagram
	for {
		now := w.now()
		if w.sw.stopping.Load() && !w.stop {
			w.stop = true
			w.endAll(now)
		}
		w.shard.Mu.Lock()
		w.runDue(now)
		done := len(w.heap) == 0
		w.shard.Mu.Unlock()
		if done {
			return
		}
		if now > hardStop {
			w.abandon(now)
			return
		}
		if q := w.sw.cfg.Quantum; q > 0 {
			// Let datagrams pile up until a quantum after the turn began,
			// then take them all in one turn: a wake-up per datagram costs
			// more than the datagram (futex and epoll round trips, very
			// dear in a VM). A turn that took the quantum already sleeps
			// not at all.
			if d := now + q - w.now(); d > 0 {
				time.Sleep(d)
			}
		}
		wait := w.heap[0].wake - w.now()
		wait = min(max(wait, 0), maxWait)
		w.tr.wait(wait, w.onDgm)
		if w.held {
			// One lock for all the datagrams of this wait, not one each.
			w.held = false
			w.shard.Mu.Unlock()
		}
		if se, ok := w.tr.(interface{ takeSendErrors() uint64 }); ok {
			if n := se.takeSendErrors(); n > 0 {
				w.shard.Mu.Lock()
				w.shard.C.Errors += n
				w.shard.C.SocketErrors += n
				w.shard.Mu.Unlock()
			}
		}
	}
}

// runDue services every bot due at now once.
func (w *worker) runDue(now time.Duration) {
	w.due = w.due[:0]
	for len(w.heap) > 0 && w.heap[0].wake <= now {
		w.due = append(w.due, w.pop())
	}
	for _, b := range w.due {
		b.service(now)
		w.push(b, now)
	}
}

// push (re)inserts b with its next wake-up; a finished bot leaves the heap.
func (w *worker) push(b *bot, now time.Duration) {
	t := b.nextWake(now)
	if t == never {
		w.setPos(b.slot, -1)
		return
	}
	if t <= now {
		w.spins++
	}
	b.wake = t
	w.insert(b)
}

// insert puts b into the heap at b.wake.
func (w *worker) insert(b *bot) {
	i := len(w.heap)
	w.heap = append(w.heap, wakeup{wake: b.wake, slot: b.slot})
	w.setPos(b.slot, i)
	w.up(i)
}

func (w *worker) setPos(slot int32, i int) {
	for int(slot) >= len(w.pos) {
		w.pos = append(w.pos, -1)
	}
	w.pos[slot] = int32(i)
}

// heapIdx is where b sits in the heap, -1 when it is not in it.
func (w *worker) heapIdx(b *bot) int {
	if int(b.slot) >= len(w.pos) {
		return -1
	}
	return int(w.pos[b.slot])
}

// reschedule moves b after something changed its next wake-up.
func (w *worker) reschedule(b *bot, now time.Duration) {
	i := w.heapIdx(b)
	if i < 0 {
		w.push(b, now)
		return
	}
	t := b.nextWake(now)
	if t == b.wake {
		return
	}
	if t == never {
		w.remove(i)
		w.pos[b.slot] = -1
		return
	}
	old := b.wake
	b.wake = t
	w.heap[i].wake = t
	if t < old {
		w.up(i)
	} else {
		w.down(i)
	}
}

func (w *worker) onDatagram(tag int32, p []byte, err error) {
	w.onDatagramAt(w.now(), tag, p, err)
}

// onDatagramAt hands one datagram (or a socket error) that arrived at now
// to the bot in slot tag.
func (w *worker) onDatagramAt(now time.Duration, tag int32, p []byte, err error) {
	if tag < 0 || int(tag) >= len(w.bots) {
		return
	}
	b := w.bots[tag]
	if !w.held {
		w.shard.Mu.Lock() // run unlocks it when the wait returns
		w.held = true
	}
	c := &w.shard.C
	if err != nil {
		c.Errors++
		c.SocketErrors++
		w.sw.logErr("receive", err)
		b.refused = true
		return
	}
	if b.client == nil {
		return // a late datagram for a session already torn down
	}
	c.PacketsIn++
	c.BytesIn += uint64(len(p))
	if b.pipe != nil {
		b.pipe.BtoA.Send(now, p)
	} else {
		b.receive(now, p)
	}
	w.reschedule(b, now)
}

// endAll brings every bot's end of life forward to now (Ctrl-C, context
// cancelled): running bots drain, idle ones are done.
func (w *worker) endAll(now time.Duration) {
	w.shard.Mu.Lock()
	defer w.shard.Mu.Unlock()
	for _, b := range w.bots {
		switch b.state {
		case botIdle:
			b.state = botDone
		case botConnecting, botRunning:
			b.endAt = now
			if b.state == botConnecting {
				b.client.Close(now)
				b.state = botClosing
			}
		}
		w.reschedule(b, now)
	}
}

// abandon closes whatever is still open after the hard deadline.
func (w *worker) abandon(now time.Duration) {
	w.shard.Mu.Lock()
	defer w.shard.Mu.Unlock()
	for _, b := range w.bots {
		if b.client != nil {
			b.fold()
			if b.connected {
				w.shard.C.Connected--
			}
			b.client, b.pipe, b.connected = nil, nil, false
			b.tr.end()
		}
		b.state = botDone
	}
	w.heap = w.heap[:0]
	for i := range w.pos {
		w.pos[i] = -1
	}
}

// Heap primitives (container/heap through an interface would box every call).
func (w *worker) less(i, j int) bool { return w.heap[i].wake < w.heap[j].wake }

func (w *worker) swap(i, j int) {
	h := w.heap
	h[i], h[j] = h[j], h[i]
	w.pos[h[i].slot], w.pos[h[j].slot] = int32(i), int32(j)
}

func (w *worker) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !w.less(i, p) {
			break
		}
		w.swap(i, p)
		i = p
	}
}

func (w *worker) down(i int) {
	n := len(w.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && w.less(r, l) {
			m = r
		}
		if !w.less(m, i) {
			return
		}
		w.swap(i, m)
		i = m
	}
}

func (w *worker) pop() *bot {
	slot := w.heap[0].slot
	w.remove(0)
	w.pos[slot] = -1
	return w.bots[slot]
}

func (w *worker) remove(i int) {
	n := len(w.heap) - 1
	if i != n {
		w.swap(i, n)
	}
	w.heap = w.heap[:n]
	if i < n {
		w.down(i)
		w.up(i)
	}
}
