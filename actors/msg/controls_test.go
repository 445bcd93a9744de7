package msg

import "testing"

type testQueue struct {
	posts [][]PortControl // copies of each PostControls' list
}

func (q *testQueue) PostControls(cs []PortControl) {
	q.posts = append(q.posts, append([]PortControl(nil), cs...))
}

// TestControlBatchPostsEachOnceByQueue: a batch posts each Control it was
// given once, to its port's queue, in the order given; a queue's
// Controls go as one list (at most MaxControlBatch: a full one goes at
// once), and nothing is posted again by a later Flush or tick.
func TestControlBatchPostsEachOnceByQueue(t *testing.T) {
	qa, qb := new(testQueue), new(testQueue)
	cqa, cqb := &ControlQueue{Taker: qa}, &ControlQueue{Taker: qb}
	pa, pb := &ControlPort{Queue: cqa, Conn: "a"}, &ControlPort{Queue: cqb, Conn: "b"}
	var b ControlBatch
	seen := map[*Control]int{}
	for tick := range 3 {
		var added []*Control
		n := 3*MaxControlBatch/2 + 6 // qa (two in three) fills a list mid-tick
		for i := range n {
			c := &Control{Tick: uint64(tick), Player: uint64(i)}
			p := pa
			if i%3 == 2 {
				p = pb
			}
			b.Add(p, c)
			added = append(added, c)
		}
		if b.Len()+postedIn(qa, qb) != n {
			t.Fatalf("tick %d: %d waiting and %d posted of %d", tick, b.Len(), postedIn(qa, qb), n)
		}
		b.Flush()
		b.Flush() // nothing more
		if b.Len() != 0 {
			t.Fatalf("tick %d: %d Controls waiting after Flush", tick, b.Len())
		}
		var order []*Control
		for _, q := range []*testQueue{qa, qb} {
			for _, l := range q.posts {
				if len(l) == 0 || len(l) > MaxControlBatch {
					t.Fatalf("tick %d: a list of %d Controls", tick, len(l))
				}
				for _, pc := range l {
					if want := map[*testQueue]any{qa: "a", qb: "b"}[q]; pc.Conn != want {
						t.Fatalf("tick %d: a Control for another queue's port", tick)
					}
					seen[pc.Control]++
					order = append(order, pc.Control)
				}
			}
			q.posts = nil
		}
		if len(order) != n {
			t.Fatalf("tick %d: %d Controls posted, %d added", tick, len(order), n)
		}
		// Within a queue in the order added: qa's then qb's.
		k := 0
		for _, want := range [2]bool{false, true} {
			for i, c := range added {
				if (i%3 == 2) == want {
					if order[k] != c {
						t.Fatalf("tick %d: Control %d posted out of order", tick, i)
					}
					k++
				}
			}
		}
	}
	for c, n := range seen {
		if n != 1 {
			t.Fatalf("Control of tick %d player %d posted %d times", c.Tick, c.Player, n)
		}
	}
	for _, e := range b.qs {
		if e.q != nil || e.n != 0 {
			t.Fatal("a flushed batch holds a queue")
		}
	}
}

// stampQueue records, for each Control posted, how many Controls had
// been added (*made) when it was posted.
type stampQueue struct {
	made   *int
	posted map[*Control]int
}

func (q *stampQueue) PostControls(cs []PortControl) {
	for _, pc := range cs {
		q.posted[pc.Control] = *q.made
	}
}

// TestControlBatchBoundsAControlsWait: no Control waits for its post
// while more than Wait-1 others are added after it (the first players of
// a large tick are not held back for the whole tick), whatever the
// queues; each is posted once, within its queue in order.
func TestControlBatchBoundsAControlsWait(t *testing.T) {
	for _, tc := range []struct {
		name   string
		wait   int
		queues int
	}{
		{"default wait, two shards", 0, 2},
		{"wait 1 posts each at once", 1, 2},
		{"wait 7, three shards", 7, 3},
		{"wait 64, one shard", 64, 1},
		{"wait 64, four shards", 64, 4},
		{"wait past a full list", 150, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wait := tc.wait
			if wait == 0 {
				wait = DefaultControlWait
			}
			made := 0
			posted := map[*Control]int{}
			ports := make([]*ControlPort, tc.queues)
			for i := range ports {
				ports[i] = &ControlPort{Queue: &ControlQueue{Taker: &stampQueue{made: &made, posted: posted}}, Conn: i}
			}
			b := ControlBatch{Wait: tc.wait}
			for tick := range 3 {
				added := map[*Control]int{}
				n := 200 + 37*tick
				for i := range n {
					c := &Control{Tick: uint64(tick), Player: uint64(i)}
					made++
					added[c] = made
					b.Add(ports[(i*i+tick)%tc.queues], c) // uneven over the queues
				}
				b.Flush()
				if len(posted) != n {
					t.Fatalf("tick %d: %d of %d Controls posted", tick, len(posted), n)
				}
				for c, at := range posted {
					if after := at - added[c]; after > wait-1 {
						t.Fatalf("tick %d: player %d's Control posted after %d more were added, want ≤ %d",
							tick, c.Player, after, wait-1)
					}
				}
				clear(posted)
			}
		})
	}
}

func postedIn(qs ...*testQueue) int {
	n := 0
	for _, q := range qs {
		for _, l := range q.posts {
			n += len(l)
		}
	}
	return n
}

// BenchmarkControlRelease (informative): a Control got and released as
// the zone and a connection do (a player's ViewSlot: NewControl on the
// zone's goroutine, Release on the shard's), against the pool's
// (msg.NewControl, which the conn benchmarks and the cluster's proxy use).
// Here on one goroutine: the pool's best case.
func BenchmarkControlRelease(b *testing.B) {
	b.Run("pool", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			NewControl().Release()
		}
	})
	b.Run("slot", func(b *testing.B) {
		var s ViewSlot
		b.ReportAllocs()
		for b.Loop() {
			s.NewControl().Release()
		}
	})
}
