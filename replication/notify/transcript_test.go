package notify

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// transcriptDigests pins what two Conns do to each other over random
// lossy, reordering, duplicating links: every packet's bytes, every
// decode and accept result, every fate and, after every event, Stats,
// InFlight, Newest and the RTT and loss estimates. The values are main's
// at 23ec986, where the Conn was 240 bytes of 64-bit sequences, counters
// and flags: the 192-byte Conn (horizon and confirmed F as distances in
// a byte, headSeq and firstPending as their low 32 bits, pending and
// Received derived, the ring's sizing in rare's object) must behave the
// same, byte for byte.
var transcriptDigests = map[string]uint64{
	"default":      0xd5c831aedfe3b3a5,
	"k1":           0x593667bdd0782bee,
	"k32-win1024":  0x809781a2f222853d,
	"win300-fl16":  0x5760a093b5f51dd8,
	"heavy-loss":   0xf1bcecc402b8a68b,
	"wrap-near-32": 0x47542db462ee8b9d,
}

func TestTranscriptIsMain(t *testing.T) {
	type tc struct {
		name       string
		cfg        func(*Config)
		loss, dup  float64
		jitter     time.Duration
		start      uint64
		steps      int
		answerOdds int // b answers one packet in this many
	}
	cases := []tc{
		{"default", func(*Config) {}, 0.05, 0.02, 30 * ms, 0, 4000, 1},
		{"k1", func(c *Config) { c.ReorderThreshold = 1 }, 0.10, 0.05, 20 * ms, 1000, 3000, 1},
		{"k32-win1024", func(c *Config) { c.ReorderThreshold = 32; c.AckWindow = 1024 }, 0.10, 0.02, 80 * ms, 77, 3000, 2},
		{"win300-fl16", func(c *Config) { c.AckWindow = 300; c.MaxInFlight = 16 }, 0.15, 0.02, 40 * ms, 5, 3000, 3},
		{"heavy-loss", func(*Config) {}, 0.45, 0.10, 60 * ms, 300, 3000, 1},
		{"wrap-near-32", func(*Config) {}, 0.08, 0.03, 50 * ms, 1<<32 - 700, 3000, 1},
	}
	var seen transcriptSeen
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			c.cfg(&cfg)
			got := transcript(t, cfg, c.start, c.loss, c.dup, c.jitter, c.steps, c.answerOdds, &seen)
			if want := transcriptDigests[c.name]; got != want {
				t.Errorf("transcript digest %#x, want main's %#x", got, want)
			}
		})
	}
	// The links must reach what the 192-byte layout changed: gaps given up
	// (the horizon's byte), rejections and forced drops (rare's object), a
	// ring grown past minRecs and trimmed back (its sizing there).
	if seen.abandoned == 0 || seen.duplicates == 0 || seen.stale == 0 || seen.forced == 0 || seen.grown == 0 || seen.trimmed == 0 {
		t.Fatalf("transcripts missed a path: %+v", seen)
	}
}

// transcriptSeen counts what the transcripts exercised.
type transcriptSeen struct {
	abandoned, duplicates, stale, forced, grown, trimmed uint64
}

