package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// lockedBuffer is a bytes.Buffer the writers' goroutines log into.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// warnings returns the players named by the log's warnings with message msg.
func (l *lockedBuffer) warnings(t *testing.T, msg string) []uint64 {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var players []uint64
	for _, line := range bytes.Split(bytes.TrimSpace(l.b.Bytes()), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var e struct {
			Level, Msg string
			Player     uint64
		}
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if e.Level == "WARN" && e.Msg == msg {
			players = append(players, e.Player)
		}
	}
	return players
}

const unencodableWarning = unencodableMsg

// A record that does not encode (a string not UTF-8) of a write that may
// be left out — the pipelined checkpoint, the checkpoint written alone, a
// Commit — is not written, and is not lost silently either: it is
// counted in Unencodable (not in Written or Checkpoints, not as a KV
// error), logged at warn with the player (once: its checkpoints fail
// again every second), and whoever waits on the write gets
// ErrUnencodableRecord. The record stays as it was: readable, the last
// state that encoded. Before, the pipelined checkpoint was published
// anyway, acknowledged and counted as written, and no reader could decode
// the record after it. (A placement's and a leaving player's are written
// repaired: TestUnencodableRecordThatMustBeWrittenIsRepaired.)
func TestUnencodableRecordIsReportedNotWritten(t *testing.T) {
	const bad = "bot-\xff"
	for _, tc := range []struct {
		name     string
		pipeline bool
		// write sends player 7's write that does not encode (player 7 was
		// joined in zone "z" at epoch 1, its first checkpoint written) and
		// returns what the waiter got.
		write func(t *testing.T, p *Players, cp handoff.Checkpoint) error
	}{
		{name: "pipelined checkpoint", pipeline: true, write: func(t *testing.T, p *Players, cp handoff.Checkpoint) error {
			cp.Name = bad
			return p.CheckpointSync(context.Background(), "z", []handoff.Checkpoint{cp}, func(string) string { return "gw" })
		}},
		{name: "checkpoint written alone", write: func(t *testing.T, p *Players, cp handoff.Checkpoint) error {
			cp.Conn = bad
			return p.CheckpointSync(context.Background(), "z", []handoff.Checkpoint{cp}, func(string) string { return "gw" })
		}},
		{name: "commit", pipeline: true, write: func(t *testing.T, p *Players, cp handoff.Checkpoint) error {
			return awaitJob(t, p, &playerJob{player: 7, zone: "y\xff", epoch: 2, commit: true})
		}},
		{name: "commit through its API", pipeline: true, write: func(t *testing.T, p *Players, cp handoff.Checkpoint) error {
			ok := make(chan bool, 1)
			p.Commit(7, "y\xff", 2, func(written bool) { ok <- written })
			select {
			case w := <-ok:
				if w {
					t.Fatal("a Commit whose record does not encode was answered written")
				}
				return ErrUnencodableRecord // done(false) is all Commit's API says
			case <-time.After(10 * time.Second):
				t.Fatal("the Commit was never answered")
				return nil
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := natsServer(t)
			js, _ := jetstream.New(nc)
			raw := playersBucket(t, js)
			kv := &countingKV{KeyValue: raw}
			var logs lockedBuffer
			p := NewPlayers(kv, "n1", slog.New(slog.NewJSONHandler(&logs, nil)))
			t.Cleanup(p.Close)
			if tc.pipeline {
				if err := p.Pipeline(context.Background(), nc); err != nil {
					t.Fatal(err)
				}
			}
			cp := handoff.Checkpoint{Entity: 7, Epoch: 1, Name: "bot-7", Conn: "c7", LastApplied: 40,
				Control: move.ControlState{Pos: [3]float32{10, 0, 20}}}
			p.Joined(7, "z", 1)
			waitFor(t, 5*time.Second, "the join", func() bool { return p.Written.Load() == 1 })
			if err := p.CheckpointSync(context.Background(), "z", []handoff.Checkpoint{cp}, func(string) string { return "gw" }); err != nil {
				t.Fatal(err)
			}
			written, updates := p.Written.Load(), kv.updates.Load()

			cp.LastApplied = 99
			for i := range 2 { // the second logs nothing: a player's bad record is logged once
				err := tc.write(t, p, cp)
				if !errors.Is(err, ErrUnencodableRecord) {
					t.Fatalf("write %d: the waiter got %v, want ErrUnencodableRecord", i+1, err)
				}
				if n := p.Unencodable.Load(); n != uint64(i+1) {
					t.Fatalf("write %d: Unencodable = %d, want %d (a Commit is not tried again)", i+1, n, i+1)
				}
			}
			if w, e := p.Written.Load()-written, p.Errors.Load(); w != 0 || e != 0 {
				t.Fatalf("%d written, %d KV errors after a record that does not encode", w, e)
			}
			if u := kv.updates.Load() - updates; u != 0 {
				t.Fatalf("%d compare-and-set requests for a record that does not encode", u)
			}
			if got := logs.warnings(t, unencodableWarning); len(got) != 1 || got[0] != 7 {
				t.Fatalf("warnings for players %v, want one for player 7", got)
			}
			rec := record(t, p, 7) // still decodes: nothing was written over it
			if rec.GetZone() != "z" || rec.GetEpoch() != 1 || rec.GetState() != pb.PlayerState_PLAYER_STATE_ONLINE ||
				rec.GetCheckpoint().GetLastApplied() != 40 {
				t.Fatalf("record after the write that did not encode: %v", rec)
			}
			// The writer goes on: the next record that encodes is written.
			cp.LastApplied = 41
			if err := p.CheckpointSync(context.Background(), "z", []handoff.Checkpoint{cp}, func(string) string { return "gw" }); err != nil {
				t.Fatal(err)
			}
			if got := record(t, p, 7).GetCheckpoint().GetLastApplied(); got != 41 {
				t.Fatalf("the next checkpoint left last applied %d, want 41", got)
			}
		})
	}
}

// awaitJob queues j on its player's writer and returns what it was
// answered.
func awaitJob(t *testing.T, p *Players, j *playerJob) error {
	t.Helper()
	done := make(chan error, 1)
	j.done = func(err error) { done <- err }
	p.enqueue(j)
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the write was never answered")
		return nil
	}
}

