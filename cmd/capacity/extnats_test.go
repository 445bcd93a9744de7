package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

var (
	natsBinOnce sync.Once
	natsBin     string
	natsBinErr  error
)

// testNATSServer builds nats-server once for the package's tests (the
// module's own version, as --external-nats does).
func testNATSServer(t *testing.T) string {
	t.Helper()
	natsBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "capacity-nats-")
		if err != nil {
			natsBinErr = err
			return
		}
		var out bytes.Buffer
		natsBin, natsBinErr = buildNATSServer(context.Background(), dir, &out)
		if natsBinErr != nil {
			natsBinErr = errors.Join(natsBinErr, errors.New(out.String()))
		}
	})
	if natsBinErr != nil {
		t.Fatal(natsBinErr)
	}
	return natsBin
}

// TestStandaloneNATSServer: startNATS returns a server that takes
// JetStream KV writes into its own store, reads its process's CPU and
// memory, and stop ends the process (its port closed).
func TestStandaloneNATSServer(t *testing.T) {
	bin := testNATSServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	s, err := startNATS(ctx, bin, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	nc, err := nats.Connect(s.url, nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "probe"})
	if err != nil {
		t.Fatal(err)
	}
	cpu0, _, err := s.usage()
	if err != nil {
		t.Fatal(err)
	}
	// Writes until the server's CPU time has moved (the kernel counts it
	// in ticks of 10 ms): bounded by the test's minute.
	cpu, rss := cpu0, uint64(0)
	for i := 0; cpu <= cpu0; i++ {
		for j := range 200 {
			if _, err := kv.Put(ctx, "k", []byte{byte(i), byte(j)}); err != nil {
				t.Fatalf("after %d rounds of writes the server's CPU still reads %v: %v", i, cpu, err)
			}
		}
		if cpu, rss, err = s.usage(); err != nil {
			t.Fatal(err)
		}
	}
	nc.Close()
	if _, err := os.Stat(filepath.Join(dir, "store", "jetstream")); err != nil {
		t.Errorf("the server's store is not in its directory: %v", err)
	}
	// A JetStream server holds megabytes resident.
	if rss < 1<<20 {
		t.Errorf("usage: RSS %d B: want it read from the server's process", rss)
	}
	s.stop()
	select {
	case <-s.done:
	default:
		t.Fatal("stop returned with the server still running")
	}
	if c, err := net.DialTimeout("tcp", strings.TrimPrefix(s.url, "nats://"), time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after stop", s.url)
	}
}

// TestStandaloneNATSServerErrors: a binary that is not a server, or one
// that exits at once, is a clear error, not a hang.
func TestStandaloneNATSServerErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := startNATS(ctx, filepath.Join(t.TempDir(), "no-such-server"), t.TempDir()); err == nil {
		t.Error("a missing binary started")
	}
	f, err := exec.LookPath("false")
	if err != nil {
		t.Fatal(err)
	}
	_, err = startNATS(ctx, f, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "exited before it listened") {
		t.Errorf("a binary that exits at once: %v, want \"exited before it listened\"", err)
	}
}

// TestNATSServerFlagNeedsExternal: --nats-server alone is refused (the
// node would embed its server and the binary go unused).
func TestNATSServerFlagNeedsExternal(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--nats-server", "/bin/true"}, &out, &out); !errors.Is(err, errNATSServerFlag) {
		t.Errorf("run --nats-server alone = %v, want %v", err, errNATSServerFlag)
	}
}

// TestMeasureOnExternalNATS: one short step with --external-nats runs
// the node on the standalone server (its client's URL is the server's),
// connects every bot, and reports the server's share beside the node's.
func TestMeasureOnExternalNATS(t *testing.T) {
	natsBin := testNATSServer(t)
	tmp := t.TempDir()
	swarm := filepath.Join(tmp, "botswarm")
	if out, err := exec.Command("go", "build", "-o", swarm, "github.com/ghostwire/ghostwire/cmd/botswarm").CombinedOutput(); err != nil {
		t.Fatalf("go build botswarm: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var errs bytes.Buffer
	o, err := parse([]string{"--players", "10", "--warmup", "0s", "--window", "2s", "--host-probe", "0",
		"--gomaxprocs", "2", "--external-nats", "--nats-server", natsBin, "--botswarm", swarm}, &errs)
	if err != nil {
		t.Fatal(err)
	}
	st, err := measure(ctx, o, swarm, tmp, 10, &errs)
	if err != nil {
		t.Fatalf("%v\n%s", err, errs.String())
	}
	if st.serverNATSURL == "" || st.nodeNATSURL != st.serverNATSURL {
		t.Errorf("the node's NATS is %s, the standalone server %s: want the node on it", redacted(st.nodeNATSURL), st.serverNATSURL)
	}
	if !st.ExternalNATS || st.Connected != 10 {
		t.Errorf("external %v, %d connected: want true, 10", st.ExternalNATS, st.Connected)
	}
	if !strings.Contains(oneLine(st), "the NATS server (its own process") {
		t.Errorf("the step's line does not report the server's share: %s", oneLine(st))
	}
}

// redacted is u without its password (the embedded server's node user
// has one).
func redacted(u string) string {
	if p, err := url.Parse(u); err == nil {
		return p.Redacted()
	}
	return "(unparsable URL)"
}
