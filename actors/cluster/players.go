package cluster

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/proto/pbconv"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// Players keeps the player records in the players bucket (key p.<id>): the
// zone and node that own each player, at which handoff epoch. Writes are
// compare-and-set and only ever move a record to a newer epoch, so a late
// write can never take a record back. They run on a few worker goroutines
// fed by a bounded queue, never on an actor: a full queue drops the
// bookkeeping write (counted) but never blocks a zone.
//
// A cross-process handoff commits through it (Commit): the new owner's node
// writes the record before the zone takes the player, and a commit whose
// write fails (a newer owner already recorded) is not delivered, so the old
// owner's Commit goes unanswered and no second owner is made.
type Players struct {
	kv   jetstream.KeyValue
	node string
	log  *slog.Logger
	jobs [playerWorkers]chan *playerJob // by player: one player's writes stay in order
	// commits is each writer's Commit lane, taken before its jobs: a
	// cross-process handoff waits for its Commit's write, and behind a
	// backlog of checkpoints (2,048 a writer) that wait stretched the
	// handoff by seconds under load, past the 5 s its source resends the
	// Commit for. A Commit goes there only while none of its player's
	// placements (joins, acquisitions, restores, a Commit sent to jobs) is
	// queued in jobs (queued): it never overtakes one (a join's plain put
	// would then take the record back). It may overtake its player's
	// checkpoints, which are written only while the record names their
	// zone and epoch: none queued here can be the Commit's zone at its
	// epoch (that zone takes the player once the Commit is written), so
	// each is refused before the Commit as after it. Checkpoints are
	// neither counted nor locked for (a node's 1,000 a second).
	commits [playerWorkers]chan *playerJob
	qmu     sync.Mutex
	queued  map[uint64]int32 // per player, its placements in jobs (lazily made)
	wg      sync.WaitGroup
	stop    chan struct{}

	// Written: records written; Conflicts: writes refused because the
	// record had a newer epoch; Dropped: bookkeeping writes dropped (queue
	// full); Errors: KV errors.
	Written, Conflicts, Dropped, Errors atomic.Uint64
	// Unencodable: writes not made because the record does not encode (a
	// string field that is not UTF-8). Such a record used to be stored all
	// the same, acknowledged and counted as written, and no reader could
	// decode it (Record fails, InZone skips it: nobody restores the player).
	Unencodable atomic.Uint64
	// Repaired: records written with their player's text made valid
	// (repaired): a placement's or a leaving player's last checkpoint
	// whose record did not encode, which must not be left out.
	Repaired atomic.Uint64
	// warned: the players whose record did not encode, logged once each
	// (their checkpoints fail again every second). Bounded (maxWarned):
	// past the bound one warning says so, and the rest are counted only.
	warnMu sync.Mutex
	warned map[uint64]struct{}
	// warnedFull: warned reached maxWarned and that was logged; further
	// players' bad records are counted, not logged.
	warnedFull bool
	// Checkpoints: checkpoints written (part of Written);
	// CheckpointsRefused: checkpoints from a zone or epoch the record no
	// longer names (the player moved on: a late write never takes it back).
	Checkpoints, CheckpointsRefused atomic.Uint64
	// Unchanged: periodic checkpoints not written because the record this
	// node wrote last, at the revision it still expects, holds the same
	// bytes but for its time (an idle player): the KV already has that
	// state, and the write was a nats-server store, a compare-and-set and
	// an ack for nothing.
	Unchanged atomic.Uint64
	seed      maphash.Seed // the records' sums (recRev.sum)

	// revs caches the revision of each record this node wrote last, with
	// the zone and epoch it named, so a checkpoint is one compare-and-set
	// round trip, not a read and a write. Entries idle for revIdle go.
	revMu sync.Mutex
	revs  map[uint64]revEntry
	born  time.Time // revEntry.used counts from here (monotonic)
	swept time.Duration
	// places are the zones and epochs the entries name (revEntry.place),
	// placeOf their indexes; the sweep rebuilds both from the entries it
	// keeps, so they hold no more than the places named since the last.
	places  []revPlace
	placeOf map[revPlace]uint32

	// valid, when set, tells whether this node may still write for a zone
	// (Leases.Valid): a node paused past its lease writes nothing when it
	// wakes. Fenced counts the writes it stopped.
	valid  func(zone string) bool
	Fenced atomic.Uint64
	// fenceWait: SetFenceWait. FenceWaits counts the writes that waited.
	fenceWait  func(ctx context.Context, zone string) error
	FenceWaits atomic.Uint64
	life       context.Context // ends with Close (a fenced Commit's wait)
	end        context.CancelFunc

	// pipe, when set (Pipeline), sends checkpoints whose revision is
	// cached as publishes, a batch in flight per writer.
	pipe *pipeline

	// chunks: the chunk writer's queue (CheckpointChunk). Chunks: chunks
	// written; ChunkOverflows: chunks too large for one message, written a
	// record a player; ChunksBad: chunks a reader could not decode
	// (ignored: the record as it is).
	chunks                            chan *chunkJob
	Chunks, ChunkOverflows, ChunksBad atomic.Uint64
	// chunkCache: chunks Record read lately (readChunk), their values'
	// bytes in chunkBytes; ChunkReads: the KV reads of chunks it made.
	chunkMu    sync.Mutex
	chunkCache map[string]cachedChunk
	chunkBytes int
	ChunkReads atomic.Uint64
	// BucketScans: InZone's reads of the whole bucket (a takeover's
	// restore; a handover lists its players instead, Listed). scanNext:
	// the read that zones asked for now join (runScan).
	BucketScans atomic.Uint64
	scanMu      sync.Mutex
	scanNext    *scanBatch
	scanHold    chan struct{} // tests: a read waits for its close, not scanGather
	chunkTTL    time.Duration // tests: not chunkCacheTTL (0: it)
	chunkCap    int           // tests: not chunkCacheBytes (0: it)
}

