package main

import (
	"bytes"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/netsim"
)

// TestMain lets the test binary serve: the driver re-runs its own
// executable with "serve" to put the server in a process of its own.
func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) != "" && len(os.Args) > 1 && os.Args[1] == "serve" {
		os.Exit(serveMain(os.Args[2:], os.Stdin, os.Stdout))
	}
	os.Exit(m.Run())
}

func TestStampRoundTrip(t *testing.T) {
	p := make([]byte, 40)
	stamp(p, 1234567890123, 7, 42)
	ts, c, seq, ok := unstamp(p)
	if !ok || ts != 1234567890123 || c != 7 || seq != 42 {
		t.Fatalf("unstamp = %d %d %d %v", ts, c, seq, ok)
	}
	if _, _, _, ok := unstamp(p[:15]); ok {
		t.Fatal("a 15-byte message unstamped")
	}
}

func TestRecorder(t *testing.T) {
	var r recorder
	r.setWindow(1000, 2000)
	p := make([]byte, 16)
	var last uint32
	for i, ts := range []int64{500, 1000, 1500, 1999, 2000} {
		stamp(p, ts, 0, uint32(i+1))
		r.recv(p, &last, ts+int64(i+1)*1_000_000) // i+1 ms late
	}
	stamp(p, 1500, 0, 9) // a gap: 6..8 missing
	r.recv(p, &last, 1500)
	stamp(p, 1500, 0, 0) // a hello: ignored
	r.recv(p, &last, 1500)
	r.sent(999)
	r.sent(1000)
	s := r.summary()
	if s.Recv != 4 || r.recvAll.Load() != 6 || s.OrderErr != 1 || r.sentWin.Load() != 1 {
		t.Fatalf("recv %d all %d order %d sent %d, want 4 6 1 1", s.Recv, r.recvAll.Load(), s.OrderErr, r.sentWin.Load())
	}
	if s.P50 != 2 || s.Max != 4 || s.P99 != 3 {
		t.Fatalf("p50 %v p99 %v max %v, want 2 3 4 (samples 0, 2, 3, 4 ms; lower rank)", s.P50, s.P99, s.Max)
	}
}

func TestParseLibs(t *testing.T) {
	got, err := parseLibs("ghostwire, kcp-go+aes")
	if err != nil || len(got) != 2 || got[1] != libKCPAES {
		t.Fatalf("parseLibs = %v, %v", got, err)
	}
	if got, _ := parseLibs("none"); got != nil {
		t.Fatalf("none = %v", got)
	}
	if _, err := parseLibs("quic"); err == nil {
		t.Fatal("an unknown library parsed")
	}
}

// TestRelay checks the impairment: delay on both legs, loss near the
// configured rate, the server seeing the relay's per-client back socket.
func TestRelay(t *testing.T) {
	echo, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := echo.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			_, _ = echo.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	rl, err := startRelay(echo.LocalAddr().(*net.UDPAddr).AddrPort(), netsim.Config{Loss: 0.2, Latency: 20 * time.Millisecond, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer rl.close()
	c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(rl.addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 200 // < 256: the first byte names the datagram
	sent := make(map[byte]time.Time)
	for i := range n {
		b := []byte{byte(i), 0}
		sent[b[0]] = time.Now()
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Microsecond)
	}
	got, minRTT := 0, time.Hour
	buf := make([]byte, 64)
	_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	for {
		k, err := c.Read(buf)
		if err != nil {
			break
		}
		if k == 2 {
			got++
			minRTT = min(minRTT, time.Since(sent[buf[0]]))
		}
	}
	// Delivered both ways: 0.8² = 64 %; 200 draws put it within ±14 % (4σ).
	if got < n*50/100 || got > n*78/100 {
		t.Fatalf("%d of %d echoed, want about 64 %%", got, n)
	}
	if minRTT < 40*time.Millisecond {
		t.Fatalf("fastest echo %v, want ≥ 40 ms (20 ms each way)", minRTT)
	}
	up, down := rl.stats()
	if up.Sent != n || up.Dropped.Loss == 0 || down.Dropped.Loss == 0 {
		t.Fatalf("relay stats up %+v down %+v", up, down)
	}
}

// TestSmoke runs every library this binary has through both phases with a
// handful of clients and checks that the numbers are whole: everything
// delivered in order, overhead above zero, the impaired latency above the
// relay's one-way delay and the loss near its rate. Run it with -tags enet
// to include ENet. About 30 s.
func TestSmoke(t *testing.T) {
	cfg := shortConfig()
	cfg.clients, cfg.warmup, cfg.duration, cfg.drain = 8, 500*time.Millisecond, 1500*time.Millisecond, 5*time.Second
	cfg.lossyClients, cfg.lossyWarmup, cfg.lossyDuration, cfg.lossyDrain = 4, time.Second, 3*time.Second, 8*time.Second
	cfg.connectTimeout = 20 * time.Second
	var log bytes.Buffer
	cfg.log = &log
	if !enetAvailable {
		cfg.libs = []string{libGhostwire, libKCP, libKCPAES}
		cfg.lossyLibs = []string{libGhostwire, libKCP}
	}
	res, err := run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	writeReport(&out, cfg, res)
	t.Logf("%s\n%s", log.String(), out.String())
	if len(res) != len(cfg.libs)+len(cfg.lossyLibs) {
		t.Fatalf("%d results", len(res))
	}
	for _, r := range res {
		if r.Err != "" {
			t.Errorf("%s (impaired %v): %s", r.Lib, r.Impaired, r.Err)
			continue
		}
		if !r.complete() {
			t.Errorf("%s (impaired %v): incomplete: up %d/%d down %d/%d, order errors %d/%d",
				r.Lib, r.Impaired, r.Up.Recv, r.Up.Sent, r.Down.Recv, r.Down.Sent, r.Up.OrderErr, r.Down.OrderErr)
		}
		if r.Up.Sent == 0 || r.Down.Sent == 0 {
			t.Errorf("%s: nothing sent in the window", r.Lib)
		}
		if o := r.overhead(cfg); o <= 0 {
			t.Errorf("%s: overhead %.0f B/client-s, want > 0 (the traffic counters miss something)", r.Lib, o)
		}
		if r.ServerCPU <= 0 {
			t.Errorf("%s: no server CPU measured", r.Lib)
		}
		if r.Impaired {
			if r.Up.P50 < 50 || r.Down.P50 < 50 {
				t.Errorf("%s: p50 up %.1f down %.1f ms through a 50 ms relay", r.Lib, r.Up.P50, r.Down.P50)
			}
			if f := float64(r.RelayDrop[0]) / float64(r.RelaySent[0]); f < 0.03 || f > 0.2 {
				t.Errorf("%s: relay dropped %.1f %% up, want about 10 %%", r.Lib, 100*f)
			}
		}
	}
}
