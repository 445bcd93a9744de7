package cluster

import (
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
)

// Reliable batches. Core NATS delivers at most once: a batch in flight when
// the server restarts, or when a connection drops, is gone, and with it the
// guaranteed events, joins and handoff steps it carried. So every sender
// (a zone proxy, a link) numbers its batches on a stream of its own and
// keeps them until the receiver acknowledges them; the receiver delivers
// each stream's batches once, in order, and asks for a resend (nak) when
// one is missing. Moves have their own resend (the connection's), views
// their keyframes; this makes everything else exactly once between nodes
// that stay up. A stream starts anew with its sender (a restarted node, a
// new proxy), and a receiver that first hears of a stream mid-way (a zone
// that moved to it) starts there.
//
// arqOut and arqIn are the two ends' bookkeeping, pure (time passed in);
// the Bridge runs them.

// Reliable-stream limits.
const (
	// arqRTO: held batches go again when the receiver acknowledged nothing
	// new for this long (the tail of a stream lost: no later batch shows
	// the gap). Acks come for every batch, within a round trip.
	arqRTO = 300 * time.Millisecond
	// arqMaxBackoff: a stream whose resend went unanswered for its whole
	// timeout (a peer paused, a frozen VM, NATS away) sends only its oldest
	// held batch at the next, as a probe, and waits twice as long each time,
	// up to arqRTO << arqMaxBackoff (2.4 s). Resending everything held every
	// 300 ms sent a peer paused 10 s 21–22 k copies, queued for it in NATS
	// and all delivered, as duplicates, at its wake. The first ack that frees
	// anything ends the backoff; a gap the receiver sees asks for the rest
	// at once (nak), as before.
	arqMaxBackoff = 3
	// arqMaxHeld bounds what a sender holds for resends (bytes): beyond it
	// the oldest go, and a receiver that asks for them jumps to the floor.
	arqMaxHeld = 4 << 20
	// arqHeldOverhead is what each held batch counts toward arqMaxHeld
	// besides its bytes (its entry, its slice, a publish at each resend):
	// thinned batches are small, and without it a stalled peer's stream
	// could hold hundreds of thousands of them.
	arqHeldOverhead = 256
	// arqNakEvery spaces a receiver's resend requests per stream.
	arqNakEvery = 20 * time.Millisecond
	// arqIdle: a receiver forgets a stream it has not heard from this long.
	arqIdle = time.Minute
	// arqMaxStreams bounds the streams a receiver tracks (a sender has one
	// per zone proxy and one link: a world of a few hundred zones and nodes
	// stays far below it).
	arqMaxStreams = 4096
)

// arqOut is a sender's end of one stream.
type arqOut struct {
	stream   uint64
	next     uint64 // the last seq stamped
	held     []heldBatch
	bytes    int
	progress time.Duration // the last ack that freed something, or the first send
	resent   time.Duration // the last time held batches went again
	backoff  uint8         // timeouts since the last progress, beyond the first (arqMaxBackoff)
	// thin, when set, re-encodes a held batch without what a resend need
	// not carry (a link's views: the next keyframe replaces them), before
	// arqMaxHeld drops whole batches: a peer paused for seconds (SIGSTOP,
	// a frozen VM) then still gets the events, controls and rejoins sent
	// meanwhile. thinned held batches, the oldest, are thin already.
	thin    func([]byte) []byte
	thinned int
}

type heldBatch struct {
	seq  uint64
	data []byte
}

// stamp numbers the next batch; floor is the oldest batch still held for a
// resend (the batch itself when none is).
func (o *arqOut) stamp() (seq, floor uint64) {
	o.next++
	if len(o.held) > 0 {
		return o.next, o.held[0].seq
	}
	return o.next, o.next
}

