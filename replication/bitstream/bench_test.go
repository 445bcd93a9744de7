package bitstream

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// A game packet as ghostwire's layers will write it, to measure the stream
// on a realistic mix: a notify-style header, the control object's full
// state, a few events (a table string, a chat line), then ghost updates with
// dirty masks until the 1200-byte budget is spent.

const benchMTU = 1200

type benchGhost struct {
	index  int64
	dirty  uint // the mask: UpdatePos, UpdateRot, UpdateVel, ghostState
	pose   Pose
	health float64
	anim   int64
	class  string
}

type benchPacket struct {
	kind, seq, ack int64
	ackBits        uint64
	ackDelay       int64
	ctlPos         [3]float64
	ctlVel         [3]float64
	ctlRot         [4]float64
	ctlHealth      float64
	events         []benchEvent
	ghosts         []benchGhost
}

type benchEvent struct {
	class int64
	emote string // table string
	chat  string // literal, may be empty
}

var benchTable = func() *StringTable {
	t := NewStringTable(1024)
	for i, s := range []string{"wave", "dance", "bow", "orc_warrior", "elf_archer", "human_mage", "wolf", "chest", "fireball"} {
		_ = t.Set(i*7, s)
	}
	return t
}()

func newBenchPacket(seed uint64, ghosts int) *benchPacket {
	rng := rand.New(rand.NewPCG(seed, 1200))
	p := &benchPacket{kind: 1, seq: 40000, ack: 39990, ackBits: 0xfffffffffffffff7, ackDelay: 12,
		ctlPos: [3]float64{-120.5, 33.25, 1999.99}, ctlVel: [3]float64{3.5, -0.25, 0}, ctlRot: randomQuat(rng), ctlHealth: 0.8}
	p.events = []benchEvent{{class: 3, emote: "wave"}, {class: 9, emote: "fireball", chat: "gg wp"}, {class: 3, emote: "bow"}}
	classes := []string{"orc_warrior", "elf_archer", "human_mage", "wolf", "chest"}
	for i := range ghosts {
		g := benchGhost{index: int64(rng.IntN(1024)), class: classes[rng.IntN(len(classes))]}
		for j := range g.pose.Pos {
			g.pose.Pos[j] = rng.Float64()*4000 - 2000
			g.pose.Vel[j] = rng.Float64()*20 - 10
		}
		g.pose.Rot = randomQuat(rng)
		g.health = rng.Float64()
		g.anim = int64(rng.IntN(41))
		// Moving things change position every update, rotation and velocity
		// often, state rarely.
		for j, d := range [4]bool{true, rng.IntN(10) < 7, rng.IntN(10) < 5, i%8 == 0} {
			if d {
				g.dirty |= 1 << j
			}
		}
		p.ghosts = append(p.ghosts, g)
	}
	return p
}

// ghostState is a ghost's fourth dirty bit, after the pose's three: its
// health, animation and class.
const ghostState = 1 << 3

// ghostBits is the most a ghost update can take, so the writer knows when to stop.
var ghostBits = 1 + 10 + 4 + 3*19 + 47 + 3*12 + 7 + 6 + 11

// The packet's float formats, validated once: writePacket writes exactly
// the bits of writePacketFields, which passes the same parameters to every
// call (TestBenchPacketFormatsSameBits).
var (
	ctlPosFormat    = mustFixed(-10000, 10000, 0.01)
	ctlVelFormat    = mustQuantized(-50, 50, 14)
	ctlHealthFormat = mustQuantized(0, 1, 8)
	posFormat       = mustFixed(-2000, 2000, 0.01)
	velFormat       = mustQuantized(-50, 50, 12)
	healthFormat    = mustQuantized(0, 1, 7)
	// ghostFormat is a ghost update's index, mask (four bits: the pose's
	// three groups, then ghostState) and pose groups.
	ghostFormat = mustUpdate(NewUpdateFormat(0, 1023, 4, posFormat, velFormat))
)

func mustFixed(min, max, precision float64) FixedFormat {
	f, err := NewFixedFormat(min, max, precision)
	if err != nil {
		panic(err)
	}
	return f
}

func mustUpdate(f UpdateFormat, err error) UpdateFormat {
	if err != nil {
		panic(err)
	}
	return f
}

func mustQuantized(min, max float64, bits uint) QuantizedFormat {
	f, err := NewQuantizedFormat(min, max, bits)
	if err != nil {
		panic(err)
	}
	return f
}

