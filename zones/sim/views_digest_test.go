// The digests are amd64's without fused multiply-adds: Go fuses float
// multiply-adds on arm64, ppc64, s390x, riscv64 and amd64.v3, which rounds
// positions and priorities otherwise.
//
//go:build amd64 && !amd64.v3

package sim

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/move"
)

// TestViewsDigest pins every view a zone builds, bit for bit: for each tick
// of a crowd and of a sparse zone, every view's references (AppendViewRefs:
// entry, held or live, and priority bucket, in order) and its entries
// (AppendView: entity and float priority, in order), through overload
// levels 0–3 (held far members, interest every 2nd and 4th tick) and with
// far members unheld (FarEvery 1), and with players teleported (into and
// out of each other's hysteresis bands), leaving and joining (slots
// reused); and the interest sets' entries and
// leaves and the held entries served, counted. The digests are main's before the
// interest scan and the references were reworked for speed (h-zone,
// 2026-11-29); a change that moves any view by one bit — a reference, a
// bucket, a float's rounding, the order — fails here. If a change of
// behaviour is meant, say why in the commit and take the new digests.
func TestViewsDigest(t *testing.T) {
	for _, tc := range []struct {
		name  string
		side  float64
		far   int
		want  uint64
		level func(tick int) int
		churn bool // players teleported, leaving and joining every tick
	}{
		{name: "crowd", side: 380, want: 0x99d21052091ce362},
		{name: "crowd far every tick", side: 380, far: 1, want: 0x7beb3c66d6b2fdda},
		{name: "crowd overloaded", side: 380, want: 0x733a3f9310c13602, level: func(tick int) int { return tick / 15 % 4 }},
		{name: "sparse", side: 0, want: 0xa411083b89bc74e4},
		{name: "crowd churning", side: 380, want: 0x90564072c9dbb05d, churn: true},
		{name: "crowd churning overloaded", side: 380, want: 0x5ae19d6ddb451439, churn: true, level: func(tick int) int { return tick / 10 % 4 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tweak func(*Config)
			if tc.far != 0 {
				tweak = func(c *Config) { c.FarEvery = tc.far }
			}
			z, now := crowdZoneWith(t, 250, tc.side, tweak)
			h := fnv.New64a()
			var b [8]byte
			put := func(v uint64) {
				binary.LittleEndian.PutUint64(b[:], v)
				h.Write(b[:])
			}
			var mv []move.Move
			var refs []ghost.ViewRef
			var ents []ghost.ViewEntry
			n := 0
			for tick := range 80 {
				if tc.level != nil {
					z.SetLevel(tc.level(tick))
				}
				if tc.churn {
					churn(t, z, now, tick)
				}
				now += 50 * time.Millisecond
				crowdInput(z, 250, now, tick, mv)
				out := z.Step(now)
				for _, v := range out.Views {
					put(v.Entity)
					refs = z.AppendViewRefs(refs[:0], v)
					put(uint64(len(refs)))
					for _, r := range refs {
						put(uint64(r))
					}
					ents = z.AppendView(ents[:0], v)
					put(uint64(len(ents)))
					for _, e := range ents {
						put(e.Entity<<32 | uint64(math.Float32bits(e.Priority)))
					}
					n += len(refs)
				}
			}
			is := z.track.Stats()
			put(is.Enters)
			put(is.Leaves)
			put(z.Stats().HeldEntries)
			got := h.Sum64()
			t.Logf("%s: %d references, %d enters, %d leaves, %d held, digest %#x", tc.name, n, is.Enters, is.Leaves, z.Stats().HeldEntries, got)
			if got != tc.want {
				t.Errorf("%s: views digest %#x, want %#x", tc.name, got, tc.want)
			}
		})
	}
}