// hold keeps an encoded batch for resends; the oldest go beyond arqMaxHeld.
func (o *arqOut) hold(seq uint64, data []byte, now time.Duration) {
	if len(o.held) == 0 {
		o.progress = now
	}
	o.held = append(o.held, heldBatch{seq, data})
	o.bytes += len(data) + arqHeldOverhead
	for o.bytes > arqMaxHeld && o.thin != nil && o.thinned < len(o.held)-1 {
		h := &o.held[o.thinned]
		t := o.thin(h.data)
		o.bytes += len(t) - len(h.data)
		h.data = t
		o.thinned++
	}
	for o.bytes > arqMaxHeld && len(o.held) > 1 {
		o.bytes -= len(o.held[0].data) + arqHeldOverhead
		o.held[0] = heldBatch{}
		o.held = o.held[1:]
		o.thinned = max(o.thinned-1, 0)
	}
}

// ack frees every batch up to seq.
func (o *arqOut) ack(seq uint64, now time.Duration) {
	n := 0
	for n < len(o.held) && o.held[n].seq <= seq {
		o.bytes -= len(o.held[n].data) + arqHeldOverhead
		o.held[n] = heldBatch{}
		n++
	}
	if n > 0 {
		o.held = o.held[n:]
		o.thinned = max(o.thinned-n, 0)
		o.progress = now
		o.backoff = 0
	}
	if len(o.held) == 0 {
		o.held = o.held[:0:0] // let the backing array go
	}
}

// resend returns the held batches from seq on, to go again.
func (o *arqOut) resend(from uint64, now time.Duration) []heldBatch {
	i := 0
	for i < len(o.held) && o.held[i].seq < from {
		i++
	}
	if i < len(o.held) {
		o.resent = now
	}
	return o.held[i:]
}

// due reports whether the held batches should go again: nothing new was
// acknowledged for the timeout (arqRTO, backed off) since the last send of
// them.
func (o *arqOut) due(now time.Duration) bool {
	return len(o.held) > 0 && now-max(o.progress, o.resent) >= arqRTO<<o.backoff
}

// timedOut returns what goes again when the timeout passed (due): every
// held batch, or only the oldest, as a probe, when the resend before went
// unanswered (nothing acknowledged since), the timeout then doubling.
func (o *arqOut) timedOut(now time.Duration) []heldBatch {
	unanswered := o.resent > o.progress
	all := o.resend(0, now)
	if !unanswered || len(all) == 0 {
		return all
	}
	o.backoff = min(o.backoff+1, arqMaxBackoff)
	return all[:1]
}

// arqIn is a receiver's end of one stream.
type arqIn struct {
	next  uint64 // the seq to deliver next
	nakAt time.Duration
	seen  time.Duration
	zone  string // the zone a zone proxy's stream serves here ("": a link's)
}

// verdict is what a receiver does with one batch.
type verdict uint8

const (
	deliver    verdict = iota // the next in order: deliver, acknowledge
	duplicate                 // had it: drop, acknowledge again (the ack may be lost)
	early                     // one before it is missing: drop, ask for a resend
	earlyQuiet                // the same, a resend was asked for just now
)

// admit decides for batch seq of the stream (floor: the oldest the sender
// held when it sent it). A new stream (next 0) starts at that floor: what
// the sender still holds is asked for, what it gave up on is not. jumped
// counts batches the sender no longer held when they were found missing.
func (in *arqIn) admit(seq, floor uint64, now time.Duration) (v verdict, jumped uint64) {
	in.seen = now
	if in.next == 0 {
		in.next = min(max(floor, 1), seq)
	}
	if seq > in.next && floor > in.next {
		jumped = min(floor, seq) - in.next
		in.next = min(floor, seq)
	}
	switch {
	case seq == in.next:
		in.next++
		return deliver, jumped
	case seq < in.next:
		return duplicate, jumped
	case now-in.nakAt < arqNakEvery && in.nakAt != 0:
		return earlyQuiet, jumped
	default:
		in.nakAt = now
		return early, jumped
	}
}

// acked is the cumulative ack: every batch up to it was delivered.
func (in *arqIn) acked() uint64 { return in.next - 1 }

// arqAck is a receiver's LinkAck, handed to the sending actor.
type arqAck struct {
	seq uint64
	nak bool
}

