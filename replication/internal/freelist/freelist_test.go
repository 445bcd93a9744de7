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
