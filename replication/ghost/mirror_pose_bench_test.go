package ghost

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"io"
	"os"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// BenchmarkMirrorPose is a renderer's frame (session.Client.View): one op
// draws every live ghost of a mirror fed the recorded stream of
// TestMirrorPosesRecorded (its first 300 sections, ≈ 30 ghosts) with
// Mirror.Pose, at 16 ms frames past the last section: interpolated, and the
// positions computed from a snapshot's codes (the history keeps no float64s).
func BenchmarkMirrorPose(b *testing.B) {
	zb, err := os.ReadFile(posesGolden)
	if err != nil {
		b.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(zb))
	if err != nil {
		b.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		b.Fatal(err)
	}
	n := int(binary.LittleEndian.Uint32(raw))
	s, err := decodePoseStream(raw[4+8*n:])
	if err != nil {
		b.Fatal(err)
	}
	reg, _, _ := newTestRegistry(b)
	m, err := NewMirror(reg, DefaultMirrorConfig())
	if err != nil {
		b.Fatal(err)
	}
	var r bitstream.Reader
	s = s[:300]
	for _, a := range s {
		r.Reset(a.data)
		if err := m.Read(&r, a.at); err != nil {
			b.Fatal(err)
		}
	}
	t0 := s[len(s)-1].at
	var sink float64
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		now := t0 + time.Duration(i%4)*16*time.Millisecond
		for j := range m.Len() {
			p, _ := m.Pose(m.At(j), now)
			sink += p.Pos[0] + p.Yaw
		}
		i++
	}
	b.ReportMetric(float64(m.Len()), "ghosts/op")
	if sink == 0 {
		b.Log(sink)
	}
}
