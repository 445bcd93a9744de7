package intern

import (
	"sync"
	"testing"
)

type cfg struct{ a, b int }

func TestEqualValuesShareOneCopy(t *testing.T) {
	var tab Table[cfg]
	p, q := tab.Get(cfg{1, 2}), tab.Get(cfg{1, 2})
	if p != q {
		t.Fatal("two equal values got two copies")
	}
	if r := tab.Get(cfg{1, 3}); r == p || *r != (cfg{1, 3}) {
		t.Fatalf("a different value got %p = %+v (shared %p)", r, *r, p)
	}
}

func TestTableIsBounded(t *testing.T) {
	var tab Table[cfg]
	for i := range Max + 10 {
		if got := tab.Get(cfg{i, 0}); *got != (cfg{i, 0}) {
			t.Fatalf("value %d: got %+v", i, *got)
		}
	}
	if n := len(tab.m); n != Max {
		t.Fatalf("table holds %d values, want the bound %d", n, Max)
	}
	// Past the bound a value gets a private copy each time, still equal.
	p, q := tab.Get(cfg{Max + 5, 0}), tab.Get(cfg{Max + 5, 0})
	if p == q || *p != *q {
		t.Fatalf("past the bound: %p %p, want two equal private copies", p, q)
	}
	// What was interned before the bound stays shared.
	if a, b := tab.Get(cfg{3, 0}), tab.Get(cfg{3, 0}); a != b {
		t.Fatal("an interned value lost its shared copy")
	}
}

func TestConcurrentGet(t *testing.T) {
	var tab Table[cfg]
	var wg sync.WaitGroup
	got := make([]*cfg, 8)
	for i := range got {
		wg.Add(1)
		go func() { defer wg.Done(); got[i] = tab.Get(cfg{7, 7}) }()
	}
	wg.Wait()
	for _, p := range got[1:] {
		if p != got[0] {
			t.Fatal("concurrent Gets of one value got different copies")
		}
	}
}
