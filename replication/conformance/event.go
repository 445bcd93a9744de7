package conformance

import (
	"fmt"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// eStep is one step of an event scenario: one Sender (the reference's
// policy) feeding one Receiver.
type eStep struct {
	Step      string   `json:"step"`
	NowMS     int64    `json:"now_ms,omitempty"`
	Class     string   `json:"class,omitempty"`
	Lane      *int     `json:"lane,omitempty"`
	Key       *int     `json:"key,omitempty"`
	Payload   string   `json:"payload,omitempty"`
	Seq       string   `json:"seq,omitempty"`
	MaxBytes  int      `json:"max_bytes,omitempty"`
	Delivered *bool    `json:"delivered,omitempty"`
	Packet    *int     `json:"packet,omitempty"`
	Bits      int      `json:"bits,omitempty"`
	Hex       string   `json:"hex,omitempty"`
	Events    []eEvent `json:"events,omitempty"`
}

type eEvent struct {
	Class   string `json:"class"`
	Lane    *int   `json:"lane,omitempty"`
	Key     *int   `json:"key,omitempty"`
	Payload string `json:"payload"`
}

type eScenario struct {
	Name  string  `json:"name"`
	Steps []eStep `json:"steps"`
}

var eventSchema = []Field{
	{"vectors[]", "scenarios; each starts with a fresh sender and receiver with the default parameters of § 4.1 (8 lanes, M = 16384, 256 stagger keys, MaxFragment 1024, MinFragment 128, Redundancy 2)"},
	{"steps[].step", "queue: the sender queues an event (class ordered/unordered/unguaranteed/staggered; lane for ordered, key for staggered; payload hex; now_ms for staggered); write: the sender writes the event section of packet `seq` at now_ms into at most max_bytes; fate: the notify fate of packet `seq` (delivered true/false); receive: the receiver reads the section of packet number `packet` (0-based index into this scenario's writes). A written packet that no receive step names was lost"},
	{"steps[].bits, hex", "write: the event section alone. Normative for a receiver; a sender reproduces it only if it follows the reference's write order and redundancy (§ 4.7, informative)"},
	{"steps[].events", "receive: the events the receiver delivers, in delivery order (lane for ordered, key for staggered)"},
}

func payload(n int, seed byte) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7) + byte(i>>8)
	}
	return hx(b)
}

func eventDoc() (doc, error) {
	ip := func(v int) *int { return &v }
	bp := func(v bool) *bool { return &v }
	q := func(class string, lane, key *int, p string, now int64) eStep {
		return eStep{Step: "queue", Class: class, Lane: lane, Key: key, Payload: p, NowMS: now}
	}
	wr := func(seq uint64, now int64, max int) eStep {
		return eStep{Step: "write", Seq: u64(seq), NowMS: now, MaxBytes: max}
	}
	fate := func(seq uint64, ok bool) eStep { return eStep{Step: "fate", Seq: u64(seq), Delivered: bp(ok)} }
	recv := func(p int) eStep { return eStep{Step: "receive", Packet: ip(p)} }

	var scen []eScenario
	add := func(name string, steps []eStep) error {
		out, err := runEvents(steps)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		scen = append(scen, eScenario{Name: name, Steps: out})
		return nil
	}
	if err := add("the worked example of § 4.9: every class in one section", []eStep{
		q("ordered", ip(3), nil, hx([]byte("hi")), 0), q("ordered", ip(3), nil, hx([]byte("yo")), 0),
		q("unordered", nil, nil, "ab", 0), q("staggered", nil, ip(5), "07", 0), q("unguaranteed", nil, nil, "", 0),
		wr(0, 0, 1200), recv(0)}); err != nil {
		return doc{}, err
	}
	// A 3000-byte ordered event in 1200-byte packets; the middle fragment's
	// packet is lost and resent at the front of the lane after its drop.
	s := []eStep{q("ordered", ip(0), nil, payload(3000, 1), 0), q("ordered", ip(0), nil, hx([]byte("after")), 0),
		wr(0, 0, 1200), wr(1, 50, 1200), wr(2, 100, 1200), recv(0), recv(2),
		fate(0, true), fate(1, false), wr(3, 150, 1200), recv(3), fate(2, true), fate(3, true), wr(4, 200, 1200)}
	if err := add("ordered fragments: a 3000-byte event over 1200-byte sections, one packet lost and resent", s); err != nil {
		return doc{}, err
	}
	// Unordered fragments arriving out of order; a lost unit resent after
	// its round is reported dropped.
	s = []eStep{q("unordered", nil, nil, payload(2500, 9), 0)}
	for i := range 4 {
		s = append(s, wr(uint64(i), int64(i)*50, 1100))
	}
	s = append(s, recv(2), recv(0), fate(0, false), fate(1, false), fate(2, true), fate(3, false),
		wr(4, 200, 1100), wr(5, 250, 1100), recv(4), recv(5))
	if err := add("unordered fragments out of order; lost units resent after their drop", s); err != nil {
		return doc{}, err
	}
	// Lanes are independent: lane 1's loss does not hold lane 2 back.
	s = []eStep{q("ordered", ip(1), nil, "11", 0), q("ordered", ip(2), nil, "21", 0), wr(0, 0, 1200),
		q("ordered", ip(1), nil, "12", 50), q("ordered", ip(2), nil, "22", 50), wr(1, 50, 1200),
		q("ordered", ip(1), nil, "13", 100), q("ordered", ip(2), nil, "23", 100), wr(2, 100, 1200),
		recv(1), recv(2), fate(0, false), fate(1, true), fate(2, true), wr(3, 150, 1200), recv(3)}
	if err := add("independent lanes, ids and the next bit; redundant copies repair a loss", s); err != nil {
		return doc{}, err
	}
	// Staggered: newest wins, versions, the send schedule.
	s = []eStep{q("staggered", nil, ip(200), "01", 0)}
	for i := range 9 {
		t := int64(i) * 50
		if i == 3 {
			s = append(s, q("staggered", nil, ip(200), "02", t))
		}
		s = append(s, wr(uint64(i), t, 1200))
	}
	s = append(s, recv(0), recv(4), recv(2), recv(6), recv(8))
	if err := add("staggered key 200: sent at 0 and 100 ms; a new state at 150 ms goes at 200 and 300 ms; older and repeated copies are ignored", s); err != nil {
		return doc{}, err
	}
	return doc{
		Description: "Event sections: every class, fragments (ordered and unordered), ids and the next bit, resends after a dropped fate, redundant copies, staggered newest-wins. Feed each written section to your receiver and compare the events it delivers; a sender that follows the reference's informative write order reproduces the sections too.",
		Spec:        "docs/protocol.md § 4",
		Schema:      eventSchema,
		Vectors:     scen,
	}, nil
}