// TestUnencodableWarningsBounded: a bad record is logged once a player for
// the first maxWarned players; past them one more warning says the bound
// was reached and the rest are only counted — a player the log no longer
// remembers would otherwise be logged at every checkpoint, once a second.
func TestUnencodableWarningsBounded(t *testing.T) {
	nc := natsServer(t)
	js, _ := jetstream.New(nc)
	kv := playersBucket(t, js)
	var logs lockedBuffer
	p := NewPlayers(kv, "n1", slog.New(slog.NewJSONHandler(&logs, nil)))
	t.Cleanup(p.Close)
	cause := errors.New("ghost: name is not UTF-8")
	const players = maxWarned + 10
	for round := range 3 { // a bad record fails again at every checkpoint
		for id := range uint64(players) {
			if err := p.unencodable(&playerJob{player: id + 1, zone: "z", epoch: 1}, cause); !errors.Is(err, ErrUnencodableRecord) || !errors.Is(err, cause) {
				t.Fatalf("round %d player %d: %v, want ErrUnencodableRecord wrapping the cause", round, id+1, err)
			}
		}
	}
	if n := p.Unencodable.Load(); n != 3*players {
		t.Fatalf("Unencodable = %d, want %d: every failure counted", n, 3*players)
	}
	if got := logs.warnings(t, unencodableWarning); len(got) != maxWarned || got[0] != 1 || got[maxWarned-1] != maxWarned {
		t.Fatalf("%d warnings naming a player, want %d (players 1…%d, once each)", len(got), maxWarned, maxWarned)
	}
	if got := logs.warnings(t, "player records that do not encode: more players than the log names; the rest are counted only"); len(got) != 1 {
		t.Fatalf("%d warnings that the bound was reached, want 1", len(got))
	}
}

