// Command peers runs one game-shaped workload through ghostwire's protocol
// stack and through the libraries a studio would otherwise pick — kcp-go and
// ENet — on this machine, and prints the numbers side by side with the ratios
// peer ÷ ghostwire. See docs/benchmarks.md ("Peers") for what is measured and
// how each library is configured.
//
//	go run -tags enet . [-short] [-clients 1000] [-json out.json]
//
// Two phases:
//
//   - load: N clients (default 1,000) on loopback, each sending a 40-byte
//     input 30 times a second while the server sends each a 300-byte state 20
//     times a second, every message reliable and ordered. Measured: the server
//     process's CPU per client-second and the client sockets' UDP bytes and
//     datagrams per client-second, each way.
//   - latency: fewer clients (default 100), same traffic, through a loopback
//     relay that drops 10 % of the datagrams each way and delays each by 50 ms
//     (100 ms RTT). Measured: the delivery latency of each message (send call
//     to delivery at the peer), p50/p99/p99.9/max, each way.
//
// The server runs in a child process (this executable, "serve"), so its CPU
// is its own; the clients and the relay run here.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		os.Exit(serveMain(os.Args[2:], os.Stdin, os.Stdout))
	}
	os.Exit(cliMain(os.Args[1:], os.Stdout))
}

func cliMain(args []string, stdout io.Writer) int {
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	short := fs.Bool("short", false, "smoke run: 50 clients for 3 s, 10 impaired clients for 5 s")
	libs := fs.String("libs", "ghostwire,kcp-go,kcp-go+aes,enet", "libraries of the load phase (none: skip)")
	lossyLibs := fs.String("lossy-libs", "ghostwire,kcp-go,enet", "libraries of the latency phase (none: skip)")
	jsonOut := fs.String("json", "", "also write the results as JSON to this file")
	d := defaultConfig()
	clients := fs.Int("clients", d.clients, "clients in the load phase")
	duration := fs.Duration("duration", d.duration, "load phase: measurement window")
	warmup := fs.Duration("warmup", d.warmup, "load phase: warm-up after connecting")
	lossyClients := fs.Int("lossy-clients", d.lossyClients, "clients in the latency phase")
	lossyDuration := fs.Duration("lossy-duration", d.lossyDuration, "latency phase: measurement window")
	loss := fs.Float64("loss", d.loss, "latency phase: loss probability each way")
	rtt := fs.Duration("rtt", d.rtt, "latency phase: round-trip time added by the relay")
	drain := fs.Duration("drain", d.drain, "both phases: most time to wait after the window for its last messages")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg := d
	if *short {
		cfg = shortConfig()
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["clients"] {
		cfg.clients = *clients
	}
	if set["duration"] {
		cfg.duration = *duration
	}
	if set["warmup"] {
		cfg.warmup = *warmup
	}
	if set["lossy-clients"] {
		cfg.lossyClients = *lossyClients
	}
	if set["lossy-duration"] {
		cfg.lossyDuration = *lossyDuration
	}
	if set["drain"] {
		cfg.drain, cfg.lossyDrain = *drain, *drain
	}
	cfg.loss, cfg.rtt = *loss, *rtt
	var err error
	if cfg.libs, err = parseLibs(*libs); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if cfg.lossyLibs, err = parseLibs(*lossyLibs); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if cfg.clients < 1 || cfg.clients > 4000 || cfg.lossyClients < 1 || cfg.lossyClients > 4000 {
		fmt.Fprintln(os.Stderr, "clients must be in [1, 4000]")
		return 2
	}
	begin := time.Now()
	res, err := run(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	writeReport(stdout, cfg, res)
	fmt.Fprintf(stdout, "\n(%s, %v)\n", commandLine(args), time.Since(begin).Round(time.Second))
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(map[string]any{"args": args, "results": res}, "", "  ")
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	rc := 0
	for _, r := range res {
		switch {
		case r.Err != "" && !(r.Lib == libENet && !enetAvailable):
			fmt.Fprintf(stdout, "%s (impaired: %v) did not run: %s\n", r.Lib, r.Impaired, r.Err)
			rc = 1
		case r.Err == "" && !r.complete():
			// Every message is reliable: a miss after the drain means the
			// machine could not carry the load (or a library gave up on a
			// peer). Its numbers are not comparable with the others.
			fmt.Fprintf(stdout, "%s (impaired: %v) incomplete: not every message arrived; load average %s (the machine is shared)\n", r.Lib, r.Impaired, r.Load)
			rc = 1
		}
	}
	return rc
}

func commandLine(args []string) string {
	s := "peers"
	for _, a := range args {
		s += " " + a
	}
	return s
}
