package main

import (
	"bytes"
	"image/png"
	"os"
	"strings"
	"testing"
)

func TestLimitIsTheLargestCountHoldingEveryTarget(t *testing.T) {
	ok := func(n int) Step { return Step{Players: n, Connected: n, TickP99Ms: 8, RTTP99Ms: 30} }
	for _, tc := range []struct {
		name  string
		steps []Step
		want  int
		found bool
	}{
		{"all hold", []Step{ok(250), ok(500), ok(1000)}, 1000, true},
		{"tick p99 over 25 ms", []Step{ok(250), ok(500), {Players: 1000, Connected: 1000, TickP99Ms: 25.1, RTTP99Ms: 30}}, 500, true},
		{"RTT p99 over 50 ms", []Step{ok(250), {Players: 500, Connected: 500, TickP99Ms: 5, RTTP99Ms: 50.5}}, 250, true},
		{"a bot not connected", []Step{ok(250), {Players: 500, Connected: 499, TickP99Ms: 5, RTTP99Ms: 20}}, 250, true},
		{"a move lost", []Step{ok(250), {Players: 500, Connected: 500, TickP99Ms: 5, RTTP99Ms: 20, LostMoves: 1}}, 250, true},
		{"no botswarm report", []Step{{Players: 250, Connected: 250, TickP99Ms: 5, RTTP99Ms: -1}}, 0, false},
		{"a hold above a miss still counts", []Step{ok(250), {Players: 500, Connected: 500, TickP99Ms: 40, RTTP99Ms: 20}, ok(750)}, 750, true},
		{"exactly at the targets holds", []Step{{Players: 300, Connected: 300, TickP99Ms: 25, RTTP99Ms: 50}}, 300, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, found := limit(tc.steps)
			if n != tc.want || found != tc.found {
				t.Errorf("limit = %d, %v; want %d, %v", n, found, tc.want, tc.found)
			}
		})
	}
}

func TestWriteLimitNamesEachMiss(t *testing.T) {
	var b bytes.Buffer
	writeLimit(&b, []Step{
		{Players: 250, Connected: 250, TickP99Ms: 3, RTTP99Ms: 20},
		{Players: 500, Connected: 480, TickP99Ms: 30, RTTP99Ms: 70, LostMoves: 12},
	})
	out := b.String()
	for _, want := range []string{"Limit: 250 players", "500 players miss", "480 of 500 connected", "tick p99 30.0 ms > 25", "RTT p99 70.0 ms > 50", "12 moves lost"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestWritePlotMakesAPNG(t *testing.T) {
	path := t.TempDir() + "/capacity.png"
	steps := []Step{
		{Players: 250, Connected: 250, TickP99Ms: 3, RTTP99Ms: 20, CPUMsPerPlayer: 1.1, HeapPerPlayerB: 28 << 10},
		{Players: 500, Connected: 500, TickP99Ms: 9, RTTP99Ms: 35, CPUMsPerPlayer: 0.9, HeapPerPlayerB: 29 << 10},
		{Players: 1000, Connected: 1000, TickP99Ms: 40, RTTP99Ms: 210, CPUMsPerPlayer: 1.0, HeapPerPlayerB: 31 << 10},
	}
	if err := writePlot(path, steps); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if w := img.Bounds().Dx(); w < 600 {
		t.Errorf("plot is %d px wide, want a readable figure", w)
	}
	if err := writePlot(path, nil); err == nil {
		t.Error("writePlot with no steps: no error")
	}
}
