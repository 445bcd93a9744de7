package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestHelpListsEveryFlag: --help is a request, not an error (main exits 0
// on ErrHelp), and its usage names every flag the tool takes.
func TestHelpListsEveryFlag(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"--help"}, &out, &out)
	if !errors.Is(err, pflag.ErrHelp) {
		t.Fatalf("run --help = %v, want pflag.ErrHelp", err)
	}
	u := out.String()
	if !strings.HasPrefix(u, "Usage: capacity") {
		t.Errorf("usage starts %q", u[:min(len(u), 40)])
	}
	for _, f := range []string{"players", "ramp", "warmup", "window", "botswarm", "swarm-flags", "json", "png",
		"cpuprofile", "memprofile", "profile-at", "npcs", "keep", "gc-percent", "mem-profile-rate", "breakdown", "host-probe",
		"world", "spawn", "gomaxprocs", "external-nats", "nats-server"} {
		if !strings.Contains(u, "--"+f+" ") && !strings.Contains(u, "--"+f+"[") {
			t.Errorf("usage does not name --%s:\n%s", f, u)
		}
	}
}
