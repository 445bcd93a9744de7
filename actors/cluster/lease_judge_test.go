package cluster

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A node that stops renewing (a crash) loses its lease to the other
// nodes' judgement, a TTL after its last renewal was seen, long before the
// bucket's own expiry (leaseBackstop): at that moment the entry is still
// in the bucket, and the claim replaces it at a higher epoch.
func TestLeaseExpiryJudgedByTheClaimants(t *testing.T) {
	nc := natsServer(t)
	const ttl = time.Second
	kv := zonesBucket(t, nc, ttl)
	if back := leaseBackstop(ttl); back < 10*ttl {
		t.Fatalf("backstop %v: want it far beyond the TTL for this test", back)
	}
	a, _ := countingLeases(t, kv, "a", ttl)
	b, _ := countingLeases(t, kv, "b", ttl)
	defer b.Close(context.Background())
	e1, err := a.Claim(context.Background(), "z")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "b to see a's lease", func() bool { o, ok := b.Owner("z"); return ok && o.Epoch == e1 })
	vacated := b.Vacated()
	abandoned := time.Now()
	a.Abandon()
	select {
	case <-vacated:
	case <-time.After(5 * ttl):
		t.Fatalf("b did not judge the lease expired within %v", 5*ttl)
	}
	// The earliest b may judge: a TTL after the last renewal it saw,
	// which went at most a renewal interval before the abandon.
	if d := time.Since(abandoned); d < ttl-b.renew {
		t.Fatalf("judged expired %v after the last renewal could have gone; want at least %v", d, ttl-b.renew)
	}
	if _, ok := b.Owner("z"); ok {
		t.Fatal("the vacated zone is still in b's directory")
	}
	if e, err := kv.Get(context.Background(), "z"); err != nil {
		t.Fatalf("the entry is gone from the bucket (%v): the server expired it, not b", err)
	} else if o, _ := decodeOwner(e); o.Node != "a" {
		t.Fatalf("bucket entry names %q, want a's lease", o.Node)
	}
	if n := b.Stats().Expiries; n != 1 {
		t.Fatalf("b judged %d leases expired, want 1", n)
	}
	e2, err := b.Claim(context.Background(), "z")
	if err != nil {
		t.Fatalf("claiming the lease judged expired: %v", err)
	}
	if e2 <= e1 {
		t.Fatalf("new epoch %d not above the old %d", e2, e1)
	}
	if !b.TookOver("z") {
		t.Fatal("the claim of a lease judged expired not reported as a takeover")
	}
	// A third node that judged nothing cannot take b's lease the same way.
	c, _ := countingLeases(t, kv, "c", ttl)
	defer c.Close(context.Background())
	if _, err := c.Claim(context.Background(), "z"); !errors.Is(err, ErrOwned) {
		t.Fatalf("claiming a live lease: %v, want ErrOwned", err)
	}
}

// Silence counts only while the bucket answers: through an election (no
// stream leader: every renewal and every probe answered with nothing
// decided) a lease whose holder could not renew is not judged expired the
// moment the bucket is back, but a TTL later, and the holder's renewal
// lands first. Here the holder's renewals reach the bucket 300 ms after
// the claimant's probes do; judged by its silence alone, the claimant
// would drop the lease at its first probe.
func TestLeaseSilenceCountsOnlyWhileTheBucketAnswers(t *testing.T) {
	nc := natsServer(t)
	const ttl = 1200 * time.Millisecond
	bucket := zonesBucket(t, nc, ttl)
	akv := &leaderlessKV{KeyValue: bucket}
	bkv := &leaderlessKV{KeyValue: bucket}
	a, lost, holds, epoch := claimHeld(t, akv, "a", ttl)
	b, _ := countingLeases(t, bkv, "b", ttl)
	defer b.Close(context.Background())
	waitFor(t, 2*time.Second, "b to see a's lease", func() bool { o, ok := b.Owner("z"); return ok && o.Epoch == epoch })
	akv.down.Store(true)
	bkv.down.Store(true)
	holds.held(t, 3*ttl, "a's zone held through the election")
	time.Sleep(2 * ttl) // silent far past the TTL
	if b.Stats().Expiries != 0 {
		t.Fatal("b judged the lease expired while the bucket answered nothing")
	}
	bkv.down.Store(false)
	back := time.Now()
	for time.Since(back) < 300*time.Millisecond {
		if _, ok := b.Owner("z"); !ok || b.Stats().Expiries != 0 {
			t.Fatalf("b dropped a's lease %v after the bucket answered again, before a TTL (%v)", time.Since(back), ttl)
		}
		time.Sleep(5 * time.Millisecond)
	}
	akv.down.Store(false)
	holds.letGo(t, 3*ttl, "a's zone let go once its renewal lands")
	ownedAgain(t, a, lost, epoch, ttl, "after the election")
	time.Sleep(ttl) // a renews on; b judges nothing
	if n := b.Stats().Expiries; n != 0 {
		t.Fatalf("b judged %d leases expired, want none", n)
	}
	if o, ok := b.Owner("z"); !ok || o.Node != "a" || o.Epoch != epoch {
		t.Fatalf("b's directory: %+v %v, want a at epoch %d", o, ok, epoch)
	}
}

