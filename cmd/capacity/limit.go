package main

import (
	"fmt"
	"io"
	"strings"
)

// The targets for the curve: on loopback, up to the limit, a zone's
// tick p99 stays within half a 50 ms tick and the bots' RTT p99 within
// 50 ms. The limit is the largest measured count that holds them with every
// bot connected and no move lost.
const (
	limitTickP99Ms = 25
	limitRTTP99Ms  = 50
)

// misses says which of the curve's targets a step missed; empty: it holds.
func misses(s Step) []string {
	var m []string
	if s.Connected < s.Players {
		m = append(m, fmt.Sprintf("%d of %d connected", s.Connected, s.Players))
	}
	if s.TickP99Ms > limitTickP99Ms {
		m = append(m, fmt.Sprintf("tick p99 %.1f ms > %d", s.TickP99Ms, limitTickP99Ms))
	}
	if s.RTTP99Ms < 0 {
		m = append(m, "no RTT (botswarm report missing)")
	} else if s.RTTP99Ms > limitRTTP99Ms {
		m = append(m, fmt.Sprintf("RTT p99 %.1f ms > %d", s.RTTP99Ms, limitRTTP99Ms))
	}
	if s.LostMoves > 0 {
		m = append(m, fmt.Sprintf("%.0f moves lost", s.LostMoves))
	}
	return m
}

// limit is the largest player count among steps that holds every target, and
// whether there is one. Counts above a miss still count if they hold: the
// table shows the misses, the limit is what was measured to work.
func limit(steps []Step) (int, bool) {
	best, ok := 0, false
	for _, s := range steps {
		if len(misses(s)) == 0 && s.Players > best {
			best, ok = s.Players, true
		}
	}
	return best, ok
}

// writeLimit prints the limit and every step's misses under the table.
func writeLimit(w io.Writer, steps []Step) {
	if len(steps) == 0 {
		return
	}
	if n, ok := limit(steps); ok {
		fmt.Fprintf(w, "\n**Limit: %d players** (tick p99 ≤ %d ms, RTT p99 ≤ %d ms, every bot connected, no move lost).\n",
			n, limitTickP99Ms, limitRTTP99Ms)
	} else {
		fmt.Fprintf(w, "\n**Limit: none of the measured counts holds** tick p99 ≤ %d ms, RTT p99 ≤ %d ms, every bot connected, no move lost.\n",
			limitTickP99Ms, limitRTTP99Ms)
	}
	for _, s := range steps {
		if m := misses(s); len(m) > 0 {
			fmt.Fprintf(w, "- %d players miss: %s\n", s.Players, strings.Join(m, "; "))
		}
	}
}
