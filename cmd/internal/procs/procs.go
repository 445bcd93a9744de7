package procs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Policy is when the sizer changes the number of Ps.
type Policy struct {
	// Max is the most Ps it sets (at least 1): the runtime's default at
	// start, which already counts the machine's cores and a container's
	// CPU limit.
	Max int
	// Raise: when the process used more than Raise × n cores in two
	// readings in a row with n Ps, n doubles (up to Max) — a load that
	// fills its Ps delays every goroutine behind it (the tick, the
	// sends). Two, not one: a node on one P at 0.65 cores of mean load
	// read 0.87 in single quarter-seconds (the measured trace in
	// testdata), and each such reading would have bounced it to two Ps.
	Raise float64
	// Lower: when the process used less than Lower × (n − 1) cores on
	// average over a Hold, n goes down by one. The mean, not every
	// reading: the readings of a steady load scatter by ±0.15 cores. And
	// with fewer Ps the same load costs less CPU (fewer thread wake-ups):
	// 0.75 cores on two Ps was 0.65 on one, so a bound a little under
	// Raise does not raise again.
	Lower float64
	// Hold is how long the load must stay low before each step down. A
	// raise within the hold after a step down (a bounce) doubles the next
	// hold, up to MaxBounceHolds × Hold; a step down that stands its hold
	// sets it back.
	Hold time.Duration
	// LagRaise: when a goroutine woken by a timer waited longer than this
	// for a P on average over one reading, n doubles at once, whatever the
	// CPU says: the Ps are held but not running (their threads wait for a
	// CPU the machine gives to other processes), and every round and tick
	// of the node waits as long. No step down while the lag is above half
	// of it: a reading that lagged so starts the hold again.
	LagRaise time.Duration
}

// MaxBounceHolds bounds the back-off after bounces: a hold is at most
// this many times Policy.Hold.
const MaxBounceHolds = 16

// DefaultPolicy is the sizer's policy for a machine whose runtime default
// is max Ps.
func DefaultPolicy(max int) Policy {
	return Policy{Max: max, Raise: 0.85, Lower: 0.8, Hold: 10 * time.Second, LagRaise: 5 * time.Millisecond}
}

// Validate reports a policy the sizer cannot follow.
func (p Policy) Validate() error {
	switch {
	case p.Max < 1:
		return fmt.Errorf("procs: Max %d, want at least 1", p.Max)
	case !(p.Raise > 0 && p.Raise <= 1):
		return fmt.Errorf("procs: Raise %v outside (0, 1]", p.Raise)
	case !(p.Lower > 0 && p.Lower < p.Raise):
		return fmt.Errorf("procs: Lower %v outside (0, Raise)", p.Lower)
	case p.Hold < 0:
		return fmt.Errorf("procs: Hold %v is negative", p.Hold)
	case p.LagRaise <= 0:
		return fmt.Errorf("procs: LagRaise %v, want more than 0", p.LagRaise)
	}
	return nil
}

// Sizer decides the number of Ps from samples of the process's CPU time.
// It is pure: the caller passes the clock and the CPU readings in.
type Sizer struct {
	p       Policy
	n       int
	primed  bool
	lastAt  time.Duration
	lastCPU time.Duration
	over    bool // the last reading used more than Raise × n
	// The hold under way: since holdAt, when the process had used holdCPU.
	holding         bool
	holdAt, holdCPU time.Duration
	hold            time.Duration // the hold now: Policy.Hold, doubled by bounces
	// lowered: a step down at loweredAt whose hold has not passed; a raise
	// before then is a bounce.
	lowered   bool
	loweredAt time.Duration
	onLag     bool // the last raise was the lag's
}

// NewSizer starts a sizer at n Ps (clamped to 1..Max).
func NewSizer(p Policy, n int) (*Sizer, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &Sizer{p: p, n: min(max(n, 1), p.Max), hold: p.Hold}, nil
}

// N is the number of Ps the sizer holds now.
func (s *Sizer) N() int { return s.n }