func runEvents(in []eStep) ([]eStep, error) {
	snd, err := event.NewSender(event.DefaultConfig())
	if err != nil {
		return nil, err
	}
	rcv, err := event.NewReceiver(event.DefaultConfig())
	if err != nil {
		return nil, err
	}
	var pkts [][]byte
	var nbits []int
	out := make([]eStep, len(in))
	for i, st := range in {
		st = eStep{Step: st.Step, NowMS: st.NowMS, Class: st.Class, Lane: st.Lane, Key: st.Key, Payload: st.Payload, Seq: st.Seq, MaxBytes: st.MaxBytes, Delivered: st.Delivered, Packet: st.Packet}
		switch st.Step {
		case "queue":
			p, err := hexBytes(st.Payload)
			if err != nil {
				return nil, err
			}
			switch st.Class {
			case "ordered":
				err = snd.SendOrdered(*st.Lane, p)
			case "unordered":
				err = snd.SendUnordered(p)
			case "unguaranteed":
				err = snd.SendUnguaranteed(p)
			case "staggered":
				err = snd.SendStaggered(uint16(*st.Key), p, ms(st.NowMS))
			default:
				err = fmt.Errorf("class %q", st.Class)
			}
			if err != nil {
				return nil, fmt.Errorf("step %d: %w", i, err)
			}
		case "write":
			seq, err := parseU64(st.Seq)
			if err != nil {
				return nil, err
			}
			buf := make([]byte, st.MaxBytes)
			w := bitstream.NewWriter(buf)
			if _, err := snd.Write(w, seq, ms(st.NowMS)); err != nil {
				return nil, fmt.Errorf("step %d: %w", i, err)
			}
			st.Bits, st.Hex = w.BitLen(), hx(w.Bytes())
			pkts = append(pkts, append([]byte(nil), w.Bytes()...))
			nbits = append(nbits, w.BitLen())
		case "fate":
			seq, err := parseU64(st.Seq)
			if err != nil {
				return nil, err
			}
			snd.OnFate(notify.Fate{Seq: seq, Delivered: *st.Delivered})
		case "receive":
			r := bitstream.NewReader(nil)
			r.ResetBits(pkts[*st.Packet], nbits[*st.Packet])
			var evs []eEvent
			err := rcv.Read(r, func(e event.Event) {
				ev := eEvent{Class: className(e.Class), Payload: hx(e.Payload)}
				switch e.Class {
				case event.Ordered:
					l := e.Lane
					ev.Lane = &l
				case event.Staggered:
					k := int(e.Key)
					ev.Key = &k
				}
				evs = append(evs, ev)
			})
			if err != nil {
				return nil, fmt.Errorf("step %d: %w", i, err)
			}
			st.Events = evs
		default:
			return nil, fmt.Errorf("step %d: unknown step %q", i, st.Step)
		}
		out[i] = st
	}
	return out, nil
}

func className(c event.Class) string {
	switch c {
	case event.Ordered:
		return "ordered"
	case event.Unordered:
		return "unordered"
	case event.Staggered:
		return "staggered"
	}
	return "unguaranteed"
}
