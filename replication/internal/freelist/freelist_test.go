package freelist

import "testing"

// A buffer given back is handed out again (no allocation), and a list
// with none free makes a new one.
func TestReuse(t *testing.T) {
	var l List[[64]byte]
	a := l.Get()
	a[0] = 7
	l.Put(a)
	if b := l.Get(); b != a {
		t.Fatal("a freed buffer was not reused")
	}
	if c := l.Get(); c == a {
		t.Fatal("a buffer in use was handed out twice")
	}
	l.Put(a)
	if n := testing.AllocsPerRun(100, func() { l.Put(l.Get()) }); n != 0 {
		t.Fatalf("%v allocations per Get/Put in steady state", n)
	}
}

// A list with Max keeps at most Max free buffers: what a burst gave back
// beyond them goes to the garbage collector.
func TestMaxBoundsTheFreeBuffers(t *testing.T) {
	l := List[int]{Max: 2}
	bufs := []*int{l.Get(), l.Get(), l.Get()}
	for _, b := range bufs {
		l.Put(b)
	}
	if len(l.free) != 2 {
		t.Fatalf("%d free buffers kept, want Max = 2", len(l.free))
	}
	var u List[int] // no Max: keeps every one
	for _, b := range bufs {
		u.Put(b)
	}
	if len(u.free) != 3 {
		t.Fatalf("%d free buffers kept without Max, want 3", len(u.free))
	}
}

// A trimmed list gives back, period by period, the buffers a burst left
// that its steady flow never takes, and keeps every one the flow takes:
// the flow then allocates nothing.
func TestTrimKeepsWhatTheFlowTakes(t *testing.T) {
	l := List[[32]byte]{Trim: true}
	const burst, flow = 500, 10
	bufs := make([]*[32]byte, burst)
	for i := range bufs {
		bufs[i] = l.Get()
	}
	for _, b := range bufs {
		l.Put(b)
	}
	cycle := func() { // the flow: flow buffers taken at once, then given back
		for i := range flow {
			bufs[i] = l.Get()
		}
		for i := range flow {
			l.Put(bufs[i])
		}
	}
	for range 20 * TrimPeriod / flow { // twenty periods
		cycle()
	}
	if n := len(l.free); n < flow || n > flow+1 { // halving stops at one spare
		t.Fatalf("%d free after twenty periods of a flow of %d (a burst of %d before)", n, flow, burst)
	}
	if cap(l.free) > 4*flow {
		t.Errorf("the trimmed list keeps room for %d", cap(l.free))
	}
	if n := testing.AllocsPerRun(10*TrimPeriod/flow, cycle); n != 0 {
		t.Fatalf("%v allocations a cycle of the steady flow", n)
	}
}

// An untrimmed list keeps a burst's buffers.
func TestNoTrimKeepsABurst(t *testing.T) {
	var l List[int]
	bufs := make([]*int, 100)
	for i := range bufs {
		bufs[i] = l.Get()
	}
	for _, b := range bufs {
		l.Put(b)
	}
	for range 4 * TrimPeriod {
		l.Put(l.Get())
	}
	if len(l.free) != len(bufs) {
		t.Fatalf("%d free, want the burst's %d", len(l.free), len(bufs))
	}
}

// DropOldest drops the bottom of the stack, keeps the order of the rest,
// and leaves nothing reachable in the room it frees.
func TestDropOldest(t *testing.T) {
	free := make([]*int, 0, 8)
	for i := range 6 {
		free = append(free, &i)
	}
	top := free[5]
	free = DropOldest(free, 4)
	if len(free) != 2 || free[1] != top {
		t.Fatalf("after dropping 4 of 6: %v", free)
	}
	for _, p := range free[2:cap(free)] {
		if p != nil {
			t.Fatal("a dropped buffer is still reachable from the list's room")
		}
	}
}
