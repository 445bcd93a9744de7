package udp

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

// TestReadWaitsCountsEmptySocket: a read that finds a datagram queued
// does not wait; one on an empty socket waits once on the poller (its
// deadline then ends it) and is counted.
func TestReadWaitsCountsEmptySocket(t *testing.T) {
	ctx := context.Background()
	a, err := Listen(ctx, "127.0.0.1:0", 4)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Listen(ctx, "127.0.0.1:0", 4)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	in := []Message{{Buf: make([]byte, MaxDatagram)}}
	p := []byte("queued")
	if n, err := a.WriteBatch([]Message{{Buf: p, N: len(p), Addr: b.LocalAddr()}}); n != 1 || err != nil {
		t.Fatalf("WriteBatch = %d, %v", n, err)
	}
	// Loopback delivers within the send: the datagram is queued now.
	if n, err := b.ReadBatch(in); n != 1 || err != nil {
		t.Fatalf("ReadBatch = %d, %v", n, err)
	}
	if w := b.ReadWaits(); w != 0 {
		t.Fatalf("ReadWaits after a read of a queued datagram = %d, want 0", w)
	}
	// Empty: the read waits on the poller until its deadline.
	if err := b.uc.SetReadDeadline(time.Now().Add(10 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ReadBatch(in); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("ReadBatch on an empty socket = %v, want the deadline", err)
	}
	if w := b.ReadWaits(); w != 1 {
		t.Fatalf("ReadWaits after a read of an empty socket = %d, want 1", w)
	}
	if w := a.ReadWaits(); w != 0 {
		t.Fatalf("ReadWaits of a socket that only wrote = %d, want 0", w)
	}
}
