package udp

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"
)

func TestBatchRoundTripLoopback(t *testing.T) {
	for _, tc := range []struct{ name, send, listen string }{
		{name: "ipv4 socket", send: "127.0.0.1:0", listen: "127.0.0.1:0"},
		{name: "dual-stack socket", send: "127.0.0.1:0", listen: ":0"},
		{name: "dual-stack sender", send: ":0", listen: "127.0.0.1:0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			a, err := Listen(ctx, tc.send, 8)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			b, err := Listen(ctx, tc.listen, 8)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			dst := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), b.LocalAddr().Port())

			const count = 20 // more than one batch
			out := make([]Message, count)
			for i := range out {
				p := []byte(fmt.Sprintf("datagram %02d", i))
				out[i] = Message{Buf: p, N: len(p), Addr: dst}
			}
			if n, err := a.WriteBatch(out); err != nil || n != count {
				t.Fatalf("WriteBatch = %d, %v; want %d", n, err, count)
			}
			in := make([]Message, 8)
			for i := range in {
				in[i].Buf = make([]byte, MaxDatagram)
			}
			seen := map[string]bool{}
			deadline := time.Now().Add(5 * time.Second)
			for len(seen) < count && time.Now().Before(deadline) {
				n, err := b.ReadBatch(in)
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range in[:n] {
					if m.Addr.Port() != a.LocalAddr().Port() || !m.Addr.Addr().Is4() {
						t.Fatalf("source %v, want 127.0.0.1:%d", m.Addr, a.LocalAddr().Port())
					}
					if !bytes.HasPrefix(m.Buf[:m.N], []byte("datagram ")) {
						t.Fatalf("payload %q", m.Buf[:m.N])
					}
					seen[string(m.Buf[:m.N])] = true
				}
			}
			if len(seen) != count {
				t.Fatalf("received %d distinct datagrams, want %d", len(seen), count)
			}
		})
	}
}

func TestCloseUnblocksRead(t *testing.T) {
	s, err := Listen(context.Background(), "127.0.0.1:0", 4)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		ms := []Message{{Buf: make([]byte, MaxDatagram)}}
		_, err := s.ReadBatch(ms)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	s.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("ReadBatch on a closed socket returned nil error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ReadBatch still blocked after Close")
	}
}

func TestListenRejectsBadBatch(t *testing.T) {
	if _, err := Listen(context.Background(), "127.0.0.1:0", 0); err == nil {
		t.Fatal("Listen accepted maxBatch 0")
	}
}
