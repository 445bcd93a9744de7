package conformance

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/ghostwire/ghostwire/actors/tokenkey"
	"github.com/ghostwire/ghostwire/actors/zone"
	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// These tests check the vector files against the spec's text, with
// independent code (x/crypto, HMAC, byte offsets), not only against the
// code that produced them.

func key32(t *testing.T, h string) (k [32]byte) {
	t.Helper()
	b := mustHex(h)
	if len(b) != 32 {
		t.Fatalf("key %q: %d bytes", h, len(b))
	}
	copy(k[:], b)
	return k
}

func TestHandshakeSpec(t *testing.T) {
	var v handshakeVecs
	load(t, "handshake.json", &v)
	for a, enc := range v.Addresses {
		if hx(specAddr(netip.MustParseAddrPort(a))) != enc {
			t.Errorf("addr(%s) = %s in the file", a, enc)
		}
	}
	tk := v.Token
	tok := mustHex(tk.Token)
	hdr := tok[:209]
	// § 7.4 header offsets.
	if string(hdr[0:2]) != "GW" || hdr[2] != 0 || hdr[3] != 1 || hx(hdr[4:28]) != tk.TokenID ||
		u64(binary.LittleEndian.Uint64(hdr[28:])) != tk.ProtocolID || int64(binary.LittleEndian.Uint64(hdr[36:])) != tk.Created ||
		int64(binary.LittleEndian.Uint64(hdr[44:])) != tk.Expires || int64(binary.LittleEndian.Uint32(hdr[52:])) != tk.TimeoutMS ||
		int(hdr[56]) != len(tk.Servers) {
		t.Fatalf("token header %x does not match § 7.4's layout and the token's fields", hdr)
	}
	for i, s := range tk.Servers {
		if !bytes.Equal(hdr[57+19*i:57+19*(i+1)], specAddr(netip.MustParseAddrPort(s))) {
			t.Errorf("server slot %d", i)
		}
	}
	if !bytes.Equal(hdr[57+19*len(tk.Servers):], make([]byte, 209-57-19*len(tk.Servers))) {
		t.Error("unused server slots are not zero")
	}
	x, err := chacha20poly1305.NewX(mustHex(tk.TokenKey))
	if err != nil {
		t.Fatal(err)
	}
	pt, err := x.Open(nil, mustHex(tk.TokenID), tok[209:555], hdr)
	if err != nil || hx(pt) != tk.Plaintext {
		t.Fatalf("sealed part: XChaCha20-Poly1305(token key, token id, AD header) gives %x, %v", pt, err)
	}
	if u64(binary.LittleEndian.Uint64(pt)) != tk.PlayerID || hx(pt[8:40]) != tk.C2SKey || hx(pt[40:72]) != tk.S2CKey ||
		hx(tok[555:587]) != tk.C2SKey || hx(tok[587:619]) != tk.S2CKey || hx(pt[74:74+binary.LittleEndian.Uint16(pt[72:])]) != tk.UserData {
		t.Fatal("sealed plaintext or key copies do not match § 7.4")
	}

	find := func(prefix string) []byte {
		for _, p := range v.Packets {
			if strings.HasPrefix(p.Name, prefix) {
				return mustHex(p.Hex)
			}
		}
		t.Fatalf("no %s packet", prefix)
		return nil
	}
	req, chal, resp, acc := find("ConnectRequest"), find("Challenge "), find("ChallengeResponse"), find("Accepted")
	// § 7.5: the request carries the token's header and sealed part, a zero cookie, zero padding.
	if len(req) != 1200 || req[0] != 0x07 || !bytes.Equal(req[1:556], tok[:555]) || !bytes.Equal(req[556:], make([]byte, 644)) {
		t.Error("ConnectRequest does not match § 7.5")
	}
	// § 7.6: the challenge echoes the token id; the response copies its cookie.
	if len(chal) != 49 || chal[0] != 0x0b || hx(chal[1:25]) != tk.TokenID {
		t.Error("Challenge does not match § 7.6")
	}
	if len(resp) != 1200 || resp[0] != 0x0f || !bytes.Equal(resp[1:556], tok[:555]) || !bytes.Equal(resp[556:580], chal[25:49]) || !bytes.Equal(resp[580:], make([]byte, 620)) {
		t.Error("ChallengeResponse does not match § 7.5/7.6")
	}
	// § 7.7: the Accepted tag.
	s2c := key32(t, tk.S2CKey)
	ak := specAcceptKey(s2c, netip.MustParseAddrPort(v.ServerAddr))
	if hx(ak[:]) != v.AcceptKey {
		t.Fatal("K_accept")
	}
	id := mustHex(v.ConnID)
	aead, _ := chacha20poly1305.New(ak[:])
	tag := aead.Seal(nil, append([]byte{1, 1, 0, 0}, id...), nil, append(append([]byte{0x13}, id...), mustHex(tk.TokenID)...))
	if len(acc) != 25 || acc[0] != 0x13 || !bytes.Equal(acc[1:9], id) || !bytes.Equal(acc[9:], tag) {
		t.Fatalf("Accepted %x, § 7.7 gives 13 %x %x", acc, id, tag)
	}
	// § 7.9: session keys.
	srvAddr := specAddr(netip.MustParseAddrPort(v.ServerAddr))
	if hx(specHMAC(mustHex(tk.C2SKey), []byte("ghostwire/1 c2s"), srvAddr, id)) != v.SessionKeys["client_to_server"] ||
		hx(specHMAC(mustHex(tk.S2CKey), []byte("ghostwire/1 s2c"), srvAddr, id)) != v.SessionKeys["server_to_client"] {
		t.Fatal("session keys do not match § 7.9")
	}
	// § 7.8 Denied.
	for r := 1; r <= 10; r++ {
		d := find(fmt.Sprintf("Denied reason %d ", r))
		if len(d) != 26 || d[0] != 0x17 || int(d[1]) != r || hx(d[2:]) != tk.TokenID {
			t.Errorf("Denied %d: %x", r, d)
		}
	}
	// § 7.9 protected packets, sealed independently.
	for _, p := range v.Protected {
		seq, _ := parseU64(p.Seq)
		if hx(specNonce(p.Direction, seq)) != p.Nonce || p.AD != v.ConnID+p.Header {
			t.Errorf("%s: nonce or AD not as § 7.9 builds them", p.Name)
		}
		wantKey := v.SessionKeys["client_to_server"]
		if p.Direction == 1 {
			wantKey = v.SessionKeys["server_to_client"]
		}
		a, _ := chacha20poly1305.New(mustHex(wantKey))
		hdr := mustHex(p.Header)
		out := a.Seal(append([]byte(nil), hdr...), mustHex(p.Nonce), mustHex(p.Plaintext), mustHex(p.AD))
		if hx(out) != p.Packet || p.Key != wantKey {
			t.Errorf("%s: sealing per § 7.9 gives %x, the file has %s", p.Name, out, p.Packet)
		}
		if p.LongForm != "23"+v.ConnID+p.Packet {
			t.Errorf("%s: long form", p.Name)
		}
	}
	// § 7.10 Disconnect: sealed like a protected packet with header 1B ‖ seq.
	for i, name := range []string{"Disconnect from the client", "Disconnect from the server"} {
		d := find(name)
		a, _ := chacha20poly1305.New(mustHex([]string{v.SessionKeys["client_to_server"], v.SessionKeys["server_to_client"]}[i]))
		seq := binary.LittleEndian.Uint64(d[9:17])
		ad := append(append(append([]byte(nil), id...), 0x1b), d[9:17]...)
		reason, err := a.Open(nil, specNonce(i, seq), d[17:], ad)
		if len(d) != 34 || d[0] != 0x1b || !bytes.Equal(d[1:9], id) || err != nil || len(reason) != 1 || reason[0] != byte(32+i) {
			t.Errorf("%s: %x does not open per § 7.10 (%v)", name, d, err)
		}
	}
	// § 7.11 NoConnection.
	if hx(find("NoConnection answering the long-form")) != "1f"+v.ConnID || hx(find("NoConnection answering its short")) != "1f0000000000000000" {
		t.Error("NoConnection does not match § 7.11")
	}
}

