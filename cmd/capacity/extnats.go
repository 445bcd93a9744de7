package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// natsServer is a standalone nats-server for --external-nats. Each step's
// node connects to a fresh one, as a cluster's nodes connect to theirs,
// so the node's heap and CPU hold no NATS server: what is left is the
// node's own, and the server's CPU and memory are read from its process.
type natsServer struct {
	cmd  *exec.Cmd
	url  string
	log  string
	proc procfs.Proc
	done chan struct{} // closed when the process has exited
	err  error         // its exit, once done is closed
}

// natsReady bounds a nats-server's start: JetStream over an empty store
// listens within a second here.
const natsReady = 30 * time.Second

// startNATS starts bin with JetStream on a free loopback port, its store
// and log in dir, and returns once it accepts connections.
func startNATS(ctx context.Context, bin, dir string) (*natsServer, error) {
	port, err := freeTCPPort()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	s := &natsServer{url: fmt.Sprintf("nats://127.0.0.1:%d", port), log: filepath.Join(dir, "nats.log"), done: make(chan struct{})}
	logf, err := os.Create(s.log)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child holds its own descriptor
	s.cmd = exec.Command(bin, "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", filepath.Join(dir, "store"))
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("nats-server %s: %w", bin, err)
	}
	go func() { s.err = s.cmd.Wait(); close(s.done) }()
	if s.proc, err = procfs.NewProc(s.cmd.Process.Pid); err != nil {
		s.stop()
		return nil, fmt.Errorf("nats-server: its /proc entry: %w", err)
	}
	deadline := time.Now().Add(natsReady)
	for {
		c, err := net.DialTimeout("tcp", s.url[len("nats://"):], time.Second)
		if err == nil {
			c.Close()
			return s, nil
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("nats-server exited before it listened (%v); its log: %s", s.err, s.log)
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("nats-server not listening on %s within %v; its log: %s", s.url, natsReady, s.log)
		}
	}
}

// usage is the server's CPU time so far (user and system) and its
// resident memory.
func (s *natsServer) usage() (time.Duration, uint64, error) {
	st, err := s.proc.Stat()
	if err != nil {
		return 0, 0, err
	}
	return time.Duration(st.CPUTime() * float64(time.Second)), uint64(st.ResidentMemory()), nil
}

// stop ends the server (SIGTERM: it flushes its store; SIGKILL after 10 s)
// and waits for it.
func (s *natsServer) stop() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// freeTCPPort is a loopback port free a moment ago (the server binds it
// next: another process taking it between is the only race, and shows as
// the server's start error).
func freeTCPPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// buildNATSServer builds nats-server at go.mod's version into dir (run from
// the module root, as the botswarm build).
func buildNATSServer(ctx context.Context, dir string, out io.Writer) (string, error) {
	bin := filepath.Join(dir, "nats-server")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/nats-io/nats-server/v2")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build github.com/nats-io/nats-server/v2 (run from the module root, or give --nats-server): %w", err)
	}
	return bin, nil
}

// natsShare fills st's NATS-server fields from two usages w seconds apart
// (the window) and the idle one.
func natsShare(st *Step, idleRSS uint64, cpu0, cpu1 time.Duration, rss1 uint64, w float64) {
	st.ExternalNATS = true
	if st.Connected <= 0 || w <= 0 {
		return
	}
	st.NATSServerCPUMs = 1000 * (cpu1 - cpu0).Seconds() / w / float64(st.Connected)
	if rss1 > idleRSS {
		st.NATSServerRSSPerPlayerB = float64(rss1-idleRSS) / float64(st.Connected)
	}
}

var errNATSServerFlag = errors.New("--nats-server: needs --external-nats (without it the node embeds its NATS server)")
