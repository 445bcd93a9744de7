package hostcheck

import "testing"

// The loops compute what they say, step by step (so neither is a loop the
// compiler may fold, and a benchmark of either times that many steps).
func TestLoopsStepByStep(t *testing.T) {
	for _, n := range []int{0, 1, 2, 7, 1000} {
		x := uint64(12345)
		for range n {
			x = x*6364136223846793005 + 1442695040888963407
		}
		if got := Chain(12345, n); got != x {
			t.Fatalf("Chain(12345, %d) = %#x, want %#x", n, got, x)
		}
		v := [6]uint64{12345, 12346, 12347, 12348, 12349, 12350}
		for range n {
			for i, k := range [6]uint64{7, 11, 13, 17, 19, 23} {
				v[i] += v[(i+1)%6] ^ k
			}
		}
		if got, want := Wide(12345, n), v[0]^v[1]^v[2]^v[3]^v[4]^v[5]; got != want {
			t.Fatalf("Wide(12345, %d) = %#x, want %#x", n, got, want)
		}
	}
	if Chain(1, 3) == Chain(1, 4) || Wide(1, 3) == Wide(1, 4) {
		t.Fatal("a step changes nothing")
	}
}

var sink uint64

const steps = 1 << 20

// BenchmarkChain reports ns/iter: the time of one step of Chain.
func BenchmarkChain(b *testing.B) {
	for b.Loop() {
		sink = Chain(sink, steps)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/steps, "ns/iter")
}

// BenchmarkWide reports ns/iter: the time of one step of Wide.
func BenchmarkWide(b *testing.B) {
	for b.Loop() {
		sink = Wide(sink, steps)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/steps, "ns/iter")
}
