package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/ghostwire/ghostwire/cmd/internal/procs"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestPrecedenceFlagsOverEnvOverFile(t *testing.T) {
	dir := t.TempDir()
	file := dir + "/zoned.json"
	if err := writeFile(file, `{"udp": ":1000", "tick": "40ms", "npcs": 7, "data": "from-file"}`); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	cfg, _, err := parseConfig([]string{"--config", file, "--udp", ":3000"}, &out, &errb,
		env(map[string]string{"GHOSTWIRE_UDP": ":2000", "GHOSTWIRE_TICK": "30ms"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.UDPAddr != ":3000" {
		t.Errorf("udp = %q, want the flag's :3000", cfg.UDPAddr)
	}
	if cfg.Tick.D() != 30*time.Millisecond {
		t.Errorf("tick = %v, want env's 30ms", cfg.Tick.D())
	}
	if cfg.NPCs != 7 || cfg.DataDir != "from-file" {
		t.Errorf("npcs=%d data=%q, want the file's 7 and from-file", cfg.NPCs, cfg.DataDir)
	}
	if cfg.HTTPAddr != "127.0.0.1:8080" {
		t.Errorf("http = %q, want the default 127.0.0.1:8080 (loopback: safe by default)", cfg.HTTPAddr)
	}
}

func TestIssueFlagNames(t *testing.T) {
	var out, errb bytes.Buffer
	cfg, _, err := parseConfig([]string{"--udp", "127.0.0.1:7001", "--http", "127.0.0.1:8001", "--data", "d",
		"--world", "w.json", "--tick", "25ms", "--npcs", "3", "--far-every", "4"}, &out, &errb, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.UDPAddr != "127.0.0.1:7001" || cfg.HTTPAddr != "127.0.0.1:8001" || cfg.DataDir != "d" ||
		cfg.WorldFile != "w.json" || cfg.Tick.D() != 25*time.Millisecond || cfg.NPCs != 3 || cfg.FarEvery != 4 {
		t.Errorf("flags not applied: %+v", cfg)
	}
}

func TestBadInputIsAClearError(t *testing.T) {
	cases := map[string][]string{
		"tick":                 {"--tick", "0s"},
		"unexpected argument":  {"stray"},
		"unknown flag":         {"--bogus"},
		"GHOSTWIRE_NPCS":       {"--data", "x"}, // env below
		"config file":          {"--config", "/nonexistent/zoned.json"},
		"udp address \"nope\"": {"--udp", "nope"},
		"far every 0":          {"--far-every", "0"},
		"far every 65":         {"--far-every", "65"},
		"gomaxprocs \"0\"":     {"--gomaxprocs", "0"},
		"gomaxprocs \"most\"":  {"--gomaxprocs", "most"},
		"--log-level \"loud\"": {"--log-level", "loud"},
	}
	for want, args := range cases {
		var out, errb bytes.Buffer
		e := map[string]string{}
		if want == "GHOSTWIRE_NPCS" {
			e["GHOSTWIRE_NPCS"] = "many"
		}
		_, _, err := parseConfig(args, &out, &errb, env(e))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: err = %v, want one mentioning %q", args, err, want)
		}
	}
}

func TestHelpListsEveryFlag(t *testing.T) {
	var out, errb bytes.Buffer
	_, _, err := parseConfig([]string{"--help"}, &out, &errb, env(nil))
	if !errors.Is(err, pflag.ErrHelp) {
		t.Fatalf("err = %v, want ErrHelp", err)
	}
	for _, f := range []string{"--udp", "--http", "--data", "--world", "--tick", "--npcs", "--far-every", "--nats", "--config", "--key-file", "--max-conns", "--gomaxprocs", "--log-level"} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("--help does not mention %s", f)
		}
	}
	if code := run([]string{"--help"}, &out, &errb, env(nil)); code != 0 {
		t.Errorf("zoned --help exit code %d, want 0", code)
	}
	if code := run([]string{"--tick", "nope"}, &out, &errb, env(nil)); code != 2 {
		t.Errorf("zoned --tick nope exit code %d, want 2", code)
	}
}

