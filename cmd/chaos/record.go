package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
)

// Buckets the recorder watches (actors/node's BucketZones, BucketPlayers).
const (
	bucketZones   = "ghostwire_zones"
	bucketPlayers = "ghostwire_players"
)

// Write is one KV entry as the server stored it: a lease write (Zone
// bucket) or a player record write. Created is the server's timestamp,
// so writes of every node sort on one clock.
type Write struct {
	Bucket  string    `json:"bucket"`
	Key     string    `json:"key"`
	Rev     uint64    `json:"rev"`
	Created time.Time `json:"created"`
	// Deleted: a delete, purge or expiry marker (the zone has no owner).
	Deleted bool   `json:"deleted,omitempty"`
	Node    string `json:"node,omitempty"`
	Zone    string `json:"zone,omitempty"`
	// Epoch: a lease's epoch (the Create's revision), or a player record's
	// handoff epoch.
	Epoch  uint64 `json:"epoch,omitempty"`
	Player uint64 `json:"player,omitempty"`
	// LastApplied: the checkpoint's last applied move (0: no checkpoint).
	LastApplied uint64 `json:"last_applied,omitempty"`
	Checkpoint  bool   `json:"checkpoint,omitempty"`
	Offline     bool   `json:"offline,omitempty"`
	// Chunk: a player's periodic checkpoint in its zone's checkpoint chunk
	// (key c.<zone>.<slice>; Key is then "c:" and the player's record key),
	// one Write a record of the chunk, at the chunk's revision. Not the
	// player's record, which stays where the player is: the end state's
	// audit skips it.
	Chunk bool `json:"chunk,omitempty"`
}

// decodeWrite turns a KV entry into a Write. A value that does not decode
// keeps its key and revision (the audit counts it).
func decodeWrite(bucket string, e jetstream.KeyValueEntry) Write {
	w := Write{Bucket: bucket, Key: e.Key(), Rev: e.Revision(), Created: e.Created()}
	if op := e.Operation(); op == jetstream.KeyValueDelete || op == jetstream.KeyValuePurge || len(e.Value()) == 0 {
		w.Deleted = true
		if bucket == bucketZones {
			w.Zone = e.Key()
		}
		return w
	}
	switch bucket {
	case bucketZones:
		var o pb.ZoneOwner
		w.Zone = e.Key()
		if proto.Unmarshal(e.Value(), &o) == nil {
			w.Node, w.Epoch = o.GetNode(), o.GetEpoch()
			if w.Epoch == 0 { // a claim not yet rewritten: its revision is the epoch
				w.Epoch = e.Revision()
			}
		}
	case bucketPlayers:
		var r pb.PlayerRecord
		if proto.Unmarshal(e.Value(), &r) == nil {
			w.Node, w.Zone, w.Epoch, w.Player = r.GetNode(), r.GetZone(), r.GetEpoch(), r.GetPlayer()
			w.Offline = r.GetState() == pb.PlayerState_PLAYER_STATE_OFFLINE
			if cp := r.GetCheckpoint(); cp != nil {
				w.Checkpoint, w.LastApplied = true, cp.GetLastApplied()
			}
		}
	}
	return w
}

// decodeChunk turns a checkpoint chunk into one Write a record, each the
// periodic checkpoint of one player (Write.Chunk). A chunk that does not
// decode is one Write with no zone (the audit skips it), as a record
// that does not decode is.
func decodeChunk(e jetstream.KeyValueEntry) []Write {
	base := Write{Bucket: bucketPlayers, Key: e.Key(), Rev: e.Revision(), Created: e.Created(), Chunk: true}
	var c pb.CheckpointChunk
	if e.Operation() != jetstream.KeyValuePut || proto.Unmarshal(e.Value(), &c) != nil {
		return []Write{base}
	}
	if len(c.GetRecords()) == 0 { // an empty slice: still a write for the zone, by its owner
		base.Zone, base.Node = c.GetZone(), c.GetNode()
		return []Write{base}
	}
	out := make([]Write, 0, len(c.GetRecords()))
	for _, r := range c.GetRecords() {
		w := base
		w.Key = "c:p." + strconv.FormatUint(r.GetPlayer(), 10)
		w.Node, w.Zone, w.Epoch, w.Player = c.GetNode(), c.GetZone(), r.GetEpoch(), r.GetPlayer()
		if cp := r.GetCheckpoint(); cp != nil {
			w.Checkpoint, w.LastApplied = true, cp.GetLastApplied()
		}
		out = append(out, w)
	}
	return out
}

