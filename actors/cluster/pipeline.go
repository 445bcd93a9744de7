package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/proto/pbconv"
)

// pipeline is what Pipeline sets up: the bucket's subjects and stream,
// and each writer's acknowledgements, which the stream sends to the
// writer's own reply subject (inbox.<writer>.<n>, n counting the
// writer's publishes) and the client puts straight on the writer's
// channel.
type pipeline struct {
	nc     *nats.Conn
	pre    string // the bucket's subject prefix ($KV.<bucket>.)
	stream string
	ackPre []byte // an ack's start: {"stream":"<stream>","seq":
	reply  [playerWorkers]string
	acks   [playerWorkers]chan *nats.Msg
	subs   [playerWorkers]*nats.Subscription
	wait   time.Duration // ackWait
}

// ackWait bounds a batch's wait for its acks (what jetstream's
// asynchronous publishes were given: NATS gone, they never come).
const ackWait = 2 * time.Second

// Pipeline makes checkpoints go out as pipelined publishes (with the same
// compare-and-set: the revision the node wrote last as the expected last
// sequence of the key's subject) instead of one request at a time per
// writer. A checkpoint a request at a time cost a node ≈ 80 µs of CPU
// (client and nats-server) at 1,000 a second, spread over the ticks; most
// of it the round trip's wake-ups, which a batch shares. The acks come
// to each writer's own subscription and are read by the writer itself:
// jetstream's asynchronous publish made a future, two channels, a timer
// and a map entry a publish and parsed each ack as JSON (≈ 10 % of a
// checkpoint's CPU, a quarter of its allocations; BenchmarkCheckpointRecords).
// nc is the connection the bucket was opened on. Without a plain KV
// bucket behind p (a mirror, another subject layout) it changes nothing
// and says why. Call it before the first write.
func (p *Players) Pipeline(ctx context.Context, nc *nats.Conn) error {
	st, err := p.kv.Status(ctx)
	if err != nil {
		return err
	}
	ks, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok || ks.StreamInfo() == nil {
		return errors.New("players: bucket status without stream info")
	}
	cfg := ks.StreamInfo().Config
	pre := "$KV." + p.kv.Bucket() + "."
	if cfg.Mirror != nil || len(cfg.Subjects) != 1 || cfg.Subjects[0] != pre+">" {
		return fmt.Errorf("players: bucket %s is not a plain KV (subjects %v)", p.kv.Bucket(), cfg.Subjects)
	}
	pl := &pipeline{nc: nc, pre: pre, stream: cfg.Name, wait: ackWait, ackPre: fmt.Appendf(nil, "{%q:%q,%q:", "stream", cfg.Name, "seq")}
	inbox := nc.NewInbox() // the connection's inbox prefix (permissions)
	for i := range pl.acks {
		pl.reply[i] = inbox + "." + strconv.Itoa(i) + "."
		// Room for a batch's acks and as many late ones of a batch it
		// stopped waiting for: a full channel drops an ack (the client
		// counts a slow consumer) and its write counts as failed.
		pl.acks[i] = make(chan *nats.Msg, 2*maxBatch)
		if pl.subs[i], err = nc.ChanSubscribe(pl.reply[i]+"*", pl.acks[i]); err != nil {
			pl.close()
			return err
		}
	}
	p.pipe = pl
	return nil
}

func (pl *pipeline) close() {
	for _, s := range pl.subs {
		if s != nil {
			_ = s.Unsubscribe()
		}
	}
}

// errAckTimeout: a publish whose ack did not come within ackWait.
var errAckTimeout = errors.New("players: checkpoint not acknowledged in time")

// ack reads a publish's ack: the stream sequence it was stored at, or
// the stream's error (a *jetstream.APIError: a wrong last sequence is a
// compare-and-set refused). The stream's usual ack is read without a
// JSON decoder; anything else goes through one.
func (pl *pipeline) ack(m *nats.Msg) (uint64, error) {
	d := m.Data
	if len(d) == 0 {
		return 0, jetstream.ErrNoStreamResponse // a status (no responders)
	}
	if rest, ok := bytes.CutPrefix(d, pl.ackPre); ok {
		var seq uint64
		k := 0
		for ; k < len(rest) && k < 19 && '0' <= rest[k] && rest[k] <= '9'; k++ {
			seq = seq*10 + uint64(rest[k]-'0')
		}
		if k > 0 && k == len(rest)-1 && rest[k] == '}' && seq > 0 {
			return seq, nil
		}
	}
	var r struct {
		Error  *jetstream.APIError `json:"error"`
		Stream string              `json:"stream"`
		Seq    uint64              `json:"seq"`
	}
	if err := json.Unmarshal(d, &r); err != nil {
		return 0, jetstream.ErrInvalidJSAck
	}
	if r.Error != nil {
		return 0, r.Error
	}
	if r.Stream != pl.stream || r.Seq == 0 {
		return 0, jetstream.ErrInvalidJSAck
	}
	return r.Seq, nil
}

