package session_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/netsim"
	"github.com/ghostwire/ghostwire/replication/session"
)

// TestSwarmSharesOneSocket runs many pure Clients over one simulated socket —
// one source address for all, as a bot swarm multiplexes them — and checks
// that each connects and exchanges events with its own server session. The
// swarm sorts the server's datagrams without trying every client: long-form
// packets and Disconnects by connection id, Challenge and Denied by token
// id; only an Accepted (which names neither) is offered to the clients still
// connecting until one takes it.
func TestSwarmSharesOneSocket(t *testing.T) {
	const bots = 300
	link := netsim.Config{Loss: 0.05, Latency: 30 * time.Millisecond, Jitter: 5 * time.Millisecond}
	pipe, err := netsim.NewPipe(link, link)
	if err != nil {
		t.Fatal(err)
	}
	var key [handshake.KeySize]byte
	seeded(21).Read(key[:])
	hcfg := handshake.DefaultServerConfig()
	hcfg.ProtocolID, hcfg.Addr = protoID, serverAddr
	hs, err := handshake.NewServer(hcfg, key, t0, seeded(22))
	if err != nil {
		t.Fatal(err)
	}
	shared := netip.MustParseAddrPort("192.0.2.99:40000") // every bot's source address

	type bot struct {
		c    *session.Client
		tok  handshake.TokenID
		recv recorder
	}
	type conn struct {
		srv  *session.Server
		h    recorder
		tok  handshake.TokenID
		used bool
	}
	ccfg := session.DefaultClientConfig()
	ccfg.AlwaysLongForm = true
	reg := session.DefaultRegistry() // one registry shared by every bot's mirror
	ccfg.Registry = reg
	botsByConn := map[handshake.ConnID]*bot{}
	botsByToken := map[handshake.TokenID]*bot{}
	var pending []*bot
	var all []*bot
	for i := 0; i < bots; i++ {
		tok, err := handshake.IssueToken(key, handshake.TokenParams{PlayerID: uint64(i), ProtocolID: protoID,
			Expiry: time.Hour, Timeout: 10 * time.Second, ServerAddrs: []netip.AddrPort{serverAddr}}, t0, seeded(uint64(1000+i)))
		if err != nil {
			t.Fatal(err)
		}
		b := &bot{}
		if b.c, err = session.NewClient(tok, serverAddr, ccfg, &b.recv, t0, 0); err != nil {
			t.Fatal(err)
		}
		b.tok = b.c.Token().ID
		botsByToken[b.tok] = b
		pending = append(pending, b)
		all = append(all, b)
	}
	conns := map[handshake.ConnID]*conn{}
	var connList []*conn // grant order: a deterministic run
	ambiguous := 0
	buf := make([]byte, 0, session.MaxPacketSize)

	toServer := func(now time.Duration) func([]byte) {
		return func(p []byte) {
			kind, err := handshake.Classify(p)
			if err != nil {
				return
			}
			var c *conn
			switch kind {
			case handshake.KindConnectRequest, handshake.KindChallengeResponse:
				out, grant, _ := hs.Handle(nil, p, shared, t0.Add(now), handshake.LoadNormal)
				if len(out) > 0 {
					pipe.BtoA.Send(now, out)
				}
				if grant != nil {
					sess, _ := grant.Session()
					c = &conn{tok: grant.Claims.ID}
					cfg := session.DefaultServerConfig()
					if c.srv, err = session.NewServer(sess, cfg, &c.h, now); err != nil {
						t.Fatal(err)
					}
					conns[grant.ID] = c
					connList = append(connList, c)
				}
				return
			case handshake.KindRouted:
				id, _, _ := handshake.ParseRouted(p)
				c = conns[id]
			case handshake.KindDisconnect:
				id, _ := handshake.ParseDisconnectID(p)
				c = conns[id]
			case handshake.KindData:
				ambiguous++ // a short form from the shared address names no one
				return
			}
			if c != nil {
				c.srv.Receive(now, p, shared)
				if !c.used && c.srv.State() != handshake.StatePending {
					hs.Consume(c.tok)
					c.used = true
				}
			}
		}
	}
	toBots := func(now time.Duration) func([]byte) {
		return func(p []byte) {
			kind, err := handshake.Classify(p)
			if err != nil {
				return
			}
			var b *bot
			switch kind {
			case handshake.KindRouted:
				id, _, _ := handshake.ParseRouted(p)
				b = botsByConn[id]
			case handshake.KindDisconnect:
				id, _ := handshake.ParseDisconnectID(p)
				b = botsByConn[id]
			case handshake.KindChallenge:
				id, _, _ := handshake.ParseChallenge(p)
				b = botsByToken[id]
			case handshake.KindDenied:
				_, id, _ := handshake.ParseDenied(p)
				b = botsByToken[id]
			case handshake.KindAccepted:
				for i, pb := range pending {
					if pb.c.Receive(now, p) == nil {
						botsByConn[pb.c.ID()] = pb
						pending = append(pending[:i], pending[i+1:]...)
						break
					}
				}
				return
			case handshake.KindData:
				ambiguous++ // the server answered a long-form client in the short form
				return
			}
			if b != nil {
				b.c.Receive(now, p)
			}
		}
	}

	for step, now := 0, time.Duration(0); now < 6*time.Second; step, now = step+1, now+5*time.Millisecond {
		if step == 200 { // 1 s in: everyone talks
			for i, b := range all {
				b.c.SendEvent(0, fmt.Appendf(nil, "bot %d", i))
			}
			for _, c := range connList {
				c.srv.SendEvent(1, fmt.Appendf(nil, "to %v", c.srv.ID()))
			}
		}
		for _, b := range all {
			if b.c.NextDeadline(now) > now {
				continue // the swarm's scheduler: only the due ones
			}
			for {
				out, err := b.c.Poll(now, buf[:0])
				if err != nil {
					t.Fatal(err)
				}
				if len(out) == 0 {
					break
				}
				pipe.AtoB.Send(now, out)
			}
		}
		pipe.AtoB.Deliver(now, toServer(now))
		for _, c := range connList {
			for {
				out, err := c.srv.Poll(now, buf[:0], nil)
				if err != nil {
					t.Fatal(err)
				}
				if len(out) == 0 {
					break
				}
				pipe.BtoA.Send(now, out)
			}
		}
		pipe.BtoA.Deliver(now, toBots(now))
	}
	if ambiguous != 0 || len(pending) != 0 || len(conns) != bots {
		t.Fatalf("%d ambiguous short-form packets, %d bots still connecting, %d sessions", ambiguous, len(pending), len(conns))
	}
	for i, b := range all {
		if b.c.State() != handshake.StateConnected {
			t.Fatalf("bot %d: %v (%v)", i, b.c.State(), b.c.Err())
		}
		c := conns[b.c.ID()]
		if len(c.h.events) != 1 || !bytes.Equal(c.h.events[0].Payload, fmt.Appendf(nil, "bot %d", i)) {
			t.Fatalf("bot %d's session got %v; bot %+v stream %+v; srv %v %+v", i, c.h.events, b.c.Stats().Counters, b.c.Stats().EventsSent, c.srv.State(), c.srv.Stats().Counters)
		}
		if len(b.recv.events) != 1 || !bytes.Equal(b.recv.events[0].Payload, fmt.Appendf(nil, "to %v", b.c.ID())) {
			t.Fatalf("bot %d got %v", i, b.recv.events)
		}
	}
}
