package conn

import (
	"log/slog"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	cmap "github.com/orcaman/concurrent-map"
)

// The node's registry (actors/node registry.go): one shard a bucket, set
// before any actor system of these tests exists.
func init() { cmap.SHARD_COUNT = 1 }

func discardSystem(tb testing.TB) *actor.ActorSystem {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	tb.Cleanup(sys.Shutdown)
	return sys
}

// TestConnPIDResolves: a connection's PID, and a copy of it, resolve to
// the connection through the actor system; another pool's PIDs and a
// removed connection's copies do not (dead letters, as with the
// registry), while the PID resolved before still reaches the stopped
// connection, which drops what it is sent.
func TestConnPIDResolves(t *testing.T) {
	sys := discardSystem(t)
	var a, b connPIDs
	a.init(sys)
	b.init(sys)
	c1, c2 := &Conn{}, &Conn{}
	p1, p2 := a.add(c1, 1), b.add(c2, 1)
	if p1.Equal(p2) {
		t.Fatalf("two pools' first connections share the PID %v", p1)
	}
	for _, tc := range []struct {
		name string
		t    *connPIDs
		pid  *actor.PID
		want *Conn
	}{
		{"its own", &a, p1, c1},
		{"a copy", &a, actor.NewPID(p1.Address, p1.Id), c1},
		{"the other pool's", &b, p2, c2},
		{"not this pool's", &a, p2, nil},
		{"an unknown number", &a, actor.NewPID(p1.Address, pidPrefix+"2"), nil},
		{"not a number", &a, actor.NewPID(p1.Address, pidPrefix+"x"), nil},
		{"another id", &a, actor.NewPID(p1.Address, "zone-1"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := tc.t.resolve(tc.pid)
			if tc.want == nil {
				if ok {
					t.Fatalf("resolved %v to %v, want nothing", tc.pid, p)
				}
				return
			}
			if !ok || p.(*proc).conn() != tc.want {
				t.Fatalf("resolved %v to %v (%v), want its connection", tc.pid, p, ok)
			}
		})
	}
	if p, ok := sys.ProcessRegistry.Get(actor.NewPID(p1.Address, p1.Id)); !ok || p.(*proc).conn() != c1 {
		t.Fatalf("the system resolved a copy of %v to %v (%v), want its connection", p1, p, ok)
	}
	a.remove(actor.NewPID(p1.Address, p1.Id))
	if p, ok := sys.ProcessRegistry.Get(actor.NewPID(p1.Address, p1.Id)); ok || p != sys.DeadLetter {
		t.Fatalf("a removed connection's copy resolved to %v (%v), want the dead letters", p, ok)
	}
	if len(a.byN) != 0 {
		t.Fatalf("%d connections kept after the only one was removed", len(a.byN))
	}
}

// TestConnPIDReachesTheConnection: a message sent to an opened
// connection's PID through the actor system reaches it on its shard, and
// its answer comes back.
func TestConnPIDReachesTheConnection(t *testing.T) {
	p := quietPool(t, 1)
	defer p.Close()
	x := record(t, 1)
	sess, _ := grantFor(t, x.req)
	c, err := p.Open(Params{Handshake: sess, Player: 7, Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.sys.Root.RequestFuture(c.PID(), &StatsRequest{}, 10*time.Second).Result()
	if err != nil {
		t.Fatalf("no answer from %v: %v", c.PID(), err)
	}
	st, ok := res.(*Stats)
	if !ok {
		t.Fatalf("answer %T, want *Stats", res)
	}
	// Not verified yet: the handshake's address (the admin API's players
	// list shows the connection's, which the gateway's table may not have).
	if !st.Addr.IsValid() || st.Addr != sess.Addr() {
		t.Fatalf("answer's address %v, want the handshake's %v", st.Addr, sess.Addr())
	}
}

// maxConnPIDBytes bounds what a connection's PID costs: the PID, its id
// and the pool's map entry, 2,000 connections on one actor system with
// the node's registry (one shard a bucket): 129 B (137 with an 8-byte
// proc of its own, which TestConnPIDAddAllocates keeps out; 118–138 B
// over earlier passes), where
// protoactor's registry took 248–251 B (302 B at 1,000: most of its 1,024
// maps took a map group for one or two connections); 156–159 B in a
// process's first run under -race (the race detector's allocations, not
// the table's: 137–138 B in the runs after). A size check, not a timing
// one.
const maxConnPIDBytes = 168

func TestConnPIDFootprint(t *testing.T) {
	const n = 2000
	sys := discardSystem(t)
	var before, mid, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var pt connPIDs
	pt.init(sys)
	c := new(Conn) // the connection's own bytes are TestConnInUseFootprint's
	pids := make([]*actor.PID, n)
	for i := range pids {
		pids[i] = pt.add(c, uint64(i+1))
	}
	runtime.GC()
	runtime.ReadMemStats(&mid)
	regs := make([]*actor.PID, n)
	for i := range regs { // as Open did
		regs[i], _ = sys.ProcessRegistry.Add(procOf(c), "conn$"+strconv.Itoa(i+1))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(pids)
	runtime.KeepAlive(regs)
	runtime.KeepAlive(c)
	per := (int64(mid.HeapAlloc) - int64(before.HeapAlloc)) / n
	reg := (int64(after.HeapAlloc) - int64(mid.HeapAlloc)) / n
	t.Logf("a connection's PID: %d B (in protoactor's registry: %d B)", per, reg)
	if per > maxConnPIDBytes {
		t.Fatalf("a connection's PID keeps %d B, want ≤ %d", per, maxConnPIDBytes)
	}
}

// TestConnPIDAddAllocates: a connection's PID costs its id and the PID,
// no object of its own for the connection as an actor.Process (proc is
// the Conn: an 8-byte proc a connection before). The map's room is made
// first, so the count is the add's own.
func TestConnPIDAddAllocates(t *testing.T) {
	sys := discardSystem(t)
	var pt connPIDs
	pt.init(sys)
	pt.byN = make(map[uint64]*Conn, 4096)
	c := new(Conn)
	n := uint64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		n++
		pt.add(c, n)
	})
	if allocs > 2 {
		t.Fatalf("adding a connection's PID allocates %.1f objects, want 2 (its id and the PID)", allocs)
	}
}