// batchWriter is a record writer's reused state for its batches: one
// message (the client copies it out as it publishes), its header, the
// buffer its subject, reply, expected revision and record are encoded
// in, and each publish's outcome. A checkpoint is one a player a second
// (the RPO). Owned by one writer goroutine.
type batchWriter struct {
	enc pbconv.RecordEncoder
	buf []byte
	m   nats.Msg
	hdr nats.Header
	seq [1]string
	// gen numbers the writer's reply subjects: a batch's publishes are
	// gen×maxBatch + their index in it, so batch after batch they are the
	// same 64 subjects a writer. The stream's client in nats-server keeps
	// the last 512 subjects it delivered to (its acks), and each new one,
	// a publish's own number, was a sublist match, its allocations and
	// an entry evicted. A batch whose acks did not all come moves the
	// writer to the next gen: a late ack is never taken for a later
	// batch's (a batch reads its acks all before the next is sent).
	gen   uint64
	timer *time.Timer
	// Per job of the batch: fenced, the fence stopped it; same, not sent
	// because its record is unchanged (Players.unchanged); sent, published
	// (its ack awaited); got, its ack read: rev the record's new revision
	// or err; sum, its record's (recordSum). err of a job not sent: its
	// record did not encode.
	fenced [maxBatch]bool
	same   [maxBatch]bool
	sent   [maxBatch]bool
	got    [maxBatch]bool
	rev    [maxBatch]uint64
	sum    [maxBatch]uint64
	err    [maxBatch]error
	// What encode encoded last: the ends of its subject, reply and
	// expected revision in buf (the record follows), its record's time.
	rep, subj, seqEnd int
	now               int64
}

// encode encodes j's record to subject pre+key, published only over
// revision rev of the key's subject, its ack to reply+n, in buf: msg
// makes the message of it (apart: an unchanged record is not sent, and
// makes no message). It returns the error of a record that does not
// encode.
func (w *batchWriter) encode(p *Players, j *playerJob, rev uint64, reply string, n uint64) error {
	w.buf = append(w.buf[:0], p.pipe.pre...)
	w.buf = append(w.buf, "p."...)
	w.buf = strconv.AppendUint(w.buf, j.player, 10)
	w.rep = len(w.buf)
	w.buf = append(w.buf, reply...)
	w.buf = strconv.AppendUint(w.buf, n, 10)
	w.subj = len(w.buf)
	w.buf = strconv.AppendUint(w.buf, rev, 10)
	w.seqEnd = len(w.buf)
	w.now = time.Now().UnixMilli()
	h := pbconv.RecordHead{Player: j.player, Zone: j.zone, State: pb.PlayerState_PLAYER_STATE_ONLINE,
		Epoch: j.epoch, Node: p.node, UpdatedUnixMs: w.now, Gateway: j.gateway}
	if j.leaving {
		h.State = pb.PlayerState_PLAYER_STATE_OFFLINE
	}
	var err error
	w.buf, err = w.enc.Append(w.buf, &h, j.cp)
	return err
}

// record is the record encode encoded last.
func (w *batchWriter) record() []byte { return w.buf[w.seqEnd:] }

// msg fills the writer's message with what encode encoded last. The data
// points into buf, valid until the next encode; the subject, reply and
// revision are copied out together, as one string (one small allocation
// a checkpoint, not three; not worth an unsafe alias of a reused buffer).
func (w *batchWriter) msg() *nats.Msg {
	b := w.buf
	if w.hdr == nil {
		w.hdr = nats.Header{}
	}
	strs := string(b[:w.seqEnd]) // one string, three views of it
	w.seq[0] = strs[w.subj:w.seqEnd]
	w.hdr[jetstream.ExpectedLastSubjSeqHeader] = w.seq[:]
	w.m = nats.Msg{Subject: strs[:w.rep], Reply: strs[w.rep:w.subj], Header: w.hdr, Data: b[w.seqEnd:len(b):len(b)]}
	return &w.m
}