// writePacketFormats and readPacketFormats are the packet through the
// formats' per-field API (the benchmark's packet before records).
func writePacketFormats(w *Writer, p *benchPacket) (ghosts int, err error) {
	// header
	_ = w.WriteRangedInt(p.kind, 0, 3)
	_ = w.WriteBits(uint64(p.seq), 16)
	_ = w.WriteBits(uint64(p.ack), 16)
	_ = w.WriteFlag(p.ackBits != math.MaxUint64)
	if p.ackBits != math.MaxUint64 {
		_ = w.WriteBits(p.ackBits, 64)
	}
	_ = w.WriteRangedInt(p.ackDelay, 0, 1023)
	// control object
	_ = w.WriteFlag(true)
	_ = ctlPosFormat.Write3(w, p.ctlPos[0], p.ctlPos[1], p.ctlPos[2])
	_ = ctlVelFormat.Write3(w, p.ctlVel[0], p.ctlVel[1], p.ctlVel[2])
	_ = w.WriteQuat(p.ctlRot)
	_ = ctlHealthFormat.Write(w, p.ctlHealth)
	// events
	for _, e := range p.events {
		_ = w.WriteFlag(true)
		_ = w.WriteRangedInt(e.class, 0, 63)
		_ = w.WriteTableString(benchTable, e.emote, 32)
		_ = w.WriteFlag(e.chat != "")
		if e.chat != "" {
			_ = w.WriteString(e.chat, 128)
		}
	}
	_ = w.WriteFlag(false)
	// ghosts until the budget is spent
	for i := range p.ghosts {
		if w.Remaining() < ghostBits+1 {
			break
		}
		g := &p.ghosts[i]
		_ = w.WriteFlag(true)
		_ = w.WriteRangedInt(g.index, 0, 1023)
		for j := range 4 {
			_ = w.WriteFlag(g.dirty>>j&1 != 0)
		}
		if g.dirty&UpdatePos != 0 {
			_ = posFormat.Write3(w, g.pose.Pos[0], g.pose.Pos[1], g.pose.Pos[2])
		}
		if g.dirty&UpdateRot != 0 {
			_ = w.WriteQuat(g.pose.Rot)
		}
		if g.dirty&UpdateVel != 0 {
			_ = velFormat.Write3(w, g.pose.Vel[0], g.pose.Vel[1], g.pose.Vel[2])
		}
		if g.dirty&ghostState != 0 {
			_ = healthFormat.Write(w, g.health)
			_ = w.WriteRangedInt(g.anim, 0, 40)
			_ = w.WriteTableString(benchTable, g.class, 32)
		}
		ghosts++
	}
	_ = w.WriteFlag(false)
	return ghosts, w.Err()
}