// Recorder keeps every write to the zones and players buckets from the
// moment it starts. Safe for concurrent use.
type Recorder struct {
	nc *nats.Conn
	wg sync.WaitGroup

	mu     sync.Mutex
	writes []Write
	seen   map[string]uint64 // bucket/key → newest revision recorded (a re-created watcher replays)
	owners map[string]Write  // zone → its current lease
	// upTo is the newest stream sequence each bucket's watchers delivered
	// (every entry, deletions and chunks too): CaughtUp's measure, and
	// where a new watcher starts.
	upTo map[string]uint64
	// from is each bucket's last sequence when its watcher started; missed
	// counts the revisions above it a watcher skipped: the stream's
	// sequence is gapless, so a skipped one was removed before the watcher
	// delivered it (a key's next revision replaces it: the buckets keep
	// one) — a write the audit never saw.
	from   map[string]uint64
	missed map[string]uint64
	// cur is each bucket's current watcher; closing, set by Close.
	cur     map[string]*recWatcher
	closing bool
}

// recHeartbeat is the idle heartbeat of the recorder's consumers. A
// consumer that lost its server (a NATS node killed) is created again
// after two missed heartbeats; at KV watchers' 5 s, the recorder sat ≥ 11 s
// behind after each election of the NATS-cluster runs and missed ≈ 12 % of
// the lease writes (superseded before it saw them), the ones the audit is
// there for.
const recHeartbeat = 100 * time.Millisecond

// recReconnect is the recorder's wait between reconnect attempts, and
// recRetry between attempts to make a watcher again: short, so that it
// follows a restarted server before the nodes write much to it.
const (
	recReconnect = 20 * time.Millisecond
	recRetry     = 20 * time.Millisecond
)

// recWatcher is a KV watcher of every revision, as jetstream's WatchAll
// with IncludeHistory, but on an ordered consumer with a short heartbeat
// (jetstream's watchers keep 5 s).
type recWatcher struct {
	sub     *nats.Subscription
	updates chan jetstream.KeyValueEntry
}

func (w *recWatcher) Updates() <-chan jetstream.KeyValueEntry { return w.updates }
func (w *recWatcher) Stop() error                             { return w.sub.Unsubscribe() }

// recEntry is one revision a recWatcher delivers.
type recEntry struct {
	bucket, key string
	value       []byte
	rev         uint64
	created     time.Time
	op          jetstream.KeyValueOp
}

func (e *recEntry) Bucket() string                  { return e.bucket }
func (e *recEntry) Key() string                     { return e.key }
func (e *recEntry) Value() []byte                   { return e.value }
func (e *recEntry) Revision() uint64                { return e.rev }
func (e *recEntry) Created() time.Time              { return e.created }
func (e *recEntry) Delta() uint64                   { return 0 }
func (e *recEntry) Operation() jetstream.KeyValueOp { return e.op }