// reset makes the writer ready for the next batch.
func (w *batchWriter) reset() {
	clear(w.fenced[:])
	clear(w.same[:])
	clear(w.sent[:])
	clear(w.got[:])
	clear(w.rev[:])
	clear(w.sum[:])
	clear(w.err[:])
	w.m = nats.Msg{}
}

// writeBatch writes checkpoints of distinct players: those whose record
// revision this node knows as compare-and-set publishes, all in flight at
// once; the rest, and any whose compare-and-set failed (the record moved
// on), one at a time as write does. wi is the writer.
func (p *Players) writeBatch(w *batchWriter, wi int, batch []*playerJob, commits <-chan *playerJob) {
	defer w.reset()
	pl := p.pipe
	first, pending := w.gen*maxBatch, 0
	for i, j := range batch {
		if p.valid != nil && !p.valid(j.zone) {
			w.fenced[i] = true
			continue
		}
		c, ok := p.revOf(j.player)
		if !ok || c.zone != j.zone || c.epoch != j.epoch || c.rev == 0 {
			continue // no revision to expect: written by write
		}
		if err := w.encode(p, j, c.rev, pl.reply[wi], first+uint64(i)); err != nil {
			if !j.keep() {
				w.err[i] = p.unencodable(j, err) // not sent: write would encode it the same way
			} // else not sent: write repairs it (a leaving player's)
			continue
		}
		w.sum[i] = p.recordSum(w.record(), w.now, j.gateway)
		if p.unchanged(j, c, w.sum[i]) {
			w.same[i] = true
			continue
		}
		if pl.nc.PublishMsg(w.msg()) == nil {
			w.sent[i] = true
			pending++
		}
	}
	if pending > 0 {
		p.awaitAcks(w, wi, first, len(batch), pending)
	}
	for i, j := range batch {
		switch {
		case w.fenced[i] && j.keep() && p.fenceWait != nil:
			p.Fenced.Add(1)
			j.fence = fenceStopped
			finish(j, p.writeAfterFence(j, commits))
		case w.fenced[i]:
			p.Fenced.Add(1)
			finish(j, errNotWritten)
		case w.same[i]:
			finish(j, nil) // the record holds it (unchanged counted it)
		case !w.sent[i] && w.err[i] != nil: // it did not encode
			finish(j, w.err[i])
		case !w.sent[i]:
			finish(j, p.write(j))
		case w.err[i] == nil:
			p.Written.Add(1)
			p.Checkpoints.Add(1)
			if j.leaving {
				p.forget(j.player)
			} else {
				p.rememberAt(j, w.rev[i], w.sum[i], time.Since(p.born))
			}
			finish(j, nil)
		case isWrongSequence(w.err[i]) || errors.Is(w.err[i], jetstream.ErrKeyExists):
			// Someone wrote the record since: look again (write reads it
			// and checks it still names this zone and epoch).
			p.forget(j.player)
			finish(j, p.write(j))
		default: // a failed write (or an ack that never came): the next second's replaces it
			p.Errors.Add(1)
			finish(j, w.err[i])
		}
	}
}

// awaitAcks reads writer wi's acks until each of the batch's pending
// publishes (numbered first to first+n-1) has one, or the wait (ackWait)
// is up: the rest fail with errAckTimeout, and the writer's next batch
// is numbered apart (batchWriter.gen). An ack of an earlier batch (one
// that came too late) is dropped.
func (p *Players) awaitAcks(w *batchWriter, wi int, first uint64, n, pending int) {
	pl := p.pipe
	if w.timer == nil {
		w.timer = time.NewTimer(pl.wait)
	} else {
		w.timer.Reset(pl.wait)
	}
	defer w.timer.Stop()
	for pending > 0 {
		select {
		case m := <-pl.acks[wi]:
			id, err := strconv.ParseUint(m.Subject[min(len(pl.reply[wi]), len(m.Subject)):], 10, 64)
			if err != nil || id < first || id-first >= uint64(n) {
				continue
			}
			i := id - first
			if !w.sent[i] || w.got[i] {
				continue
			}
			w.got[i] = true
			w.rev[i], w.err[i] = pl.ack(m)
			pending--
		case <-w.timer.C:
			for i := range n {
				if w.sent[i] && !w.got[i] {
					w.err[i] = errAckTimeout
				}
			}
			w.gen++
			return
		}
	}
}