func readPacketFormats(r *Reader, p *benchPacket, chat []byte) ([]byte, error) {
	var err error
	var u uint64
	fail := func(e error) {
		if err == nil {
			err = e
		}
	}
	p.kind, err = r.ReadRangedInt(0, 3, "hdr.kind")
	u, e := r.ReadBits(16, "hdr.seq")
	fail(e)
	p.seq = int64(u)
	u, e = r.ReadBits(16, "hdr.ack")
	fail(e)
	p.ack = int64(u)
	p.ackBits = math.MaxUint64
	if has, e := r.ReadFlag("hdr.hasAckBits"); e != nil || has {
		fail(e)
		p.ackBits, e = r.ReadBits(64, "hdr.ackBits")
		fail(e)
	}
	p.ackDelay, e = r.ReadRangedInt(0, 1023, "hdr.ackDelay")
	fail(e)
	if _, e := r.ReadFlag("ctl.present"); e != nil {
		fail(e)
	}
	p.ctlPos[0], p.ctlPos[1], p.ctlPos[2], e = ctlPosFormat.Read3(r, "ctl.pos")
	fail(e)
	p.ctlVel[0], p.ctlVel[1], p.ctlVel[2], e = ctlVelFormat.Read3(r, "ctl.vel")
	fail(e)
	p.ctlRot, e = r.ReadQuat("ctl.rot")
	fail(e)
	p.ctlHealth, e = ctlHealthFormat.Read(r, "ctl.health")
	fail(e)
	p.events = p.events[:0]
	for {
		more, e := r.ReadFlag("event.more")
		if e != nil || !more {
			fail(e)
			break
		}
		var ev benchEvent
		ev.class, e = r.ReadRangedInt(0, 63, "event.class")
		fail(e)
		ev.emote, e = r.ReadTableString(benchTable, 32, "event.emote")
		fail(e)
		if has, e := r.ReadFlag("event.hasChat"); e != nil || has {
			fail(e)
			chat, e = r.ReadStringBytes(chat, 128, "event.chat")
			fail(e)
		}
		if err != nil {
			return chat, err
		}
		p.events = append(p.events, ev)
	}
	p.ghosts = p.ghosts[:0]
	for err == nil {
		more, e := r.ReadFlag("ghost.more")
		if e != nil || !more {
			fail(e)
			break
		}
		var g benchGhost
		g.index, e = r.ReadRangedInt(0, 1023, "ghost.index")
		fail(e)
		for j := range 4 {
			d, e := r.ReadFlag("ghost.dirty")
			if d {
				g.dirty |= 1 << j
			}
			fail(e)
		}
		if g.dirty&UpdatePos != 0 {
			g.pose.Pos[0], g.pose.Pos[1], g.pose.Pos[2], e = posFormat.Read3(r, "ghost.pos")
			fail(e)
		}
		if g.dirty&UpdateRot != 0 {
			g.pose.Rot, e = r.ReadQuat("ghost.rot")
			fail(e)
		}
		if g.dirty&UpdateVel != 0 {
			g.pose.Vel[0], g.pose.Vel[1], g.pose.Vel[2], e = velFormat.Read3(r, "ghost.vel")
			fail(e)
		}
		if g.dirty&ghostState != 0 {
			g.health, e = healthFormat.Read(r, "ghost.health")
			fail(e)
			g.anim, e = r.ReadRangedInt(0, 40, "ghost.anim")
			fail(e)
			g.class, e = r.ReadTableString(benchTable, 32, "ghost.class")
			fail(e)
		}
		p.ghosts = append(p.ghosts, g)
	}
	return chat, err
}

// writePacket and readPacket are the packet as game code writes it: the
// header and the control object as one record, the events through the
// Writer (strings), and the ghost updates as one record across the run,
// their class names among them (RecordWriter.WriteTableString).
func writePacket(w *Writer, p *benchPacket) (ghosts int, err error) {
	rec := w.Begin()
	// header
	rec.WriteRangedInt(p.kind, 0, 3)
	rec.WriteBits(uint64(p.seq), 16)
	rec.WriteBits(uint64(p.ack), 16)
	rec.WriteFlag(p.ackBits != math.MaxUint64)
	if p.ackBits != math.MaxUint64 {
		rec.WriteBits(p.ackBits, 64)
	}
	rec.WriteRangedInt(p.ackDelay, 0, 1023)
	// control object
	rec.WriteFlag(true)
	rec.WriteFixed3(&ctlPosFormat, p.ctlPos[0], p.ctlPos[1], p.ctlPos[2])
	rec.WriteQuantized3(&ctlVelFormat, p.ctlVel[0], p.ctlVel[1], p.ctlVel[2])
	rec.WriteQuat(p.ctlRot)
	rec.WriteQuantized(&ctlHealthFormat, p.ctlHealth)
	_ = rec.End()
	// events
	for _, e := range p.events {
		_ = w.WriteFlag(true)
		_ = w.WriteRangedInt(e.class, 0, 63)
		_ = w.WriteTableString(benchTable, e.emote, 32)
		_ = w.WriteFlag(e.chat != "")
		if e.chat != "" {
			_ = w.WriteString(e.chat, 128)
		}
	}
	_ = w.WriteFlag(false)
	// ghosts until the budget is spent
	rec = w.Begin()
	for i := range p.ghosts {
		if rec.Remaining() < ghostBits+1 {
			break
		}
		g := &p.ghosts[i]
		// The run's flag, the index, the dirty mask and the pose groups
		// it selects, in one call.
		rec.WriteRunUpdate(&ghostFormat, g.index, g.dirty, &g.pose)
		if g.dirty&ghostState != 0 {
			rec.WriteQuantized(&healthFormat, g.health)
			rec.WriteRangedInt(g.anim, 0, 40)
			rec.WriteTableString(benchTable, g.class, 32)
		}
		ghosts++
	}
	rec.WriteFlag(false)
	_ = rec.End()
	return ghosts, w.Err()
}