// Hold is the hold the next step down waits for: Policy.Hold, or more
// after bounces.
func (s *Sizer) Hold() time.Duration { return s.hold }

// RaisedOnLag is whether the last raise was the probe's lag's (a CPU
// that stayed under Raise may have been over it too).
func (s *Sizer) RaisedOnLag() bool { return s.onLag }

// Reading is one sample of the process: at At it had used CPU of CPU
// time in all, and the probe's timer wakes since the last reading waited
// Lag for a P on average.
type Reading struct {
	At, CPU, Lag time.Duration
}

// Observe takes a reading and returns the Ps the sizer wants from now on.
// The first reading only sets the baseline; a reading no later than the
// last, or with less CPU than the last (a clock that went back), is taken
// as a baseline too, and a hold under way starts again.
func (s *Sizer) Observe(r Reading) int {
	now, cpu := r.At, r.CPU
	if !s.primed || now <= s.lastAt || cpu < s.lastCPU {
		s.primed, s.lastAt, s.lastCPU = true, now, cpu
		s.over, s.holding = false, false
		return s.n
	}
	used := float64(cpu-s.lastCPU) / float64(now-s.lastAt) // cores
	from, fromCPU := s.lastAt, s.lastCPU                   // the reading covers [from, now]
	s.lastAt, s.lastCPU = now, cpu
	if s.lowered && now-s.loweredAt >= s.hold { // the last step down stood its hold
		s.lowered, s.hold = false, s.p.Hold
	}
	high := used > s.p.Raise*float64(s.n)
	if lag := r.Lag > s.p.LagRaise; s.n < s.p.Max && (lag || high && s.over) {
		s.n = min(2*s.n, s.p.Max)
		s.onLag = lag
		s.over, s.holding = false, false
		if s.lowered { // within the hold after a step down: back off
			s.hold = min(2*s.hold, MaxBounceHolds*s.p.Hold)
			s.lowered = false
		}
		return s.n
	}
	s.over = high
	if s.n == 1 || 2*r.Lag > s.p.LagRaise {
		s.holding = false
		return s.n
	}
	if !s.holding {
		s.holding, s.holdAt, s.holdCPU = true, from, fromCPU
	}
	if now-s.holdAt < s.hold {
		return s.n
	}
	if mean := float64(cpu-s.holdCPU) / float64(now-s.holdAt); mean < s.p.Lower*float64(s.n-1) {
		s.n--
		s.lowered, s.loweredAt = true, now
	}
	// The next decision, down or not, takes a hold of its own.
	s.holdAt, s.holdCPU = now, cpu
	return s.n
}

// Setting is how a command sizes its Ps: Auto (the sizer) or a fixed N.
type Setting struct {
	Auto bool
	N    int // when not Auto: the Ps to set (≥ 1)
}

// ParseSetting reads a --gomaxprocs value: "auto" or a positive count.
func ParseSetting(s string) (Setting, error) {
	if strings.EqualFold(s, "auto") {
		return Setting{Auto: true}, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return Setting{}, fmt.Errorf("gomaxprocs %q: want auto or a count of at least 1", s)
	}
	return Setting{N: n}, nil
}

// Stats counts the sizer's changes and its probe's wakes.
type Stats struct {
	Raises, Lowers atomic.Uint64
	// LagRaises: of the raises, those the probe's lag made.
	LagRaises atomic.Uint64
	// Ps is the number the sizer set last (0 before it set any).
	Ps atomic.Int64
	// Wakes and LagNanos: the probe's timer wakes and their lateness in
	// all (mean lag = LagNanos / Wakes).
	Wakes, LagNanos atomic.Uint64
}

