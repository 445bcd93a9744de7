package session

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
)

// The section decoders run only on packets that authenticated, so a fuzzer
// cannot reach them through Receive; these targets feed them directly with
// arbitrary plaintext. Seeds: testdata/fuzz/Fuzz{Server,Client}Sections.

var (
	fzT0     = time.Unix(1_700_000_000, 0)
	fzServer = netip.MustParseAddrPort("10.0.0.1:7777")
	fzClient = netip.MustParseAddrPort("192.0.2.10:50000")
)

func fzRand(seed uint64) *rand.ChaCha8 {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	return rand.NewChaCha8(s)
}

// fzGrant runs a handshake and returns the token, the server's grant and
// its Accepted reply.
func fzGrant(t testing.TB) ([]byte, *handshake.Grant, []byte) {
	var key [handshake.KeySize]byte
	fzRand(1).Read(key[:])
	cfg := handshake.DefaultServerConfig()
	cfg.Addr = fzServer
	hs, err := handshake.NewServer(cfg, key, fzT0, fzRand(2))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := handshake.IssueToken(key, handshake.TokenParams{
		Expiry: time.Hour, Timeout: 10 * time.Second, ServerAddrs: []netip.AddrPort{fzServer},
	}, fzT0, fzRand(3))
	if err != nil {
		t.Fatal(err)
	}
	hc, err := handshake.NewClient(tok, fzServer)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := hc.AppendRequest(nil)
	acc, grant, err := hs.Handle(nil, req, fzClient, fzT0, handshake.LoadNormal)
	if err != nil || grant == nil {
		t.Fatalf("handshake: %v", err)
	}
	return tok, grant, acc
}

type fzSink struct{ moves, events int }

func (s *fzSink) Move(move.Move)      { s.moves++ }
func (s *fzSink) Event(e event.Event) { s.events += len(e.Payload) }

func FuzzServerSections(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0})
	// No moves, an event base section (generation 7, lane 2 at 40), no events.
	w := bitstream.NewWriter(make([]byte, 32))
	w.WriteFlag(false)
	w.WriteFlag(true)
	w.WriteBits(7, 64)
	w.WriteFlag(true)
	w.WriteBits(2, 3)
	w.WriteGamma(41)
	w.WriteFlag(false)
	w.WriteFlag(false)
	f.Add(append([]byte(nil), w.Bytes()...))
	_, grant, _ := fzGrant(f)
	sess, err := grant.Session()
	if err != nil {
		f.Fatal(err)
	}
	var sink fzSink
	srv, err := NewServer(sess, DefaultServerConfig(), &sink, 0)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, pt []byte) {
		last := srv.LastApplied()
		var r bitstream.Reader
		if err := srv.readSections(&r, pt, new([move.MaxWindow]move.Move), nil); err == nil && srv.LastApplied() < last {
			t.Fatalf("moves went back from %d to %d", last, srv.LastApplied())
		}
	})
}

func FuzzClientSections(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0})
	// No control, events applied (lane 0 up to 5, lane 3 up to 1), no
	// events, no ghosts.
	w := bitstream.NewWriter(make([]byte, 32))
	w.WriteFlag(false)
	w.WriteFlag(true)
	w.WriteFlag(true)
	w.WriteBits(0, 3)
	w.WriteGamma(5)
	w.WriteFlag(true)
	w.WriteBits(3, 3)
	w.WriteGamma(1)
	w.WriteFlag(false)
	w.WriteFlag(false)
	w.WriteGamma(1)
	f.Add(append([]byte(nil), w.Bytes()...))
	tok, _, _ := fzGrant(f)
	c, err := NewClient(tok, fzServer, DefaultClientConfig(), nil, fzT0, 0)
	if err != nil {
		f.Fatal(err)
	}
	for i := 0; i < 40; i++ { // moves to acknowledge
		c.Input(move.Move{Forward: 50})
	}
	now := time.Duration(0)
	f.Fuzz(func(t *testing.T, pt []byte) {
		now += time.Millisecond
		c.readSections(now, pt) // errors are expected; panics and hangs are not
		if c.Mirror().Len() > c.cfg.Mirror.MaxGhosts {
			t.Fatalf("mirror holds %d ghosts", c.Mirror().Len())
		}
	})
}
