package main

import (
	"context"
	"errors"
	"fmt"
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
	nc       *nats.Conn
	watchers []jetstream.KeyWatcher
	wg       sync.WaitGroup

	mu     sync.Mutex
	writes []Write
	seen   map[string]uint64 // bucket/key → newest revision recorded (a re-created watcher replays)
	owners map[string]Write  // zone → its current lease
}

// StartRecorder connects to url and watches both buckets (they must exist:
// start it after the first node is ready).
func StartRecorder(ctx context.Context, url string, opts ...nats.Option) (*Recorder, error) {
	opts = append(opts, nats.Name("chaos-recorder"), nats.MaxReconnects(-1), nats.ReconnectWait(200*time.Millisecond))
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("recorder: connect: %w", err)
	}
	r := &Recorder{nc: nc, seen: map[string]uint64{}, owners: map[string]Write{}}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("recorder: %w", err)
	}
	for _, b := range []string{bucketZones, bucketPlayers} {
		kv, err := js.KeyValue(ctx, b)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("recorder: bucket %s: %w", b, err)
		}
		// The watch lives until Close, not as long as ctx (which bounds the
		// start only): jetstream stops a watcher when its context ends.
		w, err := kv.WatchAll(context.Background(), jetstream.IncludeHistory())
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("recorder: watch %s: %w", b, err)
		}
		r.watchers = append(r.watchers, w)
		r.wg.Add(1)
		go r.run(b, w)
	}
	return r, nil
}

func (r *Recorder) run(bucket string, w jetstream.KeyWatcher) {
	defer r.wg.Done()
	for e := range w.Updates() {
		if e == nil { // end of the initial listing
			continue
		}
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
	out := make(map[string]Write, len(r.owners))
	for z, w := range r.owners {
		out[z] = w
	}
	return out
}

// Writes is a copy of everything recorded so far, in arrival order.
func (r *Recorder) Writes() []Write {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Write(nil), r.writes...)
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
	for _, w := range r.watchers {
		_ = w.Stop()
	}
	r.nc.Close()
	r.wg.Wait()
}
