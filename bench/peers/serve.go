package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// serveEnv marks a process started as a bench server (the driver re-runs
// its own executable, so the test binary can serve too).
const serveEnv = "PEERS_SERVE"

// processCPU is this process's user + system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startServer(lib string, o serveOpts) (server, error) {
	switch lib {
	case libGhostwire:
		return startGhostwire(o)
	case libKCP, libKCPAES:
		o.crypt = lib == libKCPAES
		return startKCP(o)
	case libENet:
		return startENet(o)
	}
	return nil, fmt.Errorf("unknown library %q", lib)
}

// serveMain runs one library's server in this process and answers the
// driver on stdin/stdout, one line each way:
//
//	→ {"ready":true,"addr":"127.0.0.1:port"}     once listening
//	← window START END                            (ns, CLOCK_REALTIME)
//	← counts                                      → [up received, down sent] so far
//	← report                                      → serverReport as JSON
//	← quit                                        → {"ok":true}, then exit
//
// The process CPU is read at the window's edges. It exits by itself when
// stdin closes or after -life.
func serveMain(args []string, stdin io.Reader, stdout io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	lib := fs.String("lib", "", "library")
	life := fs.Duration("life", 10*time.Minute, "exit after this long whatever happens")
	var o serveOpts
	fs.StringVar(&o.keyFile, "key", "", "ghostwire connect-token key file")
	fs.IntVar(&o.clients, "clients", 1000, "most clients")
	fs.IntVar(&o.stateSize, "state-size", 300, "state message bytes")
	fs.IntVar(&o.stateHz, "state-hz", 20, "state messages per second per client")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	enc := json.NewEncoder(stdout)
	srv, err := startServer(*lib, o)
	if err != nil {
		enc.Encode(map[string]any{"error": err.Error()})
		return 1
	}
	kill := time.AfterFunc(*life, func() {
		fmt.Fprintf(os.Stderr, "peers serve %s: -life %v exceeded, exiting\n", *lib, *life)
		os.Exit(3)
	})
	defer kill.Stop()
	enc.Encode(map[string]any{"ready": true, "addr": srv.addr().String()})
	var cpuA, cpuB atomic.Int64
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "window":
			if len(f) != 3 {
				enc.Encode(map[string]any{"error": "window START END"})
				continue
			}
			a, _ := strconv.ParseInt(f[1], 10, 64)
			b, _ := strconv.ParseInt(f[2], 10, 64)
			srv.setWindow(a, b)
			time.AfterFunc(time.Until(time.Unix(0, a)), func() { cpuA.Store(int64(processCPU())) })
			time.AfterFunc(time.Until(time.Unix(0, b)), func() { cpuB.Store(int64(processCPU())) })
			enc.Encode(map[string]any{"ok": true})
		case "counts":
			a, b := srv.counts()
			enc.Encode([2]uint64{a, b})
		case "report":
			r := srv.report()
			r.CPU = cpuB.Load() - cpuA.Load()
			enc.Encode(r)
		case "quit":
			srv.close()
			enc.Encode(map[string]any{"ok": true})
			return 0
		default:
			enc.Encode(map[string]any{"error": "unknown command " + f[0]})
		}
	}
	srv.close()
	return 0
}