// watchBucket delivers every revision of bucket's stream from revision
// start on, deletions and the server's expiry markers included, until
// Stop.
func watchBucket(js nats.JetStreamContext, bucket string, start uint64) (*recWatcher, error) {
	pre := "$KV." + bucket + "."
	w := &recWatcher{updates: make(chan jetstream.KeyValueEntry, 256)}
	sub, err := js.Subscribe(pre+">", func(m *nats.Msg) {
		meta, err := m.Metadata()
		if err != nil || len(m.Subject) <= len(pre) {
			return
		}
		e := &recEntry{bucket: bucket, key: m.Subject[len(pre):], value: m.Data,
			rev: meta.Sequence.Stream, created: meta.Timestamp, op: jetstream.KeyValuePut}
		switch {
		case m.Header.Get("KV-Operation") == "DEL", m.Header.Get(jetstream.MarkerReasonHeader) == "Remove":
			e.op = jetstream.KeyValueDelete
		case m.Header.Get("KV-Operation") == "PURGE", m.Header.Get(jetstream.MarkerReasonHeader) != "":
			e.op = jetstream.KeyValuePurge
		}
		w.updates <- e // blocks the subscription's delivery, as jetstream's watchers do
	}, nats.BindStream("KV_"+bucket), nats.OrderedConsumer(), nats.IdleHeartbeat(recHeartbeat), nats.StartSequence(start))
	if err != nil {
		return nil, err
	}
	w.sub = sub
	sub.SetClosedHandler(func(string) { close(w.updates) })
	return w, nil
}

// StartRecorder connects to url and watches both buckets (they must exist:
// start it after the first node is ready).
func StartRecorder(ctx context.Context, url string, opts ...nats.Option) (*Recorder, error) {
	r := &Recorder{seen: map[string]uint64{}, owners: map[string]Write{}, upTo: map[string]uint64{},
		from: map[string]uint64{}, missed: map[string]uint64{}, cur: map[string]*recWatcher{}}
	// After a reconnect the consumers, on a server that may be gone, are
	// made again at once from the next revision, not two heartbeats later:
	// the nodes' first renewals land within a reconnect wait. The recorder
	// reconnects well inside the nodes' wait (250 ms and up to 100 ms of
	// jitter, actors/node): a revision a node writes before the recorder's
	// consumer is back and replaces before it reads is lost to the audit
	// (a restarted server and a recorder on the nodes' timing: 5–10 lease
	// revisions a make chaos-nats run).
	opts = append(opts, nats.Name("chaos-recorder"), nats.MaxReconnects(-1), nats.ReconnectWait(recReconnect),
		nats.ReconnectJitter(0, 0), nats.ReconnectHandler(func(*nats.Conn) { r.restart() }))
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("recorder: connect: %w", err)
	}
	r.nc = nc
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("recorder: %w", err)
	}
	// A consumer's creation that an election leaves unanswered is tried
	// again only when it times out: at the default 5 s, the new consumer
	// came seconds after the new leader.
	ljs, err := nc.JetStream(nats.MaxWait(time.Second))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("recorder: %w", err)
	}
	buckets := []string{bucketZones, bucketPlayers}
	for _, b := range buckets {
		st, err := js.Stream(ctx, "KV_"+b)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("recorder: bucket %s: %w", b, err)
		}
		r.from[b] = st.CachedInfo().State.LastSeq
	}
	for _, b := range buckets {
		w, err := watchBucket(ljs, b, 1)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("recorder: watch %s: %w", b, err)
		}
		r.mu.Lock()
		r.cur[b] = w
		r.mu.Unlock()
		r.wg.Add(1)
		go r.follow(ljs, b, w)
	}
	return r, nil
}

// restart stops the current watchers; follow makes new ones.
func (r *Recorder) restart() {
	r.mu.Lock()
	ws := make([]*recWatcher, 0, len(r.cur))
	for _, w := range r.cur {
		ws = append(ws, w)
	}
	r.mu.Unlock()
	for _, w := range ws {
		_ = w.Stop()
	}
}

