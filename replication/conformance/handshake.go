package conformance

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// Fixed inputs: the keys, addresses and clock every handshake vector uses.
var (
	tokenKey   = [handshake.KeySize]byte{0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a, 0x8b, 0x8c, 0x8d, 0x8e, 0x8f, 0x90, 0x91, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a, 0x9b, 0x9c, 0x9d, 0x9e, 0x9f}
	serverAddr = netip.MustParseAddrPort("203.0.113.7:7777")
	server6    = netip.MustParseAddrPort("[2001:db8::7]:7777")
	clientAddr = netip.MustParseAddrPort("198.51.100.23:50000")
	wallStart  = time.Unix(1_800_000_000, 0)
)

const stockProtocolID = 0x3130307665645747 // "GWdev001", tokenkey.DefaultProtocolID

// detRand is the fixed randomness of the vectors: ChaCha8 with a fixed seed
// (token ids, token keys, connection ids, cookie secrets).
func detRand(seed byte) *rand.ChaCha8 {
	var s [32]byte
	for i := range s {
		s[i] = seed + byte(i)
	}
	return rand.NewChaCha8(s)
}

func issueToken(seed byte, player uint64) ([]byte, error) {
	return handshake.IssueToken(tokenKey, handshake.TokenParams{
		PlayerID: player, ProtocolID: stockProtocolID, Expiry: time.Minute, Timeout: 10 * time.Second,
		ServerAddrs: []netip.AddrPort{serverAddr, server6}, UserData: []byte("team=blue"),
	}, wallStart, detRand(seed))
}

type tokenVec struct {
	TokenKey   string   `json:"token_key"`
	NowUnix    int64    `json:"now_unix"`
	PlayerID   string   `json:"player_id"`
	ProtocolID string   `json:"protocol_id"`
	Created    int64    `json:"created"`
	Expires    int64    `json:"expires"`
	TimeoutMS  int64    `json:"timeout_ms"`
	Servers    []string `json:"servers"`
	UserData   string   `json:"user_data"`
	TokenID    string   `json:"token_id"`
	C2SKey     string   `json:"client_to_server_key"`
	S2CKey     string   `json:"server_to_client_key"`
	Header     string   `json:"header"`
	Sealed     string   `json:"sealed"`
	Plaintext  string   `json:"sealed_plaintext"`
	Token      string   `json:"token"`
}

type packetVec struct {
	Name string `json:"name"`
	Hex  string `json:"hex"`
}

type sealVec struct {
	Name      string `json:"name"`
	Direction int    `json:"direction"`
	Seq       string `json:"seq"`
	Key       string `json:"key"`
	Nonce     string `json:"nonce"`
	AD        string `json:"ad"`
	Header    string `json:"header"`
	Plaintext string `json:"plaintext"`
	Packet    string `json:"packet"`
	LongForm  string `json:"long_form,omitempty"`
}

type handshakeVecs struct {
	Addresses   map[string]string `json:"addresses"`
	Token       tokenVec          `json:"token"`
	ServerAddr  string            `json:"server"`
	ClientAddr  string            `json:"client_source"`
	Packets     []packetVec       `json:"packets"`
	ConnID      string            `json:"connection_id"`
	AcceptKey   string            `json:"accept_key"`
	SessionKeys map[string]string `json:"session_keys"`
	Protected   []sealVec         `json:"protected"`
}

var handshakeSchema = []Field{
	{"vectors.addresses", "addr(a) encodings (§ 7.2, 19 bytes) of the addresses used below"},
	{"vectors.token", "a connect token (§ 7.4) issued with token_key at now_unix: its inputs, its id and client key copies, the 209-byte header, the 346-byte sealed part (XChaCha20-Poly1305: key token_key, nonce token_id, AD header) and its 330-byte plaintext, and the 619-byte token"},
	{"vectors.packets[]", "handshake packets in the order of one connection to `server` from `client_source` (§ 7.5–7.8, 7.10, 7.11): the ConnectRequest; the server under LoadHigh answers a Challenge; the ChallengeResponse; the Accepted (its tag: § 7.7 with accept_key); Denied for each reason; Disconnects; NoConnection replies"},
	{"vectors.connection_id, accept_key, session_keys", "what the Accepted grants: the connection id, K_accept (§ 7.7) and K_c2s / K_s2c (§ 7.9)"},
	{"vectors.protected[]", "protected packets (§ 7.9): direction 0 client→server (key K_c2s), 1 server→client (K_s2c); nonce and AD as the spec builds them; header = the cleartext notify header bytes, plaintext = the payload; packet = header ‖ ciphertext ‖ tag (short form); long_form = 0x23 ‖ connection id ‖ packet"},
}

