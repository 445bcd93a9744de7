// Command botswarm is ghostwire's load test: a swarm of bots that speak the
// real protocol (replication/session over real UDP) to a zone server, move
// by a scenario, suffer a simulated network (replication/netsim), check
// correctness invariants as they play — every move acknowledged exactly once
// and in order, echoed events intact and in order, ghosts where the other
// bots really are, handoff hitches — and report: a live progress line, a
// summary table, a JSON report, a self-contained HTML report, and an SLO gate
// for CI.
//
//	go run ./cmd/zoned &
//	go run ./cmd/botswarm --bots 500 --duration 1m --loss 2% --html report.html \
//	    --slo 'rtt_p99<150ms,loss<5%,lost_moves=0,view_err_p99<0.5m'
//
// See docs/operations.md, "Load testing with botswarm".
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/metrics"
	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/report"
	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/scenario"
	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/scrape"
	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/swarm"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// Exit statuses.
const (
	exitOK    = 0
	exitGate  = 1 // an SLO target missed or an invariant violated
	exitUsage = 2 // bad flags or setup
)

// run is main without the process: tests call it directly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	o, fs, err := parseArgs(args, stderr)
	if errors.Is(err, errHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "botswarm: %v\n(see botswarm --help)\n", err)
		return exitUsage
	}
	p, err := buildPlan(o, fs, getenv)
	if err != nil {
		fmt.Fprintf(stderr, "botswarm: %v\n", err)
		return exitUsage
	}
	level := slog.LevelError
	if o.verbose {
		level = slog.LevelWarn
	}
	p.cfg.Log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if !o.quiet {
		p.cfg.OnSample = func(pt metrics.Point, c metrics.Counters) {
			fmt.Fprintln(stderr, report.Progress(pt, c))
		}
	}
	sw, err := swarm.New(p.cfg)
	if err != nil {
		fmt.Fprintf(stderr, "botswarm: %v\n", err)
		return exitUsage
	}
	if !o.quiet {
		fmt.Fprintf(stderr, "botswarm: %d bots (%d observing ghosts) → %v, %s scenario, %v, %d worker(s), %s sockets, key from %s\n",
			p.cfg.Bots, sw.Observers(), serverList(p.cfg.Servers), o.scenario, o.duration, sw.Workers(), sw.Transport(), p.keyFrom)
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "botswarm: --cpuprofile: %v\n", err)
			return exitUsage
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "botswarm: --cpuprofile: %v\n", err)
			return exitUsage
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	var scr *scrape.Scraper
	scrDone := make(chan struct{})
	scrCtx, stopScrape := context.WithCancel(context.Background())
	if o.metricsURL != "" {
		scr = scrape.New(o.metricsURL, time.Now())
		go func() {
			defer close(scrDone)
			scr.Run(scrCtx, time.Second)
		}()
	} else {
		close(scrDone)
	}
	col := sw.Run(ctx)
	stopScrape()
	<-scrDone
	r := metrics.Build(col, p.config(sw.Transport(), sw.Workers()), p.metricsOptions())
	r.Self.Transport, r.Self.Workers, r.Self.Observers = sw.Transport(), sw.Workers(), sw.Observers()
	if scr != nil {
		ps, fails, err := scr.Series()
		r.SetServer(ps)
		if fails > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("--metrics-url: %d of %d scrapes failed (last: %v)", fails, fails+len(ps), err))
		}
	}
	r.Notes = append(r.Notes, notes(r, p)...)
	passed := r.Gate(o.slo, p.spec)

	status := exitOK
	if err := report.WriteSummary(stdout, r); err != nil {
		fmt.Fprintf(stderr, "botswarm: summary: %v\n", err)
	}
	if o.report != "" {
		if err := r.WriteJSONFile(o.report); err != nil {
			fmt.Fprintf(stderr, "botswarm: %v\n", err)
			status = exitUsage
		}
	}
	if o.html != "" {
		if err := report.WriteHTMLFile(o.html, r); err != nil {
			fmt.Fprintf(stderr, "botswarm: %v\n", err)
			status = exitUsage
		}
	}
	if !passed {
		var names []string
		for _, x := range r.SLO.Results {
			if !x.OK {
				names = append(names, x.Text)
			}
		}
		fmt.Fprintf(stdout, "SLO FAILED: %s\n", strings.Join(names, "; "))
		status = exitGate
	}
	if !o.allowViolations {
		var broken []string
		for _, inv := range r.Invariants {
			if inv.Checked && !inv.OK {
				broken = append(broken, inv.Name+": "+inv.Detail)
			}
		}
		if len(broken) > 0 {
			fmt.Fprintf(stdout, "INVARIANT VIOLATED: %s\n", strings.Join(broken, "; "))
			status = max(status, exitGate)
			if status == exitUsage {
				status = exitUsage
			}
		}
	}
	return status
}

// notes explain what the numbers cannot say on their own.
func notes(r *metrics.Report, p plan) []string {
	var n []string
	t := r.Totals
	if t.ViewByTime > 0 {
		n = append(n, fmt.Sprintf("view error: %d of %d samples were judged by server time (the server's player ghosts do not carry the move sequence in Extra[0..1]), so they include up to one server tick of motion", t.ViewByTime, t.ViewSamples))
	}
	if t.EventsSent > 0 && t.EventsEchoed == 0 {
		n = append(n, "events: the server echoed no lane-0 event; the event invariant could not be checked")
	}
	if p.cfg.Scenario.Kind == scenario.Teleport {
		n = append(n, fmt.Sprintf("teleport: %d jumps requested as lane-1 events (\"GWtp\" x z); %d corrections seen — a server without teleport support ignores them", t.Teleports, t.Corrections))
	}
	if t.SessionsUnplaced > 0 {
		n = append(n, fmt.Sprintf("sessions: %d were accepted by the gateway but never placed in a zone — no state from the server in %v or more: the server refused the player's join or its restore from the player record (zoned's log: \"join refused\", \"player record moved on since the restore read it\"); their %d moves count as unplaced, not unacked", t.SessionsUnplaced, swarm.UnplacedAfter, t.MovesUnplaced))
	}
	if t.Connects == 0 {
		n = append(n, "no bot connected: is the server running, and do --key-file and --protocol-id match it?")
	}
	if float64(r.Metrics["cpu_per_bot"]) > 0 {
		n = append(n, fmt.Sprintf("botswarm used %.3g millicores per connected bot on average (process CPU, includes an in-process server if any)", 1000*float64(r.Metrics["cpu_per_bot"])))
	}
	return n
}
