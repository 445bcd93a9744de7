package session_test

import (
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/session"
)

// footprint returns the live heap bytes per instance that mk keeps, over n
// instances, measured after GC. A size check, not a timing one.
func footprint(t *testing.T, n int, mk func() any) uint64 {
	t.Helper()
	keep := make([]any, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range keep {
		keep[i] = mk()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	if after.HeapAlloc < before.HeapAlloc {
		return 0
	}
	return (after.HeapAlloc - before.HeapAlloc) / uint64(n)
}

// serverSession runs one handshake and returns the server's session, which
// NewServer only reads.
func serverSession(t *testing.T) *handshake.Session {
	t.Helper()
	var key [handshake.KeySize]byte
	seeded(3).Read(key[:])
	hcfg := handshake.DefaultServerConfig()
	hcfg.ProtocolID, hcfg.Addr = protoID, serverAddr
	hs, err := handshake.NewServer(hcfg, key, t0, seeded(4))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := handshake.IssueToken(key, handshake.TokenParams{
		PlayerID: 1, ProtocolID: protoID, Expiry: time.Hour, Timeout: 10 * time.Second,
		ServerAddrs: []serverAddrT{serverAddr},
	}, t0, seeded(5))
	if err != nil {
		t.Fatal(err)
	}
	cli, err := session.NewClient(tok, serverAddr, session.DefaultClientConfig(), nil, t0, 0)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := cli.Poll(0, nil)
	_, grant, err := hs.Handle(nil, req, clientAddr, t0, handshake.LoadNormal)
	if err != nil || grant == nil {
		t.Fatalf("handshake: %v", err)
	}
	sess, _ := grant.Session()
	return sess
}

// Bounds on what one fresh connection keeps on the server with the default
// configs: they fail when a ring or window goes back to being preallocated at
// its maximum (the smallest of those was ~14 KB). Generous on purpose: a size
// check, not a timing one.
const (
	maxServerBytes      = 1280    // measured 868 B alone with the notify gap times made at the first gap; 900 B alone and 1,083 B after the package's other tests with 16-byte notify records (a ring of 4 in 64 B); 932 B alone with the event Sender at 120 B and Receiver at 80 B (a section's budgets and stream marks on the stack of its Write and Read); 964 B alone with the event Receiver at 96 B; 1,007 B alone with the Server at 448 B; 1,012 B alone with the notify Conn at 240 B; 1,028–1,029 B alone, 1,210 B after the package's other tests, with the move ControlWriter at 64 B; 1,060–1,061 B alone, 1,243 B after the package's other tests (1,275 under -race), with the Server at 480 B, the notify Conn at 256 and the move ControlWriter at 80 (1,075–1,103 and 1,257 B with the ControlWriter at 96; 1,107 and 1,289–1,293 B with the Conn at 288; 1,139–1,165 and 1,323 B with the Server at 512), and the handshake Session and notify Conn at 288 B and the event Sender 144 B and Receiver 128 B (1,171 and 1,353–1,357 B with the notify Conn at 320; 1,203 and 1,385–1,387 B with the Session at 320, the Sender at 152 and the Receiver at 136; 1,539 and 1,721–1,724 B before; 1,667 and 1,849 B before the ninth pass; was ~129 KB, then ~14.6 KB, ~6.9 KB, ~4.5 KB before the sixth pass)
	maxServerInUseBytes = 1308    // measured 1,296 B (-race alike) with the notify Conn at 192 B; 1,344 B with the notify gap times made at the first gap (a loss-free link never does); 1,376 B with 16-byte notify records (a ring of 4 in 64 B, was 96); 1,408 B with the CRCs of the moves SetControl may ask for in the Server (crcFIFO: three inline, a slice only while a zone lags), 1,440 B with a four-entry ring of its own; 1,440 B with the event Sender at 120 B and Receiver at 80 B (a section's budgets and stream marks on the stack of its Write and Read); 1,472 B with the event Receiver at 96 B (32-bit counters, the trim period in the shared Config); 1,488 B with the Server at 448 B (32-bit packet counts); 1,518–1,520 B with the notify Conn at 240 B (Dropped derived, two 32-bit counters); 1,534–1,536 B (-race alike) with the move ControlWriter at 64 B (80 with the hold's start and Full counters of its own); 1,552 B with the handshake Session at 128 B (a 128-sequence replay window, 3 words where 1,024 took 17, and no unused receiving protector state); 1,680 B with it at 256, the Server at 480 B, the notify Conn at 256, the ControlWriter at 80 and the event Receiver at 112 (1,696 B -race alike with the Receiver at 128; 1,728 B with the Session at 288; 1,744 B with the ControlWriter at 96; 1,776 B with the Conn at 288; 1,805–1,808 B with the Server at 512): event rings and stream/lane state pooled once idle, transmission state pooled, unordered/staggered state on use, payloads read into the shard's scratch, notify ring of 4, the handshake Session and notify Conn at 288 B, the event Sender at 144 and Receiver at 128 (1,840 B with the notify Conn at 320; 1,904 B with the others at 320, 160 and 144 too; 2,856 B before; 2,888 B with the handshake Session at 352; 3,016 B before the ninth pass; ~11.5 KB before the event rings were sized by use, ~6.0 KB before the sixth pass)
	maxRelayBytes       = 4 << 10 // measured ~1.3 KB: the section buffer (was ~75 KB)
	// maxServerGhostsBytes: TestServerInUseFootprint's Server with a
	// ghost record in every packet.
	maxServerGhostsBytes = 1356 // measured 1,344 B (-race alike) with the notify Conn at 192 B; 1,392 B with the notify gap times made at the first gap; 1,421–1,424 B with 16-byte notify records; 1,456 B with the CRCs in the Server; 1,488 B with the event Sender at 120 B and Receiver at 80 B; 1,520 B with the event Receiver at 96 B; 1,536 B with the Server at 448 B; 1,565–1,568 B with the notify Conn at 240 B; 1,581–1,584 B (-race alike) with it at 256; 1,600 B with the ControlWriter at 80 B, 1,608 B while the fates waiting for PopGhostFates were 24-byte notify.Fates, 1,640 B while the ghost packets' ring held 64-bit sequences
)

// TestServerLayout: a Server stays in the 448-byte size class (480 while
// its packet counts, the acked control move and the superseded count were
// 64-bit and the probe and Disconnect counts 32-bit; 512 while it kept
// holdUntil, the seqRing's bound, the Applier's rare counters and
// PacketsOut; 576 while it held its own 56-byte packet writer and the
// Disconnect time; see ShareScratch).
func TestServerLayout(t *testing.T) {
	if n := unsafe.Sizeof(session.Server{}); n > 448 {
		t.Errorf("Server is %d bytes, over the 448-byte size class", n)
	}
}

func TestServerFootprint(t *testing.T) {
	sess := serverSession(t)
	cfg := session.DefaultServerConfig()
	per := footprint(t, 200, func() any {
		s, err := session.NewServer(sess, cfg, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
	t.Logf("session.NewServer: %d B per connection", per)
	if per > maxServerBytes {
		t.Fatalf("session.NewServer keeps %d B per connection, want ≤ %d", per, maxServerBytes)
	}
}

func TestGhostRelayFootprint(t *testing.T) {
	per := footprint(t, 200, func() any {
		r, err := session.NewGhostRelay(session.MaxPacketSize, 0)
		if err != nil {
			t.Fatal(err)
		}
		return r
	})
	t.Logf("session.NewGhostRelay: %d B per connection", per)
	if per > maxRelayBytes {
		t.Fatalf("session.NewGhostRelay keeps %d B per connection, want ≤ %d", per, maxRelayBytes)
	}
}

// TestServerInUseFootprint measures what a Server keeps while in use: a
// client sending moves at 30 Hz and an event every third of a second each
// way, after ten seconds of that (rings at their working size, trims done).
// It counts what dropping the Servers frees, so the clients are not in it.
func TestServerInUseFootprint(t *testing.T) {
	const n = 50
	pairs := make([]*pair, n)
	sc := session.NewScratch() // one per goroutine, as a connection shard shares it
	for i := range pairs {
		p := newPairN(t, 0)
		p.srv.ShareScratch(sc)
		p.h.moves = make([]move.Move, 0, 64) // the server hands over a few moves per round
		for range 300 {
			p.step(t)
		}
		pairs[i] = p
	}
	per := serverBytesEach(pairs, sc)
	t.Logf("session.Server in use: %d B per connection", per)
	if per > maxServerInUseBytes {
		t.Fatalf("a Server in use keeps %d B per connection, want ≤ %d", per, maxServerInUseBytes)
	}
}

// maxServerQuietBytes: TestServerInUseQuietFootprint's Server, whose
// client sends no events. Measured 1,152 B with the event Receiver made
// at the client's first event (Server.receiver); 1,232 B while every
// Server made one at its start.
const maxServerQuietBytes = 1184

// TestServerInUseQuietFootprint is TestServerInUseFootprint with a client
// that sends no events (many players never chat, trade or cast): its
// Server makes no event Receiver (80 bytes).
func TestServerInUseQuietFootprint(t *testing.T) {
	const n = 50
	pairs := make([]*pair, n)
	sc := session.NewScratch()
	for i := range pairs {
		p := newPairN(t, 0)
		p.quiet = true
		p.srv.ShareScratch(sc)
		p.h.moves = make([]move.Move, 0, 64)
		for range 300 {
			p.step(t)
		}
		pairs[i] = p
	}
	if st := pairs[0].srv.Stats(); st.EventsRecv.Sections != st.Moves.Sections || st.Moves.Sections < 290 {
		t.Fatalf("%d event sections counted in %d data packets", st.EventsRecv.Sections, st.Moves.Sections)
	}
	per := serverBytesEach(pairs, sc)
	t.Logf("session.Server in use, its client quiet: %d B per connection", per)
	if per > maxServerQuietBytes {
		t.Fatalf("a Server in use whose client sends no events keeps %d B per connection, want ≤ %d", per, maxServerQuietBytes)
	}
}

// oneGhostRecord is a GhostWriter whose every section holds one record
// (three bits the client skips: newPairSkipGhosts).
type oneGhostRecord struct{}

func (oneGhostRecord) Pending() bool { return false }

func (oneGhostRecord) Write(w *bitstream.Writer, seq uint64, now time.Duration) (int, error) {
	return 1, w.WriteBits(5, 3)
}

// TestServerInUseGhostsFootprint is TestServerInUseFootprint with a ghost
// record in every server packet, as on a server where every player has
// ghosts in view: the ring of ghost packets awaiting their fates and the
// fate queue are in use too.
func TestServerInUseGhostsFootprint(t *testing.T) {
	const n = 50
	pairs := make([]*pair, n)
	sc := session.NewScratch()
	for i := range pairs {
		p := newPairSkipGhosts(t, 0)
		p.srv.ShareScratch(sc)
		p.h.moves = make([]move.Move, 0, 64)
		p.ghosts = oneGhostRecord{}
		for range 300 {
			p.step(t)
		}
		pairs[i] = p
	}
	if st := pairs[0].srv.Stats(); st.Counters.DataOut == 0 || len(pairs[0].fates) == 0 {
		t.Fatalf("no ghost fates: %+v", st)
	}
	per := serverBytesEach(pairs, sc)
	t.Logf("session.Server in use with ghosts: %d B per connection", per)
	if per > maxServerGhostsBytes {
		t.Fatalf("a Server in use with ghosts keeps %d B per connection, want ≤ %d", per, maxServerGhostsBytes)
	}
}

// serverBytesEach is the live heap each pair's Server holds: the heap with
// them, less the heap once they are dropped, over the pairs. The shared
// scratch sc is the shard's, not the connections': it stays live for both
// readings.
func serverBytesEach(pairs []*pair, sc *session.Scratch) int64 {
	var with, without runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&with)
	for _, p := range pairs {
		p.srv = nil
	}
	runtime.GC()
	runtime.ReadMemStats(&without)
	runtime.KeepAlive(pairs)
	runtime.KeepAlive(sc)
	return int64(with.HeapAlloc-without.HeapAlloc) / int64(len(pairs))
}
