package conn

import (
	"runtime"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/move"
)

// maxConnInUseBytes bounds what one connection keeps on its shard in use:
// the Conn, its session (handshake keys and replay window, notify, events,
// moves, control), its ghost manager with an empty table, and the moves
// kept for a resend, after two seconds of a client's 30 Hz moves and the
// zone's controls (no events, no ghosts). Measured over 1,000 connections
// (over 200, the process's shared state — free lists, interned configs,
// pools — moved it by ±30 B from run to run): 2,400 B with the session's
// event Receiver made at the client's first event (this client sends
// none; 2,480 B with one made at the start); 2,560 B (-race alike) with
// notify's Conn at 192 B (2,608 with it at 240, thirty-sixth pass); 2,830 B with the 256-byte
// Conn (the zone's epoch in connRare, one time for a resend's wait, the
// held input and kept events behind one pointer, the user data a string,
// four bools a byte; thirty-first pass), 2,894–2,902 B with the 320-byte
// one and the rest as follows; 2,926 B with the event
// Sender at 120 B and Receiver at 80 (a section's state on the stack of
// its Write and Read); 2,958–2,966 B with the
// moves kept for a resend in 12 bytes each (the client's CRC not kept:
// the eight a connection keeps room for, the 96-byte class); 2,998–3,003 B (-race alike)
// with the 320-byte Conn (the input a datagram collects is the shard's,
// a held Control's deadline follows from its arrival; eighteenth pass),
// 3,030–3,035 B with the 352-byte one. Over 200: 3,024–3,062 B with the
// per-datagram fields in 160 bytes (seventeenth pass); 3,212–3,213 B (3,184 B
// under -race) with the 128-byte handshake Session (a 128-sequence replay
// window; thirteenth pass); 3,276–3,341 B (3,313 B under
// -race) with the session's 480-byte Server, 256-byte notify.Conn and
// handshake Session, 80-byte ControlWriter and 112-byte event Receiver
// (twelfth pass); 3,403–3,463 B (3,403 B
// under -race) with the 352-byte Conn (the pool read through the shard,
// the inputs held during a lookup and the lookup count made when needed);
// 3,467–3,495 B (3,435 B
// under -race) with the 384-byte one and the moves kept for a resend in 16 bytes each (the eight
// a connection keeps room for: the 128-byte class; 3,499–3,500 B with 20
// bytes each, the 160-byte class); 3,596–3,628 B (3,656 B
// under -race) with the handshake Session and notify Conn at 288 B and the
// event Sender and Receiver at 144 and 128 (3,628–3,660 B with the notify
// Conn at 320; 3,691–3,751 B, also under -race, with them at
// 320, 160 and 144) and the session's pooled event state (eleventh pass; 4,024–4,083
// B, 4,051 B under -race, before it), with the 384-byte Conn (4,087–4,119 B, 4,147 B under -race
// with the 448-byte one; 4,104–4,136 B with the
// 112-byte ghost manager; 4,146–4,174
// B while the handshake Session was 352 bytes; 4,514 B before the ninth
// pass: the ghost manager's copy of the table's Stats, the 576-byte
// Server, the 352-byte notify.Conn and event.Sender, moves kept in 32
// bytes each). The shard's own buffers are not in it;
// the ghost table's footprint is replication/ghost's TestTableFootprint. A
// size check, not a timing one.
const maxConnInUseBytes = 2440

func TestConnInUseFootprint(t *testing.T) {
	const n, steps = 1000, 60
	x := record(t, steps)
	s, _ := benchShard(t, x, 0) // the shard's own buffers are not the connections'
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	cs := make([]*Conn, n)
	for i := range cs {
		sess, _ := grantFor(t, x.req)
		c := &Conn{sh: s, hs: sess, player: 7, hidx: -1}
		if err := c.start(0, 0); err != nil {
			t.Fatal(err)
		}
		cs[i] = c
	}
	var ctl move.ControlState
	for i := range steps {
		now := time.Duration(i+1) * benchStep
		ctl.Pos[0] += 0.2
		for _, c := range cs {
			step(s, c, x.steps[i], now, ctl)
		}
	}
	s.flush()
	runtime.GC()
	runtime.GC() // the second empties the message pools (sync.Pool keeps a victim cache for one more)
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(cs)
	runtime.KeepAlive(s)
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	t.Logf("a connection in use: %d B", per)
	for _, c := range cs {
		if c.rare != nil || c.side != nil {
			t.Fatalf("a connection in steady use made its rare state (%v) or side state (%v)", c.rare != nil, c.side != nil)
		}
	}
	if per > maxConnInUseBytes {
		t.Fatalf("a connection in use keeps %d B, want ≤ %d", per, maxConnInUseBytes)
	}
}
