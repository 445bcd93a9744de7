package session

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// WriteSeed writes one seed of a []byte fuzz target in the corpus format.
func WriteSeed(t testing.TB, target string, data []byte) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
	if err := os.WriteFile(filepath.Join(dir, hex.EncodeToString(sum[:8])), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGenerateFuzzSeeds runs a real session — moves, events both ways, a
// ghost table, a teleport — and, with -gen-seeds, writes the plaintext of its
// payloads as seeds of the section fuzzers. Without the flag it still runs
// and checks that every payload decodes, so the generator cannot rot.
func TestGenerateFuzzSeeds(t *testing.T) {
	tok, grant, acc := fzGrant(t)
	sess, _ := grant.Session()
	var sink fzSink
	srv, err := NewServer(sess, DefaultServerConfig(), &sink, 0)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := NewClient(tok, fzServer, DefaultClientConfig(), nil, fzT0, 0)
	if err != nil {
		t.Fatal(err)
	}
	cli.Poll(0, nil)
	if err := cli.Receive(0, acc); err != nil {
		t.Fatal(err)
	}
	reg := cli.cfg.Registry
	tab, err := ghost.NewTable(reg, ghost.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	npc, _ := reg.Lookup(ghost.NPCClassID)
	var state move.ControlState
	var c2s, s2c [][]byte
	view := make([]ghost.ViewEntry, 5)
	for i := 1; i <= 60; i++ {
		now := time.Duration(i) * 50 * time.Millisecond
		for cli.InputDue(now) {
			cli.Input(move.Move{Forward: int8(i), Yaw: uint16(i * 1000), Buttons: uint16(i % 2)})
		}
		if i%7 == 0 {
			cli.SendEvent(i%3, bytes.Repeat([]byte{byte(i)}, i))
			srv.SendUnordered([]byte("unordered"))
		}
		if i%11 == 0 {
			srv.SendEvent(2, bytes.Repeat([]byte("big"), 700)) // fragmented
			cli.SendUnguaranteed([]byte("emote"))
		}
		for k := range view {
			a := float64(i)/10 + float64(k)
			view[k] = ghost.ViewEntry{Entity: uint64(k + 1), Class: npc, Priority: 1,
				State: ghost.State{Pos: [3]float64{10 * math.Cos(a), 0, 10 * math.Sin(a)}, Health: int32(i)}}
		}
		if i == 40 {
			view = view[:3] // two leave: kills
		}
		if err := tab.SetView(now, view); err != nil {
			t.Fatal(err)
		}
		out, err := cli.Poll(now, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) > 0 {
			short := out
			if out[0] == 0x23 {
				short = out[RoutedPrefixSize:]
			}
			var r bitstream.Reader
			pt, _, err := srv.e.open(now, short, fzClient, new([MaxPacketSize]byte), &r, new(notify.Header), new(handshake.Scratch))
			if err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
			c2s = append(c2s, bytes.Clone(pt))
			if err := srv.readSections(&r, pt, new([move.MaxWindow]move.Move), nil); err != nil {
				t.Fatal(err)
			}
			srv.processFates()
		}
		state = move.Walk(state, move.Move{Forward: int8(i), Dt: 32}, 1.0/30)
		srv.SetControl(cli.stream.Newest(), state)
		if i == 30 {
			srv.ForceControl()
		}
		sout, err := srv.Poll(now, nil, tab)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range srv.PopGhostFates(nil) {
			tab.OnFate(f)
		}
		if len(sout) > 0 {
			pt, _, err := cli.e.open(now, sout, fzServer, &cli.pt, &cli.r, new(notify.Header), new(handshake.Scratch))
			if err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
			s2c = append(s2c, bytes.Clone(pt))
			if len(pt) > 0 {
				if err := cli.readSections(now, pt); err != nil {
					t.Fatalf("round %d: %v", i, err)
				}
			}
			cli.processFates()
		}
	}
	if len(c2s) < 30 || len(s2c) < 30 || cli.Mirror().Len() != 3 || sink.events == 0 {
		t.Fatalf("generator session too thin: %d/%d payloads, %d ghosts, %d event bytes", len(c2s), len(s2c), cli.Mirror().Len(), sink.events)
	}
	if !*genSeeds {
		return
	}
	for i, pt := range c2s {
		if i%3 == 0 || len(pt) > 40 {
			WriteSeed(t, "FuzzServerSections", pt)
		}
	}
	for i, pt := range s2c {
		if i%3 == 0 || len(pt) > 40 {
			WriteSeed(t, "FuzzClientSections", pt)
		}
	}
}
