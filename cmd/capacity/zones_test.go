package main

import "testing"

func TestZoneLineInIDOrder(t *testing.T) {
	s := Step{PlayersByZone: map[string]int{"x1z0": 2000, "x0z0": 0, "x1z1": 3, "x0z1": 1}}
	const want = "players by zone: x0z0 0, x0z1 1, x1z0 2000, x1z1 3"
	if got := zoneLine(s); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
