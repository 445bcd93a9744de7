package conformance

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strconv"
	"testing"

	"golang.org/x/crypto/chacha20poly1305"
)

// TestRedirectSpec opens redirect.json's Redirect and its acknowledgement
// with § 7.19's and § 7.10's layouts and x/crypto, not replication/handshake.
func TestRedirectSpec(t *testing.T) {
	var v redirectVecs
	load(t, "redirect.json", &v)
	id := mustHex(v.ConnID)
	p := mustHex(v.Packet)
	seq, _ := strconv.ParseUint(v.Seq, 10, 64)
	if len(p) != 671 || p[0] != 0x27 || !bytes.Equal(p[1:9], id) || binary.LittleEndian.Uint64(p[9:17]) != seq {
		t.Fatalf("redirect header %x does not match § 7.19", p[:17])
	}
	ad := append(append(append([]byte(nil), id...), 0x27), p[9:17]...)
	if hx(ad) != v.AD || hx(specNonce(1, seq)) != v.Nonce {
		t.Fatal("AD or nonce differ from § 7.19")
	}
	a, _ := chacha20poly1305.New(mustHex(v.SessionKeys["server_to_client"]))
	pt, err := a.Open(nil, specNonce(1, seq), p[17:], ad)
	if err != nil || hx(pt) != v.Plaintext {
		t.Fatalf("redirect does not open per § 7.19: %v", err)
	}
	target := netip.MustParseAddrPort(v.Target)
	tok := pt[19:]
	if !bytes.Equal(pt[:19], specAddr(target)) || hx(tok) != v.Token || len(tok) != 619 {
		t.Fatal("plaintext is not addr(target) ‖ token")
	}
	// The token's header lists the target, and only it (§ 7.4 offsets).
	if tok[56] != 1 || !bytes.Equal(tok[57:76], specAddr(target)) ||
		int64(binary.LittleEndian.Uint64(tok[44:]))-int64(binary.LittleEndian.Uint64(tok[36:])) != 30 {
		t.Fatal("the fresh token does not list the target alone with a 30 s life")
	}
	// The acknowledgement: Disconnect reason 38 at the client's next sequence.
	d := mustHex(v.Ack)
	c, _ := chacha20poly1305.New(mustHex(v.SessionKeys["client_to_server"]))
	ackSeq := binary.LittleEndian.Uint64(d[9:17])
	reason, err := c.Open(nil, specNonce(0, ackSeq), d[17:], append(append(append([]byte(nil), id...), 0x1b), d[9:17]...))
	if len(d) != 34 || d[0] != 0x1b || err != nil || len(reason) != 1 || reason[0] != 38 || strconv.FormatUint(ackSeq, 10) != v.AckSeq {
		t.Fatalf("acknowledgement %x is not Disconnect(Redirected) per § 7.10 (%v)", d, err)
	}
}