// transcript runs a and b (a starting its numbering at start, b at
// start/2) for steps sends of a, b sending one for every answerOdds of
// a's, over links that lose, duplicate and delay by up to jitter, and
// returns the digest of everything observable.
func transcript(t *testing.T, cfg Config, start uint64, loss, dup float64, jitter time.Duration, steps, answerOdds int, seen *transcriptSeen) uint64 {
	t.Helper()
	var conns [2]*Conn
	starts := [2]uint64{start, start / 2}
	for i := range conns {
		c, err := newConn(cfg, starts[i], starts[1-i])
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	rng := rand.New(rand.NewPCG(uint64(steps), start))
	hash := fnv.New64a()
	var word [8]byte
	put := func(v uint64) {
		binary.LittleEndian.PutUint64(word[:], v)
		hash.Write(word[:])
	}
	type inFlight struct {
		at  time.Duration
		to  int
		pkt []byte
	}
	var net []inFlight
	var w bitstream.Writer
	var r bitstream.Reader
	var buf [512]byte
	var fates []Fate
	observe := func(c *Conn) {
		st := c.Stats()
		for _, v := range []uint64{st.Sent, st.Delivered, st.Dropped, st.ForcedDrops, st.HeaderBits, st.RTTSamples,
			st.Received, st.Duplicates, st.Stale, st.TooFar, st.BadHeader, st.Abandoned, st.WindowEvicted} {
			put(v)
		}
		newest, ok := c.Newest()
		if !ok {
			newest = math.MaxUint64 // Newest's value is unspecified before a packet
		}
		put(newest)
		put(uint64(c.InFlight()))
		put(c.NextSeq())
		put(uint64(c.RTT()))
		put(uint64(c.RTTVar()))
		put(uint64(c.Jitter()))
		put(math.Float64bits(c.LossRate()))
		put(b2u(c.ForcedAny()))
	}
	now := time.Duration(0)
	ringLen := map[*Conn]int{}
	send := func(from int) {
		c := conns[from]
		w.Reset(buf[:])
		typ := PacketType(rng.IntN(3))
		seq, err := c.WriteHeader(&w, typ, now)
		put(seq)
		put(errCode(err))
		if err != nil {
			return
		}
		pkt := append([]byte(nil), w.Bytes()...)
		hash.Write(pkt)
		for copies := 1 + b2i(rng.Float64() < dup); copies > 0; copies-- {
			if rng.Float64() < loss {
				continue
			}
			net = append(net, inFlight{at: now + 20*ms + time.Duration(rng.Int64N(int64(jitter)+1)), to: 1 - from, pkt: pkt})
		}
	}
	for i := range steps {
		now += time.Duration(5+rng.IntN(30)) * ms
		// Deliver what is due, in arrival order (the slice is short).
		for {
			k := -1
			for j := range net {
				if net[j].at <= now && (k < 0 || net[j].at < net[k].at) {
					k = j
				}
			}
			if k < 0 {
				break
			}
			p := net[k]
			net = append(net[:k], net[k+1:]...)
			c := conns[p.to]
			r.Reset(p.pkt)
			h, err := c.ReadHeader(&r)
			put(h.Seq)
			put(errCode(err))
			if err == nil {
				put(errCode(c.Accept(h, p.at)))
			}
			observe(c)
		}
		for k, c := range conns {
			c.Tick(now)
			if (i+k)%2 == 0 {
				fates = c.PopFates(fates[:0])
			} else {
				fates = fates[:0]
				for f, ok := c.PopFate(); ok; f, ok = c.PopFate() {
					fates = append(fates, f)
				}
			}
			for _, f := range fates {
				put(f.Seq)
				put(b2u(f.Delivered))
				put(uint64(f.SentAt))
			}
			probe := c.NextSeq() - uint64(rng.IntN(40))
			sentAt, ok := c.Delivered(probe)
			put(uint64(sentAt))
			put(b2u(ok))
			observe(c)
		}
		send(0)
		if rng.IntN(answerOdds) == 0 {
			send(1)
		}
		for _, c := range conns {
			n := len(c.recs)
			if n > minRecs {
				seen.grown++
			}
			if n < ringLen[c] {
				seen.trimmed++
			}
			ringLen[c] = n
		}
	}
	for _, c := range conns {
		st := c.Stats()
		seen.abandoned += st.Abandoned
		seen.duplicates += st.Duplicates
		seen.stale += st.Stale
		seen.forced += st.ForcedDrops
	}
	return hash.Sum64()
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func b2i(b bool) int { return int(b2u(b)) }

// errCode numbers the errors a transcript meets (a read error by its
// kind only).
func errCode(err error) uint64 {
	for i, e := range []error{nil, ErrDuplicate, ErrStale, ErrTooFar, ErrBadType, ErrBadAck, ErrNotDecoded, ErrFatesPending, ErrSeqSpan} {
		if err == e {
			return uint64(i)
		}
	}
	return 99
}
