//go:build enet

package main

// ENet (Debian's libenet-dev, ENet 1.3.x), through a small cgo wrapper
// (enet_bench.c): the server is one ENetHost serviced by one C thread, the
// loop of ENet's tutorial plus the state tick; the clients are one ENetHost
// (socket) and one peer each, driven by one C thread. Every message is
// ENET_PACKET_FLAG_RELIABLE on channel 0 (reliable and ordered); hosts are
// created with 0/0 bandwidth ("unlimited", as the tutorial does), no
// compression and no checksum (both off by default), the default MTU
// (1400), and 4 MiB socket buffers on the server as for the others.

/*
#cgo pkg-config: libenet
#include <stdlib.h>
#include "enet_bench.h"
*/
import "C"

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"time"
	"unsafe"
)

const enetAvailable = true

var errNoENet error // built with ENet

var enetInit sync.Once

func initENet() error {
	var err error
	enetInit.Do(func() {
		if C.eb_init() != 0 {
			err = fmt.Errorf("enet_initialize failed")
		}
	})
	return err
}

func statsFromC(s *C.eb_stats) (dirStats, []int32) {
	n := int(s.lat_n)
	var lat []int32
	if n > 0 && s.lat_us != nil {
		lat = slices.Clone(unsafe.Slice((*int32)(unsafe.Pointer(s.lat_us)), n))
	}
	return summarize(lat, uint64(s.recv_win), uint64(s.order_err)), lat
}

// ---------------------------------------------------------------------------

type enetServer struct {
	port int
	done chan struct{}
	once sync.Once
	rep  serverReport
}

func startENet(o serveOpts) (server, error) {
	if err := initENet(); err != nil {
		return nil, err
	}
	port := C.eb_server_open(C.int(o.clients+64), C.int(o.stateSize), C.int(o.stateHz), C.int(sockBuf))
	if port < 0 {
		return nil, fmt.Errorf("enet: server host not created")
	}
	s := &enetServer{port: int(port), done: make(chan struct{})}
	go func() {
		runtime.LockOSThread()
		C.eb_server_run()
		close(s.done)
	}()
	return s, nil
}

func (s *enetServer) addr() netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(s.port))
}

func (s *enetServer) setWindow(a, b int64) { C.eb_set_window(C.int64_t(a), C.int64_t(b)) }

// report stops the server loop (the results live in the C thread's memory):
// it is the last thing the driver asks.
func (s *enetServer) report() serverReport {
	s.once.Do(func() {
		C.eb_server_stop()
		<-s.done
		var st C.eb_stats
		C.eb_server_stats(&st)
		up, _ := statsFromC(&st)
		s.rep = serverReport{Up: up, DownSent: uint64(st.sent_win), Extra: map[string]any{"connected": uint64(st.connected)}}
	})
	return s.rep
}

func (s *enetServer) counts() (upRecv, downSent uint64) {
	var a, b C.uint64_t
	C.eb_server_counts(&a, &b)
	return uint64(a), uint64(b)
}

func (s *enetServer) close() { s.report() }

// ---------------------------------------------------------------------------

type enetClients struct {
	opts clientOpts
	done chan struct{}
	once sync.Once
	st   C.eb_stats
	dn   dirStats
}

func newENetClients(o clientOpts) (clientSet, error) {
	if err := initENet(); err != nil {
		return nil, err
	}
	return &enetClients{opts: o, done: make(chan struct{})}, nil
}

func (c *enetClients) dial(ctx context.Context, n int, server, via netip.AddrPort) error {
	if C.eb_clients_open(C.int(n), C.int(via.Port()), C.int(c.opts.inputSize), C.int(c.opts.inputHz)) != 0 {
		return fmt.Errorf("enet: client hosts not created")
	}
	var wg sync.WaitGroup
	for k := range int(C.eb_client_threads()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			C.eb_clients_run(C.int(k))
		}()
	}
	go func() { wg.Wait(); close(c.done) }()
	for int(C.eb_clients_connected()) < n {
		select {
		case <-ctx.Done():
			return fmt.Errorf("enet: %d of %d clients connected: %w", int(C.eb_clients_connected()), n, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

func (c *enetClients) counts() (downRecv, upSent uint64) {
	var a, b C.uint64_t
	C.eb_clients_counts(&a, &b)
	return uint64(a), uint64(b)
}

func (c *enetClients) setWindow(a, b int64) { C.eb_set_window(C.int64_t(a), C.int64_t(b)) }

func (c *enetClients) finish() {
	c.once.Do(func() {
		C.eb_clients_stop()
		<-c.done
		C.eb_clients_debug()
		C.eb_clients_stats(&c.st)
		c.dn, _ = statsFromC(&c.st)
		C.free(unsafe.Pointer(c.st.lat_us))
		c.st.lat_us, c.st.lat_n = nil, 0
	})
}

func (c *enetClients) windowTraffic() trafficSnap {
	c.finish()
	t := c.st.traffic
	return trafficSnap{uint64(t[0]), uint64(t[1]), uint64(t[2]), uint64(t[3])}
}

func (c *enetClients) down() dirStats { c.finish(); return c.dn }
func (c *enetClients) upSent() uint64 { c.finish(); return uint64(c.st.sent_win) }

func (c *enetClients) close() {
	c.finish()
	C.eb_clients_close()
}