// --gomaxprocs: auto by default, a count fixes it, the flag over
// GHOSTWIRE_GOMAXPROCS.
func TestGomaxprocsSetting(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  map[string]string
		want procs.Setting
	}{
		{nil, nil, procs.Setting{Auto: true}},
		{[]string{"--gomaxprocs", "2"}, nil, procs.Setting{N: 2}},
		{nil, map[string]string{"GHOSTWIRE_GOMAXPROCS": "1"}, procs.Setting{N: 1}},
		{[]string{"--gomaxprocs", "auto"}, map[string]string{"GHOSTWIRE_GOMAXPROCS": "1"}, procs.Setting{Auto: true}},
	} {
		var out, errb bytes.Buffer
		_, opts, err := parseConfig(c.args, &out, &errb, env(c.env))
		if err != nil || opts.procs != c.want {
			t.Errorf("%v %v: %+v, %v; want %+v", c.args, c.env, opts.procs, err, c.want)
		}
	}
	var out, errb bytes.Buffer
	if _, _, err := parseConfig(nil, &out, &errb, env(map[string]string{"GHOSTWIRE_GOMAXPROCS": "-1"})); err == nil || !strings.Contains(err.Error(), "GHOSTWIRE_GOMAXPROCS") {
		t.Errorf("GHOSTWIRE_GOMAXPROCS=-1: err = %v, want one naming the variable", err)
	}
}

// --log-level: info by default, the flag over GHOSTWIRE_LOG_LEVEL, any
// case.
func TestLogLevelSetting(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  map[string]string
		want slog.Level
	}{
		{nil, nil, slog.LevelInfo},
		{[]string{"--log-level", "debug"}, nil, slog.LevelDebug},
		{[]string{"--log-level", "WARN"}, nil, slog.LevelWarn},
		{nil, map[string]string{"GHOSTWIRE_LOG_LEVEL": "error"}, slog.LevelError},
		{[]string{"--log-level", "info"}, map[string]string{"GHOSTWIRE_LOG_LEVEL": "debug"}, slog.LevelInfo},
	} {
		var out, errb bytes.Buffer
		_, opts, err := parseConfig(c.args, &out, &errb, env(c.env))
		if err != nil || opts.logLevel != c.want {
			t.Errorf("%v %v: %v, %v; want %v", c.args, c.env, opts.logLevel, err, c.want)
		}
	}
	var out, errb bytes.Buffer
	if _, _, err := parseConfig(nil, &out, &errb, env(map[string]string{"GHOSTWIRE_LOG_LEVEL": "chatty"})); err == nil || !strings.Contains(err.Error(), "GHOSTWIRE_LOG_LEVEL") {
		t.Errorf("GHOSTWIRE_LOG_LEVEL=chatty: err = %v, want one naming the variable", err)
	}
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o600) }

// startArgs is a whole node on loopback ports of its own in a fresh data dir.
func startArgs(t *testing.T, udp string) []string {
	return []string{"--data", t.TempDir(), "--udp", udp, "--http", "", "--nats-listen", "127.0.0.1:0", "--node-id", "start-test"}
}

// A signal that comes while the node is still starting stops it cleanly:
// exit 0 and a line that says so, not "start failed" (an operator's ^C, a
// pod deleted while it starts).
func TestSignalWhileStartingIsACleanStop(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the signal came before the start could finish
	var out, errb bytes.Buffer
	code := serve(ctx, func() {}, startArgs(t, "127.0.0.1:0"), &out, &errb, env(nil))
	log := errb.String()
	if code != 0 || !strings.Contains(log, "stopped while starting (signal received)") || strings.Contains(log, "start failed") {
		t.Fatalf("exit %d, log:\n%s", code, log)
	}
}

// A start that fails with no signal is still an error: exit 1, "start failed".
func TestStartFailureIsAnError(t *testing.T) {
	busy, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	var out, errb bytes.Buffer
	code := serve(context.Background(), func() {}, startArgs(t, busy.LocalAddr().String()), &out, &errb, env(nil))
	log := errb.String()
	if code != 1 || !strings.Contains(log, "start failed") || strings.Contains(log, "stopped while starting") {
		t.Fatalf("exit %d, log:\n%s", code, log)
	}
}