func ackSubject(world, node string) string { return "gw." + world + ".node." + node + ".ack" }

// newStream registers a sending actor's stream: acks for it go to pid.
func (b *Bridge) newStream(pid *actor.PID) uint64 {
	b.arqMu.Lock()
	defer b.arqMu.Unlock()
	for {
		s := rand.Uint64()
		if _, taken := b.outs[s]; s != 0 && !taken {
			b.outs[s] = pid
			return s
		}
	}
}

func (b *Bridge) dropStream(s uint64) {
	b.arqMu.Lock()
	delete(b.outs, s)
	b.arqMu.Unlock()
}

// sendReliable sends m on o's stream to subject: first the held batches
// whose acknowledgement is overdue, then m, stamped (set) and held.
func (b *Bridge) sendReliable(o *arqOut, subject string, kind Kind, m proto.Message, set func(stream, seq, floor uint64)) {
	now := b.cfg.Now()
	if o.due(now) {
		for _, h := range o.timedOut(now) {
			b.publishRaw(subject, kind, h.data)
			b.m.BatchesResent.Add(1)
		}
	}
	seq, floor := o.stamp()
	set(o.stream, seq, floor)
	data, err := proto.Marshal(m)
	if err != nil {
		b.m.count(kind, dirOut, 0, errEncode)
		return // the next batch's floor lets the receiver past this seq
	}
	o.hold(seq, data, now)
	if f := b.loseOut.Load(); f != nil && (*f)(subject) {
		return // a fault drill: lost in flight
	}
	b.publishRaw(subject, kind, data)
}

// LoseBatches makes the bridge lose each first send of a batch for which
// lose returns true, as a NATS restart loses what is in flight (fault
// drills and tests; nil: none). Resends always go.
func (b *Bridge) LoseBatches(lose func(subject string) bool) {
	if lose == nil {
		b.loseOut.Store(nil)
		return
	}
	b.loseOut.Store(&lose)
}

// streamEvent runs a sending actor's side of its stream: it registers the
// stream when the actor starts, drops it when it stops, and applies acks.
// It reports whether it handled the message.
func (b *Bridge) streamEvent(ctx actor.Context, o *arqOut, subject string, kind Kind) bool {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		o.stream = b.newStream(ctx.Self())
	case *actor.Stopping:
		b.dropStream(o.stream)
	case *arqAck:
		b.takeAck(o, subject, kind, m)
	default:
		return false
	}
	return true
}

// forgetStreams forgets the receiving ends of the streams of zone, which
// this node no longer serves: if the zone comes back, its proxies' streams
// start again at their floors, as at a node that never served it. Kept,
// their state from before counted as skipped every batch the zone's
// owners meanwhile had acknowledged (2,000 and more after a node paused
// 10 s had the zone handed back to it: a warning of batches lost that
// were not).
func (b *Bridge) forgetStreams(zone string) {
	b.arqMu.Lock()
	defer b.arqMu.Unlock()
	for s, in := range b.ins {
		if in.zone == zone {
			delete(b.ins, s)
		}
	}
}

// takeAck applies a receiver's acknowledgement to o, resending from the
// missing batch on a nak.
func (b *Bridge) takeAck(o *arqOut, subject string, kind Kind, a *arqAck) {
	now := b.cfg.Now()
	o.ack(a.seq, now)
	if a.nak {
		for _, h := range o.resend(a.seq+1, now) {
			b.publishRaw(subject, kind, h.data)
			b.m.BatchesResent.Add(1)
		}
	}
}

// admitBatch runs the receiving end of a batch's stream and acknowledges
// it; it reports whether the batch is to be delivered (the next in order).
// A batch without a stream (an older sender) is always delivered. zone is
// the zone a zone proxy's batch is for ("" for a link's): its streams are
// forgotten when this node stops serving it (forgetStreams).