// Config is Run's: the sampling and how it reads and sets the process.
type Config struct {
	Interval time.Duration // between readings (0: 250 ms)
	Policy   *Policy       // nil: DefaultPolicy(the runtime's default)
	// CPU reads the process's CPU time so far (nil: getrusage); Set sets
	// the Ps (nil: runtime.GOMAXPROCS). Tests pass their own.
	CPU func() (time.Duration, error)
	Set func(n int)
	// Probe is the period of the lag probe, a goroutine that sleeps and
	// measures how late it wakes (0: 5 ms; below 0: no probe, no lag).
	Probe time.Duration
	Log   *slog.Logger
	Stats *Stats
}

// probe sleeps every period until ctx ends, adding each wake's lateness
// to st: a timer's goroutine made ready waits for a P like any other.
func probe(ctx context.Context, period time.Duration, st *Stats) {
	t := time.NewTimer(period)
	defer t.Stop()
	for {
		at := time.Now()
		t.Reset(period)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st.LagNanos.Add(uint64(max(time.Since(at)-period, 0)))
		st.Wakes.Add(1)
	}
}

// ErrNoCPUClock: the platform gives no CPU time of the process, so the
// sizer cannot run.
var ErrNoCPUClock = errors.New("procs: no process CPU clock on this platform")

// Apply sets a fixed Setting at once and returns false, or returns true
// when the setting is Auto and Run should be started. The environment's
// GOMAXPROCS, when set (getenv), wins over both: Apply leaves the runtime
// as it is and returns false.
func Apply(set Setting, getenv func(string) string, log *slog.Logger) bool {
	if getenv("GOMAXPROCS") != "" {
		if log != nil {
			log.Info("GOMAXPROCS set in the environment: not sized", "gomaxprocs", runtime.GOMAXPROCS(0))
		}
		return false
	}
	if !set.Auto {
		runtime.GOMAXPROCS(set.N)
		return false
	}
	return true
}

// Run samples the process every Interval and sets the Ps the sizer wants,
// until ctx ends. It starts from the runtime's current GOMAXPROCS (all of
// the default: a node starts with its joins' burst), returns at once when
// the policy's Max is 1, and returns ErrNoCPUClock where the process's CPU
// time cannot be read.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Interval <= 0 {
		cfg.Interval = 250 * time.Millisecond
	}
	if cfg.CPU == nil {
		cfg.CPU = ProcessCPU
	}
	if cfg.Set == nil {
		cfg.Set = func(n int) { runtime.GOMAXPROCS(n) }
	}
	start := runtime.GOMAXPROCS(0)
	pol := DefaultPolicy(start)
	if cfg.Policy != nil {
		pol = *cfg.Policy
	}
	s, err := NewSizer(pol, start)
	if err != nil {
		return err
	}
	if pol.Max == 1 { // one P is all there is: nothing to size, no probe to pay for
		return nil
	}
	if _, err := cfg.CPU(); err != nil {
		return err
	}
	if cfg.Stats == nil {
		cfg.Stats = &Stats{}
	}
	st := cfg.Stats
	if cfg.Probe == 0 {
		cfg.Probe = 5 * time.Millisecond
	}
	if cfg.Probe > 0 {
		pctx, stop := context.WithCancel(ctx)
		defer stop()
		go probe(pctx, cfg.Probe, st)
	}
	mono := time.Now()
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	var wakes, lag uint64
	for {
		cpu, err := cfg.CPU()
		if err != nil {
			return err
		}
		r := Reading{At: time.Since(mono), CPU: cpu}
		w, l := st.Wakes.Load(), st.LagNanos.Load()
		if w > wakes {
			r.Lag = time.Duration((l - lag) / (w - wakes))
		}
		wakes, lag = w, l
		was := s.N()
		if n := s.Observe(r); n != was {
			cfg.Set(n)
			st.Ps.Store(int64(n))
			if n > was {
				st.Raises.Add(1)
				if s.RaisedOnLag() {
					st.LagRaises.Add(1)
				}
			} else {
				st.Lowers.Add(1)
			}
			if cfg.Log != nil {
				cfg.Log.Debug("gomaxprocs sized", "from", was, "to", n, "lag", r.Lag, "on_lag", n > was && s.RaisedOnLag())
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
