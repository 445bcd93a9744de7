package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one child process whose output goes to a log file (appended
// across restarts). Safe for concurrent use.
type proc struct {
	name, bin, logPath string
	args               []string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	state   *os.ProcessState
	offset  int64 // log size when the current run started
	meant   bool  // the driver signalled it: an exit is expected
	started time.Time
}

func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	st, _ := f.Stat()
	fmt.Fprintf(f, "=== chaos: start %s %s\n", p.name, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group: a Ctrl-C of the driver reaches the driver
	// only, which then stops the children in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.state, p.meant, p.started = cmd, done, nil, false, time.Now()
	if st != nil {
		p.offset = st.Size()
	}
	go func() {
		_ = cmd.Wait()
		f.Close()
		p.mu.Lock()
		p.state = cmd.ProcessState
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// signal sends sig to the running process; expectExit marks the exit that
// may follow as the driver's doing.
func (p *proc) signal(sig syscall.Signal, expectExit bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.state != nil {
		return fmt.Errorf("%s is not running", p.name)
	}
	if expectExit {
		p.meant = true
	}
	return p.cmd.Process.Signal(sig)
}

// wait waits up to d for the process to exit and says how it did.
func (p *proc) wait(d time.Duration) (string, bool) {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return "not started", true
	}
	select {
	case <-done:
	case <-time.After(d):
		return "", false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state.String(), true
}

// running says whether the current run is alive.
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && p.state == nil
}

// unexpectedExit reports an exit the driver did not ask for.
func (p *proc) unexpectedExit() (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == nil || p.meant {
		return "", false
	}
	return p.state.String(), true
}

// stop sends SIGTERM (after SIGCONT, in case it is stopped), waits up to
// grace, then SIGKILLs.
func (p *proc) stop(grace time.Duration) string {
	if !p.running() {
		return "not running"
	}
	_ = p.signal(syscall.SIGCONT, true)
	_ = p.signal(syscall.SIGTERM, true)
	if st, ok := p.wait(grace); ok {
		return st
	}
	_ = p.signal(syscall.SIGKILL, true)
	st, _ := p.wait(10 * time.Second)
	return st + " (SIGKILLed after " + grace.String() + ")"
}

// waitLog waits up to d for line to appear in the log since the current
// run started (or for the process to die).
func (p *proc) waitLog(ctx context.Context, line string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		off := p.offset
		p.mu.Unlock()
		if b, err := os.ReadFile(p.logPath); err == nil && int64(len(b)) > off && bytes.Contains(b[off:], []byte(line)) {
			return nil
		}
		if !p.running() {
			return fmt.Errorf("%s exited before %q (see %s)", p.name, line, p.logPath)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s: no %q within %v (see %s)", p.name, line, d, p.logPath)
}

// freePort picks a free loopback port of network (tcp or udp) below the
// kernel's ephemeral range. A node comes back on the ports it had (its
// clients and tokens name them), and while it is down the bots' new
// sockets and the nodes' NATS connections take ports from that range: a
// port the kernel handed out once (":0") can be handed out again, and in CI
// a bot's reconnect took a SIGTERMed node's UDP port before it restarted
// ("bind: address already in use"). Below the range the kernel gives no
// port away by itself. Another process could still take it before we use
// it; a node that cannot bind fails its start loudly.
func freePort(network string) (int, error) {
	lo := ephemeralLow()
	const floor = 10000 // clear of the well-known and registered ports in common use
	for try := 0; lo-floor > 1000 && try < 200; try++ {
		p := floor + rand.IntN(lo-floor)
		if portFree(network, p) {
			return p, nil
		}
	}
	// No room below the range (an unusual ip_local_port_range): the
	// kernel's choice, as before.
	return kernelPort(network)
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// ip_local_port_range; 32768, its default, where it cannot be read).
func ephemeralLow() int {
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 0 && n <= 65535 {
				return n
			}
		}
	}
	return 32768
}

// portFree reports whether loopback port p of network binds now.
func portFree(network string, p int) bool {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	if network == "udp" {
		c, err := net.ListenPacket("udp", addr)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// kernelPort is a loopback port of network the kernel picks (":0").
func kernelPort(network string) (int, error) {
	if network == "udp" {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).Port, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitTCP waits up to d until addr accepts connections.
func waitTCP(ctx context.Context, addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return errors.New("nothing accepts on " + addr + " within " + d.String())
}
