package gateway

import (
	"log/slog"
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
)

// sinkActor releases every datagram and signals every n-th.
type sinkActor struct {
	n    int
	seen int
	done *sync.WaitGroup
}

func (s *sinkActor) Receive(ctx actor.Context) {
	if d, ok := ctx.Message().(*msg.Datagram); ok {
		d.Release()
		s.seen++
		if s.seen%s.n == 0 {
			s.done.Done()
		}
	}
}

// BenchmarkMailboxHop is the cost the actor model adds per datagram: one
// protoactor Send of a pooled *msg.Datagram from the gateway to a
// connection actor, in bursts of 64 (one read batch). Not a tracked number;
// docs/benchmarks.md reads it next to BenchmarkServerPacketPath.
func BenchmarkMailboxHop(b *testing.B) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	defer sys.Shutdown()
	const burst = 64
	var wg sync.WaitGroup
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &sinkActor{n: burst, done: &wg} }))
	defer func() { _ = sys.Root.StopFuture(pid).Wait() }()
	ds := make([]*msg.Datagram, burst)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if n%burst == 0 {
			wg.Wait()
			wg.Add(1)
			for i := range ds {
				ds[i] = msg.NewDatagram()
			}
		}
		sys.Root.Send(pid, ds[n%burst])
		n++
	}
	// Top up the last burst so the sink's count lands on a multiple.
	for ; n%burst != 0; n++ {
		sys.Root.Send(pid, msg.NewDatagram())
	}
	wg.Wait()
}
