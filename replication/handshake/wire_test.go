package handshake

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

func TestClassify(t *testing.T) {
	ctl := func(k Kind, n int) []byte { return append([]byte{k.ControlByte()}, make([]byte, n-1)...) }
	tests := []struct {
		name string
		pkt  []byte
		want Kind
		err  error
	}{
		{"empty", nil, 0, ErrGarbage},
		{"oversized", make([]byte, MaxPacketSize+1), 0, ErrGarbage},
		{"smallest data packet", make([]byte, MinDataSize), KindData, nil},
		{"data packet one byte short", make([]byte, MinDataSize-1), 0, ErrGarbage},
		{"data with notify type 1", append([]byte{0x01}, make([]byte, 20)...), KindData, nil},
		{"data with notify type 2", append([]byte{0x02}, make([]byte, 20)...), KindData, nil},
		{"control kind 0", ctl(0, 30), 0, ErrGarbage},
		{"control kind 9", ctl(9, 30), 0, ErrGarbage},
		{"control kind 63", ctl(63, 30), 0, ErrGarbage},
		{"connect request", ctl(KindConnectRequest, RequestSize), KindConnectRequest, nil},
		{"connect request one short", ctl(KindConnectRequest, RequestSize-1), 0, ErrGarbage},
		{"challenge", ctl(KindChallenge, ChallengeSize), KindChallenge, nil},
		{"challenge response", ctl(KindChallengeResponse, RequestSize), KindChallengeResponse, nil},
		{"accepted", ctl(KindAccepted, AcceptedSize), KindAccepted, nil},
		{"accepted one long", ctl(KindAccepted, AcceptedSize+1), 0, ErrGarbage},
		{"denied", ctl(KindDenied, DeniedSize), KindDenied, nil},
		{"disconnect", ctl(KindDisconnect, DisconnectSize), KindDisconnect, nil},
		{"no connection", ctl(KindNoConnection, NoConnectionSize), KindNoConnection, nil},
		{"routed", ctl(KindRouted, MinRoutedSize), KindRouted, nil},
		{"routed too short", ctl(KindRouted, MinRoutedSize-1), 0, ErrGarbage},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, err := Classify(tc.pkt)
			if k != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("Classify = %v, %v; want %v, %v", k, err, tc.want, tc.err)
			}
		})
	}
}

// TestControlBytes pins the first byte of every kind (docs).
func TestControlBytes(t *testing.T) {
	want := map[Kind]byte{KindConnectRequest: 0x07, KindChallenge: 0x0B, KindChallengeResponse: 0x0F,
		KindAccepted: 0x13, KindDenied: 0x17, KindDisconnect: 0x1B, KindNoConnection: 0x1F, KindRouted: 0x23}
	for k, b := range want {
		if k.ControlByte() != b {
			t.Errorf("%v: %#x, want %#x", k, k.ControlByte(), b)
		}
	}
	sizes := map[string][2]int{
		"challenge": {ChallengeSize, 49}, "accepted": {AcceptedSize, 25}, "denied": {DeniedSize, 26},
		"disconnect": {DisconnectSize, 34}, "no connection": {NoConnectionSize, 9}, "request": {RequestSize, 1200},
	}
	for name, s := range sizes {
		if s[0] != s[1] {
			t.Errorf("%s size %d, documented %d", name, s[0], s[1])
		}
	}
}

// TestNotifyHeadersAreData: every header replication/notify writes starts with a
// byte whose low two bits are its 2-bit type (0, 1 or 2), so it can never be
// mistaken for a control byte. This is the contract that lets a steady-state
// packet carry no prefix.
func TestNotifyHeadersAreData(t *testing.T) {
	a, err := notify.New(notify.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := notify.New(notify.DefaultConfig())
	var buf [256]byte
	var w bitstream.Writer
	var r bitstream.Reader
	for i := range 3000 {
		typ := notify.PacketType(i % 3)
		w.Reset(buf[:])
		if _, err := a.WriteHeader(&w, typ, time.Duration(i)*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		hdr := buf[:(w.BitLen()+7)/8]
		if hdr[0]&3 == 3 {
			t.Fatalf("packet %d: notify header starts with control byte %#x", i, hdr[0])
		}
		pkt := append(append([]byte(nil), hdr...), make([]byte, TagSize)...)
		if k, err := Classify(pkt); err != nil || k != KindData {
			t.Fatalf("packet %d classified %v, %v", i, k, err)
		}
		if i%7 != 3 { // deliver most packets so acks get written too
			r.Reset(hdr)
			if h, err := b.ReadHeader(&r); err == nil {
				b.Accept(h, time.Duration(i)*time.Millisecond)
			}
		}
		a, b = b, a
		a.PopFates(nil)
		b.PopFates(nil)
	}
}

func TestConnectRequestRoundTrip(t *testing.T) {
	tok := issue(t, testParams(), testStart.Add(time.Second), 1)
	c, _ := NewClient(tok, testServer)
	pkt := request(t, c)
	r, err := ParseConnectRequest(pkt)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.Append(nil), pkt) {
		t.Fatal("re-encoded request differs")
	}
	if !bytes.Equal(r.Wire, tok[:wireTokenSize]) {
		t.Fatal("request does not carry header ‖ sealed part")
	}
	if bytes.Contains(pkt, c.Token().ClientToServerKey[:]) || bytes.Contains(pkt, c.Token().ServerToClientKey[:]) {
		t.Fatal("a connect request leaks the session keys")
	}
}
