package gateway

import (
	"bytes"
	"testing"
)

// FuzzRouterHandle feeds arbitrary datagrams, from the connected client's
// address or from a stranger, to a gateway router with one live connection
// (the connection's session driven synchronously). Whatever the bytes:
// no panic; each datagram has exactly one fate in the counters; only a
// byte-exact genuine packet is ever accepted, and only the genuine connect
// request is ever granted.
func FuzzRouterHandle(f *testing.F) {
	const warm, genuine = 30, 10
	x := recordExchange(f, warm+genuine)
	for _, st := range x.steps[warm:] {
		for _, p := range st {
			f.Add(p, true)
		}
	}
	f.Add(x.req, false)
	f.Add([]byte{0xFF, 0, 0}, true)
	isGenuine := func(p []byte) bool {
		for _, st := range x.steps[warm:] {
			for _, g := range st {
				if bytes.Equal(p, g) {
					return true
				}
			}
		}
		return false
	}
	f.Fuzz(func(t *testing.T, pkt []byte, fromClient bool) {
		if len(pkt) > len(new([1200]byte)) {
			pkt = pkt[:1200] // the socket truncates to MaxDatagram
		}
		rp := newReplay(t, x)
		for range warm {
			rp.step()
		}
		before, in0 := rp.srv.Stats(), rp.r.st.datagramsIn.Load()
		fates0 := fates(rp.r.st)
		rp.replayOne(pkt, fromClient)
		after := rp.srv.Stats()
		if got := rp.r.st.datagramsIn.Load() - in0; got != 1 {
			t.Fatalf("datagrams in %d, want 1", got)
		}
		if got := fates(rp.r.st) - fates0; got != 1 {
			t.Fatalf("fates %d for one datagram", got)
		}
		if after.Accepted != before.Accepted && !(fromClient && isGenuine(pkt)) {
			t.Fatalf("accepted a forgery: %x", pkt)
		}
		if rp.r.st.granted.Load() != 0 && !bytes.Equal(pkt, x.req) {
			t.Fatalf("granted a forged connect request: %x", pkt)
		}
	})
}

// fates is the sum of the gateway's per-datagram outcomes.
func fates(c *counters) uint64 {
	return c.garbage.Load() + c.unexpected.Load() + c.unknownConn.Load() + c.handshakeLimited.Load() +
		c.handshakes.Load() + c.routed.Load() + c.inboundDropped.Load()
}
