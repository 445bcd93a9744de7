package main

import (
	"fmt"
	"io"
	"strings"
)

// ipUDPHeader is what IPv4 and UDP add to every datagram on a real link
// (20 + 8 bytes); loopback carries the same headers.
const ipUDPHeader = 28

// complete: every message sent inside the window was delivered, in order,
// exactly once (every library here promises that for reliable-ordered
// messages; a miss means the run was overloaded or the drain too short).
func (r result) complete() bool {
	return r.Up.Recv == r.Up.Sent && r.Down.Recv == r.Down.Sent && r.Up.OrderErr == 0 && r.Down.OrderErr == 0
}

// perClient is a count per client-second.
func (r result) perClient(v uint64) float64 { return float64(v) / r.clientSeconds() }

// cpuUS is the server's CPU per client-second, in µs.
func (r result) cpuUS() float64 { return float64(r.ServerCPU.Nanoseconds()) / 1e3 / r.clientSeconds() }

// udpBytes is the UDP payload bytes per client-second, both ways.
func (r result) udpBytes() float64 { return r.perClient(r.Traffic.UpB + r.Traffic.DownB) }

// wireBytes adds the IPv4 and UDP headers of every datagram.
func (r result) wireBytes() float64 {
	return r.perClient(r.Traffic.UpB + r.Traffic.DownB + ipUDPHeader*(r.Traffic.UpP+r.Traffic.DownP))
}

// payload is the application bytes handed to the library per client-second.
func (r result) payload(cfg config) (up, down float64) {
	return r.perClient(r.Up.Sent * uint64(cfg.inputSize)), r.perClient(r.Down.Sent * uint64(cfg.stateSize))
}

// overhead is what the library put on the wire beyond the payload (headers,
// acks, resends, keepalives, crypto), UDP payload only, per client-second.
func (r result) overhead(cfg config) float64 {
	up, down := r.payload(cfg)
	return r.udpBytes() - up - down
}

func ratio(peer, gw float64) string {
	if gw <= 0 || peer <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", peer/gw)
}

func writeReport(w io.Writer, cfg config, res []result) {
	var load, lossy []result
	for _, r := range res {
		if r.Impaired {
			lossy = append(lossy, r)
		} else {
			load = append(load, r)
		}
	}
	find := func(rs []result, lib string) (result, bool) {
		for _, r := range rs {
			if r.Lib == lib && r.Err == "" {
				return r, true
			}
		}
		return result{}, false
	}
	note := func(r result) string {
		if r.Err != "" {
			return "not run: " + r.Err
		}
		if !r.complete() {
			s := fmt.Sprintf("**incomplete**: up %d/%d, down %d/%d delivered, %d+%d out of order",
				r.Up.Recv, r.Up.Sent, r.Down.Recv, r.Down.Sent, r.Up.OrderErr, r.Down.OrderErr)
			if c, ok := r.Extra["connected"].(float64); ok && int(c) < r.Clients {
				s += fmt.Sprintf("; %d of %d clients disconnected by the library", r.Clients-int(c), r.Clients)
			}
			return s
		}
		return "all delivered, in order"
	}
	rates := func(r result) string {
		return fmt.Sprintf("%.1f / %.1f", r.perClient(r.Up.Sent), r.perClient(r.Down.Sent))
	}

	if len(load) > 0 {
		r0 := load[0]
		fmt.Fprintf(w, "\n### Load: %d clients, %v window, loopback\n\n", r0.Clients, r0.Window)
		fmt.Fprintf(w, "Per client-second. Payload handed to the library: %d B up (%d × %d B), %d B down (%d × %d B).\n\n",
			cfg.inputHz*cfg.inputSize, cfg.inputHz, cfg.inputSize, cfg.stateHz*cfg.stateSize, cfg.stateHz, cfg.stateSize)
		fmt.Fprintln(w, "| library | server CPU µs | msgs up / down | up B (datagrams) | down B (datagrams) | overhead B | wire B incl. IPv4+UDP | client process CPU µs | delivery |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
		for _, r := range load {
			if r.Err != "" {
				fmt.Fprintf(w, "| %s | — | — | — | — | — | — | — | %s |\n", r.Lib, note(r))
				continue
			}
			fmt.Fprintf(w, "| %s | %.1f | %s | %.0f (%.1f) | %.0f (%.1f) | %.0f | %.0f | %.1f | %s |\n", r.Lib,
				r.cpuUS(), rates(r), r.perClient(r.Traffic.UpB), r.perClient(r.Traffic.UpP),
				r.perClient(r.Traffic.DownB), r.perClient(r.Traffic.DownP),
				r.overhead(cfg), r.wireBytes(), float64(r.DriverCPU.Nanoseconds())/1e3/r.clientSeconds(), note(r))
		}
	}
	if len(lossy) > 0 {
		r0 := lossy[0]
		fmt.Fprintf(w, "\n### Latency: %d clients, %.0f %% loss each way, %v RTT (loopback relay, netsim links), %v window\n\n",
			r0.Clients, cfg.loss*100, cfg.rtt, r0.Window)
		fmt.Fprintln(w, "Delivery latency of reliable-ordered messages, send call to delivery, ms.")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| library | up p50 | up p99 | up p99.9 | up max | down p50 | down p99 | down p99.9 | down max | wire B/client-s | server CPU µs/client-s | delivery |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
		for _, r := range lossy {
			if r.Err != "" {
				fmt.Fprintf(w, "| %s |%s %s |\n", r.Lib, strings.Repeat(" — |", 10), note(r))
				continue
			}
			fmt.Fprintf(w, "| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.0f | %.1f | %s |\n", r.Lib,
				r.Up.P50, r.Up.P99, r.Up.P999, r.Up.Max, r.Down.P50, r.Down.P99, r.Down.P999, r.Down.Max,
				r.wireBytes(), r.cpuUS(), note(r))
		}
	}

	gl, okL := find(load, libGhostwire)
	gi, okI := find(lossy, libGhostwire)
	fmt.Fprintln(w, "\n### Ratios, peer ÷ ghostwire (below 1: the peer uses less / is faster)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| peer | server CPU per client-s | wire bytes per client-s | overhead bytes per client-s | p99 up at loss | p99 down at loss |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, lib := range []string{libKCP, libKCPAES, libENet} {
		cells := []string{"—", "—", "—", "—", "—"}
		any := false
		if p, ok := find(load, lib); ok && okL {
			cells[0], cells[1], cells[2] = ratio(p.cpuUS(), gl.cpuUS()), ratio(p.wireBytes(), gl.wireBytes()), ratio(p.overhead(cfg), gl.overhead(cfg))
			any = true
		}
		if p, ok := find(lossy, lib); ok && okI {
			cells[3], cells[4] = ratio(p.Up.P99, gi.Up.P99), ratio(p.Down.P99, gi.Down.P99)
			any = true
		}
		if any {
			fmt.Fprintf(w, "| %s | %s |\n", lib, strings.Join(cells, " | "))
		}
	}
}
