package gateway_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// A player's zone was restored elsewhere (its node paused past its lease)
// and the connection rejoined it there; when the paused node wakes up, its
// zone still answers the events it had queued, which the restored zone
// applied and answered already. The connection drops the old owner's
// events (at or below the restored checkpoint's epoch, once the new owner
// spoke) and passes the new owner's on.
func TestConnDropsEventsOfAnOwnerItWasRestoredAwayFrom(t *testing.T) {
	defer verifyNoLeaks(t)()
	r := newRig(t, nil)
	const id = 4100
	tc := newClient(t, id, r.token(t, id), r.gw.PublicAddr(), r.start, nil, id)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var quit atomic.Bool
	done := make(chan error, 1)
	go func() {
		done <- tc.run(ctx, func(tc *tclient, now time.Duration) {
			if quit.Load() && tc.c.State() == handshake.StateConnected {
				tc.c.Close(now) // on the client's goroutine
			}
		})
	}()
	eventually(t, 5*time.Second, "the join", func() bool {
		r.zst.mu.Lock()
		defer r.zst.mu.Unlock()
		return r.zst.conns[id] != nil
	})
	r.zst.mu.Lock()
	pid := r.zst.conns[id]
	joins := r.zst.joins
	r.zst.mu.Unlock()
	// The restore: a Rejoin from a checkpoint at epoch 5, the new owner's
	// first Control at 6.
	r.sys.Root.Send(pid, &msg.Rejoin{Player: id, Restore: &handoff.Checkpoint{Entity: id, Epoch: 5}})
	eventually(t, 5*time.Second, "the rejoin", func() bool { r.zst.mu.Lock(); defer r.zst.mu.Unlock(); return r.zst.joins > joins })
	c := msg.NewControl()
	c.Player, c.Epoch = id, 6
	r.sys.Root.Send(pid, c)
	out := func(epoch uint64, p string) {
		o := msg.NewOutput()
		o.Player, o.Epoch = id, epoch
		o.Add(event.Ordered, 3, 0, []byte(p))
		r.sys.Root.Send(pid, o)
	}
	out(5, "old owner") // the woken node's late answer
	out(6, "new owner")
	out(0, "unnumbered")
	eventually(t, 5*time.Second, "the new owner's events", func() bool { return len(tc.received()) >= 2 })
	time.Sleep(100 * time.Millisecond) // and nothing more
	if got := tc.received(); !slices.Equal(got, []string{"new owner", "unnumbered"}) {
		t.Fatalf("client got %q, want the new owner's events only", got)
	}
	if s := r.gw.Stats(); s.EventsStale != 1 {
		t.Fatalf("%d stale events counted, want 1", s.EventsStale)
	}
	quit.Store(true)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r.close(t)
}