func handshakeDoc() (doc, error) {
	tok, err := issueToken(1, 42)
	if err != nil {
		return doc{}, err
	}
	t, err := handshake.ParseToken(tok)
	if err != nil {
		return doc{}, err
	}
	cl, err := handshake.OpenToken(tokenKey, tok, wallStart, serverAddr)
	if err != nil {
		return doc{}, err
	}
	v := handshakeVecs{
		Addresses:  map[string]string{serverAddr.String(): hx(specAddr(serverAddr)), server6.String(): hx(specAddr(server6)), clientAddr.String(): hx(specAddr(clientAddr))},
		ServerAddr: serverAddr.String(), ClientAddr: clientAddr.String(),
	}
	v.Token = tokenVec{
		TokenKey: hx(tokenKey[:]), NowUnix: wallStart.Unix(), PlayerID: u64(cl.PlayerID), ProtocolID: u64(t.ProtocolID),
		Created: t.Created, Expires: t.Expires, TimeoutMS: t.Timeout.Milliseconds(),
		Servers: []string{serverAddr.String(), server6.String()}, UserData: hx(cl.UserData[:cl.UserDataLen]),
		TokenID: hx(t.ID[:]), C2SKey: hx(t.ClientToServerKey[:]), S2CKey: hx(t.ServerToClientKey[:]),
		Header: hx(tok[:209]), Sealed: hx(tok[209:555]), Plaintext: hx(specPlaintext(&cl)), Token: hx(tok),
	}

	hc, err := handshake.NewClient(tok, serverAddr)
	if err != nil {
		return doc{}, err
	}
	srv, err := handshake.NewServer(hsConfig(), tokenKey, wallStart.Add(-time.Hour), detRand(2))
	if err != nil {
		return doc{}, err
	}
	add := func(name string, b []byte) { v.Packets = append(v.Packets, packetVec{name, hx(b)}) }
	req, err := hc.AppendRequest(nil)
	if err != nil {
		return doc{}, err
	}
	add("ConnectRequest", req)
	now := wallStart.Add(time.Second)
	chal, g, err := srv.Handle(nil, req, clientAddr, now, handshake.LoadHigh)
	if g != nil || len(chal) != 49 {
		return doc{}, fmt.Errorf("LoadHigh: want a Challenge, got %d bytes (%v)", len(chal), err)
	}
	add("Challenge (the server under LoadHigh)", chal)
	if err := hc.HandleReply(chal); err != nil {
		return doc{}, err
	}
	resp, err := hc.AppendRequest(nil)
	if err != nil {
		return doc{}, err
	}
	add("ChallengeResponse (the cookie copied into bytes 556-579)", resp)
	acc, g, err := srv.Handle(nil, resp, clientAddr, now.Add(50*time.Millisecond), handshake.LoadHigh)
	if err != nil || g == nil {
		return doc{}, fmt.Errorf("challenge response not granted: %v", err)
	}
	add("Accepted", acc)
	if err := hc.HandleReply(acc); err != nil {
		return doc{}, err
	}
	v.ConnID = hx(g.ID[:])
	ak := specAcceptKey(t.ServerToClientKey, serverAddr)
	v.AcceptKey = hx(ak[:])
	v.SessionKeys = map[string]string{"client_to_server": hx(g.Keys.ClientToServer[:]), "server_to_client": hx(g.Keys.ServerToClient[:])}
	retry, _, err := srv.Handle(nil, resp, clientAddr, now.Add(60*time.Millisecond), handshake.LoadHigh)
	if err != nil || hx(retry) != hx(acc) {
		return doc{}, fmt.Errorf("retry not answered with the same Accepted: %v", err)
	}
	for r := handshake.Reason(1); r <= 10; r++ {
		add(fmt.Sprintf("Denied reason %d (%s)", r, r), handshake.AppendDenied(nil, r, t.ID))
	}

	ss, err := g.Session()
	if err != nil {
		return doc{}, err
	}
	cs, err := hc.Session()
	if err != nil {
		return doc{}, err
	}
	// Protected packets: real notify headers, payloads of each kind.
	seal := func(name string, s *handshake.Session, dir int, key [32]byte, t notify.PacketType, nc *notify.Conn, payload []byte) error {
		var hb [16]byte
		w := bitstream.NewWriter(hb[:])
		seq, err := nc.WriteHeader(w, t, 0)
		if err != nil {
			return err
		}
		hdr := w.Bytes()
		pkt, err := s.Seal(append([]byte(nil), hdr...), hdr, payload, seq)
		if err != nil {
			return err
		}
		long := handshake.AppendRouted(nil, g.ID)
		sv := sealVec{Name: name, Direction: dir, Seq: u64(seq), Key: hx(key[:]), Nonce: hx(specNonce(dir, seq)), AD: hx(append(g.ID[:], hdr...)),
			Header: hx(hdr), Plaintext: hx(payload), Packet: hx(pkt), LongForm: hx(append(long, pkt...))}
		v.Protected = append(v.Protected, sv)
		return nil
	}
	cn, _ := notify.New(notify.DefaultConfig())
	sn, _ := notify.New(notify.DefaultConfig())
	if err := seal("client's first packet: ack-only, nothing to acknowledge yet", cs, 0, g.Keys.ClientToServer, notify.TypeAck, cn, nil); err != nil {
		return doc{}, err
	}
	// The server session is pending until a client packet authenticates
	// (§ 7.13): open the first one, as the gateway would.
	first := v.Protected[0]
	hdr0 := mustHex(first.Header)
	if _, _, err := ss.Open(nil, hdr0, mustHex(first.Packet)[len(hdr0):], 0, clientAddr); err != nil {
		return doc{}, fmt.Errorf("server opening the client's first packet: %w", err)
	}
	if err := seal("client data packet (a move section with one move, an empty event section)", cs, 0, g.Keys.ClientToServer, notify.TypeData, cn, []byte{0x81, 0x00, 0x80, 0x95, 0x15, 0x4e, 0x0e, 0x90, 0xbf, 0x3f, 0x00, 0x80, 0xff, 0x1f, 0x00, 0x00}); err != nil {
		return doc{}, err
	}
	if err := seal("server data packet (control flag 1, ack 0, state present, ...)", ss, 1, g.Keys.ServerToClient, notify.TypeData, sn, []byte{0x01, 0x00, 0x02, 0x40, 0x6b, 0x0f, 0x03, 0x00, 0x00, 0x00}); err != nil {
		return doc{}, err
	}
	if err := seal("server ack-only packet", ss, 1, g.Keys.ServerToClient, notify.TypeAck, sn, nil); err != nil {
		return doc{}, err
	}
	d1, err := cs.AppendDisconnect(nil, handshake.ReasonClientQuit)
	if err != nil {
		return doc{}, err
	}
	add("Disconnect from the client, reason 32 ClientQuit (its sequence is the client's next, 2)", d1)
	d2, err := ss.AppendDisconnect(nil, handshake.ReasonServerShutdown)
	if err != nil {
		return doc{}, err
	}
	add("Disconnect from the server, reason 33 ServerShutdown (its sequence is the server's next, 2)", d2)
	nc1, err := handshake.AppendNoConnection(nil, mustHex(v.Protected[1].LongForm))
	if err != nil {
		return doc{}, err
	}
	add("NoConnection answering the long-form client data packet above", nc1)
	nc2, err := handshake.AppendNoConnection(nil, mustHex(v.Protected[1].Packet))
	if err != nil {
		return doc{}, err
	}
	add("NoConnection answering its short form", nc2)
	return doc{
		Description: "Connect token, handshake packets, key derivation and protected packets of one connection, from fixed keys and fixed randomness (every value here is reproducible). A client checks its token parser, builds the same requests, verifies the Accepted tag, derives the same session keys, and seals and opens the same packets.",
		Spec:        "docs/protocol.md § 7.1–7.11",
		Schema:      handshakeSchema,
		Vectors:     v,
	}, nil
}

func mustHex(s string) []byte {
	b, err := hexBytes(s)
	if err != nil {
		panic(err)
	}
	return b
}

func hsConfig() handshake.ServerConfig {
	c := handshake.DefaultServerConfig()
	c.ProtocolID, c.Addr = stockProtocolID, serverAddr
	c.GuardCapacity = handshake.MinGuardCapacity
	return c
}
