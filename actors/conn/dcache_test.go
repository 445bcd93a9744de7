package conn

import (
	"testing"

	"github.com/ghostwire/ghostwire/actors/msg"
)

// TestShardKeepsHandledDatagrams: a compact datagram (the gateway's
// Stager copies a client's packet into one, msg.Datagram.CompactWith) goes
// to its shard's cache once its connection handled it, for the Stager's
// goroutine to take back through the depot, not to the pool.
func TestShardKeepsHandledDatagrams(t *testing.T) {
	x := record(t, 1)
	s, cs := benchShard(t, x, 1)
	var st Stager
	full := clientDatagram(x.steps[0][0])
	d := full.CompactWith(st.Datagrams())
	full.Release()
	if d == nil || len(d.Buf) != msg.TinyDatagram {
		t.Fatalf("the client's first packet (%d bytes) is not a tiny copy", len(x.steps[0][0]))
	}
	s.post(cs[0], d)
	s.round(benchStep)
	if st := cs[0].srv.Stats(); st.Accepted != 1 {
		t.Fatalf("accepted %d, want the datagram handled", st.Accepted)
	}
	if n := s.dc.Len(); n != 1 || !s.dc.Holds(d) {
		t.Fatalf("the shard's cache holds %d datagrams (the handled one: %v)", n, s.dc.Holds(d))
	}
}
