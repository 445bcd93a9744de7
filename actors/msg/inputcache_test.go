package msg

import (
	"sync"
	"testing"

	"github.com/ghostwire/ghostwire/replication/move"
)

// drainReturns empties the returns stacks (tests share them: they are
// the process's).
func drainReturns() { inputReturns.Swap(nil); roomReturns.Swap(nil) }

// TestInputCacheTakesReleasesBack: Inputs a zone releases (on its own
// goroutine) come back to the shard's cache that made them, emptied: those
// without events to Get, those with events' room to Room, which hands on
// the room and returns the Input to Get.
func TestInputCacheTakesReleasesBack(t *testing.T) {
	drainReturns()
	defer drainReturns()
	var shard InputCache
	made := make(map[*Input]bool)
	var got []*Input
	for i := range 64 {
		in := shard.Get()
		made[in] = true
		in.Player = uint64(i + 1)
		in.Moves = append(in.Moves, move.Move{Seq: uint64(i + 1)})
		if i%2 == 0 {
			in.Add(0, 0, 1, []byte("payload"))
		}
		got = append(got, in)
	}
	done := make(chan struct{})
	go func() { // the zone
		for _, in := range got {
			in.Release()
		}
		close(done)
	}()
	<-done
	rooms := 0
	for range 64 {
		in := shard.Get()
		if !made[in] {
			t.Fatalf("an Input the zone released did not come back")
		}
		if in.Player != 0 || len(in.Moves) != 0 || len(in.Events) != 0 || in.Received != 0 || in.next != nil {
			t.Fatalf("a returned Input not empty: %+v", in)
		}
		if cap(in.Events) != 0 {
			t.Fatalf("an Input without events came back with event room")
		}
		shard.Room(in)
		if cap(in.Events) != 0 && len(in.Events) == 0 && len(in.arena) == 0 {
			rooms++
		}
	}
	if rooms != 32 {
		t.Fatalf("%d Inputs got the room of the 32 released with events, want 32", rooms)
	}
}

// TestInputReturnsBounded: releases onto a full returns stack go to the
// pool: however many Inputs a zone releases while no shard takes any,
// the stack holds maxReturned, and the room stack maxRoomReturned; the
// room of those that overflow is not pooled.
func TestInputReturnsBounded(t *testing.T) {
	drainReturns()
	defer drainReturns()
	for range 10 * maxReturned {
		new(Input).Release()
	}
	n := 0
	for in := inputReturns.Load(); in != nil; in = in.next {
		n++
	}
	if n != maxReturned {
		t.Fatalf("returns stack of %d Inputs after %d releases, want its bound %d", n, 10*maxReturned, maxReturned)
	}
	// The room stack has its own, smaller bound (an Input with event room
	// holds more).
	for range 10 * maxRoomReturned {
		in := new(Input)
		in.Add(1, 0, 0, []byte("payload"))
		in.Release()
	}
	n = 0
	for in := roomReturns.Load(); in != nil; in = in.next {
		if cap(in.Events) == 0 {
			t.Fatal("an Input without event room on the room stack")
		}
		n++
	}
	if n != maxRoomReturned {
		t.Fatalf("room stack of %d Inputs after %d releases, want its bound %d", n, 10*maxRoomReturned, maxRoomReturned)
	}
	// What went to the pool went without its room: a pooled Input is for
	// a datagram of moves.
	for range 10 * maxRoomReturned {
		if in := NewInput(); cap(in.Events) != 0 || cap(in.arena) != 0 {
			t.Fatalf("the pool handed out an Input with event room (%d events, %d bytes)", cap(in.Events), cap(in.arena))
		}
	}
}

// TestInputReturnsConcurrent: zones releasing while shards take (run it
// with -race): every Input a shard gets, and every event room, is empty
// and in no one else's hands.
func TestInputReturnsConcurrent(t *testing.T) {
	drainReturns()
	defer drainReturns()
	const shards, perShard, rounds = 2, 32, 300
	var mu sync.Mutex
	out := make(map[*Input]bool) // handed out, not yet released
	zone := make(chan []*Input, 4*shards)
	var zones sync.WaitGroup
	for range 2 {
		zones.Add(1)
		go func() {
			defer zones.Done()
			for batch := range zone {
				for _, in := range batch {
					mu.Lock()
					delete(out, in)
					mu.Unlock()
					in.Release()
				}
			}
		}()
	}
	var wg sync.WaitGroup
	for s := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var c InputCache
			for r := range rounds {
				batch := make([]*Input, 0, perShard)
				for i := range perShard {
					in := c.Get()
					if in.Player != 0 || len(in.Moves) != 0 {
						t.Errorf("shard %d got a used Input: %+v", s, in)
						return
					}
					mu.Lock()
					if out[in] {
						mu.Unlock()
						t.Errorf("shard %d got an Input already handed out", s)
						return
					}
					out[in] = true
					mu.Unlock()
					in.Player = uint64(s*1_000_000 + r*perShard + i + 1)
					in.Moves = append(in.Moves, move.Move{Seq: in.Player})
					if i%5 == 0 { // an event now and then: room from the room stack
						c.Room(in)
						if len(in.Events) != 0 || len(in.arena) != 0 {
							t.Errorf("shard %d got event room in use: %+v", s, in.Events)
							return
						}
						in.Add(0, 0, 1, []byte("payload"))
					}
					batch = append(batch, in)
				}
				zone <- batch
			}
		}()
	}
	wg.Wait()
	close(zone)
	zones.Wait()
}

// BenchmarkInputGetRelease: a shard's Input for a datagram, released by
// its zone, through the pool or through the shard's cache and the
// returns stack (here on one goroutine: the pool's best case).
func BenchmarkInputGetRelease(b *testing.B) {
	b.Run("pool", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			in := inputPool.Get().(*Input)
			in.Moves = append(in.Moves, move.Move{Seq: 1})
			in.Moves = in.Moves[:0]
			inputPool.Put(in)
		}
	})
	b.Run("cache", func(b *testing.B) {
		var c InputCache
		b.ReportAllocs()
		for b.Loop() {
			in := c.Get()
			in.Moves = append(in.Moves, move.Move{Seq: 1})
			in.Release()
		}
	})
}

// BenchmarkInputAcrossGoroutines: as on a server, a shard gets an Input
// per datagram and sends its round's (16) to a zone goroutine that
// releases them: through the pool (Get finds the shard's per-P queue
// empty and steals from the zone's) or through the shard's cache and the
// returns stack. Wall time only: the point is the processors' sharing.
func BenchmarkInputAcrossGoroutines(b *testing.B) {
	const round = 16
	b.Run("pool", func(b *testing.B) {
		benchAcross(b, round, func() *Input { return inputPool.Get().(*Input) }, func(in *Input) {
			in.Moves = in.Moves[:0]
			inputPool.Put(in)
		})
	})
	b.Run("cache", func(b *testing.B) {
		var c InputCache
		benchAcross(b, round, c.Get, (*Input).Release)
	})
}

func benchAcross(b *testing.B, round int, get func() *Input, release func(*Input)) {
	zone := make(chan []*Input, 64)
	done := make(chan struct{})
	go func() {
		for batch := range zone {
			for _, in := range batch {
				release(in)
			}
		}
		close(done)
	}()
	batch := make([]*Input, 0, round)
	i := 0
	for b.Loop() {
		in := get()
		in.Moves = append(in.Moves, move.Move{Seq: uint64(i)})
		i++
		if batch = append(batch, in); len(batch) == round {
			zone <- batch
			batch = make([]*Input, 0, round)
		}
	}
	close(zone)
	<-done
}
