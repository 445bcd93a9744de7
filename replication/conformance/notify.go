package conformance

import (
	"errors"
	"fmt"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// nStep is one step of a notify scenario between peers "a" and "b". The
// inputs are step, side, now_ms, type and packet; the rest is what the
// reference produced.
type nStep struct {
	Step   string  `json:"step"`
	Side   string  `json:"side"`
	NowMS  int64   `json:"now_ms"`
	Type   *int    `json:"type,omitempty"`
	Packet *int    `json:"packet,omitempty"`
	Seq    string  `json:"seq,omitempty"`
	Bits   int     `json:"bits,omitempty"`
	Hex    string  `json:"hex,omitempty"`
	Result string  `json:"result,omitempty"`
	Fates  []nFate `json:"fates,omitempty"`
}

type nFate struct {
	Seq       string `json:"seq"`
	Delivered bool   `json:"delivered"`
}

type nScenario struct {
	Name  string  `json:"name"`
	Steps []nStep `json:"steps"`
}

var notifySchema = []Field{
	{"vectors[]", "scenarios; each starts with two fresh peers a and b (W = 256, K = 4, MinReorderTime 25 ms, InitialRTT 100 ms), both at sequence 0"},
	{"steps[].step", "send: side writes a packet header (type: 0 data, 1 ack-only) at now_ms; deliver: side reads packet number `packet` (0-based index into this scenario's sends) at now_ms and, if acceptable, accepts it; tick: side runs its receiver's time threshold at now_ms. A packet that no deliver step names was lost"},
	{"steps[].seq, bits, hex", "send: the packet's 64-bit sequence number and its header alone (no payload), padded to a byte. The ack delay code is the reference encoder's dithered choice (§ 3.7 gives it exactly); a reader only needs the table"},
	{"steps[].result", "deliver: accepted, or the rejection (duplicate, stale, too_far, bad_ack), which changes nothing"},
	{"steps[].fates", "deliver and tick: the fates of side's own packets that became known, in send order (pop them after every step)"},
}

func notifyDoc() (doc, error) {
	var scen []nScenario
	add := func(name string, steps []nStep) error {
		out, err := runNotify(steps)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		scen = append(scen, nScenario{Name: name, Steps: out})
		return nil
	}
	data, ack := 0, 1
	send := func(side string, t int64, typ *int) nStep {
		return nStep{Step: "send", Side: side, NowMS: t, Type: typ}
	}
	deliver := func(side string, t int64, pkt int) nStep {
		p := pkt
		return nStep{Step: "deliver", Side: side, NowMS: t, Packet: &p}
	}

	// 1. Ping-pong without loss: the 21-bit steady-state header appears.
	var s []nStep
	for i := range 12 {
		t := int64(i) * 50
		s = append(s, send("a", t, &data), deliver("b", t+10, 2*i), send("b", t+25, &data), deliver("a", t+35, 2*i+1))
	}
	if err := add("loss-free ping-pong, 20 packets/s each way, 10 ms one way", s); err != nil {
		return doc{}, err
	}

	// 2. a streams, b answers each arrival; a's packets 3 and 4 are lost.
	s = nil
	idx := 0
	for i := range 12 {
		t := int64(i) * 50
		s = append(s, send("a", t, &data))
		ai := idx
		idx++
		if i == 3 || i == 4 {
			continue
		}
		s = append(s, deliver("b", t+10, ai), send("b", t+20, &ack), deliver("a", t+30, idx))
		idx++
	}
	if err := add("two losses given up by the packet threshold (K = 4), reported dropped", s); err != nil {
		return doc{}, err
	}

	// 3. Reordering by up to three slots is not loss.
	s = nil
	for i := range 8 {
		s = append(s, send("a", int64(i)*20, &data))
	}
	for k, p := range []int{0, 2, 3, 1, 4, 7, 5, 6} {
		s = append(s, deliver("b", 200+int64(k)*5, p))
	}
	s = append(s, send("b", 260, &ack), deliver("a", 270, 8))
	if err := add("reordered by 1-3 slots: all delivered", s); err != nil {
		return doc{}, err
	}

	// 4. The time threshold (Tick) gives up a gap when no later packets come.
	s = []nStep{send("a", 0, &data), send("a", 50, &data), send("a", 100, &data), send("a", 150, &data),
		deliver("b", 10, 0), deliver("b", 60, 1), deliver("b", 160, 3),
		{Step: "tick", Side: "b", NowMS: 200}, send("b", 200, &ack), deliver("a", 210, 4),
		{Step: "tick", Side: "b", NowMS: 420}, send("b", 420, &ack), deliver("a", 430, 5),
		deliver("b", 440, 2)}
	if err := add("a gap abandoned by the time threshold, then the late packet is stale", s); err != nil {
		return doc{}, err
	}

	// 5. A duplicate changes nothing.
	s = []nStep{send("a", 0, &data), deliver("b", 10, 0), deliver("b", 11, 0), send("b", 20, &data), deliver("a", 30, 1), deliver("a", 31, 1)}
	if err := add("duplicates are rejected", s); err != nil {
		return doc{}, err
	}

	// 6. Without acks the sequence field widens; b then acks with a wide L.
	s = nil
	for i := range 70 {
		s = append(s, send("a", int64(i)*10, &data), deliver("b", int64(i)*10+5, i))
	}
	s = append(s, send("b", 700, &ack), deliver("a", 705, 70), send("a", 710, &data), deliver("b", 715, 71))
	if err := add("70 packets without an ack: 7-bit then 16-bit sequence fields", s); err != nil {
		return doc{}, err
	}
	return doc{
		Description: "Packet-notify headers and ack processing: scripted exchanges between two peers with losses, reordering, duplicates and the time threshold. Replay each step with your implementation and compare the header bytes you write, the accept/reject result and the fates you report.",
		Spec:        "docs/protocol.md § 3",
		Schema:      notifySchema,
		Vectors:     scen,
	}, nil
}

func ms(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

// runNotify executes steps (only their inputs are read) and returns them
// with the outputs filled in.
func runNotify(in []nStep) ([]nStep, error) {
	peers := map[string]*notify.Conn{}
	for _, p := range []string{"a", "b"} {
		c, err := notify.New(notify.DefaultConfig())
		if err != nil {
			return nil, err
		}
		peers[p] = c
	}
	var pkts [][]byte
	var buf [64]byte
	out := make([]nStep, len(in))
	for i, st := range in {
		st = nStep{Step: st.Step, Side: st.Side, NowMS: st.NowMS, Type: st.Type, Packet: st.Packet}
		c, ok := peers[st.Side]
		if !ok {
			return nil, fmt.Errorf("step %d: side %q", i, st.Side)
		}
		now := ms(st.NowMS)
		switch st.Step {
		case "send":
			w := bitstream.NewWriter(buf[:])
			seq, err := c.WriteHeader(w, notify.PacketType(*st.Type), now)
			if err != nil {
				return nil, fmt.Errorf("step %d: %w", i, err)
			}
			st.Seq, st.Bits, st.Hex = u64(seq), w.BitLen(), hx(w.Bytes())
			pkts = append(pkts, append([]byte(nil), w.Bytes()...))
		case "deliver":
			if *st.Packet >= len(pkts) {
				return nil, fmt.Errorf("step %d: packet %d not sent yet", i, *st.Packet)
			}
			r := bitstream.NewReader(pkts[*st.Packet])
			h, err := c.ReadHeader(r)
			if err == nil {
				err = c.Accept(h, now)
			}
			st.Result = notifyResult(err)
			st.Fates = popFates(c)
		case "tick":
			c.Tick(now)
			st.Fates = popFates(c)
		default:
			return nil, fmt.Errorf("step %d: unknown step %q", i, st.Step)
		}
		out[i] = st
	}
	return out, nil
}

func popFates(c *notify.Conn) []nFate {
	var out []nFate
	for _, f := range c.PopFates(nil) {
		out = append(out, nFate{Seq: u64(f.Seq), Delivered: f.Delivered})
	}
	return out
}

func notifyResult(err error) string {
	switch {
	case err == nil:
		return "accepted"
	case errors.Is(err, notify.ErrDuplicate):
		return "duplicate"
	case errors.Is(err, notify.ErrStale):
		return "stale"
	case errors.Is(err, notify.ErrTooFar):
		return "too_far"
	case errors.Is(err, notify.ErrBadAck):
		return "bad_ack"
	}
	return "error: " + err.Error()
}
