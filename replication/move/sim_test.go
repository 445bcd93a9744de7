package move

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/netsim"
)

// lossy is the 20 % random loss, plus jitter that reorders, explicit
// reordering and duplication.
func lossy(loss float64, seed uint64) netsim.Config {
	return netsim.Config{
		Loss: loss, Latency: 50 * ms, Jitter: 10 * ms, AllowJitterReorder: true,
		Reorder: 0.05, Duplicate: 0.05, Seed: seed,
	}
}

func TestPredictionExactWithoutLoss(t *testing.T) {
	tests := []struct {
		name  string
		link  netsim.Config
		spawn ControlState
	}{
		{name: "perfect link", link: netsim.Config{Seed: 1}},
		{name: "50ms latency with FIFO jitter", link: netsim.Config{Latency: 50 * ms, Jitter: 15 * ms, Seed: 2}},
		{name: "spawn state learned from first packet", link: netsim.Config{Latency: 40 * ms, Seed: 3},
			spawn: ControlState{Pos: [3]float32{120.5, 0, -33.25}, Yaw: 1.5, PayloadLen: 2, Payload: [MaxPayload]byte{7, 9}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			down := tc.link
			down.Seed += 100
			res := runSim(t, simConfig{up: tc.link, down: down, control: DefaultControlConfig(),
				moves: 3000, tail: time.Second, seed: tc.link.Seed, spawn: tc.spawn})
			if res.acks < res.sampled/3 {
				t.Fatalf("only %d acks checked for %d moves: the check is nearly vacuous", res.acks, res.sampled)
			}
			if res.ackMismatch != 0 {
				t.Fatalf("prediction differed from the server at %d of %d acks (first at move %d)", res.ackMismatch, res.acks, res.mismatchAt[0])
			}
			if res.applied != res.sampled || res.lostTruth != 0 || res.applier.Lost != 0 {
				t.Fatalf("applied %d of %d moves, lost %d (applier says %d)", res.applied, res.sampled, res.lostTruth, res.applier.Lost)
			}
			if res.control.Corrections != 0 || res.control.Initial != 1 {
				t.Fatalf("control stats %+v: want exactly the initial full state and no correction", res.control)
			}
			if tc.spawn == (ControlState{}) && res.control.Mismatches != 0 {
				t.Fatalf("%d CRC mismatches with identical starts and deterministic movement", res.control.Mismatches)
			}
			if !res.final {
				t.Fatal("last ack: predicted state differs from the server's")
			}
		})
	}
}

// TestMovesLostForGood is the proof: at 20 % random loss (each way,
// with reordering and duplication) at most 0.05 % of moves are lost for good,
// every other move is applied exactly once and in order (runSim checks every
// application against what the client sampled), and deterministic movement
// keeps prediction exact.
func TestMovesLostForGood(t *testing.T) {
	const seeds, movesPerSeed = 10, 10_000
	var sampled, lost, applied, dups, checkedAcks int
	var upSent, upLost, downSent, downLost uint64
	for seed := uint64(1); seed <= seeds; seed++ {
		res := runSim(t, simConfig{up: lossy(0.2, seed), down: lossy(0.2, seed+1000), control: DefaultControlConfig(),
			moves: movesPerSeed, tail: 2 * time.Second, seed: seed})
		if uint64(res.lostTruth) != res.applier.Lost {
			t.Fatalf("seed %d: applier counted %d lost moves, %d were never applied", seed, res.applier.Lost, res.lostTruth)
		}
		if res.applied+res.lostTruth != res.sampled {
			t.Fatalf("seed %d: applied %d + lost %d != sampled %d: moves still pending at the end", seed, res.applied, res.lostTruth, res.sampled)
		}
		if res.lostTruth == 0 && (res.ackMismatch != 0 || res.control.Corrections != 0) {
			t.Fatalf("seed %d: no move lost, yet %d acks mismatched and %d corrections were sent", seed, res.ackMismatch, res.control.Corrections)
		}
		sampled += res.sampled
		lost += res.lostTruth
		applied += res.applied
		dups += int(res.applier.Duplicates)
		checkedAcks += res.acks
		upSent += res.upLink.Sent
		upLost += res.upLink.Dropped.Loss
		downSent += res.downLink.Sent
		downLost += res.downLink.Dropped.Loss
	}
	for _, l := range []struct {
		dir        string
		lost, sent uint64
	}{{"client→server", upLost, upSent}, {"server→client", downLost, downSent}} {
		if r := float64(l.lost) / float64(l.sent); r < 0.19 || r > 0.21 {
			t.Fatalf("%s lost %.2f %% of packets, want 20 %%: the scenario is not the issue's", l.dir, 100*r)
		}
	}
	rate := float64(lost) / float64(sampled)
	t.Logf("%d moves over %d seeds: %d applied, %d lost for good (%.4f %%), %d redundant copies skipped, %d acks checked bit for bit",
		sampled, seeds, applied, lost, 100*rate, dups, checkedAcks)
	if sampled < 100_000 {
		t.Fatalf("measured over %d moves, want ≥ 100000", sampled)
	}
	if rate > 0.0005 {
		t.Fatalf("%.4f %% of moves lost for good, want ≤ 0.05 %%", 100*rate)
	}
	if dups == 0 {
		t.Fatal("no redundant copy was ever skipped: the redundancy was not exercised")
	}
}

