package swarm

import (
	"net"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/batchudp"
)

// The per-bot work botswarm adds to the protocol's own, on the paths every
// move, ack and sample takes. All must be allocation-free.

func BenchmarkTruthPublish(b *testing.B) {
	var tr truth
	tr.reset(1)
	b.ReportAllocs()
	var s uint64
	for b.Loop() {
		s++
		tr.putPos(s, float32(s), float32(s))
		tr.putAck(time.Duration(s)*time.Millisecond, s)
	}
}

func BenchmarkTruthLookup(b *testing.B) {
	var tr truth
	tr.reset(1)
	for s := uint64(1); s <= 1000; s++ {
		tr.putPos(s, 1, 2)
		tr.putAck(time.Duration(s)*time.Millisecond, s)
	}
	b.ReportAllocs()
	var ok bool
	for b.Loop() {
		a, _ := tr.ackAt(900 * time.Millisecond)
		_, _, ok = tr.posAt(a)
	}
	if !ok {
		b.Fatal("lookup failed")
	}
}

func BenchmarkEchoParse(b *testing.B) {
	var buf [echoLen]byte
	p := appendEcho(buf[:], echoMsg{bot: 1, session: 2, counter: 3, sent: 4})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseEcho(p); err != nil {
			b.Fatal(err)
		}
	}
}

// spread keeps BenchmarkHeapReschedule's padding alive.
var spread [][]byte

func BenchmarkHeapReschedule(b *testing.B) {
	w := &worker{}
	const n = 5000
	for i := range n {
		// Bots far apart in memory, as a run's are (sessions in between).
		x := &bot{slot: int32(i), wake: time.Duration(i) * time.Microsecond}
		w.bots = append(w.bots, x)
		w.insert(x)
		spread = append(spread, make([]byte, 4096))
	}
	b.ReportAllocs()
	t := time.Duration(n) * time.Microsecond
	for b.Loop() {
		x := w.pop()
		t += time.Microsecond
		x.wake = t
		w.insert(x)
	}
}

// BenchmarkLoopbackSend measures what one datagram costs the sender on
// this machine: write(2) on a connected UDP socket to a local receiver
// that reads everything. On a VM this kernel path, not botswarm, bounds
// how many bots a core drives (docs/parts/botswarm-bench.md).
func BenchmarkLoopbackSend(b *testing.B) {
	if _, err := newEpollTransport(); err != nil {
		b.Skip(err)
	}
	benchLoopbackSend(b, "epoll")
}

// BenchmarkLoopbackSendShared: the same through a shared socket, whose
// datagrams leave in sendmmsg batches of 64.
func BenchmarkLoopbackSendShared(b *testing.B) {
	if _, err := newSharedTransport(false); err != nil {
		b.Skip(err)
	}
	benchLoopbackSend(b, "shared")
}

// BenchmarkLoopbackSendSharedGRO: the same to a receiver that reads with
// UDP_GRO (as botswarm's fake server does, and zoned's gateway does not):
// the kernel queues each UDP_SEGMENT group whole instead of cutting it up
// in the sender's sendmmsg — what a GRO reader saves its clients.
func BenchmarkLoopbackSendSharedGRO(b *testing.B) {
	if _, err := newSharedTransport(false); err != nil {
		b.Skip(err)
	}
	benchLoopbackSendTo(b, "shared", true)
}

func benchLoopbackSend(b *testing.B, kind string) { benchLoopbackSendTo(b, kind, false) }

func benchLoopbackSendTo(b *testing.B, kind string, gro bool) {
	peer, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	_ = peer.SetReadBuffer(4 << 20)
	done := make(chan struct{})
	if gro {
		bc := batchudp.NewConn(peer)
		if !batchudp.EnableGRO(peer) {
			b.Skip("no UDP_GRO")
		}
		go func() {
			defer close(done)
			rb := batchudp.NewBatch(16, 0)
			for bc.ReadBatch(rb) == nil {
			}
		}()
	} else {
		go func() {
			defer close(done)
			buf := make([]byte, 2048)
			for {
				if _, err := peer.Read(buf); err != nil {
					return
				}
			}
		}()
	}
	tr, err := newTransport(kind, false)
	if err != nil {
		b.Fatal(err)
	}
	s, err := tr.open(peer.LocalAddr().(*net.UDPAddr).AddrPort(), 0)
	if err != nil {
		b.Fatal(err)
	}
	pkt := make([]byte, 60) // a typical client data packet
	b.ReportAllocs()
	for b.Loop() {
		_ = tr.send(s, pkt)
	}
	tr.wait(0, func(int32, []byte, error) {}) // a shared socket: send the last batch
	b.StopTimer()
	tr.shutdown()
	peer.Close()
	<-done
}