// A renewal that lands after a claimant judged the lease expired (the
// holder's reply merely late) puts the lease back in its directory, and
// the claim, compare-and-set at the revision judged, is refused.
func TestLeaseRenewedAfterTheJudgementCannotBeClaimed(t *testing.T) {
	nc := natsServer(t)
	const ttl = 1200 * time.Millisecond
	bucket := zonesBucket(t, nc, ttl)
	kv := &lateKV{KeyValue: bucket, key: "z", sent: make(chan struct{}), release: make(chan struct{})}
	a, lost, holds, epoch := claimHeld(t, kv, "a", ttl)
	b, _ := countingLeases(t, bucket, "b", ttl)
	defer b.Close(context.Background())
	waitFor(t, 2*time.Second, "b to see a's lease", func() bool { o, ok := b.Owner("z"); return ok && o.Epoch == epoch })
	kv.armed.Store(true)
	<-kv.sent
	holds.held(t, 2*ttl, "a's zone held, its renewal stuck")
	waitFor(t, 3*ttl, "b to judge the lease expired", func() bool { return b.Stats().Expiries == 1 })
	close(kv.release)
	holds.letGo(t, 3*ttl, "a's zone let go once its renewal lands")
	waitFor(t, 2*time.Second, "b to see the renewal", func() bool { o, ok := b.Owner("z"); return ok && o.Epoch == epoch })
	if _, err := b.Claim(context.Background(), "z"); !errors.Is(err, ErrOwned) {
		t.Fatalf("claiming a lease renewed since the judgement: %v, want ErrOwned", err)
	}
	if _, held := a.Held("z"); !held || lost.Load() != 0 {
		t.Fatalf("a: held %v, lost %d; want held, not lost", held, lost.Load())
	}
	if _, err := bucket.Get(context.Background(), probeKey); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("the probes wrote their key: %v", err)
	}
}

// stallKV is a zones bucket whose watchers stop delivering once stalled
// (stallAll), as a watcher's consumer does for seconds after a NATS
// election (the renewals that land meanwhile are not seen); a watcher
// started after that delivers, as a fresh consumer does.
type stallKV struct {
	jetstream.KeyValue
	mu       sync.Mutex
	watchers []*stallWatcher
}

func (k *stallKV) WatchAll(ctx context.Context, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	w, err := k.KeyValue.WatchAll(ctx, opts...)
	if err != nil {
		return nil, err
	}
	sw := &stallWatcher{KeyWatcher: w, out: make(chan jetstream.KeyValueEntry, 64)}
	k.mu.Lock()
	k.watchers = append(k.watchers, sw)
	k.mu.Unlock()
	go func() {
		defer close(sw.out)
		for e := range w.Updates() {
			if e != nil && sw.stalled.Load() {
				continue
			}
			select {
			case sw.out <- e:
			case <-ctx.Done():
				return
			}
		}
	}()
	return sw, nil
}

// stallAll stalls every watcher started so far.
func (k *stallKV) stallAll() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, w := range k.watchers {
		w.stalled.Store(true)
	}
}

type stallWatcher struct {
	jetstream.KeyWatcher
	out     chan jetstream.KeyValueEntry
	stalled atomic.Bool
}

func (w *stallWatcher) Updates() <-chan jetstream.KeyValueEntry { return w.out }

