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
