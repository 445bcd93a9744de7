package udp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkLoopbackReadBatch (informative: real sockets, real time) is
// the gateway reader's read loop on 127.0.0.1 under a server's inbound
// load at 1,000 players as botswarm makes it: 30 datagrams a player-second
// of 40 bytes, sent by 4 sockets (botswarm's workers, one a 250 bots),
// each sending its share once a millisecond in one sendmmsg (its 1 ms
// quantum: ≈ 8 datagrams), the four a quarter of a millisecond apart, a
// late sender its bursts due in one sendmmsg (as a worker's late turn).
// An op is one millisecond of that load (32 datagrams). The reader reads in
// batches of 64 as the gateway does; with wait=D it lets datagrams pile
// up, as botswarm's quantum does: after a read it sleeps until D after
// the read began. It reports the datagrams a ReadBatch returns
// (dg/read), the recvmmsg calls a datagram (calls/dg: the reads and the
// calls that found the socket empty, ReadWaits, after which the reader
// parked), the reader thread's CPU a datagram (cpu-ns/dg: the system
// calls and the wake-ups, CLOCK_THREAD_CPUTIME_ID), and the latency from
// sendmmsg to ReadBatch's return (lat-p50-µs, lat-p99-µs). On a shared
// host the figures move with the load beside them: compare the variants
// in one run.
func BenchmarkLoopbackReadBatch(b *testing.B) {
	for _, wait := range []time.Duration{0, 250 * time.Microsecond, 1000 * time.Microsecond} {
		b.Run(fmt.Sprintf("wait=%v", wait), func(b *testing.B) { benchLoopbackRead(b, wait) })
	}
}

func benchLoopbackRead(b *testing.B, wait time.Duration) {
	const senders, per, size, slots = 4, 8, 40, 64
	ctx := context.Background()
	srv, err := Listen(ctx, "127.0.0.1:0", slots)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	if err := srv.SetBuffers(4<<20, 1<<20); err != nil {
		b.Fatal(err)
	}
	var tx []*Socket
	for range senders {
		s, err := Listen(ctx, "127.0.0.1:0", per)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		tx = append(tx, s)
	}
	epoch := time.Now()
	type result struct {
		reads, dgs int
		cpu        time.Duration
		lat        []time.Duration
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		ms := make([]Message, slots)
		for i := range ms {
			ms[i].Buf = make([]byte, 1500)
		}
		var r result
		var t0, t1 unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &t0)
		for {
			began := time.Since(epoch)
			n, err := srv.ReadBatch(ms)
			if err != nil {
				_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &t1)
				r.cpu = time.Duration(t1.Nano() - t0.Nano())
				if !errors.Is(err, ErrClosed) {
					r.reads = -1
				}
				done <- r
				return
			}
			at := time.Since(epoch)
			r.reads++
			for _, m := range ms[:n] {
				if m.N == size && m.Buf[0] == 1 {
					r.dgs++
					r.lat = append(r.lat, at-time.Duration(binary.LittleEndian.Uint64(m.Buf[8:])))
				}
			}
			if wait > 0 && n < slots {
				if d := began + wait - time.Since(epoch); d > 0 {
					time.Sleep(d)
				}
			}
		}
	}()
	// Each sender keeps its schedule (a burst of per every millisecond,
	// sender j at j/senders of it) and, late (the host's timers wake
	// ≈ 1 ms late here), sends every burst due in one sendmmsg, as a
	// botswarm worker serves all its bots due in one turn.
	ms := make([]Message, 4*per)
	for i := range ms {
		ms[i] = Message{Buf: make([]byte, size), N: size, Addr: srv.LocalAddr()}
		ms[i].Buf[0] = 1
	}
	sent := 0
	next := make([]int, senders) // each sender's next burst
	start := time.Since(epoch)
	due := func(j, k int) time.Duration {
		return start + time.Duration(k)*time.Millisecond + time.Duration(j)*time.Millisecond/senders
	}
	b.ResetTimer()
	op := 0
	for b.Loop() {
		op++
		for j, s := range tx {
			if d := due(j, next[j]) - time.Since(epoch); d > 0 {
				time.Sleep(d)
			}
			now := time.Since(epoch)
			n := 0
			for next[j] < op && due(j, next[j]) <= now && n+per <= len(ms) {
				next[j]++
				n += per
			}
			for i := range ms[:n] {
				binary.LittleEndian.PutUint64(ms[i].Buf[8:], uint64(now))
			}
			w, err := s.WriteBatch(ms[:n])
			if err != nil {
				b.Fatal(err)
			}
			sent += w
		}
	}
	b.StopTimer()
	// Let the last datagrams in (bounded), then end the reader.
	time.Sleep(20 * time.Millisecond)
	srv.Close()
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		b.Fatal("the reader did not end")
	}
	if r.reads < 0 {
		b.Fatal("the reader failed")
	}
	if r.reads == 0 || r.dgs == 0 {
		b.Fatalf("read %d datagrams in %d reads (sent %d)", r.dgs, r.reads, sent)
	}
	slices.Sort(r.lat)
	b.ReportMetric(float64(r.dgs)/float64(r.reads), "dg/read")
	b.ReportMetric(float64(uint64(r.reads)+srv.ReadWaits())/float64(r.dgs), "calls/dg")
	b.ReportMetric(float64(r.cpu.Nanoseconds())/float64(r.dgs), "cpu-ns/dg")
	b.ReportMetric(float64(r.lat[len(r.lat)/2].Microseconds()), "lat-p50-µs")
	b.ReportMetric(float64(r.lat[len(r.lat)*99/100].Microseconds()), "lat-p99-µs")
	b.ReportMetric(float64(sent-r.dgs), "lost")
}
