package conformance

import (
	"fmt"
	"time"

	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/notify"
	"github.com/ghostwire/ghostwire/replication/session"
)

type datagram struct {
	SentMS    int64  `json:"sent_ms"`
	From      string `json:"from"`
	Kind      string `json:"kind"`
	Lost      bool   `json:"lost,omitempty"`
	Hex       string `json:"hex"`
	Seq       string `json:"seq,omitempty"`
	Header    string `json:"header,omitempty"`
	Plaintext string `json:"plaintext,omitempty"`
}

type transcript struct {
	Token       string            `json:"token"`
	Server      string            `json:"server"`
	Client      string            `json:"client_source"`
	ConnID      string            `json:"connection_id"`
	SessionKeys map[string]string `json:"session_keys"`
	Latency     int64             `json:"one_way_latency_ms"`
	Datagrams   []datagram        `json:"datagrams"`
}

var sessionSchema = []Field{
	{"vectors", "one whole connection between the reference client (session.Client, default config, Walk) and server (session.Server behind handshake.Server, 20 packets/s), over a link with one_way_latency_ms each way: the token (player 42), the handshake, 30 Hz moves running forward, a lane-0 event echoed back by the server and reported applied (§ 7.20), an NPC in the client's view, one lost packet each way, and the client's Close"},
	{"datagrams[]", "every datagram in send order: sent_ms, from (client/server), kind (connect_request, accepted, data, ack_only — short or long form — and disconnect), the bytes; lost: never delivered"},
	{"datagrams[].seq, header, plaintext", "protected packets: the notify sequence number, the cleartext header bytes and the decrypted payload (key session_keys.client_to_server for the client's, server_to_client for the server's; nonce and AD per § 7.9). The plaintext is § 7.18.2's body: the client's move section, event base section and event section; the server's control flag, control section, events-applied section, event section and ghost section"},
}

type sessHandler struct {
	srv   *session.Server
	state move.ControlState
}

func (h *sessHandler) Move(m move.Move) {
	h.state = move.Walk(h.state, m, m.Seconds())
	h.srv.SetControl(m.Seq, h.state)
}

func (h *sessHandler) Event(e event.Event) {
	if e.Class == event.Ordered && e.Lane == 0 {
		_ = h.srv.SendEvent(0, e.Payload) // the dev game's echo
		h.srv.SetEventsApplied(0, e.Seq)  // and the zone's report (§ 7.20)
	}
}