func readPacket(r *Reader, p *benchPacket, chat []byte) ([]byte, error) {
	rec := r.Begin("hdr")
	p.kind = rec.ReadRangedInt(0, 3)
	p.seq = int64(rec.ReadBits(16))
	p.ack = int64(rec.ReadBits(16))
	p.ackBits = math.MaxUint64
	if rec.ReadFlag() {
		p.ackBits = rec.ReadBits(64)
	}
	p.ackDelay = rec.ReadRangedInt(0, 1023)
	_ = rec.ReadFlag() // ctl.present
	p.ctlPos[0], p.ctlPos[1], p.ctlPos[2] = rec.ReadFixed3(&ctlPosFormat)
	p.ctlVel[0], p.ctlVel[1], p.ctlVel[2] = rec.ReadQuantized3(&ctlVelFormat)
	p.ctlRot = rec.ReadQuat()
	p.ctlHealth = rec.ReadQuantized(&ctlHealthFormat)
	if err := rec.End(); err != nil {
		return chat, err
	}
	p.events = p.events[:0]
	for {
		more, err := r.ReadFlag("event.more")
		if err != nil {
			return chat, err
		}
		if !more {
			break
		}
		var ev benchEvent
		if ev.class, err = r.ReadRangedInt(0, 63, "event.class"); err != nil {
			return chat, err
		}
		if ev.emote, err = r.ReadTableString(benchTable, 32, "event.emote"); err != nil {
			return chat, err
		}
		has, err := r.ReadFlag("event.hasChat")
		if err != nil {
			return chat, err
		}
		if has {
			if chat, err = r.ReadStringBytes(chat, 128, "event.chat"); err != nil {
				return chat, err
			}
		}
		p.events = append(p.events, ev)
	}
	p.ghosts = p.ghosts[:0]
	rec = r.Begin("ghost")
	for {
		// Decoded in place, as a real decoder updates its table's entry:
		// not built in a local and copied in by append, and not zeroed
		// first (128 bytes a ghost) — a real decoder keeps the groups an
		// update does not send, as the entry's last state. The entries
		// are reused across packets the same way (each benchmark loop
		// decodes the same packet, so a position holds the same ghost);
		// a fresh entry, past the slice's length, is zero.
		n := len(p.ghosts)
		if n < cap(p.ghosts) {
			p.ghosts = p.ghosts[:n+1]
		} else {
			p.ghosts = append(p.ghosts, benchGhost{})
		}
		g := &p.ghosts[n]
		// The run's flag, the index, the mask and the pose groups it
		// selects, in one call; the run's end leaves the entry's pose as
		// it was.
		id, dirty, more := rec.ReadRunUpdate(&ghostFormat, &g.pose)
		if !more {
			p.ghosts = p.ghosts[:n]
			break
		}
		g.index, g.dirty = id, dirty
		if g.dirty&ghostState != 0 {
			g.health = rec.ReadQuantized(&healthFormat)
			g.anim = rec.ReadRangedInt(0, 40)
			g.class = rec.ReadTableString(benchTable, 32)
		}
	}
	return chat, rec.End()
}

