package main

import (
	"bufio"
	"context"
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ghostwire/ghostwire/actors/tokenkey"
	"github.com/ghostwire/ghostwire/replication/netsim"
)

const (
	libGhostwire = "ghostwire"
	libKCP       = "kcp-go"
	libKCPAES    = "kcp-go+aes"
	libENet      = "enet"
)

// config is one invocation: the workload, the two phases and their bounds.
type config struct {
	libs      []string // load phase
	lossyLibs []string // latency phase

	clients  int
	warmup   time.Duration
	duration time.Duration
	drain    time.Duration

	lossyClients  int
	lossyWarmup   time.Duration
	lossyDuration time.Duration
	lossyDrain    time.Duration
	loss          float64
	rtt           time.Duration

	inputSize, inputHz int
	stateSize, stateHz int

	connectTimeout time.Duration
	log            io.Writer
}

func defaultConfig() config {
	return config{
		libs:      []string{libGhostwire, libKCP, libKCPAES, libENet},
		lossyLibs: []string{libGhostwire, libKCP, libENet},
		clients:   1000, warmup: 3 * time.Second, duration: 15 * time.Second, drain: 10 * time.Second,
		lossyClients: 100, lossyWarmup: 5 * time.Second, lossyDuration: 20 * time.Second, lossyDrain: 10 * time.Second,
		loss: 0.10, rtt: 100 * time.Millisecond,
		inputSize: 40, inputHz: 30, stateSize: 300, stateHz: 20,
		connectTimeout: 60 * time.Second,
		log:            os.Stderr,
	}
}

// shortConfig is the smoke run: every path once, a few seconds each.
func shortConfig() config {
	c := defaultConfig()
	c.clients, c.warmup, c.duration = 50, time.Second, 3*time.Second
	c.lossyClients, c.lossyWarmup, c.lossyDuration = 10, 2*time.Second, 5*time.Second
	return c
}

// result is one library in one phase.
type result struct {
	Lib      string        `json:"lib"`
	Clients  int           `json:"clients"`
	Window   time.Duration `json:"window_ns"`
	Impaired bool          `json:"impaired"`
	Err      string        `json:"error,omitempty"`

	ServerCPU time.Duration  `json:"server_cpu_ns"`
	DriverCPU time.Duration  `json:"driver_cpu_ns"` // clients (and relay) process
	Traffic   trafficSnap    `json:"traffic"`       // client sockets, UDP payload
	Up        dirStats       `json:"up"`            // inputs, client → server
	Down      dirStats       `json:"down"`          // state, server → client
	Extra     map[string]any `json:"server_extra,omitempty"`
	RelayDrop [2]uint64      `json:"relay_dropped,omitempty"` // up, down
	RelaySent [2]uint64      `json:"relay_offered,omitempty"`
	Drain     time.Duration  `json:"drain_ns"` // window end to the last delivery (or the bound)
	Load      string         `json:"loadavg"`  // /proc/loadavg after the window: the machine is shared
}

// loadAvg is the machine's 1/5/15-minute load average.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// clientSeconds is the measured load: clients × window.
func (r result) clientSeconds() float64 { return float64(r.Clients) * r.Window.Seconds() }

func newClients(lib string, o clientOpts) (clientSet, error) {
	switch lib {
	case libGhostwire:
		return newGhostwireClients(o)
	case libKCP, libKCPAES:
		o.crypt = lib == libKCPAES
		return newKCPClients(o)
	case libENet:
		return newENetClients(o)
	}
	return nil, fmt.Errorf("unknown library %q", lib)
}

// serverProc is a server process started from this executable.
type serverProc struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *json.Decoder
	addr netip.AddrPort
}

