package main

import (
	"context"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// server is one library's server end, inside the server process.
type server interface {
	addr() netip.AddrPort
	// setWindow starts recording: up messages stamped inside [start, end)
	// are timed on arrival, down messages sent inside it are counted.
	setWindow(start, end int64)
	report() serverReport
	// counts is the progress so far: up messages of the window received,
	// down messages of the window sent.
	counts() (upRecv, downSent uint64)
	close()
}

type serverReport struct {
	CPU      int64          `json:"cpu_ns"`    // process CPU (user + system) inside the window
	Up       dirStats       `json:"up"`        // Sent is filled in by the driver
	DownSent uint64         `json:"down_sent"` // state messages sent inside the window
	Extra    map[string]any `json:"extra,omitempty"`
}

// clientSet is one library's clients, inside the driver process.
type clientSet interface {
	// dial connects n clients to server, sending to via (the relay, or the
	// server itself), and returns when all are connected; then they start
	// sending inputs.
	dial(ctx context.Context, n int, server, via netip.AddrPort) error
	setWindow(start, end int64)
	// windowTraffic is the client sockets' traffic inside the window (valid
	// once it has ended).
	windowTraffic() trafficSnap
	down() dirStats // Sent is filled in by the driver
	upSent() uint64
	// counts is the progress so far: down messages of the window received,
	// up messages of the window sent.
	counts() (downRecv, upSent uint64)
	close()
}

// clientOpts and serveOpts: the workload, the same for every library.
type clientOpts struct {
	keyFile   string // ghostwire: the connect-token key
	inputSize int
	inputHz   int
	crypt     bool // kcp-go: AES-128
}

type serveOpts struct {
	keyFile   string
	clients   int
	stateSize int
	stateHz   int
	crypt     bool
}

// goSide is the recording half of a Go client set: a recorder for the down
// direction (and the up messages sent) and the sockets' traffic, snapshot
// at the window's edges.
type goSide struct {
	rec *recorder
	tr  *traffic

	mu         sync.Mutex
	snapA      trafficSnap
	snapB      trafficSnap
	timers     []*time.Timer
	windowDone atomic.Bool
}

func newGoSide() goSide { return goSide{rec: new(recorder), tr: new(traffic)} }

func (g *goSide) setWindow(start, end int64) {
	g.rec.setWindow(start, end)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.timers = append(g.timers,
		time.AfterFunc(time.Until(time.Unix(0, start)), func() { g.mu.Lock(); g.snapA = g.tr.snap(); g.mu.Unlock() }),
		time.AfterFunc(time.Until(time.Unix(0, end)), func() { g.mu.Lock(); g.snapB = g.tr.snap(); g.mu.Unlock() }))
}

func (g *goSide) windowTraffic() trafficSnap {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.snapB.sub(g.snapA)
}

func (g *goSide) down() dirStats { return g.rec.summary() }
func (g *goSide) counts() (uint64, uint64) {
	return g.rec.recvWin.Load(), g.rec.sentWin.Load()
}
func (g *goSide) upSent() uint64 { return g.rec.sentWin.Load() }

// inputDriver sends every client's input at the input rate, the clients'
// phases spread evenly over one period (players do not press keys in step).
// One goroutine for all clients, woken every millisecond: a client whose
// time came sends one input; one that fell more than a period behind skips
// (a game samples once per frame, it does not burst).
type inputDriver struct {
	done chan struct{}
	wg   sync.WaitGroup
}

func startInputs(n int, o clientOpts, rec *recorder, send func(i int, p []byte)) *inputDriver {
	d := &inputDriver{done: make(chan struct{})}
	period := time.Second / time.Duration(o.inputHz)
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		t0 := time.Now()
		next := make([]time.Duration, n)
		seq := make([]uint32, n)
		for i := range next {
			next[i] = period * time.Duration(i) / time.Duration(n)
		}
		buf := make([]byte, o.inputSize)
		tk := time.NewTicker(time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-d.done:
				return
			case <-tk.C:
			}
			now := time.Since(t0)
			for i := range n {
				if next[i] > now {
					continue
				}
				seq[i]++
				ts := nowNS()
				stamp(buf, ts, uint32(i), seq[i])
				send(i, buf)
				rec.sent(ts)
				next[i] += period
				if next[i] <= now {
					next[i] = now + period
				}
			}
		}
	}()
	return d
}

func (d *inputDriver) stop() {
	close(d.done)
	d.wg.Wait()
}

// parallel runs f(0..n-1) on at most width goroutines and returns the first
// error (the others are cancelled through ctx).
func parallel(ctx context.Context, n, width int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		next  atomic.Int64
	)
	for range min(width, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return first
}