// A record that does not encode but must not be left out is written with
// its player's text made valid (each byte that is not UTF-8 U+FFFD): a
// join's (left out, the player had no record: its checkpoints refused,
// nobody to restore it after a crash), another placement's (an
// acquisition, a restore: the record would name the zone the player
// left), and a leaving player's last checkpoint (left out, the record
// stayed ONLINE after the player left: a takeover restores him). The
// record names the write's zone, epoch and state with the checkpoint's
// state; the write is answered written, counted in Repaired (not in
// Unencodable), logged once. A zone name that is not UTF-8 (this node's
// own configuration) names no zone repaired: not written, as before.
// On a real nats-server's KV, pipelined as a node writes them.
func TestUnencodableRecordThatMustBeWrittenIsRepaired(t *testing.T) {
	const bad, fixed = "bot-\xff7", "bot-\ufffd7"
	good := handoff.Checkpoint{Entity: 7, Epoch: 1, Name: "bot-7", Conn: "c7", LastApplied: 40,
		Control: move.ControlState{Pos: [3]float32{10, 0, 20}}}
	for _, tc := range []struct {
		name string
		// joined: player 7 was joined in zone "z" at epoch 1 first, its
		// checkpoint written (the pipeline has its revision).
		joined bool
		write  func(t *testing.T, p *Players, cp handoff.Checkpoint) error
		// The record wanted after the write.
		zone  string
		epoch uint64
		state pb.PlayerState
	}{
		{name: "join", write: func(t *testing.T, p *Players, cp handoff.Checkpoint) error {
			return awaitJob(t, p, &playerJob{player: 7, zone: "z", epoch: 1, cp: &cp, place: true, fresh: true, gateway: "gw"})
		}, zone: "z", epoch: 1, state: pb.PlayerState_PLAYER_STATE_ONLINE},
		{name: "join through its API", write: func(t *testing.T, p *Players, cp handoff.Checkpoint) error {
			p.Placed(7, "z", 1, true, &cp, "gw")
			waitFor(t, 5*time.Second, "the join's write", func() bool { return p.Written.Load()+p.Unencodable.Load() > 0 })
			return nil
		}, zone: "z", epoch: 1, state: pb.PlayerState_PLAYER_STATE_ONLINE},
		{name: "acquisition", joined: true, write: func(t *testing.T, p *Players, cp handoff.Checkpoint) error {
			cp.Epoch = 2
			return awaitJob(t, p, &playerJob{player: 7, zone: "y", epoch: 2, cp: &cp, place: true, gateway: "gw"})
		}, zone: "y", epoch: 2, state: pb.PlayerState_PLAYER_STATE_ONLINE},
		{name: "restore", joined: true, write: func(t *testing.T, p *Players, cp handoff.Checkpoint) error {
			cp.Epoch = 2
			return awaitJob(t, p, &playerJob{player: 7, zone: "z", epoch: 2, from: 1, cp: &cp, place: true, restore: true, gateway: "gw"})
		}, zone: "z", epoch: 2, state: pb.PlayerState_PLAYER_STATE_ONLINE},
		{name: "leaving checkpoint, pipelined", joined: true, write: func(t *testing.T, p *Players, cp handoff.Checkpoint) error {
			return awaitJob(t, p, newCheckpointJob("z", &cp, true, "gw"))
		}, zone: "z", epoch: 1, state: pb.PlayerState_PLAYER_STATE_OFFLINE},
		{name: "leaving checkpoint written alone", joined: true, write: func(t *testing.T, p *Players, cp handoff.Checkpoint) error {
			p.forget(7) // no cached revision: written by write, not the pipeline
			return awaitJob(t, p, newCheckpointJob("z", &cp, true, "gw"))
		}, zone: "z", epoch: 1, state: pb.PlayerState_PLAYER_STATE_OFFLINE},
		{name: "leaving through its API", joined: true, write: func(t *testing.T, p *Players, cp handoff.Checkpoint) error {
			n := p.Checkpoints.Load()
			p.Checkpoint("z", []handoff.Checkpoint{cp}, true, func(string) string { return "gw" })
			waitFor(t, 5*time.Second, "the leaving checkpoint", func() bool { return p.Checkpoints.Load()+p.Unencodable.Load() > n })
			return nil
		}, zone: "z", epoch: 1, state: pb.PlayerState_PLAYER_STATE_OFFLINE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := natsServer(t)
			js, _ := jetstream.New(nc)
			var logs lockedBuffer
			p := NewPlayers(playersBucket(t, js), "n1", slog.New(slog.NewJSONHandler(&logs, nil)))
			t.Cleanup(p.Close)
			if err := p.Pipeline(context.Background(), nc); err != nil {
				t.Fatal(err)
			}
			if tc.joined {
				p.Joined(7, "z", 1)
				if err := p.CheckpointSync(context.Background(), "z", []handoff.Checkpoint{good}, func(string) string { return "gw" }); err != nil {
					t.Fatal(err)
				}
			}
			cp := good
			cp.Name, cp.LastApplied = bad, 99
			if err := tc.write(t, p, cp); err != nil {
				t.Fatalf("the waiter got %v, want the write made (repaired)", err)
			}
			rec := record(t, p, 7)
			if rec == nil {
				t.Fatal("no record: the write was left out")
			}
			if rec.GetZone() != tc.zone || rec.GetEpoch() != tc.epoch || rec.GetState() != tc.state {
				t.Fatalf("record names %s at epoch %d, %v; want %s at %d, %v", rec.GetZone(), rec.GetEpoch(), rec.GetState(), tc.zone, tc.epoch, tc.state)
			}
			if c := rec.GetCheckpoint(); c.GetName() != fixed || c.GetLastApplied() != 99 || rec.GetGateway() != "gw" {
				t.Fatalf("record's checkpoint %v (gateway %q), want the write's state with name %q", c, rec.GetGateway(), fixed)
			}
			if r, u := p.Repaired.Load(), p.Unencodable.Load(); r != 1 || u != 0 {
				t.Fatalf("Repaired %d, Unencodable %d; want 1, 0", r, u)
			}
			if got := logs.warnings(t, repairedMsg); len(got) != 1 || got[0] != 7 {
				t.Fatalf("warnings for players %v, want one for player 7", got)
			}
		})
	}

	// A zone name that is not UTF-8 is not repaired into another zone's.
	t.Run("zone not UTF-8", func(t *testing.T) {
		nc := natsServer(t)
		js, _ := jetstream.New(nc)
		p := NewPlayers(playersBucket(t, js), "n1", nil)
		t.Cleanup(p.Close)
		cp := good
		if err := awaitJob(t, p, &playerJob{player: 7, zone: "z\xff", epoch: 1, cp: &cp, place: true, fresh: true}); !errors.Is(err, ErrUnencodableRecord) {
			t.Fatalf("the waiter got %v, want ErrUnencodableRecord", err)
		}
		if rec := record(t, p, 7); rec != nil || p.Repaired.Load() != 0 || p.Unencodable.Load() != 1 {
			t.Fatalf("record %v, Repaired %d, Unencodable %d; want none, 0, 1", rec, p.Repaired.Load(), p.Unencodable.Load())
		}
	})
}
