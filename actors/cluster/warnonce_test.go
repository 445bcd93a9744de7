package cluster

import (
	"fmt"
	"log/slog"
	"testing"
)

// TestBridgeWarnOnceBounded: the bridge logs each kind of bad input once
// (its key); past maxWarnKeys keys one more warning says the bound was
// reached and nothing more is logged — a key the bridge no longer
// remembers would otherwise be logged at every message, and hostile input
// would flood the log.
func TestBridgeWarnOnceBounded(t *testing.T) {
	var logs lockedBuffer
	b := &Bridge{m: new(Metrics), log: slog.New(slog.NewJSONHandler(&logs, nil)), warned: map[string]bool{}}
	const keys = maxWarnKeys + 10
	for range 3 {
		for k := range keys {
			b.warnOnce(fmt.Sprintf("garbage:subject.%d", k), "cluster: undecodable message dropped")
		}
	}
	if got := logs.warnings(t, "cluster: undecodable message dropped"); len(got) != maxWarnKeys {
		t.Fatalf("%d warnings, want %d: each key once, up to the bound", len(got), maxWarnKeys)
	}
	if got := logs.warnings(t, "cluster: more kinds of bad input than the log names; the rest are counted only"); len(got) != 1 {
		t.Fatalf("%d warnings that the bound was reached, want 1", len(got))
	}
}
