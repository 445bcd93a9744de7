package node

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/zone"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// A zone's restore asks it which of the restored players are back. If the
// zone was lost again meanwhile (its lease lapsed: a bridge proxy stands
// under its name), the answer comes from the proxy, which answers an
// Inspect without running it (actors/cluster's proxy: remote zones are
// inspected by their own node): lookBack reports the zone gone. restore
// waited for the look's result for good, and the node's Stop with it
// (TestClusterThreeNodesAcrossBorders at load ≈ 20, where leases lapsed
// again and again: hung in Stop for minutes).
func TestLookBackAfterTheZoneWentAway(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	z, err := sim.New(sim.Config{Zone: "x0z0"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := z.Join(0, 7, "c", "p7", [3]float32{-400, 0, -400}, 0); err != nil {
		t.Fatal(err)
	}
	spawn := func(recv actor.ReceiveFunc) *actor.PID {
		return sys.Root.Spawn(actor.PropsFromFunc(recv))
	}
	for _, tc := range []struct {
		name    string
		recv    actor.ReceiveFunc
		want    []uint64
		wantErr error
	}{
		{name: "the zone", want: []uint64{7}, recv: func(ctx actor.Context) {
			if m, ok := ctx.Message().(*zone.Inspect); ok {
				m.Fn(z)
				m.Answer(ctx)
			}
		}},
		{name: "a proxy under the zone's name", wantErr: errZoneGone, recv: func(ctx actor.Context) {
			if m, ok := ctx.Message().(*zone.Inspect); ok {
				m.Answer(ctx)
			}
		}},
		{name: "a busy zone", wantErr: actor.ErrTimeout, recv: func(actor.Context) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type result struct {
				back []uint64
				err  error
			}
			done := make(chan result, 1)
			pid := spawn(tc.recv)
			go func() {
				back, err := lookBack(sys.Root, pid, []uint64{7, 8}, 200*time.Millisecond)
				done <- result{back, err}
			}()
			select {
			case r := <-done:
				if !errors.Is(r.err, tc.wantErr) || !slices.Equal(r.back, tc.want) {
					t.Fatalf("lookBack = %v, %v; want %v, %v", r.back, r.err, tc.want, tc.wantErr)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("lookBack still waiting 10 s after a look bounded at 200 ms")
			}
		})
	}
}