// writePacketFields and readPacketFields are the same packet through the
// per-field API, every call passing its range (the benchmark's packet
// before the formats).
func writePacketFields(w *Writer, p *benchPacket) (ghosts int, err error) {
	// header
	_ = w.WriteRangedInt(p.kind, 0, 3)
	_ = w.WriteBits(uint64(p.seq), 16)
	_ = w.WriteBits(uint64(p.ack), 16)
	_ = w.WriteFlag(p.ackBits != math.MaxUint64)
	if p.ackBits != math.MaxUint64 {
		_ = w.WriteBits(p.ackBits, 64)
	}
	_ = w.WriteRangedInt(p.ackDelay, 0, 1023)
	// control object
	_ = w.WriteFlag(true)
	for _, x := range p.ctlPos {
		_ = w.WriteFixed(x, -10000, 10000, 0.01)
	}
	for _, v := range p.ctlVel {
		_ = w.WriteQuantized(v, -50, 50, 14)
	}
	_ = w.WriteQuat(p.ctlRot)
	_ = w.WriteUnitFloat(p.ctlHealth, 8)
	// events
	for _, e := range p.events {
		_ = w.WriteFlag(true)
		_ = w.WriteRangedInt(e.class, 0, 63)
		_ = w.WriteTableString(benchTable, e.emote, 32)
		_ = w.WriteFlag(e.chat != "")
		if e.chat != "" {
			_ = w.WriteString(e.chat, 128)
		}
	}
	_ = w.WriteFlag(false)
	// ghosts until the budget is spent
	for i := range p.ghosts {
		if w.Remaining() < ghostBits+1 {
			break
		}
		g := &p.ghosts[i]
		_ = w.WriteFlag(true)
		_ = w.WriteRangedInt(g.index, 0, 1023)
		for j := range 4 {
			_ = w.WriteFlag(g.dirty>>j&1 != 0)
		}
		if g.dirty&UpdatePos != 0 {
			_ = w.WriteFixed(g.pose.Pos[0], -2000, 2000, 0.01)
			_ = w.WriteFixed(g.pose.Pos[1], -2000, 2000, 0.01)
			_ = w.WriteFixed(g.pose.Pos[2], -2000, 2000, 0.01)
		}
		if g.dirty&UpdateRot != 0 {
			_ = w.WriteQuat(g.pose.Rot)
		}
		if g.dirty&UpdateVel != 0 {
			_ = w.WriteQuantized(g.pose.Vel[0], -50, 50, 12)
			_ = w.WriteQuantized(g.pose.Vel[1], -50, 50, 12)
			_ = w.WriteQuantized(g.pose.Vel[2], -50, 50, 12)
		}
		if g.dirty&ghostState != 0 {
			_ = w.WriteUnitFloat(g.health, 7)
			_ = w.WriteRangedInt(g.anim, 0, 40)
			_ = w.WriteTableString(benchTable, g.class, 32)
		}
		ghosts++
	}
	_ = w.WriteFlag(false)
	return ghosts, w.Err()
}

func readPacketFields(r *Reader, p *benchPacket, chat []byte) ([]byte, error) {
	var err error
	var u uint64
	fail := func(e error) {
		if err == nil {
			err = e
		}
	}
	p.kind, err = r.ReadRangedInt(0, 3, "hdr.kind")
	u, e := r.ReadBits(16, "hdr.seq")
	fail(e)
	p.seq = int64(u)
	u, e = r.ReadBits(16, "hdr.ack")
	fail(e)
	p.ack = int64(u)
	p.ackBits = math.MaxUint64
	if has, e := r.ReadFlag("hdr.hasAckBits"); e != nil || has {
		fail(e)
		p.ackBits, e = r.ReadBits(64, "hdr.ackBits")
		fail(e)
	}
	p.ackDelay, e = r.ReadRangedInt(0, 1023, "hdr.ackDelay")
	fail(e)
	if _, e := r.ReadFlag("ctl.present"); e != nil {
		fail(e)
	}
	for j := range p.ctlPos {
		p.ctlPos[j], e = r.ReadFixed(-10000, 10000, 0.01, "ctl.pos")
		fail(e)
	}
	for j := range p.ctlVel {
		p.ctlVel[j], e = r.ReadQuantized(-50, 50, 14, "ctl.vel")
		fail(e)
	}
	p.ctlRot, e = r.ReadQuat("ctl.rot")
	fail(e)
	p.ctlHealth, e = r.ReadUnitFloat(8, "ctl.health")
	fail(e)
	p.events = p.events[:0]
	for {
		more, e := r.ReadFlag("event.more")
		if e != nil || !more {
			fail(e)
			break
		}
		var ev benchEvent
		ev.class, e = r.ReadRangedInt(0, 63, "event.class")
		fail(e)
		ev.emote, e = r.ReadTableString(benchTable, 32, "event.emote")
		fail(e)
		if has, e := r.ReadFlag("event.hasChat"); e != nil || has {
			fail(e)
			chat, e = r.ReadStringBytes(chat, 128, "event.chat")
			fail(e)
		}
		if err != nil {
			return chat, err
		}
		p.events = append(p.events, ev)
	}
	p.ghosts = p.ghosts[:0]
	for err == nil {
		more, e := r.ReadFlag("ghost.more")
		if e != nil || !more {
			fail(e)
			break
		}
		var g benchGhost
		g.index, e = r.ReadRangedInt(0, 1023, "ghost.index")
		fail(e)
		for j := range 4 {
			d, e := r.ReadFlag("ghost.dirty")
			if d {
				g.dirty |= 1 << j
			}
			fail(e)
		}
		if g.dirty&UpdatePos != 0 {
			for j := range g.pose.Pos {
				g.pose.Pos[j], e = r.ReadFixed(-2000, 2000, 0.01, "ghost.pos")
				fail(e)
			}
		}
		if g.dirty&UpdateRot != 0 {
			g.pose.Rot, e = r.ReadQuat("ghost.rot")
			fail(e)
		}
		if g.dirty&UpdateVel != 0 {
			for j := range g.pose.Vel {
				g.pose.Vel[j], e = r.ReadQuantized(-50, 50, 12, "ghost.vel")
				fail(e)
			}
		}
		if g.dirty&ghostState != 0 {
			g.health, e = r.ReadUnitFloat(7, "ghost.health")
			fail(e)
			g.anim, e = r.ReadRangedInt(0, 40, "ghost.anim")
			fail(e)
			g.class, e = r.ReadTableString(benchTable, 32, "ghost.class")
			fail(e)
		}
		p.ghosts = append(p.ghosts, g)
	}
	return chat, err
}