// SetFence makes every write for a zone wait on valid(zone) (set before
// the first write; Leases.Valid).
func (p *Players) SetFence(valid func(zone string) bool) { p.valid = valid }

// SetFenceWait makes a write that the fence stopped and must not be lost
// wait on wait(ctx, zone) (Leases.WaitValid: a renewal lands, or the lease
// is gone) and go then, instead of being dropped (set before the first
// write): a cross-process Commit's (off the writer), a placement's and a
// leaving player's last checkpoint (on it: keep). A lease whose renewal is
// merely late (seconds on a loaded host; the node holds the zone
// meanwhile, Leases.SetHold) fenced every Commit that came in that
// window: each was answered false and its source's resends fenced in turn
// until it gave up (CommitGiveUp), the player then owned by nobody
// (TestClusterThreeNodesAcrossBorders at load ≈ 10: 237 Commit writes
// fenced, 90 handoffs stranded, in one run); a join's record was never
// written (296 in another), a leaving player's record stayed ONLINE.
func (p *Players) SetFenceWait(wait func(ctx context.Context, zone string) error) { p.fenceWait = wait }

// fenceWaitMax bounds a fenced Commit's wait (the lease's hold is 2 × TTL).
const fenceWaitMax = time.Minute

// recRev is one cached revision as its readers see it (revOf).
type recRev struct {
	rev   uint64
	zone  string
	epoch uint64
	// sum: recordSum of the checkpoint's record written at rev (0: not a
	// checkpoint's, or not known). A periodic checkpoint whose record
	// has the same sum is not written again (Unchanged).
	sum uint64
}

// revEntry is one cached revision as the map holds it: 24 bytes, a map
// slot with its key 32 (it was 48 and 56: the zone's string header, the
// epoch and the use time in nanoseconds in every entry). The node's
// players are in a few zones at one epoch each, so the zone and epoch are
// a shared place, named by index; the use time counts whole seconds from
// born, enough for a 30-second idle rule (revIdle) and 136 years. At
// 2,000 players the map took 112 B a player, now 82 on average over map
// seeds (44–82 for one map; TestRevisionCacheFootprint).
type revEntry struct {
	rev, sum uint64
	place    uint32 // index in Players.places
	used     uint32 // seconds since born when last written or found unchanged
}

// revPlace is a zone and epoch that cached records name.
type revPlace struct {
	zone  string
	epoch uint64
}

// revIdle: a cached revision unused this long belongs to a player who
// left this node's zones.
const revIdle = 30 * time.Second

// playerJob is one queued record write. The queues hold pointers (8
// bytes a slot, not the job's 88): 4 × 2,048 jobs by value were 832 KB
// made at start whatever the load.
type playerJob struct {
	player uint64
	epoch  uint64
	// from (restore): the epoch the restored record stood at.
	from    uint64
	zone    string
	gateway string
	// cp, when set, makes the job a checkpoint: written only while the
	// record names zone at epoch. With place, the checkpoint goes in the
	// placement's write instead (Placed).
	cp *handoff.Checkpoint
	// done, when set, is given the write's outcome: nil when the record
	// was written.
	done    func(err error)
	fresh   bool // a join: the record starts again (epochs restart with a new session)
	place   bool
	leaving bool // the player's last checkpoint: the record goes offline
	// restore (Restored): a join that put the player back from its record
	// as it stood at epoch from; written only while the record still names
	// this zone at that epoch.
	restore bool
	// commit (Commit): tries counts its writes; settled is set when one
	// was answered for good (refused, or fenced), not failed. (In the
	// bools' padding: a checkpoint's job stays in its size class.)
	commit  bool
	settled bool
	tries   uint8
	// fence: a Commit's wait for its zone's lease (SetFenceWait):
	// fenceStopped, the fence stopped its write (it waits); fenceWaited,
	// it did so once. (A uint8: the job stays in its size class.)
	fence uint8
}

// playerJob.fence states.
const (
	fenceStopped = 1 + iota
	fenceWaited
)

// checkpointJob is a checkpoint's job with the copy it writes: one
// allocation a checkpoint (288 B), not a job and a copy.
type checkpointJob struct {
	job playerJob
	cp  handoff.Checkpoint
}

// newCheckpointJob queues a copy of cp: the caller's slice is reused by
// the next tick.
func newCheckpointJob(zone string, cp *handoff.Checkpoint, leaving bool, gateway string) *playerJob {
	c := &checkpointJob{cp: *cp}
	c.job = playerJob{player: cp.Entity, zone: zone, epoch: uint64(cp.Epoch), cp: &c.cp, leaving: leaving, gateway: gateway}
	return &c.job
}

// playerWorkers bounds the concurrent KV writes.
const playerWorkers = 4

// playerQueue is each writer's queue: a full one drops a bookkeeping
// write (counted in Dropped; a Commit is answered false and resent by its
// source) and never blocks a zone. 2,048 a writer holds 8 s of a 1,000-player
// node's checkpoints across a NATS outage.
const playerQueue = 2048

// NewPlayers starts the record writers.
func NewPlayers(kv jetstream.KeyValue, node string, log *slog.Logger) *Players {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Players{kv: kv, node: node, log: log, stop: make(chan struct{}), revs: map[uint64]revEntry{}, born: time.Now(),
		seed: maphash.MakeSeed()}
	p.life, p.end = context.WithCancel(context.Background())
	p.chunks = make(chan *chunkJob, chunkQueue)
	p.wg.Add(1)
	go p.chunkWriter()
	for i := range p.jobs {
		p.jobs[i] = make(chan *playerJob, playerQueue)
		p.commits[i] = make(chan *playerJob, commitQueue)
		p.wg.Add(1)
		go p.work(i, p.jobs[i], p.commits[i])
	}
	return p
}

