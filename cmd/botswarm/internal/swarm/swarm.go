package swarm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/impair"
	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/metrics"
	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/scenario"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/session"
)

// Swarm is one run: the bots, their workers and the metrics.
type Swarm struct {
	cfg           Config
	clientCfg     session.ClientConfig // observers
	blindCfg      session.ClientConfig // the other bots: no ghost decoding
	epoch         time.Time            // the run's clock starts here
	runEnd        time.Duration        // bots stop moving (then drain)
	clock         serverClock
	echoSeen      atomic.Bool // the server echoes: drains wait for echoes
	stopping      atomic.Bool
	truths        []truth
	workers       []*worker
	shards        []*metrics.Shard
	log           *slog.Logger
	logged        atomic.Int64 // error log lines written (rate-limited)
	transportName string
}

// New validates cfg and prepares the bots; Run starts them.
func New(cfg Config) (*Swarm, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cc := session.DefaultClientConfig()
	cc.Moves = move.Config{InputRate: cfg.InputRate}
	cc.SendRate = cfg.SendRate
	// One registry for every bot (a session building its own took 5.6 KB and
	// 60 allocations); the classes are the server's.
	cc.Registry = session.DefaultRegistry()
	if err := cc.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if cc.KeepAlive >= cfg.TokenTimeout {
		return nil, fmt.Errorf("%w: token timeout %v must exceed the session's keep-alive interval %v", ErrConfig, cfg.TokenTimeout, cc.KeepAlive)
	}
	sw := &Swarm{
		cfg: cfg, clientCfg: cc, log: cfg.Log,
		runEnd: cfg.Duration,
		truths: make([]truth, cfg.Bots),
	}
	if sw.log == nil {
		sw.log = slog.New(slog.DiscardHandler)
	}
	nw := cfg.Workers
	if nw == 0 {
		nw = min(runtime.GOMAXPROCS(0), max(1, cfg.Bots/250))
	}
	nw = min(nw, cfg.Bots)
	assign := impair.Assign(cfg.Mix, cfg.Bots, cfg.Seed)
	kind := cfg.Transport
	v6, mixed := families(cfg.Servers)
	if mixed {
		switch kind {
		case "shared":
			return nil, fmt.Errorf("%w: a shared socket serves one address family; the servers mix IPv4 and IPv6", ErrConfig)
		case "", "auto":
			kind = "epoll" // a socket per bot, each of its server's family
			if _, err := newEpollTransport(); errors.Is(err, errUnsupported) {
				kind = "goroutines"
			}
		}
	}
	for i := range nw {
		tr, err := newTransport(kind, v6)
		if err != nil {
			for _, w := range sw.workers {
				w.tr.shutdown()
			}
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		sw.transportName = tr.name()
		w := &worker{sw: sw, id: i, tr: tr, shard: metrics.NewShard(),
			rng: rand.New(rand.NewPCG(cfg.Seed, uint64(i)+0x776b)), buf: make([]byte, 0, session.MaxPacketSize)}
		sw.workers = append(sw.workers, w)
		sw.shards = append(sw.shards, w.shard)
	}
	// Bots that share a socket send the long form: the server routes them
	// by connection id, not by their (common) address.
	sw.clientCfg.AlwaysLongForm = sw.workers[0].tr.shared()
	sw.blindCfg = sw.clientCfg
	sw.blindCfg.SkipGhosts = true
	for i := range cfg.Bots {
		w := sw.workers[i%nw]
		b := &bot{w: w, idx: i, slot: int32(len(w.bots)), prof: assign[i], tr: &sw.truths[i], observer: isObserver(i, cfg.Observers),
			mover:  scenario.NewMover(cfg.Scenario, i),
			server: cfg.Servers[i%len(cfg.Servers)]}
		b.netIn = func(p []byte) { b.receive(b.rxNow, p) }
		b.netOut = b.send
		if cfg.Ramp > 0 {
			b.startAt = time.Duration(float64(i) / cfg.Ramp * float64(time.Second))
		}
		b.state = botIdle
		if b.startAt >= sw.runEnd {
			b.state = botDone
		}
		w.bots = append(w.bots, b)
	}
	return sw, nil
}

// isObserver spreads a fraction of the bots evenly over the indexes: bot i
// observes when ⌊(i+1)·f⌋ > ⌊i·f⌋ (f = 1: all, 0: none).
func isObserver(i int, f float64) bool {
	return math.Floor(float64(i+1)*f) > math.Floor(float64(i)*f)
}

// ObserverPlayer reports whether the player id is that of a bot which,
// with Observers f and PlayerBase base, decodes ghosts: so the fake server
// can send ghosts to those bots only (the others skip the section).
func ObserverPlayer(pid, base uint64, f float64) bool {
	if pid < base {
		return false
	}
	i := (pid - base) >> pidSessionBits
	return i < 1<<31 && isObserver(int(i), f)
}

// Observers is how many bots decode and check ghosts.
func (sw *Swarm) Observers() int {
	n := 0
	for _, w := range sw.workers {
		for _, b := range w.bots {
			if b.observer {
				n++
			}
		}
	}
	return n
}

// families tells whether the servers are IPv6 and whether they mix families.
func families(servers []netip.AddrPort) (v6, mixed bool) {
	for i, s := range servers {
		is6 := !s.Addr().Unmap().Is4()
		if i == 0 {
			v6 = is6
		} else if is6 != v6 {
			mixed = true
		}
	}
	return v6, mixed
}

// Transport names the socket layer in use.
func (sw *Swarm) Transport() string { return sw.transportName }

// Workers is the number of worker goroutines.
func (sw *Swarm) Workers() int { return len(sw.workers) }

// Run drives the swarm until cfg.Duration has passed and the bots have
// drained and disconnected, or ctx is cancelled (the bots then drain and
// quit early). It samples the metrics once a second (cfg.OnSample) and
// returns the collector with the whole run.
func (sw *Swarm) Run(ctx context.Context) *metrics.Collector {
	sw.epoch = time.Now()
	col := metrics.NewCollector(sw.shards, sw.cfg.Bots, sw.epoch)
	for _, w := range sw.workers {
		for _, b := range w.bots {
			w.push(b, 0)
		}
	}
	var wg sync.WaitGroup
	for _, w := range sw.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run()
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			sw.stopping.Store(true)
			ctx = context.Background() // sample on while the bots drain
		case now := <-tick.C:
			if sw.stopping.Load() || now.Sub(sw.epoch) >= sw.runEnd {
				col.Draining()
			}
			p := col.Sample(now)
			if sw.cfg.OnSample != nil {
				sw.cfg.OnSample(p, col.Totals())
			}
		case <-done:
			col.Draining()
			p := col.Sample(time.Now())
			if sw.cfg.OnSample != nil {
				sw.cfg.OnSample(p, col.Totals())
			}
			return col
		}
	}
}

// peer returns the truth of the bot whose current session has player id
// entity, if it is one of ours.
func (sw *Swarm) peer(entity uint64) (*truth, bool) {
	if entity < sw.cfg.PlayerBase {
		return nil, false
	}
	i := (entity - sw.cfg.PlayerBase) >> pidSessionBits
	if i >= uint64(len(sw.truths)) {
		return nil, false
	}
	t := &sw.truths[i]
	if t.session.Load() != entity {
		return nil, false
	}
	return t, true
}

// logErr logs the first errors of a run at warning level, then one in
// a thousand: a dead server must not flood the terminal.
func (sw *Swarm) logErr(what string, err error) {
	if err == nil {
		return
	}
	n := sw.logged.Add(1)
	if n <= 10 || n%1000 == 0 {
		sw.log.Warn("bot "+what, "err", err, "count", n)
	}
}