// TestSessionTranscript opens every protected datagram of session.json with
// the spec's nonce and AD, and decodes each body in § 7.18.2's order with
// fresh section decoders: the transcript is a valid connection.
func TestSessionTranscript(t *testing.T) {
	var v transcript
	load(t, "session.json", &v)
	id := mustHex(v.ConnID)
	keys := map[string][]byte{"client": mustHex(v.SessionKeys["client_to_server"]), "server": mustHex(v.SessionKeys["server_to_client"])}
	next := map[string]uint64{}
	reg, _, err := stockRegistry()
	if err != nil {
		t.Fatal(err)
	}
	mir, _ := ghost.NewMirror(reg, ghost.DefaultMirrorConfig())
	toClient, _ := event.NewReceiver(event.DefaultConfig())
	toServer, _ := event.NewReceiver(event.DefaultConfig())
	var ap move.Applier
	var echoed, reported, spawned, firstLong bool
	fullStates := 0
	var moves uint64
	sawAccepted := false
	for i, d := range v.Datagrams {
		b := mustHex(d.Hex)
		switch d.Kind {
		case "accepted":
			sawAccepted = true
			continue
		case "connect_request", "challenge_response":
			continue
		case "disconnect":
			next[d.From]++
			continue
		}
		if d.From == "client" && next["client"] == 0 {
			firstLong = strings.HasSuffix(d.Kind, "_long") && sawAccepted
		}
		if strings.HasSuffix(d.Kind, "_long") {
			if b[0] != 0x23 || !bytes.Equal(b[1:9], id) {
				t.Fatalf("datagram %d: long form prefix", i)
			}
			b = b[9:]
		}
		seq := next[d.From]
		next[d.From]++
		if u64(seq) != d.Seq {
			t.Fatalf("datagram %d: seq %s, want %d (every protected packet takes the next)", i, d.Seq, seq)
		}
		hl := len(mustHex(d.Header))
		dir := 0
		if d.From == "server" {
			dir = 1
		}
		a, _ := chacha20poly1305.New(keys[d.From])
		pt, err := a.Open(nil, specNonce(dir, seq), b[hl:], append(append([]byte(nil), id...), b[:hl]...))
		if err != nil || hx(pt) != d.Plaintext {
			t.Fatalf("datagram %d: does not open per § 7.9 (%v)", i, err)
		}
		if d.Lost || !strings.HasPrefix(d.Kind, "data") {
			if !strings.HasPrefix(d.Kind, "data") && len(pt) != 0 {
				t.Fatalf("datagram %d: ack-only with a payload", i)
			}
			continue
		}
		r := bitstream.NewReader(pt)
		if d.From == "client" {
			if err := ap.Read(r, func(m move.Move) { moves = m.Seq }); err != nil {
				t.Fatalf("datagram %d: move section: %v", i, err)
			}
			// § 7.20: a new connection's numbering: the base section is absent.
			if present, err := r.ReadFlag("events.base.present"); err != nil || present {
				t.Fatalf("datagram %d: event base section present %v (%v) on a new numbering", i, present, err)
			}
			if err := toServer.Read(r, func(event.Event) {}); err != nil {
				t.Fatalf("datagram %d: event section: %v", i, err)
			}
			continue
		}
		has, err := r.ReadFlag("control")
		if err != nil {
			t.Fatal(err)
		}
		if has {
			u, err := move.ReadControl(r, 1<<20)
			if err != nil {
				t.Fatalf("datagram %d: control section: %v", i, err)
			}
			spawned = spawned || (u.HasState && u.State.Pos[2] > 600)
			if u.HasState {
				fullStates++
			}
		}
		// § 7.20: { more:1 lane:3 γ(seq) } 0 after a present bit.
		if present, err := r.ReadFlag("events.applied.present"); err != nil {
			t.Fatal(err)
		} else if present {
			for {
				more, err := r.ReadFlag("more")
				if err != nil {
					t.Fatal(err)
				}
				if !more {
					break
				}
				lane, _ := r.ReadBits(3, "lane")
				seq, err := r.ReadGamma("seq")
				if err != nil || lane != 0 || seq != 1 {
					t.Fatalf("datagram %d: events applied: lane %d seq %d (%v), want lane 0 event 1", i, lane, seq, err)
				}
				reported = true
			}
		}
		if err := toClient.Read(r, func(e event.Event) { echoed = echoed || string(e.Payload) == "hello" }); err != nil {
			t.Fatalf("datagram %d: event section: %v", i, err)
		}
		if err := mir.Read(r, ms(d.SentMS)); err != nil {
			t.Fatalf("datagram %d: ghost section: %v", i, err)
		}
		if r.Remaining() > 7 {
			t.Fatalf("datagram %d: %d bits after the ghost section", i, r.Remaining())
		}
	}
	// The client predicted from the zero state until its spawn state came
	// (§ 5.2): its mismatching CRCs were held, so the only full states are
	// the initial one and the 1 s periodic refresh.
	if fullStates != 2 {
		t.Errorf("%d full control states in the transcript, want 2 (initial, periodic)", fullStates)
	}
	if !firstLong || !spawned || !echoed || !reported || mir.Len() != 1 || moves < 30 {
		t.Fatalf("transcript: first client packet long form %v, spawn state %v, echo %v reported %v, ghosts %d, moves %d", firstLong, spawned, echoed, reported, mir.Len(), moves)
	}
}

