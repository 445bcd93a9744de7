package gateway

// pinned runs the gateway actor's mailbox on one long-lived goroutine.
// protoactor's default dispatcher starts a goroutine every time an idle
// mailbox gets a message, and the gateway's mailbox gets one per read
// batch — at low load one per datagram — each new goroutine growing its
// stack by copying on the routing path. A goroutine that stays parked on a
// channel between batches does neither.
type pinned struct {
	ch   chan func()
	quit chan struct{}
	done chan struct{}
}

func newPinned() *pinned {
	// The mailbox schedules itself only when it goes from idle to running
	// (and may reschedule from inside a run): one or two waiting at most.
	d := &pinned{ch: make(chan func(), 64), quit: make(chan struct{}), done: make(chan struct{})}
	go d.loop()
	return d
}

func (d *pinned) loop() {
	defer close(d.done)
	for {
		select {
		case fn := <-d.ch:
			fn()
		case <-d.quit:
			return
		}
	}
}

// Schedule implements actor.Dispatcher. After close it drops fn: the actor
// has stopped.
func (d *pinned) Schedule(fn func()) {
	select {
	case d.ch <- fn:
	case <-d.quit:
	}
}

// Throughput implements actor.Dispatcher: messages per run before the
// mailbox yields (protoactor's default).
func (d *pinned) Throughput() int { return 300 }

// close ends the goroutine; call it once the actor has stopped.
func (d *pinned) close() {
	close(d.quit)
	<-d.done
}