func startServerProc(lib string, cfg config, keyFile string, clients int) (*serverProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	life := cfg.connectTimeout + cfg.warmup + cfg.duration + cfg.drain + cfg.lossyWarmup + cfg.lossyDuration + cfg.lossyDrain + time.Minute
	cmd := exec.Command(exe, "serve", "-lib", lib, "-key", keyFile, "-clients", strconv.Itoa(clients),
		"-state-size", strconv.Itoa(cfg.stateSize), "-state-hz", strconv.Itoa(cfg.stateHz), "-life", life.String())
	cmd.Env = append(os.Environ(), serveEnv+"=1")
	cmd.Stderr = cfg.log
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &serverProc{cmd: cmd, in: in, out: json.NewDecoder(bufio.NewReader(out))}
	var hello struct {
		Ready bool   `json:"ready"`
		Addr  string `json:"addr"`
		Error string `json:"error"`
	}
	if err := p.recv(&hello, 30*time.Second); err != nil || !hello.Ready {
		p.kill()
		if hello.Error != "" {
			return nil, errors.New(hello.Error)
		}
		return nil, fmt.Errorf("server did not start: %v", err)
	}
	if p.addr, err = netip.ParseAddrPort(hello.Addr); err != nil {
		p.kill()
		return nil, err
	}
	return p, nil
}

// recv decodes the next reply, giving up (and killing the process) after d.
func (p *serverProc) recv(v any, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- p.out.Decode(v) }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		p.kill()
		return fmt.Errorf("server reply timed out after %v", d)
	}
}

func (p *serverProc) ask(cmd string, v any) error {
	if _, err := fmt.Fprintln(p.in, cmd); err != nil {
		return err
	}
	return p.recv(v, 30*time.Second)
}

func (p *serverProc) kill() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

// stop asks the server to quit and waits a bounded time for it.
func (p *serverProc) stop() {
	var ok map[string]any
	_ = p.ask("quit", &ok)
	_ = p.in.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// runOne measures one library: server process up, clients connected
// (through the relay when impaired), warm-up, the window, the drain.
func runOne(lib string, cfg config, keyFile string, impaired bool) (res result) {
	n, warmup, dur, drain := cfg.clients, cfg.warmup, cfg.duration, cfg.drain
	if impaired {
		n, warmup, dur, drain = cfg.lossyClients, cfg.lossyWarmup, cfg.lossyDuration, cfg.lossyDrain
	}
	res = result{Lib: lib, Clients: n, Window: dur, Impaired: impaired}
	fail := func(err error) result { res.Err = err.Error(); return res }

	if lib == libENet && !enetAvailable {
		return fail(errNoENet)
	}
	srv, err := startServerProc(lib, cfg, keyFile, n)
	if err != nil {
		return fail(fmt.Errorf("server: %w", err))
	}
	defer srv.stop()
	via := srv.addr
	var rl *relay
	if impaired {
		one := cfg.rtt / 2
		rl, err = startRelay(srv.addr, netsim.Config{Loss: cfg.loss, Latency: one, MaxInFlight: 1 << 16, Seed: 1})
		if err != nil {
			return fail(fmt.Errorf("relay: %w", err))
		}
		defer rl.close()
		via = rl.addr()
	}
	cs, err := newClients(lib, clientOpts{keyFile: keyFile, inputSize: cfg.inputSize, inputHz: cfg.inputHz})
	if err != nil {
		return fail(err)
	}
	defer cs.close()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.connectTimeout)
	t0 := time.Now()
	err = cs.dial(ctx, n, srv.addr, via)
	cancel()
	if err != nil {
		return fail(fmt.Errorf("connect: %w", err))
	}
	fmt.Fprintf(cfg.log, "  %-11s %4d clients connected in %v%s\n", lib, n, time.Since(t0).Round(time.Millisecond), map[bool]string{true: " (through the relay)"}[impaired])
	time.Sleep(warmup)

	start := time.Now().Add(200 * time.Millisecond)
	end := start.Add(dur)
	var ok map[string]any
	if err := srv.ask(fmt.Sprintf("window %d %d", start.UnixNano(), end.UnixNano()), &ok); err != nil {
		return fail(fmt.Errorf("server window: %w", err))
	}
	cs.setWindow(start.UnixNano(), end.UnixNano())
	var cpuA, cpuB atomic.Int64
	time.AfterFunc(time.Until(start), func() { cpuA.Store(int64(processCPU())) })
	time.AfterFunc(time.Until(end), func() { cpuB.Store(int64(processCPU())) })
	time.Sleep(time.Until(end) + time.Second)
	// The drain: wait until every message of the window has arrived (all of
	// them are reliable) and the counts hold still for one poll, at most
	// drain.
	var prev [4]uint64
	for deadline := time.Now().Add(drain); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		var c [2]uint64
		if err := srv.ask("counts", &c); err != nil {
			return fail(fmt.Errorf("server counts: %w", err))
		}
		downRecv, upSent := cs.counts()
		now := [4]uint64{c[0], upSent, downRecv, c[1]}
		if os.Getenv("PEERS_DEBUG") != "" {
			fmt.Fprintf(cfg.log, "  drain %v: up %d/%d down %d/%d\n", time.Since(end).Round(time.Millisecond), now[0], now[1], now[2], now[3])
		}
		if now[0] == now[1] && now[2] == now[3] && now == prev {
			break
		}
		prev = now
	}
	res.Drain = time.Since(end)
	res.Load = loadAvg()

	var rep serverReport
	if err := srv.ask("report", &rep); err != nil {
		return fail(fmt.Errorf("server report: %w", err))
	}
	res.ServerCPU = time.Duration(rep.CPU)
	res.DriverCPU = time.Duration(cpuB.Load() - cpuA.Load())
	res.Extra = rep.Extra
	res.Up = rep.Up
	res.Up.Sent = cs.upSent()
	res.Down = cs.down()
	res.Down.Sent = rep.DownSent
	res.Traffic = cs.windowTraffic()
	if rl != nil {
		up, down := rl.stats()
		res.RelaySent = [2]uint64{up.Sent, down.Sent}
		res.RelayDrop = [2]uint64{up.Dropped.Total(), down.Dropped.Total()}
	}
	return res
}