// commitQueue bounds each writer's Commit lane; a full one sends a Commit
// to the writer's jobs, behind the checkpoints.
const commitQueue = 64

// PlayerKey is a player's key in the players bucket.
func PlayerKey(player uint64) string { return "p." + strconv.FormatUint(player, 10) }

// Joined records a player who joined zone at epoch (asynchronously).
func (p *Players) Joined(player uint64, zone string, epoch uint64) {
	p.Placed(player, zone, epoch, true, nil, "")
}

// Acquired records that zone took player at epoch (asynchronously; a write
// older than the record is refused).
func (p *Players) Acquired(player uint64, zone string, epoch uint64) {
	p.Placed(player, zone, epoch, false, nil, "")
}

// Placed records that zone holds player at epoch, as Joined (join) or
// Acquired do, with cp (when not nil) as the record's checkpoint in the
// same write, gateway naming the node of the player's connection: a join
// or a handoff then costs the record one write, not a placement and a
// checkpoint after it. An acquisition is written with the revision this
// node wrote last when it has one (a handoff between two of its zones:
// one compare-and-set round trip, not a read and a write); a record that
// already names zone at epoch (a cross-process Commit wrote it) gets the
// checkpoint. Asynchronous, as the others.
func (p *Players) Placed(player uint64, zone string, epoch uint64, join bool, cp *handoff.Checkpoint, gateway string) {
	p.enqueue(&playerJob{player: player, zone: zone, epoch: epoch, fresh: join, cp: cp, place: true, gateway: gateway})
}

// Restored records that zone put player back at epoch from its record
// (a rejoin, a resume: the checkpoint that record held, at epoch from), as
// Joined does, but only while the record still names zone at from: if
// another zone took the player since (a handoff whose Commit was written
// after the connection read the record), the write is refused — a plain
// write here made a second owner (see TestRestoreAfterTheRecordMovedIsRefused).
// Asynchronous, as the others: settled (when not nil) is called once, on a
// writer goroutine, with whether the record was written; refused, failed
// or dropped (the writers' queue full), the zone drops the player again.
// (Jobs still queued at Close are dropped uncalled: the node is stopping.)
func (p *Players) Restored(player uint64, zone string, epoch, from uint64, cp *handoff.Checkpoint, gateway string, settled func(written bool)) {
	j := &playerJob{player: player, zone: zone, epoch: epoch, cp: cp, place: true, gateway: gateway, restore: true, from: from}
	if settled != nil {
		j.done = func(err error) { settled(err == nil) }
	}
	p.enqueue(j)
}

// Commit writes the record of a cross-process handoff and calls done with
// the outcome (from a writer goroutine). A record that already names this
// zone at this epoch (a resent Commit) counts as written.
//
// A write that failed (a KV error or timeout, not a refusal) is tried
// again, up to commitTries writes commitRetry apart, before done(false):
// the source stops resending its Commit after CommitGiveUp, and under load
// a node's record writes time out (2 s) — the last copy's failed write
// then left the player owned nowhere, its old zone refusing to put it back
// (handoff.ErrHandedOn) until it forgot the handoff.
//
// It goes before the checkpoints queued on its writer (Players.commits),
// after any write of its own player queued before it.
func (p *Players) Commit(player uint64, zone string, epoch uint64, done func(ok bool)) {
	p.enqueue(&playerJob{player: player, zone: zone, epoch: epoch, commit: true,
		done: func(err error) { done(err == nil) }})
}

// Checkpoint queues the checkpoints of zone's players (asynchronously;
// bounded: a full queue drops them, counted, and the next second's
// replace them). gateway names the node holding each one's connection
// (from handoff.Checkpoint.Conn), so whoever restores the player knows
// where to send its views. leaving marks players who left: their record
// goes offline with the final state.
func (p *Players) Checkpoint(zone string, cps []handoff.Checkpoint, leaving bool, gateway func(conn string) string) {
	for i := range cps {
		p.enqueue(newCheckpointJob(zone, &cps[i], leaving, gateway(cps[i].Conn)))
	}
}

func (p *Players) enqueue(j *playerJob) {
	select {
	case <-p.stop:
		// Closed: no writer takes it. Whoever waits for its outcome
		// hears now, not never.
		finish(j, errClosed)
		return
	default:
	}
	w := j.player % playerWorkers
	if j.commit {
		p.qmu.Lock()
		if p.queued[j.player] == 0 {
			select {
			case p.commits[w] <- j:
				p.qmu.Unlock()
				return
			default: // a full lane: behind the checkpoints, as any write
			}
		}
		p.qmu.Unlock()
	}
	p.count(j, 1)
	select {
	case p.jobs[w] <- j:
	default:
		p.count(j, -1)
		p.Dropped.Add(1)
		if j.done != nil {
			j.done(errQueueFull) // a Commit's source resends it
		}
	}
}

// count adds d to the placements of j's player queued in jobs, if j is
// one (not a checkpoint): +1 before a send (a writer never takes a job
// its count is not yet on), -1 when a writer took it or the send failed.
func (p *Players) count(j *playerJob, d int32) {
	if j.pipelined() {
		return
	}
	p.qmu.Lock()
	if n := p.queued[j.player] + d; n > 0 {
		if p.queued == nil {
			p.queued = map[uint64]int32{}
		}
		p.queued[j.player] = n
	} else {
		delete(p.queued, j.player)
	}
	p.qmu.Unlock()
}

