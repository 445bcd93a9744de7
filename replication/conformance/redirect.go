package conformance

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/ghostwire/ghostwire/replication/handshake"
)

// redirectTarget is the other node's gateway the vector redirects to.
var redirectTarget = netip.MustParseAddrPort("203.0.113.8:7777")

type redirectVecs struct {
	ConnID      string            `json:"connection_id"`
	SessionKeys map[string]string `json:"session_keys"`
	Target      string            `json:"target"`
	Token       string            `json:"token"`
	TokenExpiry int64             `json:"token_expires"`
	Seq         string            `json:"seq"`
	Nonce       string            `json:"nonce"`
	AD          string            `json:"ad"`
	Plaintext   string            `json:"plaintext"`
	Packet      string            `json:"packet"`
	Ack         string            `json:"ack"`
	AckSeq      string            `json:"ack_seq"`
}

var redirectSchema = []Field{
	{"vectors.connection_id, session_keys", "the connection being redirected, granted from handshake.json's token (connect request and Accepted as there)"},
	{"vectors.target, token, token_expires", "the gateway the client is sent to, and the fresh connect token for the same player (player 42, user data kept) listing only it, expiring 30 s after issue (§ 7.19)"},
	{"vectors.seq, nonce, ad, plaintext, packet", "the Redirect (§ 7.19): 0x27 ‖ connection id ‖ seq (8, LE) ‖ ChaCha20-Poly1305(K_s2c, nonce = 01 ‖ 00 00 00 ‖ seq, AD = connection id ‖ 27 ‖ seq, plaintext = addr(target) ‖ token) — 671 bytes"},
	{"vectors.ack, ack_seq", "the client's acknowledgement: its Disconnect (§ 7.10) with reason 38 Redirected, at the client's next sequence"},
}

// redirectDoc is a Redirect on a fresh connection to serverAddr and the
// client's acknowledgement.
func redirectDoc() (doc, error) {
	tok, err := issueToken(1, 42)
	if err != nil {
		return doc{}, err
	}
	hc, err := handshake.NewClient(tok, serverAddr)
	if err != nil {
		return doc{}, err
	}
	srv, err := handshake.NewServer(hsConfig(), tokenKey, wallStart.Add(-time.Hour), detRand(2))
	if err != nil {
		return doc{}, err
	}
	req, err := hc.AppendRequest(nil)
	if err != nil {
		return doc{}, err
	}
	acc, g, err := srv.Handle(nil, req, clientAddr, wallStart.Add(time.Second), handshake.LoadNormal)
	if err != nil || g == nil {
		return doc{}, fmt.Errorf("not granted: %v", err)
	}
	if err := hc.HandleReply(acc); err != nil {
		return doc{}, err
	}
	cs, err := hc.Session()
	if err != nil {
		return doc{}, err
	}
	ss, err := g.Session()
	if err != nil {
		return doc{}, err
	}
	// The client's first packet proves its address (§ 7.13).
	first, err := cs.Seal([]byte{0x01, 0x00}, []byte{0x01, 0x00}, nil, 0)
	if err != nil {
		return doc{}, err
	}
	if _, _, err := ss.Open(nil, first[:2], first[2:], 0, clientAddr); err != nil {
		return doc{}, err
	}
	fresh, err := handshake.IssueToken(tokenKey, handshake.TokenParams{
		PlayerID: g.Claims.PlayerID, ProtocolID: stockProtocolID, Expiry: 30 * time.Second, Timeout: g.Claims.Timeout,
		ServerAddrs: []netip.AddrPort{redirectTarget}, UserData: g.Claims.UserData[:g.Claims.UserDataLen],
	}, wallStart.Add(2*time.Second), detRand(3))
	if err != nil {
		return doc{}, err
	}
	seq := ss.NextSeq()
	pkt, err := ss.AppendRedirect(nil, redirectTarget, fresh)
	if err != nil {
		return doc{}, err
	}
	to, got, err := cs.OpenRedirect(pkt)
	if err != nil || to != redirectTarget || hx(got) != hx(fresh) {
		return doc{}, fmt.Errorf("the client does not take its Redirect: %v", err)
	}
	ackSeq := cs.NextSeq()
	ack, err := cs.AppendDisconnect(nil, handshake.ReasonRedirected)
	if err != nil {
		return doc{}, err
	}
	if r, err := ss.OpenDisconnect(ack); err != nil || r != handshake.ReasonRedirected {
		return doc{}, fmt.Errorf("the server does not take the acknowledgement: %v %v", r, err)
	}
	ft, err := handshake.ParseToken(fresh)
	if err != nil {
		return doc{}, err
	}
	var seqLE [8]byte
	for i := range seqLE {
		seqLE[i] = byte(seq >> (8 * i))
	}
	ad := append(append(append([]byte(nil), g.ID[:]...), 0x27), seqLE[:]...)
	v := redirectVecs{
		ConnID:      hx(g.ID[:]),
		SessionKeys: map[string]string{"client_to_server": hx(g.Keys.ClientToServer[:]), "server_to_client": hx(g.Keys.ServerToClient[:])},
		Target:      redirectTarget.String(), Token: hx(fresh), TokenExpiry: ft.Expires,
		Seq: u64(seq), Nonce: hx(specNonce(1, seq)), AD: hx(ad),
		Plaintext: hx(append(specAddr(redirectTarget), fresh...)), Packet: hx(pkt),
		Ack: hx(ack), AckSeq: u64(ackSeq),
	}
	return doc{
		Description: "A Redirect: the server moves a connected client to another gateway with a fresh connect token for the same player, and the client acknowledges with Disconnect(Redirected). From fixed keys and randomness; a client checks it opens the packet to the same target and token and builds the same acknowledgement.",
		Spec:        "docs/protocol.md § 7.19",
		Schema:      redirectSchema,
		Vectors:     v,
	}, nil
}