func sessionDoc() (doc, error) {
	tok, err := issueToken(3, 42)
	if err != nil {
		return doc{}, err
	}
	cl, err := session.NewClient(tok, serverAddr, session.DefaultClientConfig(), nil, wallStart, 0)
	if err != nil {
		return doc{}, err
	}
	hs, err := handshake.NewServer(hsConfig(), tokenKey, wallStart.Add(-time.Hour), detRand(4))
	if err != nil {
		return doc{}, err
	}
	reg, classes, err := stockRegistry()
	if err != nil {
		return doc{}, err
	}
	tab, err := ghost.NewTable(reg, ghost.DefaultConfig())
	if err != nil {
		return doc{}, err
	}
	const latency = 15
	tr := transcript{Token: hx(tok), Server: serverAddr.String(), Client: clientAddr.String(), Latency: latency}
	type inflight struct {
		at   int64
		toSv bool
		pkt  []byte
	}
	var queue []inflight
	var h *sessHandler
	var srv *session.Server
	var keys handshake.SessionKeys
	var id handshake.ConnID
	spawn := move.ControlState{Pos: [3]float32{-437.125, 0, 612.0625}}
	var buf []byte
	sent := map[string]int{}
	lose := func(from string, kind string) bool {
		// One data packet lost each way, early in the steady state.
		sent[from+kind]++
		return kind == "data" && sent[from+kind] == 6
	}
	var clientSeq, serverSeq uint64
	record := func(now int64, from string, pkt []byte) (datagram, error) {
		d := datagram{SentMS: now, From: from, Hex: hx(pkt)}
		kind, err := handshake.Classify(pkt)
		if err != nil {
			return d, err
		}
		body := pkt
		prefix := ""
		switch kind {
		case handshake.KindConnectRequest:
			d.Kind = "connect_request"
			return d, nil
		case handshake.KindChallengeResponse:
			d.Kind = "challenge_response"
			return d, nil
		case handshake.KindAccepted:
			d.Kind = "accepted"
			return d, nil
		case handshake.KindDisconnect:
			d.Kind = "disconnect"
			if from == "client" {
				clientSeq++
			} else {
				serverSeq++
			}
			return d, nil
		case handshake.KindRouted:
			_, body, err = handshake.ParseRouted(pkt)
			if err != nil {
				return d, err
			}
			prefix = "_long"
		case handshake.KindData:
		default:
			d.Kind = fmt.Sprint(kind)
			return d, nil
		}
		// A protected packet: decrypt with the spec's nonce/AD via Protector.
		dir, key := handshake.ClientToServer, keys.ClientToServer
		nc := &clientSeq
		if from == "server" {
			dir, key, nc = handshake.ServerToClient, keys.ServerToClient, &serverSeq
		}
		p, err := handshake.NewProtector(key, id, dir)
		if err != nil {
			return d, err
		}
		// Every protected packet consumes the side's next sequence number
		// (§ 7.9); the header is the shortest prefix that authenticates.
		seq := *nc
		*nc++
		var pt []byte
		hl := 1
		for ; hl <= 12; hl++ {
			if pt, err = p.Open(nil, body[:hl], body[hl:], seq); err == nil {
				break
			}
		}
		if err != nil {
			return d, fmt.Errorf("opening %s packet %d: %w", from, seq, err)
		}
		typ := notify.PacketType(body[0] & 3)
		d.Seq, d.Header, d.Plaintext = u64(seq), hx(body[:hl]), hx(pt)
		if typ == notify.TypeData {
			d.Kind = "data" + prefix
		} else {
			d.Kind = "ack_only" + prefix
		}
		return d, nil
	}
	closed := false
	for now := int64(0); now <= 1500; now++ {
		t := ms(now)
		// Deliver what arrives now.
		rest := queue[:0]
		var due []inflight
		for _, q := range queue {
			if q.at == now {
				due = append(due, q)
			} else {
				rest = append(rest, q)
			}
		}
		queue = rest
		for _, q := range due {
			if !q.toSv {
				if err := cl.Receive(t, q.pkt); err != nil && cl.State() != handshake.StateClosed && cl.State() != handshake.StateDraining {
					return doc{}, fmt.Errorf("client receive at %d ms: %w", now, err)
				}
				continue
			}
			kind, _ := handshake.Classify(q.pkt)
			if kind == handshake.KindConnectRequest || kind == handshake.KindChallengeResponse {
				reply, g, err := hs.Handle(nil, q.pkt, clientAddr, wallStart.Add(t), handshake.LoadNormal)
				if err != nil {
					return doc{}, fmt.Errorf("handshake at %d ms: %w", now, err)
				}
				if g != nil {
					sess, err := g.Session()
					if err != nil {
						return doc{}, err
					}
					keys, id = g.Keys, g.ID
					h = &sessHandler{state: spawn}
					if srv, err = session.NewServer(sess, session.DefaultServerConfig(), h, t); err != nil {
						return doc{}, err
					}
					h.srv = srv
					srv.SetControl(0, spawn)
					tr.ConnID = hx(id[:])
					tr.SessionKeys = map[string]string{"client_to_server": hx(keys.ClientToServer[:]), "server_to_client": hx(keys.ServerToClient[:])}
				}
				if len(reply) > 0 {
					d, err := record(now, "server", reply)
					if err != nil {
						return doc{}, err
					}
					tr.Datagrams = append(tr.Datagrams, d)
					queue = append(queue, inflight{now + latency, false, reply})
				}
				continue
			}
			if srv == nil {
				continue
			}
			if _, err := srv.Receive(t, q.pkt, clientAddr); err != nil && srv.State() != handshake.StateClosed {
				return doc{}, fmt.Errorf("server receive at %d ms: %w", now, err)
			}
			for _, f := range srv.PopGhostFates(nil) {
				tab.OnFate(f)
			}
		}
		// The client: input at 30 Hz, one echo event, close at 1200 ms.
		if cl.State() == handshake.StateConnected || cl.State() == handshake.StatePending || cl.State() == handshake.StateChallenged {
			for cl.InputDue(t) {
				if _, err := cl.Input(move.Move{Forward: 127, Yaw: 16384}); err != nil {
					return doc{}, err
				}
			}
		}
		if now == 300 {
			if err := cl.SendEvent(0, []byte("hello")); err != nil {
				return doc{}, err
			}
		}
		if now == 1200 && !closed {
			cl.Close(t)
			closed = true
		}
		// The zone's view every 50 ms: one NPC walking along x.
		if srv != nil && now%50 == 0 {
			x := -430 + float64(now)/1000
			if err := tab.SetView(t, []ghost.ViewEntry{{Entity: npcID(0, 1), Class: classes[2], Priority: 1, State: ghost.State{Pos: [3]float64{x, 0, 600}, Health: 100}}}); err != nil {
				return doc{}, err
			}
		}
		for _, side := range []string{"client", "server"} {
			for {
				var out []byte
				var err error
				if side == "client" {
					out, err = cl.Poll(t, buf[:0])
				} else {
					if srv == nil {
						break
					}
					out, err = srv.Poll(t, buf[:0], tab)
				}
				if err != nil {
					return doc{}, fmt.Errorf("%s poll at %d ms: %w", side, now, err)
				}
				if len(out) == 0 {
					break
				}
				pkt := append([]byte(nil), out...)
				d, err := record(now, side, pkt)
				if err != nil {
					return doc{}, err
				}
				d.Lost = lose(side, d.Kind)
				tr.Datagrams = append(tr.Datagrams, d)
				if !d.Lost {
					queue = append(queue, inflight{now + latency, side == "client", pkt})
				}
			}
		}
		if srv != nil && srv.Done() && cl.State() == handshake.StateClosed && len(queue) == 0 {
			break
		}
	}
	if cl.State() != handshake.StateClosed {
		return doc{}, fmt.Errorf("transcript: client not closed: %v", cl.State())
	}
	return doc{
		Description: "A whole connection, datagram by datagram, with the session keys to open every protected packet: the one-round-trip handshake, the client's first (long-form) packets, moves and their control acks, the client's spawn state, an echoed event, ghost sections, a lost packet each way, and the Disconnect copies. Decrypt each packet, decode its body with your section decoders and compare.",
		Spec:        "docs/protocol.md § 7.18 (and § 3–7)",
		Schema:      sessionSchema,
		Vectors:     tr,
	}, nil
}
