package cluster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// leaderlessKV is a zones bucket whose stream has no leader while down is
// set, as a NATS cluster's has between the death of the server that led
// it and the next election: every renewal is answered at once, with
// nothing decided (ErrNoStreamResponse, what nats.go returns then).
type leaderlessKV struct {
	jetstream.KeyValue
	down atomic.Bool
	// unanswered counts the renewals answered with nothing decided.
	unanswered atomic.Int64
}

func (k *leaderlessKV) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	if k.down.Load() {
		k.unanswered.Add(1)
		return 0, jetstream.ErrNoStreamResponse
	}
	return k.KeyValue.Update(ctx, key, value, revision)
}

func (k *leaderlessKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if k.down.Load() {
		return nil, jetstream.ErrNoStreamResponse
	}
	return k.KeyValue.Get(ctx, key)
}

// A zones bucket that decides nothing for longer than the lease's wait
// (2 × TTL) holds the zone, not loses it, and the first renewal once it
// answers again lets the zone go on at the same epoch. By hand, one of
// three NATS servers SIGKILLed (its stream's leader; the next elected 8 s
// later): given up at TTL − TTL/12, all four zones of the world were
// stopped and taken back from their players' records, 90 of 90 players
// corrected. The bucket here keeps its entries (its TTL is long), as a
// stream with no leader expires nothing.
func TestLeaseHeldThroughALeaderlessBucket(t *testing.T) {
	nc := natsServer(t)
	const ttl = 1200 * time.Millisecond // given up (held) 1.1 s after the last renewal; wait 2.4 s
	kv := &leaderlessKV{KeyValue: zonesBucket(t, nc, 30*time.Second)}
	l, lost, holds, epoch := claimHeld(t, kv, "a", ttl)
	kv.down.Store(true)
	holds.held(t, 3*ttl, "the zone held once its renewals decide nothing past the give-up point")
	time.Sleep(2*l.wait - time.Since(lastOK(l, "z"))) // twice the wait an answer in flight gets
	if got, held := l.Held("z"); !held || got != epoch || lost.Load() != 0 || l.Valid("z") {
		t.Fatalf("%v after the last renewal, the bucket silent: held %v at epoch %d (want %d), lost %d, valid %v; want held, not lost, not valid",
			time.Since(lastOK(l, "z")).Round(time.Millisecond), held, got, epoch, lost.Load(), l.Valid("z"))
	}
	kv.down.Store(false)
	holds.letGo(t, 3*ttl, "the zone let go once a renewal lands")
	ownedAgain(t, l, lost, epoch, ttl, "after the bucket came back")
}

// A held zone whose renewals decide nothing sends them every heldRetry,
// not every tick: a NATS cluster's new stream leader expires the lease at
// its first age check after the election unless a renewal lands first, and
// at the tick's pace the first landed up to TTL/6 after the election.
func TestHeldLeaseRenewsSoonAfterNothingDecided(t *testing.T) {
	nc := natsServer(t)
	const ttl = 1200 * time.Millisecond // ticks every 200 ms; held retries every 20 ms
	kv := &leaderlessKV{KeyValue: zonesBucket(t, nc, 30*time.Second)}
	l, lost, holds, epoch := claimHeld(t, kv, "a", ttl)
	if l.heldRetry >= l.renew/4 {
		t.Fatalf("held retry %v, tick %v: want the retry well inside the tick", l.heldRetry, l.renew)
	}
	kv.down.Store(true)
	holds.held(t, 3*ttl, "the zone held once its renewals decide nothing")
	const window = time.Second
	before := kv.unanswered.Load()
	time.Sleep(window)
	tries := kv.unanswered.Load() - before
	// At the tick's pace the window holds 5 renewals; at the held retry's
	// up to 50. More than twice the tick's pace passes a host too starved
	// to keep the retry's.
	if ticks := int64(window / l.renew); tries <= 2*ticks {
		t.Fatalf("%d renewals in %v held (the tick's pace: %d); want more than %d", tries, window, ticks, 2*ticks)
	}
	kv.down.Store(false)
	holds.letGo(t, 3*ttl, "the zone let go once a renewal lands")
	ownedAgain(t, l, lost, epoch, ttl, "after the bucket came back")
	t.Logf("%d renewals in %v held", tries, window)
}

// Silent past outage, the held zone is given up (lost), as before at the
// give-up point; and a lease with no hold (nobody can stop its zone) is
// given up at the give-up point still.
func TestLeaseGivenUpAfterALongOutage(t *testing.T) {
	nc := natsServer(t)
	const ttl = 1200 * time.Millisecond
	t.Run("held", func(t *testing.T) {
		kv := &leaderlessKV{KeyValue: zonesBucket(t, nc, 30*time.Second)}
		l, lost := countingLeases(t, kv, "a", ttl)
		defer l.Close(context.Background())
		l.mu.Lock()
		l.outage = 3 * ttl
		l.mu.Unlock()
		holds := recordHolds(l)
		if _, err := l.Claim(context.Background(), "z"); err != nil {
			t.Fatal(err)
		}
		kv.down.Store(true)
		last := lastOK(l, "z")
		holds.held(t, 3*ttl, "the zone held")
		if lost.Load() != 0 {
			t.Fatal("lost at the give-up point, held")
		}
		waitFor(t, 2*l.outage, "the zone lost past outage", func() bool { return lost.Load() == 1 })
		if d := time.Since(last); d < 3*ttl {
			t.Fatalf("lost %v after the last renewal, before outage (%v)", d, 3*ttl)
		}
	})
	t.Run("no hold", func(t *testing.T) {
		kv := &leaderlessKV{KeyValue: zonesBucket(t, nc, 30*time.Second)}
		l, lost := countingLeases(t, kv, "b", ttl)
		defer l.Close(context.Background())
		if _, err := l.Claim(context.Background(), "y"); err != nil {
			t.Fatal(err)
		}
		kv.down.Store(true)
		waitFor(t, 3*ttl, "the zone lost at the give-up point", func() bool { return lost.Load() == 1 })
		if _, held := l.Held("y"); held {
			t.Fatal("still held after the give-up point with no hold")
		}
	})
}
