package cluster

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
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
	jobs [playerWorkers]chan playerJob // by player: one player's writes stay in order
	wg   sync.WaitGroup
	stop chan struct{}

	// Written: records written; Conflicts: writes refused because the
	// record had a newer epoch; Dropped: bookkeeping writes dropped (queue
	// full); Errors: KV errors.
	Written, Conflicts, Dropped, Errors atomic.Uint64
}

type playerJob struct {
	player uint64
	zone   string
	epoch  uint64
	fresh  bool // a join: the record starts again (epochs restart with a new session)
	done   func(ok bool)
}

// playerWorkers bounds the concurrent KV writes.
const playerWorkers = 4

// NewPlayers starts the record writers.
func NewPlayers(kv jetstream.KeyValue, node string, log *slog.Logger) *Players {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Players{kv: kv, node: node, log: log, stop: make(chan struct{})}
	for i := range p.jobs {
		p.jobs[i] = make(chan playerJob, 2048)
		p.wg.Add(1)
		go p.work(p.jobs[i])
	}
	return p
}

// PlayerKey is a player's key in the players bucket.
func PlayerKey(player uint64) string { return "p." + strconv.FormatUint(player, 10) }

// Joined records a player who joined zone at epoch (asynchronously).
func (p *Players) Joined(player uint64, zone string, epoch uint64) {
	p.enqueue(playerJob{player: player, zone: zone, epoch: epoch, fresh: true})
}

// Acquired records that zone took player at epoch (asynchronously; a write
// older than the record is refused).
func (p *Players) Acquired(player uint64, zone string, epoch uint64) {
	p.enqueue(playerJob{player: player, zone: zone, epoch: epoch})
}

// Commit writes the record of a cross-process handoff and calls done with
// the outcome (from a writer goroutine). A record that already names this
// zone at this epoch (a resent Commit) counts as written.
func (p *Players) Commit(player uint64, zone string, epoch uint64, done func(ok bool)) {
	select {
	case p.jobs[player%playerWorkers] <- playerJob{player: player, zone: zone, epoch: epoch, done: done}:
	default:
		p.Dropped.Add(1)
		done(false) // the source resends the Commit
	}
}

func (p *Players) enqueue(j playerJob) {
	select {
	case p.jobs[j.player%playerWorkers] <- j:
	default:
		p.Dropped.Add(1)
	}
}

func (p *Players) work(jobs <-chan playerJob) {
	defer p.wg.Done()
	for {
		select {
		case <-p.stop:
			return
		case j := <-jobs:
			ok := p.write(j)
			if j.done != nil {
				j.done(ok)
			}
		}
	}
}

// write stores j's record: unconditionally for a join, by compare-and-set
// to a newer epoch otherwise (retried a few times on a race).
func (p *Players) write(j playerJob) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	key := PlayerKey(j.player)
	val, _ := proto.Marshal(&pb.PlayerRecord{Player: j.player, Zone: j.zone, State: pb.PlayerState_PLAYER_STATE_ONLINE,
		Epoch: j.epoch, Node: p.node, UpdatedUnixMs: time.Now().UnixMilli()})
	if j.fresh {
		if _, err := p.kv.Put(ctx, key, val); err != nil {
			p.Errors.Add(1)
			return false
		}
		p.Written.Add(1)
		return true
	}
	for range 4 {
		e, err := p.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			if _, err := p.kv.Create(ctx, key, val); err == nil {
				p.Written.Add(1)
				return true
			} else if !errors.Is(err, jetstream.ErrKeyExists) {
				p.Errors.Add(1)
				return false
			}
			continue // created meanwhile: look again
		case err != nil:
			p.Errors.Add(1)
			return false
		}
		var rec pb.PlayerRecord
		if proto.Unmarshal(e.Value(), &rec) == nil {
			if rec.GetEpoch() > j.epoch || rec.GetEpoch() == j.epoch && rec.GetZone() != j.zone {
				p.Conflicts.Add(1)
				p.log.Warn("player record newer than this write: refused", "player", j.player, "zone", j.zone,
					"epoch", j.epoch, "record_zone", rec.GetZone(), "record_epoch", rec.GetEpoch())
				return false
			}
			if rec.GetEpoch() == j.epoch {
				return true // this very write, again (a resent Commit)
			}
		}
		if _, err := p.kv.Update(ctx, key, val, e.Revision()); err == nil {
			p.Written.Add(1)
			return true
		} else if !isWrongSequence(err) && !errors.Is(err, jetstream.ErrKeyExists) {
			p.Errors.Add(1)
			return false
		}
	}
	p.Errors.Add(1)
	return false
}

// Close stops the writers (queued writes are dropped).
func (p *Players) Close() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	p.wg.Wait()
}