// TestCorrectionConverges: a server-side surprise (a push the client cannot
// predict) makes the client's CRC mismatch; the server sends its full state;
// the client rewinds, replays and matches the server again shortly after.
func TestCorrectionConverges(t *testing.T) {
	const every, moves = 150, 3000 // a surprise every 5 s
	perturb := func(seq uint64) bool { return seq%every == 0 && seq <= moves }
	tests := []struct {
		name     string
		up, down netsim.Config
		noFates  bool
		window   uint64 // mismatching acks allowed after each surprise, in moves
		exact    bool   // exactly one correction per surprise
	}{
		{name: "no loss", up: netsim.Config{Latency: 50 * ms, Seed: 1}, down: netsim.Config{Latency: 50 * ms, Seed: 2}, window: 15, exact: true},
		{name: "20% loss", up: lossy(0.2, 3), down: lossy(0.2, 4), window: 45},
		{name: "no fates, hold timeout", up: netsim.Config{Latency: 50 * ms, Seed: 5}, down: netsim.Config{Latency: 50 * ms, Seed: 6}, noFates: true, window: 15, exact: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := runSim(t, simConfig{up: tc.up, down: tc.down, control: DefaultControlConfig(), moves: moves,
				tail: 2 * time.Second, seed: 9, perturb: perturb, noFates: tc.noFates})
			surprises := uint64(moves / every)
			if res.control.Corrections < surprises {
				t.Fatalf("%d corrections for %d surprises", res.control.Corrections, surprises)
			}
			if tc.exact && res.control.Corrections != surprises {
				t.Fatalf("%d corrections for %d surprises on a loss-free link, want exactly one each (held %d)", res.control.Corrections, surprises, res.control.Held)
			}
			for _, seq := range res.mismatchAt {
				if since := seq % every; since > tc.window {
					t.Fatalf("ack of move %d still mismatched %d moves after the surprise at %d", seq, since, seq-since)
				}
			}
			if len(res.mismatchAt) == 0 {
				t.Fatal("no ack ever mismatched: the surprises did not reach the client's view")
			}
			if !res.final {
				t.Fatal("client did not converge: the last ack still mismatched")
			}
			t.Logf("%d surprises → %d corrections, %d mismatching acks, %d mismatches held", surprises, res.control.Corrections, len(res.mismatchAt), res.control.Held)
		})
	}
}

// TestFullWindowHoldsInput: with a tiny window (200 ms) and heavy loss the
// window fills again and again; sampling through Due holds input while it
// is full instead of dropping the oldest move, so nothing the client
// predicted is lost, every move is applied exactly once, and the client
// converges. (Adding past a full window, which drops and counts, is
// covered by TestApplierCountsGaps and the ops fuzzer.)
func TestFullWindowHoldsInput(t *testing.T) {
	res := runSim(t, simConfig{up: lossy(0.5, 11), down: lossy(0.2, 12), control: DefaultControlConfig(),
		stream: Config{InputRate: 30, Window: 6}, moves: 3000, calmAfter: 2400, tail: 2 * time.Second, seed: 13})
	if res.stream.Held == 0 {
		t.Fatal("no sample held with a 6-move window at 50 % loss: the scenario never fills the window")
	}
	if res.stream.Dropped != 0 || res.lostTruth != 0 || res.applier.Lost != 0 {
		t.Fatalf("dropped %d, lost %d (applier %d): a full window must hold input, not lose it",
			res.stream.Dropped, res.lostTruth, res.applier.Lost)
	}
	if res.applied != res.sampled {
		t.Fatalf("applied %d of %d sampled moves", res.applied, res.sampled)
	}
	if !res.final {
		t.Fatal("client did not converge")
	}
	t.Logf("%d moves sampled and applied, %d samples held", res.sampled, res.stream.Held)
}

// TestTightBudgetKeepsOrder: a budget too small for all unacked moves still
// delivers every move exactly once and in order, oldest first.
func TestTightBudgetKeepsOrder(t *testing.T) {
	res := runSim(t, simConfig{up: lossy(0.2, 21), down: lossy(0.2, 22), control: DefaultControlConfig(),
		budget: 8 + 26, moves: 3000, tail: 3 * time.Second, seed: 23})
	if res.stream.Truncated == 0 {
		t.Fatal("no section was truncated: the budget is not tight")
	}
	if maxBits := uint64(26 * 8); res.upBits > res.upPkts*maxBits {
		t.Fatalf("sections averaged more than the %d-bit budget", maxBits)
	}
	if res.applied+res.lostTruth != res.sampled || uint64(res.lostTruth) != res.applier.Lost {
		t.Fatalf("applied %d, lost %d (applier %d), sampled %d", res.applied, res.lostTruth, res.applier.Lost, res.sampled)
	}
	t.Logf("%d sections truncated, %d moves lost, %d applied", res.stream.Truncated, res.lostTruth, res.applied)
}
