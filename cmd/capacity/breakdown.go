package main

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"sort"
	"strings"
)

// A part is one line of the heap breakdown: the live bytes whose
// allocating stack (first frame outside the runtime, then its callers)
// names one of match first. A pattern ending in $ must end the name
// ("(*Table).grow$" is not "(*Table).growPkts").
type part struct {
	name  string
	match []string
}

// parts are checked in order; the first whose pattern occurs in a frame of
// the stack, from the allocation site outwards, gets the bytes.
var parts = []part{
	{"ghost table: per-id records (the 32-byte slot, 32-byte position track with its oldest position in flight, per-group sequences; the records' wire ids and the id bitmap; the second position in flight while fates come late; last State only for entry views)", []string{"replication/ghost.resize", "replication/ghost.(*Table).grow$", "replication/ghost.(*Table).remap"}},
	// The record store is made by newRecordStore (grown or trimmed), the
	// packet ring by growPkts and the pool compacted by compactPositions
	// (trimmed): before the table's rest.
	{"ghost table: in-flight positions and records (and the second positions in flight when first made)", []string{"replication/ghost.(*posPool)", "replication/ghost.newRecordStore", "replication/ghost.(*Table).growPkts",
		"replication/ghost.(*Table).compactPositions"}},
	// Before the table's rest: the snapshots are made in replication/ghost.
	// Before the connection: a reference view's Refs are made in actors/msg.
	{"views from the zone (snapshots shared by all, references or entry copies per player)", []string{"replication/ghost.(*SnapshotWriter)", "zones/sim.(*Zone).AppendView", "zones/sim.(*Zone).Snapshot", "actors/msg.NewViewRefs"}},
	{"ghost table: the rest (the Table struct, rare counters, entity index, view order, scratch)", []string{"replication/ghost.", "actors/ghostmgr."}},
	{"session: notify, events, moves, control", []string{"replication/session.", "replication/notify.", "replication/event.", "replication/move."}},
	{"connection, gateway, queued datagrams", []string{"actors/conn.", "actors/gateway.", "actors/msg.", "actors/udp."}},
	{"zones (slots, interest, grid, move queues)", []string{"zones/", "actors/zone."}},
	{"protoactor (PIDs, process registry)", []string{"protoactor-go", "concurrent-map"}},
}

const otherPart = "other (handshake, NATS, runtime, …)"

// otherNATS is the part of "other" allocated by NATS (the embedded
// nats-server: its JetStream block cache, subject index and per-client
// caches; the nats.go client) or the node's record writers and cluster
// code: a line of its own under "other", in it and not added to the sum,
// so "other" stays comparable with earlier runs and no part loses bytes.
const otherNATS = "… of it NATS (embedded server: block cache, subject index; client), the record writers and the node's cluster code"

// natsFrames mark an "other" stack as NATS's, anywhere in it.
var natsFrames = []string{"github.com/nats-io/", "actors/cluster.", "actors/node."}

// heapParts returns the live heap as of the last completed collection,
// by part, from the runtime's heap profile (sampled at
// runtime.MemProfileRate and scaled up the way pprof does).
func heapParts() map[string]float64 {
	var recs []runtime.MemProfileRecord
	n, _ := runtime.MemProfile(nil, false)
	for {
		recs = make([]runtime.MemProfileRecord, n+64)
		var ok bool
		if n, ok = runtime.MemProfile(recs, false); ok {
			recs = recs[:n]
			break
		}
	}
	rate := float64(runtime.MemProfileRate)
	out := make(map[string]float64, len(parts)+1)
	for i := range recs {
		r := &recs[i]
		b := float64(r.InUseBytes())
		if b <= 0 {
			continue
		}
		if objs := r.InUseObjects(); rate > 1 && objs > 0 {
			b /= 1 - math.Exp(-b/float64(objs)/rate)
		}
		name, nats := classify(r.Stack())
		out[name] += b
		if nats {
			out[otherNATS] += b
		}
	}
	return out
}

// classify names the part a stack's bytes belong to, and whether they are
// NATS's share of "other".
func classify(stk []uintptr) (string, bool) {
	var fns []string
	frames := runtime.CallersFrames(stk)
	for {
		f, more := frames.Next()
		fns = append(fns, f.Function)
		if !more {
			break
		}
	}
	name := classifyNames(fns)
	return name, name == otherPart && natsNames(fns)
}

// natsNames: a frame of the stack is NATS's or the record writers'.
func natsNames(fns []string) bool {
	for _, fn := range fns {
		for _, m := range natsFrames {
			if strings.Contains(fn, m) {
				return true
			}
		}
	}
	return false
}

// classifyNames is classify over function names, allocation site first.
func classifyNames(fns []string) string {
	for _, fn := range fns {
		if strings.HasPrefix(fn, "runtime.") || strings.HasPrefix(fn, "sync.") {
			continue
		}
		for _, p := range parts {
			for _, m := range p.match {
				if a, ok := strings.CutSuffix(m, "$"); ok && strings.HasSuffix(fn, a) || !ok && strings.Contains(fn, m) {
					return p.name
				}
			}
		}
	}
	return otherPart
}

// perPlayer is (after − idle) ÷ players, part by part.
func perPlayer(idle, after map[string]float64, players int) map[string]float64 {
	out := make(map[string]float64, len(after))
	for k, v := range after {
		out[k] = max(v-idle[k], 0) / float64(players)
	}
	return out
}

// writeBreakdown prints the heap per player by part, one column per step.
func writeBreakdown(w io.Writer, steps []Step) {
	var cols []Step
	for _, s := range steps {
		if s.HeapParts != nil {
			cols = append(cols, s)
		}
	}
	if len(cols) == 0 {
		return
	}
	names := make([]string, 0, len(parts)+1)
	for _, p := range parts {
		names = append(names, p.name)
	}
	names = append(names, otherPart, otherNATS)
	fmt.Fprintln(w)
	fmt.Fprint(w, "| live heap per player, by part |")
	for _, s := range cols {
		fmt.Fprintf(w, " %d players |", s.Players)
	}
	fmt.Fprint(w, "\n|---|")
	for range cols {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w)
	for _, n := range names {
		fmt.Fprintf(w, "| %s |", n)
		for _, s := range cols {
			fmt.Fprintf(w, " %.1f KB |", s.HeapParts[n]/1024)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprint(w, "| **sum** (sampled; the heap per player above is exact) |")
	for _, s := range cols {
		sum := 0.0
		keys := make([]string, 0, len(s.HeapParts))
		for k := range s.HeapParts {
			if k != otherNATS { // a share of "other", already in it
				keys = append(keys, k)
			}
		}
		sort.Strings(keys) // a fixed order: float sums differ by order
		for _, k := range keys {
			sum += s.HeapParts[k]
		}
		fmt.Fprintf(w, " %.1f KB |", sum/1024)
	}
	fmt.Fprintln(w)
}
