package cluster

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A zone without an owner is warned about only when the spell lasts past
// two lease TTLs (no node claims it), once a spell, and its end is said
// then; a short spell (every planned handover's tail) is logged at debug.
// Before, each zone's first drop in the process's life warned, and none
// after it: every drain warned, and a later outage went unsaid.
func TestNoOwnerWarnedOnlyWhenItLasts(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b := &Bridge{cfg: Config{Leases: &Leases{ttl: time.Second}}, m: new(Metrics), log: log}
	p := &zoneProxy{b: b, zone: "r"}
	count := func(level, text string) int {
		n := 0
		for _, line := range strings.Split(buf.String(), "\n") {
			if strings.Contains(line, "level="+level) && strings.Contains(line, text) {
				n++
			}
		}
		return n
	}
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	p.noOwner(3, at(0))
	p.noOwner(2, at(1900*time.Millisecond))
	if n := count("WARN", "no owner"); n != 0 {
		t.Fatalf("warned %d times within two TTLs:\n%s", n, buf.String())
	}
	p.noOwner(1, at(2*time.Second))
	p.noOwner(1, at(5*time.Second))
	if n := count("WARN", "no node claims it"); n != 1 || !strings.Contains(buf.String(), "dropped=6") {
		t.Fatalf("a spell of 2 s: %d warnings, want 1 saying the 6 dropped:\n%s", n, buf.String())
	}
	p.owned("n1", at(6*time.Second))
	if n := count("INFO", "owner again"); n != 1 || !strings.Contains(buf.String(), "dropped=7") {
		t.Fatalf("the warned spell's end: %d lines, want 1 saying the 7 dropped:\n%s", n, buf.String())
	}

	// A second, short spell (a handover): debug only, and its end unsaid.
	p.noOwner(1, at(10*time.Second))
	p.noOwner(1, at(10500*time.Millisecond))
	p.owned("n2", at(11*time.Second))
	// And a third that lasts is warned again: the bound is a spell, not
	// the zone's life.
	p.noOwner(1, at(20*time.Second))
	p.noOwner(1, at(23*time.Second))
	if w, i, d := count("WARN", "no node claims it"), count("INFO", "owner again"), count("DEBUG", "no owner"); w != 2 || i != 1 || d != 3 {
		t.Fatalf("warnings %d (want 2), ends said %d (want 1), spells begun at debug %d (want 3):\n%s", w, i, d, buf.String())
	}
	if got := b.m.NoOwner.Load(); got != 11 {
		t.Fatalf("NoOwner %d, want the 11 items dropped", got)
	}
}
