package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// asZoned makes the test binary run zoned's main when a signal test starts
// it as a child: the process gets real signals, not a cancelled context.
const asZoned = "GHOSTWIRE_TEST_RUN_ZONED"

func TestMain(m *testing.M) {
	if os.Getenv(asZoned) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, func(k string) string {
			if k == asZoned {
				return ""
			}
			return os.Getenv(k)
		}))
	}
	os.Exit(m.Run())
}

// TestSignalsAreAGracefulStop: SIGINT, SIGTERM and SIGHUP each stop a
// running zoned (a real process) the graceful way — "shutting down", then
// "stopped", exit 0. SIGHUP's default would end it at once with neither.
func TestSignalsAreAGracefulStop(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], startArgs(t, "127.0.0.1:0")...)
			cmd.Env = append(os.Environ(), asZoned+"=1")
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			lines := make(chan string, 64)
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					lines <- sc.Text()
				}
				_, _ = io.Copy(io.Discard, stderr)
			}()
			var log strings.Builder
			wait := func(what string, d time.Duration) bool {
				deadline := time.After(d)
				for {
					select {
					case l, ok := <-lines:
						if !ok {
							return false
						}
						log.WriteString(l + "\n")
						if strings.Contains(l, what) {
							return true
						}
					case <-deadline:
						return false
					}
				}
			}
			if !wait("zoned ready", 60*time.Second) {
				t.Fatalf("zoned not ready within 60s:\n%s", log.String())
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if !wait("shutting down (signal received", 30*time.Second) || !wait(`msg=stopped`, 30*time.Second) {
				t.Fatalf("%v: no graceful stop in the log:\n%s", sig, log.String())
			}
			for range lines { // to EOF: the process has closed its stderr
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("%v: zoned exited with %v, want 0\n%s", sig, err, log.String())
			}
		})
	}
}