// run measures every library of both phases and returns the results.
func run(cfg config) ([]result, error) {
	dir, err := os.MkdirTemp("", "ghostwire-peers-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	key, err := tokenkey.Generate(crand.Reader)
	if err != nil {
		return nil, err
	}
	keyFile := filepath.Join(dir, "token.key")
	if err := tokenkey.Write(keyFile, key, true); err != nil {
		return nil, err
	}
	var out []result
	if len(cfg.libs) > 0 {
		fmt.Fprintf(cfg.log, "load: %d clients, %d Hz × %d B up, %d Hz × %d B down, all reliable-ordered, %v window after %v warm-up, loopback, no impairment\n",
			cfg.clients, cfg.inputHz, cfg.inputSize, cfg.stateHz, cfg.stateSize, cfg.duration, cfg.warmup)
	}
	for _, lib := range cfg.libs {
		r := runOne(lib, cfg, keyFile, false)
		logResult(cfg.log, r)
		out = append(out, r)
	}
	if len(cfg.lossyLibs) > 0 {
		fmt.Fprintf(cfg.log, "latency: %d clients through the relay, %.0f %% loss each way, %v RTT, %v window after %v warm-up\n",
			cfg.lossyClients, cfg.loss*100, cfg.rtt, cfg.lossyDuration, cfg.lossyWarmup)
	}
	for _, lib := range cfg.lossyLibs {
		r := runOne(lib, cfg, keyFile, true)
		logResult(cfg.log, r)
		out = append(out, r)
	}
	return out, nil
}

func logResult(w io.Writer, r result) {
	if r.Err != "" {
		fmt.Fprintf(w, "  %-11s not measured: %s\n", r.Lib, r.Err)
		return
	}
	fmt.Fprintf(w, "  %-11s server %.1f µs CPU/client-s, up %d/%d down %d/%d delivered (drain %v), p99 up %.1f ms down %.1f ms, load %s\n",
		r.Lib, r.cpuUS(), r.Up.Recv, r.Up.Sent, r.Down.Recv, r.Down.Sent, r.Drain.Round(10*time.Millisecond), r.Up.P99, r.Down.P99, r.Load)
	if !r.complete() {
		b, _ := json.Marshal(r.Extra)
		fmt.Fprintf(w, "  %-11s server counters: %s\n", "", b)
	}
}

// parseLibs reads a comma-separated library list ("" or "none": none).
func parseLibs(s string) ([]string, error) {
	if s == "" || s == "none" {
		return nil, nil
	}
	var out []string
	for _, l := range strings.Split(s, ",") {
		switch l = strings.TrimSpace(l); l {
		case libGhostwire, libKCP, libKCPAES, libENet:
			out = append(out, l)
		default:
			return nil, fmt.Errorf("unknown library %q (want %s, %s, %s, %s)", l, libGhostwire, libKCP, libKCPAES, libENet)
		}
	}
	return out, nil
}
