package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// An ack is read as the stream sends it: its usual form without a JSON
// decoder, any other (a domain, a duplicate, an error) through one; a
// refused compare-and-set is a wrong last sequence (the writer reads the
// record again), anything unreadable or of another stream a failure,
// never a revision.
func TestPipelineAckReads(t *testing.T) {
	pl := &pipeline{stream: "KV_players", ackPre: []byte(`{"stream":"KV_players","seq":`)}
	for _, c := range []struct {
		data    string
		rev     uint64
		wrong   bool // a wrong last sequence
		invalid bool
	}{
		{data: `{"stream":"KV_players","seq":1}`, rev: 1},
		{data: `{"stream":"KV_players","seq":18446744073709551615}`, rev: 18446744073709551615},
		{data: `{"stream":"KV_players","seq":42,"domain":"hub"}`, rev: 42},
		{data: `{"stream":"KV_players","domain":"hub","seq":43}`, rev: 43},
		{data: `{"stream":"KV_players","seq":44,"duplicate": true}`, rev: 44},
		{data: `{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 7"},"stream":"KV_players","seq":0}`, wrong: true},
		// a replicated stream (R>1) refuses a compare-and-set with 10164
		{data: `{"error":{"code":400,"err_code":10164,"description":"wrong last sequence: 7"},"stream":"KV_players","seq":0}`, wrong: true},
		{data: `{"error":{"code":503,"err_code":10077,"description":"resource limits exceeded for account"},"stream":"KV_players","seq":0}`},
		{data: `{"stream":"KV_other","seq":5}`, invalid: true},
		{data: `{"stream":"KV_players","seq":0}`, invalid: true},
		{data: `{"stream":"KV_players","seq":12x}`, invalid: true},
		{data: `{"stream":"KV_players","seq":}`, invalid: true},
		{data: `not json`, invalid: true},
		{data: ``},
	} {
		rev, err := pl.ack(&nats.Msg{Data: []byte(c.data)})
		switch {
		case c.rev != 0 && (rev != c.rev || err != nil):
			t.Errorf("%s: revision %d (%v), want %d", c.data, rev, err, c.rev)
		case c.rev == 0 && (rev != 0 || err == nil):
			t.Errorf("%s: revision %d, no error", c.data, rev)
		case c.wrong != isWrongSequence(err):
			t.Errorf("%s: %v, wrong last sequence %v", c.data, err, c.wrong)
		case c.invalid != errors.Is(err, jetstream.ErrInvalidJSAck):
			t.Errorf("%s: %v, invalid %v", c.data, err, c.invalid)
		}
	}
}

// A writer takes the acks of its batch by their numbers: an ack of an
// earlier batch (late: the writer stopped waiting for it) or a second
// copy is dropped, one of a publish that went out unsent is ignored, and
// a publish whose ack never comes fails when the wait is up, not with the
// revision of another's.
func TestPipelineAwaitAcksTakesItsOwn(t *testing.T) {
	pl, p, ack := ackedPipeline()
	var w batchWriter
	const first = 10 // this batch: publishes 10–13; 12 was not sent
	w.sent[0], w.sent[1], w.sent[3] = true, true, true
	ack(9, 900)  // the batch before's
	ack(11, 111) // out of order
	ack(12, 122) // not sent
	ack(11, 999) // again
	pl.acks[1] <- &nats.Msg{Subject: "_INBOX.x.1.", Data: []byte(`{"stream":"KV_players","seq":5}`)}
	ack(14, 140) // the next batch's (cannot be: it goes out after this one's)
	ack(10, 100)
	p.awaitAcks(&w, 1, first, 4, 3) // 13's never comes
	if w.rev[0] != 100 || w.err[0] != nil || w.rev[1] != 111 || w.err[1] != nil {
		t.Fatalf("acks 10, 11: %d %v, %d %v; want 100, 111", w.rev[0], w.err[0], w.rev[1], w.err[1])
	}
	if w.got[2] || w.rev[2] != 0 || w.err[2] != nil {
		t.Fatalf("an ack of an unsent publish was taken: %d %v", w.rev[2], w.err[2])
	}
	if w.rev[3] != 0 || !errors.Is(w.err[3], errAckTimeout) {
		t.Fatalf("the missing ack: %d %v, want a timeout", w.rev[3], w.err[3])
	}
}