// CheckpointSync writes the checkpoints of zone's players and waits for
// every write (a zone handed over: its new owner restores from them). The
// writes go through the players' ordered queues, after any checkpoint
// still queued, so an older one never lands last. Its error wraps
// ErrUnencodableRecord when a record did not encode (a retry never
// fixes that one; the log names the players).
func (p *Players) CheckpointSync(ctx context.Context, zone string, cps []handoff.Checkpoint, gateway func(conn string) string) error {
	// The outcomes as codes, not errors: a channel of pointer-free
	// elements is one allocation, not two (its buffer apart).
	results := make(chan syncOutcome, len(cps))
	for i := range cps {
		j := newCheckpointJob(zone, &cps[i], false, gateway(cps[i].Conn))
		j.done = func(err error) { results <- syncOutcomeOf(err) }
		select { // a checkpoint: not counted (count)
		case p.jobs[j.player%playerWorkers] <- j:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	failed, unencodable := 0, 0
	for range cps {
		select {
		case o := <-results:
			if o != syncWritten {
				failed++
			}
			if o == syncUnencodable {
				unencodable++
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if failed > 0 {
		return syncError(failed, unencodable, len(cps))
	}
	return nil
}

// syncError is CheckpointSync's error (apart: its formatting would grow
// CheckpointSync's frame, and a goroutine's stack with it).
func syncError(failed, unencodable, n int) error {
	if unencodable > 0 {
		return fmt.Errorf("%d of %d checkpoints not written, %d of them: %w", failed, n, unencodable, ErrUnencodableRecord)
	}
	return fmt.Errorf("%d of %d checkpoints not written", failed, n)
}

// syncOutcome is a CheckpointSync write's outcome.
type syncOutcome uint8

const (
	syncWritten syncOutcome = iota
	syncFailed
	syncUnencodable
)

func syncOutcomeOf(err error) syncOutcome {
	switch {
	case err == nil:
		return syncWritten
	case errors.Is(err, ErrUnencodableRecord):
		return syncUnencodable
	}
	return syncFailed
}

func (p *Players) work(wi int, jobs, commits <-chan *playerJob) {
	defer p.wg.Done()
	var w batchWriter
	var batch []*playerJob
	var next *playerJob
	held := false
	for {
		var j *playerJob
		if held { // taken from jobs before a Commit came: its player's may be older
			j, held = next, false
		} else {
			select {
			case j = <-commits:
			default:
				select {
				case <-p.stop:
					return
				case j = <-commits:
				case j = <-jobs:
					p.count(j, -1)
				}
			}
		}
		if p.pipe == nil || !j.pipelined() {
			p.writeOne(j, commits)
			continue
		}
		// The checkpoints queued behind it go out with it, up to one of
		// each player (the next needs this one's revision) and up to the
		// first other write (which waits for them: a player's writes stay
		// in order).
		batch = append(batch[:0], j)
	more:
		for len(batch) < maxBatch && len(commits) == 0 { // a Commit waits for one batch at most
			select {
			case n := <-jobs:
				p.count(n, -1)
				if !n.pipelined() || batched(batch, n.player) {
					next, held = n, true
					break more
				}
				batch = append(batch, n)
			default:
				break more
			}
		}
		p.writeBatch(&w, wi, batch, commits)
		clear(batch) // let the written jobs go
	}
}

// awaitFence waits, off the writer, until this node may write for j's
// zone again (fenceWait), then queues j again; a lease gone (or no renewal
// within fenceWaitMax, or Close) answers it false for good.
func (p *Players) awaitFence(j *playerJob) {
	p.FenceWaits.Add(1)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		ctx, cancel := context.WithTimeout(p.life, fenceWaitMax)
		defer cancel()
		if err := p.fenceWait(ctx, j.zone); err != nil {
			j.settled = true
			finish(j, err)
			return
		}
		p.enqueue(j)
	}()
}

// writeOne writes j, a job that goes alone (not a pipelined checkpoint),
// and answers it; commits is the writer's Commit lane (nil: none to serve).
func (p *Players) writeOne(j *playerJob, commits <-chan *playerJob) {
	err := p.write(j)
	if err != nil && j.fence == fenceStopped && j.commit {
		j.fence = fenceWaited
		j.tries-- // it wrote nothing
		p.awaitFence(j)
		return
	}
	if err != nil && j.fence == fenceStopped {
		err = p.writeAfterFence(j, commits)
	}
	if err != nil && j.commit && !j.settled && j.tries < commitTries {
		// Not on this writer: the players behind it wait for none.
		time.AfterFunc(commitRetry, func() { p.enqueue(j) })
		return
	}
	finish(j, err)
}

// keep: a write the fence must not drop, only hold back — a placement (a
// join, an acquisition, a restore: the record names the player's zone, or
// its checkpoints, refused, never reach it) and a leaving player's last
// checkpoint (the record goes offline). Dropped, the record stayed ONLINE
// after the player left, for good (or named a zone the player had left,
// every checkpoint refused). A periodic checkpoint is dropped: the next
// replaces it.
func (j *playerJob) keep() bool { return j.place || j.leaving }

// writeAfterFence writes j, which the fence stopped, once this node may
// write for its zone again (fenceWait), on the writer itself: the
// player's writes stay in order (a leaving checkpoint written after the
// player's next join would take the new session's record offline). The
// writer's jobs behind it wait, as for a slow write (fenced meanwhile
// anyway when the node's leases renew late together), but its Commit lane
// is served while it waits (a cross-process handoff waits for no other
// zone's lease; a placement waiting here counts as queued, so its own
// player's Commits queue behind it). A lease gone (or no renewal within
// fenceWaitMax, or Close) drops j, counted.
func (p *Players) writeAfterFence(j *playerJob, commits <-chan *playerJob) error {
	p.FenceWaits.Add(1)
	j.fence = fenceWaited
	p.count(j, 1)
	defer p.count(j, -1)
	ctx, cancel := context.WithTimeout(p.life, fenceWaitMax)
	defer cancel()
	waited := make(chan error, 1)
	go func() { waited <- p.fenceWait(ctx, j.zone) }()
	for {
		select {
		case err := <-waited:
			if err != nil {
				return err
			}
			return p.write(j)
		case c := <-commits:
			p.writeOne(c, nil)
		}
	}
}

// commitTries and commitRetry bound a Commit's record writes (Commit).
const (
	commitTries = 4
	commitRetry = 250 * time.Millisecond
)

// maxBatch bounds the checkpoints a writer has in flight at once.
const maxBatch = 64

// pipelined: a checkpoint (not a placement with one).
func (j *playerJob) pipelined() bool { return j.cp != nil && !j.place }

func batched(b []*playerJob, player uint64) bool {
	for i := range b {
		if b[i].player == player {
			return true
		}
	}
	return false
}

func finish(j *playerJob, err error) {
	if j.done != nil {
		j.done(err)
	}
}

// ErrUnencodableRecord: a record write not made because the record does
// not encode (a string field that is not UTF-8); it is not tried again.
var ErrUnencodableRecord = errors.New("players: record does not encode")

// A write's outcome when it was not made, for whoever waits on it (a
// Commit's source, CheckpointSync): errNotWritten for a refusal, a fence
// or a KV error (counted apart), errQueueFull when the writers' queue
// had no room, errClosed after Close.
var (
	errNotWritten = errors.New("players: record not written")
	errQueueFull  = errors.New("players: record writers' queue full")
	errClosed     = errors.New("players: record writers closed")
)

// outcome is a write's error from its bool outcome.
func outcome(ok bool) error {
	if ok {
		return nil
	}
	return errNotWritten
}

// unencodable answers j, whose record did not encode (err), for good:
// counted, logged (once a player), never tried again (a Commit's retries would encode the
// same strings). The record is not written: its bytes would be stored and
// acknowledged, and no reader could decode them.
func (p *Players) unencodable(j *playerJob, err error) error {
	p.Unencodable.Add(1)
	j.settled = true
	p.warnOnce(j, err, unencodableMsg)
	return fmt.Errorf("player %d: %w: %w", j.player, ErrUnencodableRecord, err)
}

// The warnings of a record that does not encode: not written
// (unencodable), or written repaired.
const (
	unencodableMsg = "player record does not encode: not written"
	repairedMsg    = "player record does not encode: written with its text that is not UTF-8 replaced"
)

// warnOnce logs msg about j's record that did not encode (err), once a
// player: a player's bad record fails again at every checkpoint.
func (p *Players) warnOnce(j *playerJob, err error, msg string) {
	p.warnMu.Lock()
	_, seen := p.warned[j.player]
	full := false
	if !seen {
		if len(p.warned) < maxWarned {
			if p.warned == nil {
				p.warned = map[uint64]struct{}{}
			}
			p.warned[j.player] = struct{}{}
		} else {
			// Past the bound a player is not remembered, so it would be
			// logged at every checkpoint (one a second): log that the
			// bound was reached, once, and count the rest.
			seen, full = true, !p.warnedFull
			p.warnedFull = true
		}
	}
	p.warnMu.Unlock()
	if !seen {
		p.log.Warn(msg, "player", j.player, "zone", j.zone, "epoch", j.epoch, "err", err)
	}
	if full {
		p.log.Warn("player records that do not encode: more players than the log names; the rest are counted only",
			"players_logged", maxWarned, "player", j.player, "err", err)
	}
}

// repaired encodes j's record again into b with its player's text that
// is not UTF-8 made valid (each bad byte U+FFFD), when j is a write that
// must not be left out (keep): a join's record not written left the
// player with none (every checkpoint refused, nobody to restore it, no
// lookup finds it), a leaving player's left its record ONLINE (a
// takeover restores a player who left). The player's name, connection
// and gateway are repaired; a zone or node name that is not UTF-8 is
// this node's own configuration and names no zone or node once
// repaired: err is returned for it, as for a write that may be left out
// (a periodic checkpoint: the record keeps the last state that encoded;
// a Commit). Counted in Repaired, logged once a player.
func (p *Players) repaired(b []byte, h *pbconv.RecordHead, j *playerJob, err error) ([]byte, error) {
	if !j.keep() || !utf8.ValidString(h.Zone) || !utf8.ValidString(h.Node) {
		return nil, err
	}
	rh := *h
	rh.Conn = strings.ToValidUTF8(h.Conn, "\uFFFD")
	rh.Gateway = strings.ToValidUTF8(h.Gateway, "\uFFFD")
	var cp *handoff.Checkpoint
	if j.cp != nil {
		c := *j.cp
		c.Name = strings.ToValidUTF8(c.Name, "\uFFFD")
		c.Conn = strings.ToValidUTF8(c.Conn, "\uFFFD")
		cp = &c
	}
	var enc pbconv.RecordEncoder
	val, rerr := enc.Append(b, &rh, cp)
	if rerr != nil {
		return nil, err
	}
	p.Repaired.Add(1)
	p.warnOnce(j, err, repairedMsg)
	return val, nil
}

// maxWarned bounds Players.warned.
const maxWarned = 1024

// write stores j's record: unconditionally for a join, by compare-and-set
// to a newer epoch otherwise (retried a few times on a race). It returns
// nil when the record was written.
func (p *Players) write(j *playerJob) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	j.tries++
	if p.valid != nil && !p.valid(j.zone) {
		p.Fenced.Add(1) // this node lost (or may have lost) the zone's lease
		if (j.commit || j.keep()) && p.fenceWait != nil && j.fence == 0 {
			j.fence = fenceStopped // it waits for the lease (a Commit off the writer)
			return errNotWritten
		}
		j.settled = true
		return errNotWritten
	}
	key := PlayerKey(j.player)
	h := pbconv.RecordHead{Player: j.player, Zone: j.zone, State: pb.PlayerState_PLAYER_STATE_ONLINE,
		Epoch: j.epoch, Node: p.node, UpdatedUnixMs: time.Now().UnixMilli()}
	if j.cp != nil && !j.place {
		return p.writeCheckpoint(ctx, key, &h, j)
	}
	if j.cp != nil {
		h.Gateway = j.gateway
	}
	var enc pbconv.RecordEncoder // the record proto.Marshal made, without its objects
	val, err := enc.Append(make([]byte, 0, recordRoom), &h, j.cp)
	if err != nil {
		if val, err = p.repaired(val[:0], &h, j, err); err != nil {
			return p.unencodable(j, err)
		}
	}
	written := func(rev uint64) bool {
		p.Written.Add(1)
		if j.cp != nil {
			p.Checkpoints.Add(1)
		}
		p.remember(j, rev)
		return true
	}
	if j.restore {
		return outcome(p.writeRestore(ctx, key, val, j, written))
	}
	if j.fresh {
		rev, err := p.kv.Put(ctx, key, val)
		if err != nil {
			p.Errors.Add(1)
			return errNotWritten
		}
		return outcome(written(rev))
	}
	c, cached := p.revOf(j.player)
	if cached && (c.epoch < j.epoch || j.cp != nil && c.epoch == j.epoch && c.zone == j.zone) {
		// This node wrote the record last, naming an older epoch (or this
		// very placement, which the checkpoint now joins): if nobody wrote
		// it since, the compare-and-set goes through; if somebody did, it
		// fails and the record is read below like any other.
		rev, err := p.kv.Update(ctx, key, val, c.rev)
		if err == nil {
			return outcome(written(rev))
		}
		if !isWrongSequence(err) && !errors.Is(err, jetstream.ErrKeyExists) {
			p.Errors.Add(1)
			return errNotWritten
		}
	}
	return outcome(p.casWrite(ctx, key, val, written, func(e jetstream.KeyValueEntry) (bool, bool) {
		var rec pb.PlayerRecord
		if proto.Unmarshal(e.Value(), &rec) == nil {
			if rec.GetEpoch() > j.epoch || rec.GetEpoch() == j.epoch && rec.GetZone() != j.zone {
				j.settled = true
				p.Conflicts.Add(1)
				p.log.Warn("player record newer than this write: refused", "player", j.player, "zone", j.zone,
					"epoch", j.epoch, "record_zone", rec.GetZone(), "record_epoch", rec.GetEpoch())
				return false, true
			}
			if rec.GetEpoch() == j.epoch && j.cp == nil {
				p.remember(j, e.Revision())
				return true, true // this very write, again (a resent Commit)
			}
		}
		return false, false
	}))
}

// recordRoom is the buffer a record is encoded in off the pipeline: a
// checkpoint's record is ≈ 160–300 bytes (appending from nil grew it 6
// times).
const recordRoom = 320

// casWrite writes val at key by compare-and-set, up to four tries: a
// missing record is created; an existing one is first shown to judge,
// which stops the write with its result (stop true) or lets it go over
// that revision. A revision that moved meanwhile is read again.
func (p *Players) casWrite(ctx context.Context, key string, val []byte, written func(uint64) bool,
	judge func(e jetstream.KeyValueEntry) (result, stop bool)) bool {
	for range 4 {
		e, err := p.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			if rev, err := p.kv.Create(ctx, key, val); err == nil {
				return written(rev)
			} else if !errors.Is(err, jetstream.ErrKeyExists) {
				p.Errors.Add(1)
				return false
			}
			continue // created meanwhile: look again
		case err != nil:
			p.Errors.Add(1)
			return false
		}
		if result, stop := judge(e); stop {
			return result
		}
		if rev, err := p.kv.Update(ctx, key, val, e.Revision()); err == nil {
			return written(rev)
		} else if !isWrongSequence(err) && !errors.Is(err, jetstream.ErrKeyExists) {
			p.Errors.Add(1)
			return false
		}
	}
	p.Errors.Add(1)
	return false
}

// writeRestore stores a restored player's record by compare-and-set, only
// over a record that still names j.zone at j.from (or no record at all).
func (p *Players) writeRestore(ctx context.Context, key string, val []byte, j *playerJob, written func(uint64) bool) bool {
	return p.casWrite(ctx, key, val, written, func(e jetstream.KeyValueEntry) (bool, bool) {
		var rec pb.PlayerRecord
		if err := proto.Unmarshal(e.Value(), &rec); err != nil || rec.GetZone() != j.zone || rec.GetEpoch() != j.from {
			p.Conflicts.Add(1)
			p.log.Warn("player record moved on since the restore read it: refused", "player", j.player, "zone", j.zone,
				"from_epoch", j.from, "record_zone", rec.GetZone(), "record_epoch", rec.GetEpoch())
			return false, true
		}
		return false, false
	})
}

// writeCheckpoint stores a checkpoint in the record, by compare-and-set,
// only while the record names the checkpoint's zone and epoch: a zone
// that lost the player (handed on, or its node fenced and another took
// over) can never write an older state over the newer owner's.
func (p *Players) writeCheckpoint(ctx context.Context, key string, h *pbconv.RecordHead, j *playerJob) error {
	h.Gateway = j.gateway
	if j.leaving {
		h.State = pb.PlayerState_PLAYER_STATE_OFFLINE
	}
	var enc pbconv.RecordEncoder
	val, err := enc.Append(make([]byte, 0, recordRoom), h, j.cp)
	if err != nil {
		if val, err = p.repaired(val[:0], h, j, err); err != nil {
			return p.unencodable(j, err)
		}
	}
	c, ok := p.revOf(j.player)
	rev := c.rev
	if !ok || c.zone != j.zone || c.epoch != j.epoch {
		rev = 0
	}
	sum := p.recordSum(val, h.UpdatedUnixMs, h.Gateway)
	if rev != 0 && p.unchanged(j, c, sum) {
		return nil
	}
	for range 3 {
		if rev == 0 {
			e, err := p.kv.Get(ctx, key)
			if err != nil {
				if errors.Is(err, jetstream.ErrKeyNotFound) {
					p.CheckpointsRefused.Add(1) // no record: the join's write is still queued or failed
					return errNotWritten
				}
				p.Errors.Add(1)
				return errNotWritten
			}
			var cur pb.PlayerRecord
			if proto.Unmarshal(e.Value(), &cur) != nil || cur.GetZone() != j.zone || cur.GetEpoch() != j.epoch {
				p.CheckpointsRefused.Add(1)
				p.forget(j.player)
				return errNotWritten
			}
			rev = e.Revision()
		}
		nrev, err := p.kv.Update(ctx, key, val, rev)
		if err == nil {
			p.Written.Add(1)
			p.Checkpoints.Add(1)
			if j.leaving {
				p.forget(j.player)
			} else {
				p.rememberAt(j, nrev, sum, time.Since(p.born))
			}
			return nil
		}
		if !isWrongSequence(err) && !errors.Is(err, jetstream.ErrKeyExists) {
			p.Errors.Add(1)
			return errNotWritten
		}
		rev = 0 // someone else wrote it: look again
	}
	p.Errors.Add(1)
	return errNotWritten
}

func (p *Players) remember(j *playerJob, rev uint64) {
	p.rememberAt(j, rev, 0, time.Since(p.born))
}

// rememberAt is remember at now (since born), with the sum of the
// checkpoint's record written at rev (0: none); entries unused for
// revIdle go, in a sweep at most every revIdle.
func (p *Players) rememberAt(j *playerJob, rev, sum uint64, now time.Duration) {
	p.revMu.Lock()
	defer p.revMu.Unlock()
	e, ok := p.revs[j.player]
	// A player's next write usually names the place its last one did:
	// no lookup of the zone's string then.
	if !ok || int(e.place) >= len(p.places) || p.places[e.place] != (revPlace{j.zone, j.epoch}) {
		e.place = p.placeIndex(revPlace{j.zone, j.epoch})
	}
	e.rev, e.sum, e.used = rev, sum, revSeconds(now)
	p.revs[j.player] = e
	if now-p.swept > revIdle {
		p.swept = now
		p.sweepRevs(revSeconds(now))
	}
}

// revSeconds is now (since born) in the whole seconds revEntry.used holds.
func revSeconds(now time.Duration) uint32 { return uint32(now / time.Second) }

// revIdleSeconds is revIdle in revEntry.used's seconds. An entry goes once
// its seconds are more than this behind: unused for more than revIdle
// (the two truncations differ by less than a second), never less.
const revIdleSeconds = uint32(revIdle / time.Second)

// placeIndex is place's index in places, added when new (under revMu).
func (p *Players) placeIndex(place revPlace) uint32 {
	if i, ok := p.placeOf[place]; ok {
		return i
	}
	if p.placeOf == nil {
		p.placeOf = map[revPlace]uint32{}
	}
	i := uint32(len(p.places))
	p.places = append(p.places, place)
	p.placeOf[place] = i
	return i
}

// sweepRevs drops the entries idle for more than revIdle and rebuilds
// places from the ones kept (under revMu): a zone this node no longer
// holds, or an epoch gone by, leaves with the last entry naming it.
func (p *Players) sweepRevs(now uint32) {
	old := p.places
	p.places, p.placeOf = nil, nil
	for id, e := range p.revs {
		if now-e.used > revIdleSeconds {
			delete(p.revs, id)
			continue
		}
		if i := p.placeIndex(old[e.place]); i != e.place {
			e.place = i
			p.revs[id] = e
		}
	}
}

// revOf is the revision cached for player, if any.
func (p *Players) revOf(player uint64) (recRev, bool) {
	p.revMu.Lock()
	defer p.revMu.Unlock()
	e, ok := p.revs[player]
	if !ok {
		return recRev{}, false
	}
	pl := p.places[e.place]
	return recRev{rev: e.rev, zone: pl.zone, epoch: pl.epoch, sum: e.sum}, true
}

// unchanged tells whether j, a checkpoint whose record sums to sum, need
// not be written over c, the revision this node wrote last for its zone
// and epoch: a periodic checkpoint (not a leaving player's, which takes
// the record offline; none anybody waits for, as a handover's: their
// compare-and-set also confirms that nobody wrote the record since)
// whose record is the one written at c but for its time. The KV holds
// that state already, so the RPO holds; if another node wrote the record
// since (it took the player), the write would have been refused, and the
// player is this zone's no more. The entry is kept in use (an idle
// player's revision is not swept; its next change is one compare-and-set).
func (p *Players) unchanged(j *playerJob, c recRev, sum uint64) bool {
	if j.leaving || j.done != nil || c.sum == 0 || c.sum != sum {
		return false
	}
	p.Unchanged.Add(1)
	p.rememberAt(j, c.rev, sum, time.Since(p.born))
	return true
}

// recordSum is a sum of the encoded record rec but for its
// updated_unix_ms field (its time, ms: every record has a new one) — the
// fields the encoder writes before it and the gateway's after it — or 0
// when rec does not end as pbconv.RecordEncoder ends a record (time, then
// gateway): nothing is then ever taken as unchanged.
func (p *Players) recordSum(rec []byte, ms int64, gateway string) uint64 {
	tail := 0
	if gateway != "" {
		tail = 1 + protowire.SizeVarint(uint64(len(gateway))) + len(gateway)
	}
	upd := 1 + protowire.SizeVarint(uint64(ms))
	cut := len(rec) - tail - upd
	if ms <= 0 || cut < 0 || rec[cut] != recordTimeTag {
		return 0
	}
	// Two hashes, not a maphash.Hash written twice (≈ 420 instructions a
	// record, its buffering): the tail is the gateway's field alone.
	return (maphash.Bytes(p.seed, rec[:cut]) ^ bits.RotateLeft64(maphash.Bytes(p.seed, rec[cut+upd:]), 1)) | 1 // never 0 (unknown)
}

// recordTimeTag is PlayerRecord.updated_unix_ms's tag (field 8, varint).
const recordTimeTag = 8 << 3

func (p *Players) forget(player uint64) {
	p.revMu.Lock()
	delete(p.revs, player)
	p.revMu.Unlock()
}

// Record reads a player's record (nil, nil if there is none), with its
// periodic checkpoint from its zone's chunk when that is newer
// (CheckpointChunk): one more read for an online player.
func (p *Players) Record(ctx context.Context, player uint64) (*pb.PlayerRecord, error) {
	e, err := p.kv.Get(ctx, PlayerKey(player))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rec pb.PlayerRecord
	if err := proto.Unmarshal(e.Value(), &rec); err != nil {
		return nil, fmt.Errorf("player record %d: %w", player, err)
	}
	return p.withChunk(ctx, &rec)
}

// listedReaders is how many of a listed zone's records Listed reads at
// once: each read is a NATS round trip (and a chunk's, cached).
const listedReaders = 32

// Listed returns the records of players (a handover's list: the players
// its old owner froze in zone) that are online in zone, each as Record
// reads it (its chunk overlaid), with a checkpoint: what InZone returns
// for them, without reading every record in the bucket. A player whose
// record is gone or names another zone is left out; a read that fails
// fails the whole.
func (p *Players) Listed(ctx context.Context, zone string, players []uint64) ([]*pb.PlayerRecord, error) {
	recs := make([]*pb.PlayerRecord, len(players))
	errs := make([]error, len(players))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(listedReaders, len(players)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(players); i = int(next.Add(1) - 1) {
				recs[i], errs[i] = p.Record(ctx, players[i])
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	out := recs[:0]
	for _, r := range recs {
		if r != nil && r.GetZone() == zone && r.GetState() == pb.PlayerState_PLAYER_STATE_ONLINE && r.GetCheckpoint() != nil {
			out = append(out, r)
		}
	}
	return out, nil
}

// InZone returns the online records that name zone and carry a
// checkpoint, each with its periodic checkpoint from the zone's chunks when
// that is newer (CheckpointChunk): the players to put back when a node
// takes the zone over. It reads the whole bucket (one watcher, every key's
// last value): O(players who ever played), ≈ 3.4 µs a record
// (BenchmarkRestoreRead). The zones asked for within scanGather of each
// other share one read: a node that takes a dead node's zones claims them
// within milliseconds, and each read apart streamed every record again
// (ten zones, ten times the bucket, at once).
func (p *Players) InZone(ctx context.Context, zone string) ([]*pb.PlayerRecord, error) {
	p.scanMu.Lock()
	select {
	case <-p.stop:
		p.scanMu.Unlock()
		return nil, errors.New("players: closed")
	default:
	}
	b := p.scanNext
	if b == nil {
		b = &scanBatch{zones: map[string]bool{}, done: make(chan struct{})}
		p.scanNext = b
		p.wg.Add(1)
		go p.runScan(b)
	}
	b.zones[zone] = true
	p.scanMu.Unlock()
	select {
	case <-b.done:
		return b.recs[zone], b.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// scanGather is how long a read of the whole bucket waits for more zones
// to read in the same pass.
const scanGather = 20 * time.Millisecond

// scanTimeout bounds one read of the whole bucket (a restore waits 10 s).
const scanTimeout = 10 * time.Second

// scanBatch is one read of the whole bucket for the zones asked for
// before it began; recs and err are set before done closes.
type scanBatch struct {
	zones map[string]bool
	done  chan struct{}
	recs  map[string][]*pb.PlayerRecord
	err   error
}

func (p *Players) runScan(b *scanBatch) {
	defer p.wg.Done()
	defer close(b.done)
	gather := time.After(scanGather)
	if p.scanHold != nil {
		gather = nil
	}
	select {
	case <-gather:
	case <-p.scanHold:
	case <-p.stop:
	}
	p.scanMu.Lock()
	if p.scanNext == b {
		p.scanNext = nil // zones asked for from now on wait for the next read
	}
	p.scanMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), scanTimeout)
	defer cancel()
	go func() {
		select {
		case <-p.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	b.recs, b.err = p.scanZones(ctx, b.zones)
}

// scanZones reads the whole bucket once for InZone: zones' online
// records, with their chunks overlaid.
func (p *Players) scanZones(ctx context.Context, zones map[string]bool) (map[string][]*pb.PlayerRecord, error) {
	p.BucketScans.Add(1)
	w, err := p.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, err
	}
	defer func() { _ = w.Stop() }()
	out := map[string][]*pb.PlayerRecord{}
	chunks := map[string][][]byte{} // each zone's chunks (overlaid at the end)
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("players: watcher stopped")
			}
			if e == nil { // every current value seen
				for z := range zones {
					out[z] = withCheckpoints(p.overlayChunks(out[z], z, chunks[z]))
				}
				return out, nil
			}
			if isChunkKey(e.Key()) {
				if z := chunkKeyZone(e.Key()); zones[z] {
					chunks[z] = append(chunks[z], e.Value())
				}
				continue
			}
			var rec pb.PlayerRecord
			if proto.Unmarshal(e.Value(), &rec) != nil {
				continue
			}
			// With or without a checkpoint: a chunk may hold one.
			if zones[rec.GetZone()] && rec.GetState() == pb.PlayerState_PLAYER_STATE_ONLINE {
				out[rec.GetZone()] = append(out[rec.GetZone()], &rec)
			}
		}
	}
}

// Close stops the writers (queued writes are dropped).
func (p *Players) Close() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	if p.end != nil {
		p.end()
	}
	p.wg.Wait()
	if p.pipe != nil {
		p.pipe.close()
	}
}