// follow records bucket's revisions from w and, when w's updates end
// before Close (a restart, a consumer nats.go gave up on), from a new
// watcher that starts after the last revision recorded, tried again every
// recRetry while NATS does not answer.
func (r *Recorder) follow(js nats.JetStreamContext, bucket string, w *recWatcher) {
	defer r.wg.Done()
	for {
		r.run(bucket, w)
		for {
			r.mu.Lock()
			closing, next := r.closing, r.upTo[bucket]+1
			r.mu.Unlock()
			if closing {
				return
			}
			nw, err := watchBucket(js, bucket, next)
			if err == nil {
				r.mu.Lock()
				if r.closing {
					r.mu.Unlock()
					_ = nw.Stop()
					r.run(bucket, nw) // until its updates end
					return
				}
				r.cur[bucket], w = nw, nw
				r.mu.Unlock()
				break
			}
			time.Sleep(recRetry)
		}
	}
}

// run records the revisions w delivers until its updates end.
func (r *Recorder) run(bucket string, w jetstream.KeyWatcher) {
	for e := range w.Updates() {
		if e == nil { // the end of an initial listing (jetstream's watchers)
			continue
		}
		r.mu.Lock()
		if lo := max(r.upTo[bucket], r.from[bucket]); e.Revision() > lo+1 {
			r.missed[bucket] += e.Revision() - lo - 1
		}
		r.upTo[bucket] = max(r.upTo[bucket], e.Revision())
		r.mu.Unlock()
		if bucket == bucketPlayers && strings.HasPrefix(e.Key(), "c.") {
			for _, w := range decodeChunk(e) {
				r.add(w)
			}
			continue
		}
		r.add(decodeWrite(bucket, e))
	}
}

func (r *Recorder) add(w Write) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := w.Bucket + "/" + w.Key
	if w.Rev <= r.seen[k] {
		return
	}
	r.seen[k] = w.Rev
	r.writes = append(r.writes, w)
	if w.Bucket == bucketZones {
		if w.Deleted {
			delete(r.owners, w.Zone)
		} else {
			r.owners[w.Zone] = w
		}
	}
}

// Owners is the current directory: zone → lease.
func (r *Recorder) Owners() map[string]Write {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.owners)
}

// Writes is a copy of everything recorded so far, in arrival order.
func (r *Recorder) Writes() []Write {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Write(nil), r.writes...)
}

// CaughtUp waits until the recorder has every revision each bucket's
// stream held when it was asked, bounded by ctx, so that an audit of
// Writes covers every write: a recorder still behind when ctx ends is an
// error, not an audit of part of the run.
func (r *Recorder) CaughtUp(ctx context.Context) error {
	js, err := jetstream.New(r.nc)
	if err != nil {
		return err
	}
	for _, b := range []string{bucketZones, bucketPlayers} {
		st, err := js.Stream(ctx, "KV_"+b)
		if err != nil {
			return fmt.Errorf("recorder: bucket %s: %w", b, err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			return fmt.Errorf("recorder: bucket %s: %w", b, err)
		}
		last := info.State.LastSeq
		for {
			r.mu.Lock()
			got := r.upTo[b]
			r.mu.Unlock()
			if got >= last {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("recorder: %s recorded up to revision %d of %d: %w", b, got, last, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

// Missed is how many revisions of each bucket were removed before the
// recorder saw them (see Recorder.missed).
func (r *Recorder) Missed() map[string]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.missed)
}

// StreamLeader names the server that leads stream (its Raft group's
// leader, from the stream's info).
func (r *Recorder) StreamLeader(ctx context.Context, stream string) (string, error) {
	js, err := jetstream.New(r.nc)
	if err != nil {
		return "", err
	}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return "", err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return "", err
	}
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return "", errors.New("stream " + stream + " has no leader")
	}
	return info.Cluster.Leader, nil
}

// Reconnects is how often the recorder's own NATS connection came back.
func (r *Recorder) Reconnects() uint64 { return r.nc.Stats().Reconnects }

// Close stops the watchers and waits for them.
func (r *Recorder) Close() {
	r.mu.Lock()
	r.closing = true
	r.mu.Unlock()
	r.restart()
	if r.nc != nil {
		r.nc.Close()
	}
	r.wg.Wait()
}
