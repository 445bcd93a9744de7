package deploy

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"testing"
	"time"
)

var metricLine = regexp.MustCompile(`(?m)^(go_sched_gomaxprocs_threads|ghostwire_gomaxprocs_lowers_total|ghostwire_gomaxprocs_raises_total) (\S+)$`)

// The real zoned, idle, as a pod runs it (no GOMAXPROCS in its
// environment): it starts on the runtime's default Ps and its sizer takes
// them down to one after its 10 s hold, which /metrics shows — the Go
// collector's gauge and the sizer's counter. On a one-CPU machine the
// default is one P already, and nothing is sized.
func TestZonedSizesItsPsWhenIdle(t *testing.T) {
	bin, _ := zoned(t)
	cmd := exec.Command(bin, "--udp=127.0.0.1:0", "--http=127.0.0.1:0", "--nats-listen=127.0.0.1:0",
		"--data="+t.TempDir(), "--log-json", "--npcs=0")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == "zoned ready" {
				addr, _ := rec["http"].(string)
				ready <- addr
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	var httpAddr string
	select {
	case httpAddr = <-ready:
	case <-time.After(60 * time.Second):
		t.Fatal("zoned not ready within 60 s")
	}
	client := &http.Client{Timeout: 5 * time.Second}
	scrape := func() map[string]float64 {
		resp, err := client.Get("http://" + httpAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]float64{}
		for _, g := range metricLine.FindAllStringSubmatch(string(body), -1) {
			m[g[1]], _ = strconv.ParseFloat(g[2], 64)
		}
		if len(m) != 3 {
			t.Fatalf("/metrics lacks the Ps or the sizer's counters: %v", m)
		}
		return m
	}
	if runtime.NumCPU() < 2 {
		if m := scrape(); m["go_sched_gomaxprocs_threads"] != 1 || m["ghostwire_gomaxprocs_lowers_total"] != 0 {
			t.Fatalf("one CPU: %v, want one P and nothing sized", m)
		}
		return
	}
	var m map[string]float64
	for deadline := time.Now().Add(40 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		if m = scrape(); m["go_sched_gomaxprocs_threads"] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("an idle zoned still on %v Ps 40 s after ready (the hold is 10 s): %v", m["go_sched_gomaxprocs_threads"], m)
		}
	}
	if m["ghostwire_gomaxprocs_lowers_total"] < 1 {
		t.Fatalf("one P but no step down counted: %v", m)
	}
}
