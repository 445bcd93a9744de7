package netsim

import (
	"testing"
	"time"
)

// fuzzConfig decodes knob bytes into a valid Config (missing bytes read as 0).
func fuzzConfig(seed uint64, k []byte) Config {
	at := func(i int) int {
		if i < len(k) {
			return int(k[i])
		}
		return 0
	}
	prob := func(i int) float64 { return float64(at(i)) / 255 }
	c := Config{
		Loss:               prob(1),
		Latency:            time.Duration(at(2)) * ms,
		Jitter:             time.Duration(at(3)) * ms / 2,
		Reorder:            prob(4) / 4,
		ReorderDelay:       time.Duration(at(5)) * ms / 4,
		AllowJitterReorder: at(0)&2 != 0,
		Duplicate:          prob(6) / 2,
		BandwidthBps:       int64(at(7)) * 50_000,
		MaxInFlight:        at(8),
		MaxPacket:          at(9) * 8,
		Seed:               seed,
	}
	if c.BandwidthBps > 0 {
		c.QueueBytes = max(at(10)*256, c.MaxPacket, DefaultMaxPacket)
	}
	if at(0)&4 != 0 {
		c.Burst = &GilbertElliott{PGoodToBad: prob(11), PBadToGood: prob(12), LossGood: prob(13) / 4, LossBad: prob(14)}
	}
	return c
}

// FuzzLink drives a Link with a random sequence of {send, advance+deliver, deliver-next,
// reconfigure} and checks the invariants after every step: conservation, the MaxInFlight bound,
// nothing delivered early or left overdue, payloads intact, no packet delivered more than twice,
// FIFO when neither jitter nor Reorder may reorder. When knobs[0] bit 0 is clear the link only has
// a fixed latency and is compared exactly against a reference FIFO queue.
func FuzzLink(f *testing.F) {
	f.Add(uint64(1), []byte{0, 0, 20}, []byte{0, 100, 0, 200, 1, 10, 2, 0, 50, 1, 30, 2, 2})
	f.Add(uint64(2), []byte{1, 25, 100, 40, 30, 0, 40, 0, 0, 0}, []byte{0, 10, 0, 20, 0, 30, 1, 5, 0, 40, 1, 200, 2, 2, 2})
	f.Add(uint64(3), []byte{3, 0, 50, 60, 80, 20, 255, 20, 3, 190, 4}, []byte{0, 255, 0, 255, 0, 255, 0, 1, 1, 1, 3, 9, 0, 4, 1, 250})
	f.Add(uint64(4), []byte{5, 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 30, 60, 10, 250}, []byte{0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 1, 1, 0, 6, 3, 1, 1})
	f.Fuzz(func(t *testing.T, seed uint64, knobs, ops []byte) {
		cfg := fuzzConfig(seed, knobs)
		modelMode := len(knobs) == 0 || knobs[0]&1 == 0
		if modelMode {
			cfg = Config{Latency: cfg.Latency, MaxInFlight: cfg.MaxInFlight, MaxPacket: cfg.MaxPacket, Seed: seed}
		}
		l, err := NewLink(cfg)
		if err != nil {
			t.Fatalf("fuzzConfig produced an invalid config %+v: %v", cfg, err)
		}
		eff := l.Config()
		boundInFlight := eff.MaxInFlight
		mayDup := cfg.Duplicate > 0
		fifo := !cfg.AllowJitterReorder && cfg.Reorder == 0

		type want struct {
			id uint64
			at time.Duration
		}
		var model []want // modelMode: expected deliveries, in order
		var now time.Duration
		var id uint64
		var lastDelivered uint64
		anyDelivered := false
		seen := map[uint64]int{}
		buf := make([]byte, MaxPacketLimit)

		deliver := func(to time.Duration) {
			l.Deliver(to, func(p []byte) {
				if len(p) < 8 {
					return // ids need 8 bytes; shorter packets are only counted
				}
				got, ok := checkPayload(p, len(p))
				if !ok {
					t.Fatalf("corrupted payload of packet %d (len %d)", got, len(p))
				}
				seen[got]++
				if seen[got] > 2 || (seen[got] > 1 && !mayDup) {
					t.Fatalf("packet %d delivered %d times", got, seen[got])
				}
				if fifo && anyDelivered && got < lastDelivered {
					t.Fatalf("FIFO link delivered packet %d after %d", got, lastDelivered)
				}
				anyDelivered, lastDelivered = true, max(lastDelivered, got)
				if modelMode {
					if len(model) == 0 || model[0].id != got || model[0].at > to {
						t.Fatalf("delivered packet %d at %v, model expects %v", got, to, model[:min(len(model), 1)])
					}
					model = model[1:]
				}
			})
			if at, ok := l.NextDelivery(); ok && at <= to {
				t.Fatalf("packet due at %v still pending after Deliver(%v)", at, to)
			}
		}

		for i := 0; i < len(ops); i++ {
			arg := 0
			if i+1 < len(ops) {
				arg = int(ops[i+1])
			}
			switch ops[i] % 4 {
			case 0: // send
				i++
				size := arg * 6 // up to 1530: some exceed MaxPacket
				if size < 8 {
					size = 8
				}
				before := l.Pending()
				l.Send(now, payload(buf[:size], id))
				if modelMode {
					if size <= eff.MaxPacket && before < eff.MaxInFlight {
						model = append(model, want{id, now + eff.Latency})
					} else if l.Pending() != before {
						t.Fatalf("rejected packet (size %d, pending %d) was queued", size, before)
					}
				}
				id++
			case 1: // advance the clock and deliver
				i++
				now += time.Duration(arg) * ms
				deliver(now)
			case 2: // jump to the next delivery
				if at, ok := l.NextDelivery(); ok {
					if at < now {
						t.Fatalf("NextDelivery %v is before the clock %v that was delivered up to", at, now)
					}
					now = max(now, at)
					deliver(now)
				}
			case 3: // reconfigure (model mode keeps its config)
				if modelMode {
					continue
				}
				k := 0
				if i+1 < len(ops) {
					k = int(ops[i+1])
				}
				i++
				nc := fuzzConfig(seed, append([]byte{byte(k)}, knobs[1:]...))
				nc.Loss, nc.MaxInFlight = float64(k%3)/2, nc.MaxInFlight+k%5
				if err := l.SetConfig(nc); err != nil {
					t.Fatalf("SetConfig(%+v): %v", nc, err)
				}
				boundInFlight = max(boundInFlight, l.Config().MaxInFlight)
				mayDup = mayDup || nc.Duplicate > 0
				fifo = fifo && !nc.AllowJitterReorder && nc.Reorder == 0
			}
			checkConservation(t, l)
			if l.Pending() > boundInFlight {
				t.Fatalf("Pending %d exceeds MaxInFlight %d", l.Pending(), boundInFlight)
			}
		}
		// Drain: everything pending must come out, and in model mode exactly what the model says.
		for l.Pending() > 0 {
			at, _ := l.NextDelivery()
			now = max(now, at)
			deliver(now)
		}
		if modelMode && len(model) != 0 {
			t.Fatalf("%d packets expected by the model never delivered", len(model))
		}
		checkConservation(t, l)
	})
}