// A watcher that sees no renewal while the leader has them (behind after
// an election) makes a suspect, not an expiry: the leader's revision
// moved, so the lease stays in the directory, and the watcher is started
// again, its listing fresh. Judged by the watcher's silence alone, b
// dropped every lease a TTL after an election in make chaos-nats-cluster,
// and the bridges dropped the zones' messages (269 guaranteed events lost
// in one run); the watchers stayed behind for 11 s and more.
func TestLeaseNotExpiredWhileTheWatcherIsBehind(t *testing.T) {
	nc := natsServer(t)
	const ttl = time.Second
	bucket := zonesBucket(t, nc, ttl)
	a, _ := countingLeases(t, bucket, "a", ttl)
	defer a.Close(context.Background())
	skv := &stallKV{KeyValue: bucket}
	b, _ := countingLeases(t, skv, "b", ttl)
	defer b.Close(context.Background())
	epoch, err := a.Claim(context.Background(), "z")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "b to see a's lease", func() bool { o, ok := b.Owner("z"); return ok && o.Epoch == epoch })
	skv.stallAll()
	relists := b.Stats().Relists
	deadline := time.Now().Add(3 * ttl)
	for time.Now().Before(deadline) {
		if o, ok := b.Owner("z"); !ok || o.Epoch != epoch || b.Stats().Expiries != 0 {
			t.Fatalf("b's watcher stalled %v: owner %+v %v, %d judged expired; want a's live lease kept", 3*ttl-time.Until(deadline), o, ok, b.Stats().Expiries)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if b.behind.Load() == 0 {
		t.Fatal("no suspect found the leader ahead of the watcher: the test did not test it")
	}
	if b.Stats().Relists == relists {
		t.Fatal("the watcher behind the leader was not started again")
	}
	// The fresh watcher sees a's renewals: b's view of the lease moves on.
	rev := func() uint64 { b.mu.Lock(); defer b.mu.Unlock(); return b.seen["z"].rev }
	r0, behind := rev(), b.behind.Load()
	waitFor(t, 2*ttl, "b's fresh watcher to see a's renewals", func() bool { return rev() > r0 })
	if b.behind.Load() != behind {
		t.Fatal("b's view moved by another confirmation, not by its watcher")
	}
	// a stops: the leader's revision stays, and b judges it expired
	// although its watcher still sees nothing.
	a.Abandon()
	waitFor(t, 3*ttl, "b to judge the abandoned lease expired", func() bool { return b.Stats().Expiries == 1 })
	if _, err := b.Claim(context.Background(), "z"); err != nil {
		t.Fatalf("claiming the lease judged expired: %v", err)
	}
}

// vagueKV is a zones bucket whose leader refuses a compare-and-set as
// wrong-sequence without naming the revision (a server whose error text
// differs from nats-server's "wrong last sequence: N").
type vagueKV struct{ jetstream.KeyValue }

func (k *vagueKV) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	rev, err := k.KeyValue.Update(ctx, key, value, revision)
	if isWrongSequence(err) {
		return 0, &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence, Description: "wrong last sequence"}
	}
	return rev, err
}

// A refusal that names no revision proves nothing: the bucket answers
// (its silence counts), but no lease is confirmed expired, so a dead
// holder's lease stays until the server's backstop removes it, and no
// claim can take it meanwhile. The server's text is untrusted input: an
// unexpected one must not make a node drop a live lease.
func TestLeaseRefusalWithoutRevisionJudgesNothing(t *testing.T) {
	nc := natsServer(t)
	const ttl = time.Second
	bucket := zonesBucket(t, nc, ttl)
	a, _ := countingLeases(t, bucket, "a", ttl)
	b, _ := countingLeases(t, &vagueKV{KeyValue: bucket}, "b", ttl)
	defer b.Close(context.Background())
	epoch, err := a.Claim(context.Background(), "z")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "b to see a's lease", func() bool { o, ok := b.Owner("z"); return ok && o.Epoch == epoch })
	a.Abandon()
	time.Sleep(3 * ttl) // silent three TTLs; the backstop is far off
	st := b.Stats()
	if st.Expiries != 0 {
		t.Fatalf("b judged %d leases expired on refusals that name no revision", st.Expiries)
	}
	if st.Probes == 0 {
		t.Fatal("b's probes were not counted as answered: the bucket did answer")
	}
	if o, ok := b.Owner("z"); !ok || o.Node != "a" {
		t.Fatalf("b's directory: %+v %v, want a's lease kept", o, ok)
	}
	if _, err := b.Claim(context.Background(), "z"); !errors.Is(err, ErrOwned) {
		t.Fatalf("claiming a lease nobody could judge: %v, want ErrOwned", err)
	}
}

// TookOver tells a claim that replaced a lease still standing (a previous
// run of the same node, restarted before the bucket removed its entry;
// or a lease judged expired) from a claim of a zone nobody held: only the
// first kind has players whose records may still name the zone online
// (the node restores those at its start).
func TestLeaseTookOverTellsAStandingLeaseApart(t *testing.T) {
	nc := natsServer(t)
	const ttl = time.Second
	kv := zonesBucket(t, nc, ttl)
	a, _ := countingLeases(t, kv, "a", ttl)
	if _, err := a.Claim(context.Background(), "z"); err != nil {
		t.Fatal(err)
	}
	if a.TookOver("z") {
		t.Fatal("a fresh claim reported as a takeover")
	}
	// a crashes and starts again under the same name.
	a.Abandon()
	again, _ := countingLeases(t, kv, "a", ttl)
	defer again.Close(context.Background())
	if _, err := again.Claim(context.Background(), "z"); err != nil {
		t.Fatalf("claiming the previous run's lease: %v", err)
	}
	if !again.TookOver("z") {
		t.Fatal("the previous run's lease taken over, not reported")
	}
	// Released, and claimed afresh: nobody held it.
	if err := again.Release(context.Background(), "z"); err != nil {
		t.Fatal(err)
	}
	if again.TookOver("z") {
		t.Fatal("TookOver reports a zone no longer held")
	}
	if _, err := again.Claim(context.Background(), "z"); err != nil {
		t.Fatal(err)
	}
	if again.TookOver("z") {
		t.Fatal("a claim of a released zone reported as a takeover")
	}
}