// A compare-and-set refused is one whatever the stream's replicas: code
// 10071 from a stream of one, 10164 from a replicated one, and KV's
// Update wraps either in ErrKeyRevisionMismatch. Counted as an error
// instead, a refused write on a cluster with --kv-replicas 3 would not
// read the record again (a Commit retries and fails, a checkpoint drops).
func TestWrongSequenceWhateverTheReplicas(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"10071", &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence}, true},
		{"10164", &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequenceConstant}, true},
		{"Update's", fmt.Errorf("%w: %w", jetstream.ErrKeyRevisionMismatch,
			&jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequenceConstant}), true},
		{"wrapped", fmt.Errorf("commit: %w", &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequenceConstant}), true},
		{"limits", &jetstream.APIError{Code: 503, ErrorCode: 10077}, false},
		{"timeout", errAckTimeout, false},
		{"nil", nil, false},
	} {
		if got := isWrongSequence(c.err); got != c.want {
			t.Errorf("%s: isWrongSequence(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// FuzzPipelineAck: whatever the stream (or anything on the writer's reply
// subject) sends, ack returns a revision or an error, never panics, and
// its JSON-free reading of the usual ack agrees with encoding/json's.
func FuzzPipelineAck(f *testing.F) {
	for _, s := range []string{
		`{"stream":"KV_players","seq":1}`,
		`{"stream":"KV_players","seq":18446744073709551615}`,
		`{"stream":"KV_players","seq":18446744073709551616}`,
		`{"stream":"KV_players","seq":42,"duplicate":true}`,
		`{"error":{"code":400,"err_code":10164,"description":"wrong last sequence: 7"},"stream":"KV_players","seq":0}`,
		`{"stream":"KV_players","seq":0}`, `{"stream":"KV_players","seq":}`, `not json`, ``,
	} {
		f.Add([]byte(s))
	}
	pl := &pipeline{stream: "KV_players", ackPre: []byte(`{"stream":"KV_players","seq":`)}
	f.Fuzz(func(t *testing.T, data []byte) {
		rev, err := pl.ack(&nats.Msg{Data: data})
		if err == nil && rev == 0 {
			t.Fatalf("%q: revision 0 without an error", data)
		}
		var r struct {
			Error  *jetstream.APIError `json:"error"`
			Stream string              `json:"stream"`
			Seq    uint64              `json:"seq"`
		}
		if json.Unmarshal(data, &r) == nil && r.Error == nil && r.Stream == pl.stream && r.Seq != 0 && (err != nil || rev != r.Seq) {
			t.Fatalf("%q: ack read revision %d (%v), encoding/json %d", data, rev, err, r.Seq)
		}
	})
}

// ackedPipeline is a pipeline without a connection whose writer 1 takes
// its acks from a channel, the Players over it, and ack, which sends
// writer 1 the ack of its publish n with revision rev.
func ackedPipeline() (pl *pipeline, p *Players, ack func(n, rev uint64)) {
	pl = &pipeline{stream: "KV_players", ackPre: []byte(`{"stream":"KV_players","seq":`), wait: 50 * time.Millisecond}
	pl.reply[1] = "_INBOX.x.1."
	pl.acks[1] = make(chan *nats.Msg, 16)
	p = &Players{pipe: pl}
	ack = func(n, rev uint64) {
		pl.acks[1] <- &nats.Msg{Subject: pl.reply[1] + strconv.FormatUint(n, 10),
			Data: []byte(`{"stream":"KV_players","seq":` + strconv.FormatUint(rev, 10) + `}`)}
	}
	return pl, p, ack
}