// The benchmark's packet must be what it claims: nearly the full budget,
// decoded field for field within quantization.
func TestBenchPacketRoundTrip(t *testing.T) {
	in := newBenchPacket(1, 200)
	w := NewWriter(make([]byte, benchMTU))
	n, err := writePacket(w, in)
	if err != nil {
		t.Fatal(err)
	}
	if w.Len() < benchMTU-ghostBits/8-1 {
		t.Fatalf("packet is %d bytes, want nearly %d", w.Len(), benchMTU)
	}
	out := &benchPacket{events: make([]benchEvent, 0, 8), ghosts: make([]benchGhost, 0, 256)}
	chat, err := readPacket(NewReader(w.Bytes()), out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.ghosts) != n || len(out.events) != 3 || string(chat) != "gg wp" || out.ackBits != in.ackBits || out.seq != in.seq {
		t.Fatalf("decoded %d ghosts (wrote %d), %d events, chat %q", len(out.ghosts), n, len(out.events), chat)
	}
	posErr := FixedMaxError(-2000, 2000, 0.01)
	for i, g := range out.ghosts {
		want := in.ghosts[i]
		if g.index != want.index || g.dirty != want.dirty {
			t.Fatalf("ghost %d: header differs", i)
		}
		for j := range g.pose.Pos {
			if math.Abs(g.pose.Pos[j]-want.pose.Pos[j]) > posErr {
				t.Fatalf("ghost %d: position %v, want %v", i, g.pose.Pos, want.pose.Pos)
			}
		}
		if want.dirty&UpdateRot != 0 && QuatAngle(g.pose.Rot, want.pose.Rot) > QuatMaxAngle(QuatBits) {
			t.Fatalf("ghost %d: rotation off", i)
		}
		if want.dirty&ghostState != 0 && (g.class != want.class || g.anim != want.anim) {
			t.Fatalf("ghost %d: state %q %d, want %q %d", i, g.class, g.anim, want.class, want.anim)
		}
	}
	t.Logf("%d bytes, %d ghosts", w.Len(), n)
}

// The records' packet and the formats' packet are the per-field packet
// bit for bit, over many seeds (each a different mix of dirty flags,
// positions and rotations), and the three decoders return the same values
// from it.
func TestBenchPacketFormatsSameBits(t *testing.T) {
	paths := []struct {
		name  string
		write func(*Writer, *benchPacket) (int, error)
		read  func(*Reader, *benchPacket, []byte) ([]byte, error)
	}{
		{"records", writePacket, readPacket},
		{"formats", writePacketFormats, readPacketFormats},
	}
	for seed := range uint64(200) {
		in := newBenchPacket(seed, 200)
		wo := NewWriter(make([]byte, benchMTU))
		no, errO := writePacketFields(wo, in)
		outO := &benchPacket{ghosts: make([]benchGhost, 0, 256)}
		if _, err := readPacketFields(NewReader(wo.Bytes()), outO, nil); err != nil || errO != nil {
			t.Fatalf("seed %d: fields: write %v, read %v", seed, errO, err)
		}
		for _, path := range paths {
			wf := NewWriter(make([]byte, benchMTU))
			nf, errF := path.write(wf, in)
			if errF != nil || nf != no {
				t.Fatalf("seed %d: %s wrote %d ghosts (%v), fields %d", seed, path.name, nf, errF, no)
			}
			if wf.BitLen() != wo.BitLen() || !bytes.Equal(wf.Bytes(), wo.Bytes()) {
				t.Fatalf("seed %d: %s wrote %d bits, fields %d; first difference at byte %d", seed, path.name, wf.BitLen(), wo.BitLen(), firstByteDiff(wf.Bytes(), wo.Bytes()))
			}
			outF := &benchPacket{ghosts: make([]benchGhost, 0, 256)}
			if _, err := path.read(NewReader(wo.Bytes()), outF, nil); err != nil {
				t.Fatalf("seed %d: %s read: %v", seed, path.name, err)
			}
			if !reflect.DeepEqual(outF, outO) {
				t.Fatalf("seed %d: the %s decoder differs from the fields'", seed, path.name)
			}
		}
	}
}

func firstByteDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// BenchmarkPacketRoundTrip writes and reads one 1200-byte packet of mixed
// fields (target ≤ 2 µs, 0 allocs).
func BenchmarkPacketRoundTrip(b *testing.B) {
	in := newBenchPacket(1, 200)
	buf := make([]byte, benchMTU)
	out := &benchPacket{events: make([]benchEvent, 0, 8), ghosts: make([]benchGhost, 0, 256)}
	chat := make([]byte, 0, 128)
	var w Writer
	var r Reader
	var ghosts, bytes int
	b.ReportAllocs()
	for b.Loop() {
		w.Reset(buf)
		n, err := writePacket(&w, in)
		if err != nil {
			b.Fatal(err)
		}
		r.Reset(w.Bytes())
		if chat, err = readPacket(&r, out, chat); err != nil || len(out.ghosts) != n {
			b.Fatal(err)
		}
		ghosts, bytes = n, w.Len()
	}
	b.SetBytes(int64(bytes))
	b.ReportMetric(float64(ghosts), "ghosts/pkt")
}

// The two halves of BenchmarkPacketRoundTrip, to show where the time goes.
func BenchmarkPacketWrite(b *testing.B) {
	in := newBenchPacket(1, 200)
	buf := make([]byte, benchMTU)
	var w Writer
	b.ReportAllocs()
	for b.Loop() {
		w.Reset(buf)
		if _, err := writePacket(&w, in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPacketRead(b *testing.B) {
	w := NewWriter(make([]byte, benchMTU))
	if _, err := writePacket(w, newBenchPacket(1, 200)); err != nil {
		b.Fatal(err)
	}
	out := &benchPacket{events: make([]benchEvent, 0, 8), ghosts: make([]benchGhost, 0, 256)}
	chat := make([]byte, 0, 128)
	var r Reader
	b.ReportAllocs()
	for b.Loop() {
		r.Reset(w.Bytes())
		var err error
		if chat, err = readPacket(&r, out, chat); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPacketRoundTripFields is BenchmarkPacketRoundTrip through the
// per-field API (every call re-validating its range): the same packet,
// bit for bit.
func BenchmarkPacketRoundTripFields(b *testing.B) {
	in := newBenchPacket(1, 200)
	buf := make([]byte, benchMTU)
	out := &benchPacket{events: make([]benchEvent, 0, 8), ghosts: make([]benchGhost, 0, 256)}
	chat := make([]byte, 0, 128)
	var w Writer
	var r Reader
	b.ReportAllocs()
	for b.Loop() {
		w.Reset(buf)
		n, err := writePacketFields(&w, in)
		if err != nil {
			b.Fatal(err)
		}
		r.Reset(w.Bytes())
		if chat, err = readPacketFields(&r, out, chat); err != nil || len(out.ghosts) != n {
			b.Fatal(err)
		}
	}
}

// Per-operation costs: each writes a field into a reused buffer (restarting
// when full), or reads fields back from a full one.
func BenchmarkOps(b *testing.B) {
	tab := benchTable
	var q [4]float64
	normalize(q[:], []float64{0.1, -0.7, 0.3, 0.6})
	ops := []struct {
		name  string
		write func(w *Writer) error
		read  func(r *Reader) error
	}{
		{"Flag", func(w *Writer) error { return w.WriteFlag(true) }, func(r *Reader) error { _, err := r.ReadFlag("f"); return err }},
		{"Bits13", func(w *Writer) error { return w.WriteBits(0x1234, 13) }, func(r *Reader) error { _, err := r.ReadBits(13, "f"); return err }},
		{"Bits64", func(w *Writer) error { return w.WriteBits(1<<63|1, 64) }, func(r *Reader) error { _, err := r.ReadBits(64, "f"); return err }},
		{"RangedInt", func(w *Writer) error { return w.WriteRangedInt(517, 0, 1023) }, func(r *Reader) error { _, err := r.ReadRangedInt(0, 1023, "f"); return err }},
		{"Quantized", func(w *Writer) error { return w.WriteQuantized(12.5, -50, 50, 12) }, func(r *Reader) error { _, err := r.ReadQuantized(-50, 50, 12, "f"); return err }},
		{"Fixed", func(w *Writer) error { return w.WriteFixed(-1999.9, -2000, 2000, 0.01) }, func(r *Reader) error { _, err := r.ReadFixed(-2000, 2000, 0.01, "f"); return err }},
		{"SignedFloat", func(w *Writer) error { return w.WriteSignedFloat(-0.3, 10) }, func(r *Reader) error { _, err := r.ReadSignedFloat(10, "f"); return err }},
		{"Float32", func(w *Writer) error { return w.WriteFloat32(3.5) }, func(r *Reader) error { _, err := r.ReadFloat32("f"); return err }},
		{"UnitVector16", func(w *Writer) error { return w.WriteUnitVector(0.1, -0.2, 0.9, 16) }, func(r *Reader) error { _, _, _, err := r.ReadUnitVector(16, "f"); return err }},
		{"Quat", func(w *Writer) error { return w.WriteQuat(q) }, func(r *Reader) error { _, err := r.ReadQuat("f"); return err }},
		{"TableHit", func(w *Writer) error { return w.WriteTableString(tab, "elf_archer", 32) }, func(r *Reader) error { _, err := r.ReadTableString(tab, 32, "f"); return err }},
		{"String16", func(w *Writer) error { return w.WriteString("sixteen bytes!!!", 64) }, func(r *Reader) error { _, err := r.ReadString(64, "f"); return err }},
		{"FixedFormat3", func(w *Writer) error { return posFormat.Write3(w, -1999.9, 3.25, 1999) }, func(r *Reader) error { _, _, _, err := posFormat.Read3(r, "f"); return err }},
		{"QuantizedFormat3", func(w *Writer) error { return velFormat.Write3(w, 12.5, -3, 49) }, func(r *Reader) error { _, _, _, err := velFormat.Read3(r, "f"); return err }},
		{"Gamma", func(w *Writer) error { return w.WriteGamma(37) }, func(r *Reader) error { _, err := r.ReadGamma("f"); return err }},
	}
	buf := make([]byte, benchMTU)
	for _, o := range ops {
		b.Run("Write"+o.name, func(b *testing.B) {
			w := NewWriter(buf)
			b.ReportAllocs()
			for b.Loop() {
				if o.write(w) != nil {
					w.Reset(buf)
				}
			}
		})
		b.Run("Read"+o.name, func(b *testing.B) {
			w := NewWriter(buf)
			for o.write(w) == nil {
			}
			data := w.Bytes()
			var r Reader
			r.Reset(data)
			b.ReportAllocs()
			for b.Loop() {
				if o.read(&r) != nil {
					r.Reset(data)
				}
			}
		})
	}
}

// BenchmarkReadShortPacket reads a 20-byte packet as 32 fields of 5 bits:
// a short packet's last 8 bytes are past the fast path's window, so its
// last fields take the slow path (a control or acknowledgement packet).
func BenchmarkReadShortPacket(b *testing.B) {
	w := NewWriter(make([]byte, 20))
	for i := range 32 {
		_ = w.WriteBits(uint64(i), 5)
	}
	data := w.Bytes()
	var r Reader
	var sum uint64
	b.ReportAllocs()
	for b.Loop() {
		r.Reset(data)
		for range 32 {
			v, err := r.ReadBits(5, "f")
			if err != nil {
				b.Fatal(err)
			}
			sum += v
		}
	}
	if sum == 0 {
		b.Fatal("nothing read")
	}
}

// BenchmarkWriteShortPacket writes 32 fields of 5 bits into a 20-byte
// buffer: the fields in its last 8 bytes take the slow path.
func BenchmarkWriteShortPacket(b *testing.B) {
	buf := make([]byte, 20)
	var w Writer
	b.ReportAllocs()
	for b.Loop() {
		w.Reset(buf)
		for i := range 32 {
			if err := w.WriteBits(uint64(i), 5); err != nil {
				b.Fatal(err)
			}
		}
	}
}
