package gateway

import (
	"math/rand/v2"
	"testing"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/handshake"
)

// 0 of 1,000,000 bit-flipped copies of a genuine packet are accepted, on the
// pure path: the gateway's router (classify + route) and the connection's
// session (replay window, then AEAD), without sockets or actors so a million
// fits the test budget. The base packet carries a sequence number the server
// has not seen, so every copy whose flips spare the sequence reaches the AEAD
// check; afterwards the genuine packet is still accepted — forgeries moved no
// window. (TestHostileTraffic sends a smaller count over a real socket.)
func TestBitFlipsNeverAuthenticate(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	const warm = 100
	x := recordExchange(t, warm+1)
	rp := newReplay(t, x)
	for range warm {
		rp.step()
	}
	base := x.steps[warm]
	if len(base) == 0 {
		t.Fatal("no client packet at the base step")
	}
	if k, _ := handshake.Classify(base[0]); k != handshake.KindData {
		t.Fatalf("base packet kind %v, want short-form data", k)
	}
	before := rp.srv.Stats()
	routed0 := rp.r.st.routed.Load()
	rng := rand.New(rand.NewPCG(11, 13))
	rp.now += 1 // same instant as the genuine packet would arrive
	for range n {
		d := msg.NewDatagram()
		d.N = copy(d.Buf[:], base[0])
		d.Addr = benchClient
		for range 1 + rng.IntN(3) {
			bit := rng.IntN(8 * d.N)
			d.Buf[bit/8] ^= 1 << (bit % 8)
		}
		if d.N == len(base[0]) && string(d.Bytes()) == string(base[0]) {
			d.Release() // flips cancelled out: not a forgery
			continue
		}
		if !rp.r.handle(rp.ctx, d) {
			d.Release()
		}
	}
	after := rp.srv.Stats()
	if after.Accepted != before.Accepted {
		t.Fatalf("%d of %d bit-flipped packets accepted", after.Accepted-before.Accepted, n)
	}
	routed := rp.r.st.routed.Load() - routed0
	if rejected := after.Rejected() - before.Rejected(); rejected != routed {
		t.Fatalf("routed %d forgeries, session rejected %d", routed, rejected)
	}
	if after.AuthFailed == before.AuthFailed {
		t.Fatal("no forgery reached the AEAD check: the test did not test authentication")
	}
	t.Logf("%d forgeries: %d garbage at the gateway, %d routed; at the session %d auth failed, %d replayed, %d bad header",
		n, rp.r.st.garbage.Load()+rp.r.st.unknownConn.Load()+rp.r.st.unexpected.Load(), routed,
		after.AuthFailed-before.AuthFailed, after.Replayed-before.Replayed, after.BadHeader-before.BadHeader)
	rp.step() // the genuine packet
	if got := rp.srv.Stats().Accepted; got != after.Accepted+uint64(len(base)) {
		t.Fatalf("genuine packet after the forgeries: accepted %d, want %d", got, after.Accepted+uint64(len(base)))
	}
}
