package msg

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

type nopQueue struct{ posted int }

func (q *nopQueue) PostControls(cs []PortControl) { q.posted += len(cs) }

// BenchmarkControlBatchAdd (informative): a zone tick's Controls to 1,000
// players through a ControlBatch, their ports spread over a node's shards
// as Pool.Open spreads connections (round robin: consecutive players on
// different shards), posted to takers that do nothing. An op is one
// tick; ns/control is Add's and Flush's share of one Control.
func BenchmarkControlBatchAdd(b *testing.B) {
	for _, shards := range []int{1, 2, 4} {
		b.Run("shards="+strconv.Itoa(shards), func(b *testing.B) {
			const players = 1000
			qs := make([]ControlQueue, shards)
			for i := range qs {
				qs[i].Taker = new(nopQueue)
			}
			ports := make([]ControlPort, players)
			for i := range ports {
				ports[i] = ControlPort{Queue: &qs[i%shards], Conn: i}
			}
			cs := make([]Control, players)
			var batch ControlBatch
			b.ReportAllocs()
			for b.Loop() {
				for i := range ports {
					batch.Add(&ports[i], &cs[i])
				}
				batch.Flush()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*players), "ns/control")
		})
	}
}

// TestControlBatchOrderAcrossQueues: over ticks whose ports come in
// cycles over the queues (as Pool.Open spreads connections), in runs on
// one queue, or at random, with waits short and long, each queue is
// posted exactly the Controls added for its ports, each once and in the
// order added, and nothing stays after Flush.
func TestControlBatchOrderAcrossQueues(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, nq := range []int{1, 2, 3, 5} {
		qs := make([]*testQueue, nq)
		cqs := make([]*ControlQueue, nq)
		for i := range qs {
			qs[i] = new(testQueue)
			cqs[i] = &ControlQueue{Taker: qs[i]}
		}
		b := ControlBatch{Wait: []int{0, 1, 7, 200}[rng.IntN(4)]}
		for tick := range 40 {
			n := rng.IntN(3 * MaxControlBatch)
			want := make([][]*Control, nq)
			for i := range n {
				var k int
				switch tick % 3 {
				case 0:
					k = i % nq // a cycle
				case 1:
					k = i * nq / max(n, 1) // runs
				default:
					k = rng.IntN(nq)
				}
				c := &Control{Tick: uint64(tick), Player: uint64(i)}
				b.Add(&ControlPort{Queue: cqs[k], Conn: k}, c)
				want[k] = append(want[k], c)
			}
			b.Flush()
			if b.Len() != 0 {
				t.Fatalf("%d queues, tick %d: %d waiting after Flush", nq, tick, b.Len())
			}
			for k, q := range qs {
				var got []*Control
				for _, l := range q.posts {
					if len(l) == 0 || len(l) > MaxControlBatch {
						t.Fatalf("%d queues, tick %d: a list of %d", nq, tick, len(l))
					}
					for _, pc := range l {
						if pc.Conn != k {
							t.Fatalf("%d queues, tick %d: queue %d was posted port %v's Control", nq, tick, k, pc.Conn)
						}
						got = append(got, pc.Control)
					}
				}
				q.posts = nil
				if len(got) != len(want[k]) {
					t.Fatalf("%d queues, tick %d: queue %d was posted %d Controls, %d were added", nq, tick, k, len(got), len(want[k]))
				}
				for i := range got {
					if got[i] != want[k][i] {
						t.Fatalf("%d queues, tick %d: queue %d's Control %d out of order", nq, tick, k, i)
					}
				}
			}
		}
	}
}
