package session

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ghostwire/ghostwire/replication/event"
)

// TestKeptEventsAllocateNothing: a client keeping its ordered events for
// resending (until the server reports them applied) allocates nothing an
// event once its lanes' arrays have grown to what it keeps at a time —
// payloads of varying sizes, reports lagging by zero to a few events, on
// two lanes.
func TestKeptEventsAllocateNothing(t *testing.T) {
	var n clientNumbering
	n.init(event.DefaultLanes)
	var p [48]byte
	i := 0
	step := func() {
		i++
		l := i % 2 * 3 // lanes 0 and 3
		size := 16 + i*7%33
		p[0] = byte(i)
		n.sent(l, p[:size])
		if lag := uint64(i % 5); n.next[l] > lag {
			n.report(l, n.next[l]-lag)
		}
	}
	for range 1000 {
		step()
	}
	if a := testing.AllocsPerRun(2000, step); a != 0 {
		t.Fatalf("%.3f allocations an ordered event kept, want 0", a)
	}
	if len(n.kept[0].live()) == 0 && len(n.kept[3].live()) == 0 {
		t.Fatal("nothing kept: the test kept nothing to move")
	}
}

// TestKeptEventsModel: the kept events, moved to the front of their lane's
// arrays or to larger ones as events come and go, are always exactly the
// events sent and not yet reported applied (nor forgotten past
// maxKeptBytes), in order, numbers and payload bytes unchanged — through
// random sends (empty to 6 KB), reports (and stretches without any)
// and redirects (continueFrom, the
// kept events handed back in order per lane).
func TestKeptEventsModel(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) { keptModel(t, seed) })
	}
}

type modelEvent struct {
	seq     uint64
	payload []byte
}

func keptModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 77))
	const lanes = 4
	n := &clientNumbering{}
	n.init(lanes)
	n.gen = 1
	model := make([][]modelEvent, lanes)
	var next, applied [lanes]uint64
	var unkept uint64
	var inPlace, grown int
	for step := range 40000 {
		switch op := rng.IntN(10); {
		case op < 6:
			l := rng.IntN(lanes)
			size := rng.IntN(64)
			if rng.IntN(8) == 0 {
				size = rng.IntN(6 << 10)
			}
			p := make([]byte, size)
			for i := range p {
				p[i] = byte(rng.Uint32())
			}
			k := &n.kept[l]
			hadDead, oldCap := k.bhead > 0, cap(k.buf)
			n.sent(l, p)
			switch {
			case cap(k.buf) > oldCap:
				grown++
			case hadDead && k.bhead == 0 && len(k.live()) > 1:
				inPlace++
			}
			next[l]++
			model[l] = append(model[l], modelEvent{next[l], p})
			size = 0
			for _, m := range model {
				for _, e := range m {
					size += len(e.payload)
				}
			}
			for size > maxKeptBytes {
				f := 0
				for i := range model {
					if len(model[i]) > len(model[f]) {
						f = i
					}
				}
				size -= len(model[f][0].payload)
				model[f] = model[f][1:]
				unkept++
			}
		case op < 9:
			if step%5000 < 1500 {
				continue // the server silent (a redirect's wait): past maxKeptBytes
			}
			l := rng.IntN(lanes)
			seq := applied[l] + uint64(rng.IntN(5))
			if rng.IntN(40) == 0 {
				seq = max(next[l]-uint64(rng.IntN(4)), applied[l]) // caught up, or nearly
			}
			n.report(l, min(seq, next[l]))
			if s := min(seq, next[l]); s > applied[l] {
				applied[l] = s
				for len(model[l]) > 0 && model[l][0].seq <= s {
					model[l] = model[l][1:]
				}
			}
		default:
			if rng.IntN(50) != 0 || step%5000 < 1500 {
				continue
			}
			c := &clientNumbering{}
			c.init(lanes)
			resend := c.continueFrom(n)
			for l := range lanes {
				if err := sameKept(resend[l], model[l]); err != nil {
					t.Fatalf("step %d: redirect: lane %d resends %v", step, l, err)
				}
			}
			n = c
		}
		size := 0
		for l := range lanes {
			if err := sameKept(n.kept[l].live(), model[l]); err != nil {
				t.Fatalf("step %d: lane %d keeps %v", step, l, err)
			}
			for _, e := range model[l] {
				size += len(e.payload)
			}
		}
		if n.keptSize != size || n.unkept != unkept {
			t.Fatalf("step %d: keptSize %d, unkept %d; want %d, %d", step, n.keptSize, n.unkept, size, unkept)
		}
	}
	t.Logf("moved in place %d times, grown %d, %d forgotten", inPlace, grown, unkept)
	if inPlace < 3 || grown < 10 || unkept == 0 {
		t.Fatalf("moved in place %d times, grown %d, %d forgotten: the test checked little", inPlace, grown, unkept)
	}
}

func sameKept(got []keptEvent, want []modelEvent) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d events, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].seq != want[i].seq || !bytes.Equal(got[i].payload, want[i].payload) {
			return fmt.Errorf("event %d: number %d (%d bytes), want %d (%d bytes, equal %v)", i,
				got[i].seq, len(got[i].payload), want[i].seq, len(want[i].payload), bytes.Equal(got[i].payload, want[i].payload))
		}
	}
	return nil
}