func TestStockVectors(t *testing.T) {
	var v struct {
		ProtocolID map[string]string   `json:"protocol_id"`
		Teleport   []teleportVec       `json:"teleport"`
		NPCIDs     []map[string]string `json:"npc_ids"`
	}
	load(t, "stock.json", &v)
	if v.ProtocolID["decimal"] != u64(tokenkey.DefaultProtocolID) {
		t.Errorf("protocol id %s, tokenkey.DefaultProtocolID is %d", v.ProtocolID["decimal"], tokenkey.DefaultProtocolID)
	}
	for _, tp := range v.Teleport {
		x, z, err := zone.ParseTeleport(mustHex(tp.Payload))
		if (err == nil) != tp.Valid || (err == nil && (f32bits(x) != tp.X || f32bits(z) != tp.Z)) {
			t.Errorf("teleport %s (%s): ParseTeleport %v %v %v", tp.Payload, tp.Note, x, z, err)
		}
	}
	for _, n := range v.NPCIDs {
		zi, _ := parseU64(n["zone_index"])
		k, _ := parseU64(n["n"])
		if u64(sim.NPCID(int(zi), k)) != n["entity"] {
			t.Errorf("NPC id %v: sim.NPCID gives %d", n, sim.NPCID(int(zi), k))
		}
	}
}

// TestSpecLinksEveryFile keeps docs/protocol.md and the files in step: every
// file is linked from the spec, and every linked file exists.
func TestSpecLinksEveryFile(t *testing.T) {
	spec, err := os.ReadFile(filepath.Join("..", "..", "docs", "protocol.md"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range files {
		names[f.Name] = true
		if !strings.Contains(string(spec), "](vectors/"+f.Name+")") {
			t.Errorf("docs/protocol.md does not link vectors/%s", f.Name)
		}
	}
	for _, m := range regexp.MustCompile(`\]\(vectors/([a-z0-9_]+\.json)\)`).FindAllStringSubmatch(string(spec), -1) {
		if !names[m[1]] {
			t.Errorf("docs/protocol.md links vectors/%s, which is not generated", m[1])
		}
	}
}