func (b *Bridge) admitBatch(from, zone string, stream, seq, floor uint64) bool {
	if stream == 0 || seq == 0 || !ValidID(from) {
		return true
	}
	now := b.cfg.Now()
	b.arqMu.Lock()
	in := b.ins[stream]
	if in == nil {
		if b.ins == nil {
			b.ins = map[uint64]*arqIn{}
		}
		if len(b.ins) >= 256 {
			for s, x := range b.ins {
				if now-x.seen > arqIdle {
					delete(b.ins, s)
				}
			}
		}
		if len(b.ins) >= arqMaxStreams {
			// A peer (buggy or hostile) opening stream after stream: the
			// least recently heard goes (its sender, if alive, is asked to
			// start over from its floor when it is heard again).
			var old uint64
			oldest := time.Duration(1<<63 - 1)
			for s, x := range b.ins {
				if x.seen < oldest {
					old, oldest = s, x.seen
				}
			}
			delete(b.ins, old)
			b.m.StreamsEvicted.Add(1)
		}
		in = &arqIn{zone: zone}
		b.ins[stream] = in
	}
	v, jumped := in.admit(seq, floor, now)
	acked := in.acked()
	b.arqMu.Unlock()
	if jumped > 0 {
		b.m.BatchesSkipped.Add(jumped)
		b.warnOnce("skipped:"+from, "cluster: batches a peer no longer held were skipped", "from", from, "batches", jumped)
	}
	switch v {
	case deliver, duplicate:
		if v == duplicate {
			b.m.BatchDuplicates.Add(1)
		}
		b.sendAck(from, stream, acked, false)
	case early:
		b.m.BatchGaps.Add(1)
		b.sendAck(from, stream, acked, true)
	}
	return v == deliver
}

func (b *Bridge) sendAck(to string, stream, seq uint64, nak bool) {
	data, _ := proto.Marshal(&pb.LinkAck{FromNode: b.cfg.Node, Stream: stream, Seq: seq, Nak: nak})
	b.publishRaw(ackSubject(b.cfg.World, to), KindAck, data)
}

// onAck routes a LinkAck to the actor sending that stream (NATS goroutine).
func (b *Bridge) onAck(nm *nats.Msg) {
	var a pb.LinkAck
	if !b.decode(KindAck, nm, &a) {
		return
	}
	b.arqMu.Lock()
	pid := b.outs[a.GetStream()]
	b.arqMu.Unlock()
	if pid != nil {
		b.cfg.Sys.Root.Send(pid, &arqAck{seq: a.GetSeq(), nak: a.GetNak()})
	}
}

// thinConnBatch is a link's held ConnBatch without its views (arqOut.thin):
// a resend's views would be stale, and the receiver takes the next
// keyframe (keyframeEvery) after the gap. A batch with no views, or one
// that does not decode, is kept as it is.
func thinConnBatch(data []byte) []byte {
	var cb pb.ConnBatch
	if proto.Unmarshal(data, &cb) != nil || len(cb.Views) == 0 && len(cb.PackedViews) == 0 {
		return data
	}
	cb.Views, cb.PackedViews = nil, nil
	thin, err := proto.Marshal(&cb)
	if err != nil {
		return data
	}
	return thin
}

// thinZoneBatch is a zone proxy's held ZoneBatch without its replica
// batches (arqOut.thin): a neighbour's border replicas are replaced by the
// next tick's, and a silent neighbour's expire (sim ReplicaTTL). Inputs,
// joins, leaves, teleports and handoff messages stay. A batch with no
// replicas, or one that does not decode, is kept as it is.
func thinZoneBatch(data []byte) []byte {
	var zb pb.ZoneBatch
	if proto.Unmarshal(data, &zb) != nil {
		return data
	}
	items := zb.Items[:0]
	for _, it := range zb.Items {
		if it.GetReplicas() == nil {
			items = append(items, it)
		}
	}
	if len(items) == len(zb.Items) {
		return data
	}
	clear(zb.Items[len(items):])
	zb.Items = items
	thin, err := proto.Marshal(&zb)
	if err != nil {
		return data
	}
	return thin
}
