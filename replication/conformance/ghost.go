package conformance

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/ghostwire/ghostwire/replication/bitstream"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/notify"
)

type gState struct {
	Pos    [3]f64    `json:"pos"`
	Vel    [3]f64    `json:"vel"`
	Yaw    f64       `json:"yaw"`
	Health int32     `json:"health"`
	Flags  uint32    `json:"flags"`
	Name   string    `json:"name"`
	Extra  [4]uint32 `json:"extra"`
}

type gEntry struct {
	Entity   string  `json:"entity"`
	Class    int     `json:"class"`
	Priority float32 `json:"priority"`
	State    gState  `json:"state"`
}

type gGhost struct {
	ID     uint32 `json:"id"`
	Entity string `json:"entity"`
	Class  int    `json:"class"`
	State  gState `json:"state"`
}

type gStep struct {
	Step      string   `json:"step"`
	NowMS     int64    `json:"now_ms,omitempty"`
	View      []gEntry `json:"view,omitempty"`
	Seq       string   `json:"seq,omitempty"`
	MaxBytes  int      `json:"max_bytes,omitempty"`
	Delivered *bool    `json:"delivered,omitempty"`
	Packet    *int     `json:"packet,omitempty"`
	Bits      int      `json:"bits,omitempty"`
	Hex       string   `json:"hex,omitempty"`
	Ghosts    []gGhost `json:"ghosts,omitempty"`
}

type gScenario struct {
	Name  string  `json:"name"`
	Steps []gStep `json:"steps"`
}

var ghostSchema = []Field{
	{"vectors[]", "scenarios; each starts with a fresh server ghost table and client mirror over the stock registry: ghost.DefaultBounds, Player (class 1) and NPC (class 2) of § 6.4, no name tables"},
	{"steps[].step", "view: the zone's interest set for this client at now_ms (entity, class, priority, state); write: the table writes the ghost section of packet `seq` at now_ms into at most max_bytes; fate: notify's fate of packet `seq`; read: the client mirror reads the section of packet number `packet` (0-based index into this scenario's writes) at local time now_ms. A written packet that no read step names was lost"},
	{"steps[].view[].state, ghosts[].state", "pos and vel in m (y up), yaw in rad, health, flags, name, extra[4]; a class replicates only its groups (NPC: no velocity, no extra)"},
	{"steps[].bits, hex", "write: the ghost section alone. Normative for a client's decoder; a server reproduces it only with the reference's priorities and budget"},
	{"steps[].ghosts", "read: every ghost the mirror holds afterwards, by ghost id, with its decoded state"},
}

func npcID(zone, n uint64) uint64 { return 1<<63 | (zone+1)<<40 | n }

func ghostDoc() (doc, error) {
	bp := func(v bool) *bool { return &v }
	ip := func(v int) *int { return &v }
	player := func(x, z, yaw float64, health int32, name string, seq uint32) gEntry {
		return gEntry{Entity: "42", Class: 1, Priority: 2, State: gState{Pos: [3]f64{f64(x), 0, f64(z)}, Vel: [3]f64{5, 0, 0}, Yaw: f64(yaw), Health: health, Name: name, Extra: [4]uint32{seq, 0, 0, 0}}}
	}
	npc := func(n uint64, x, z float64) gEntry {
		return gEntry{Entity: u64(npcID(0, n)), Class: 2, Priority: 1, State: gState{Pos: [3]f64{f64(x), 0, f64(z)}, Yaw: -2.5, Health: 100}}
	}
	view := func(t int64, es ...gEntry) gStep { return gStep{Step: "view", NowMS: t, View: es} }
	write := func(seq uint64, t int64) gStep { return gStep{Step: "write", Seq: u64(seq), NowMS: t, MaxBytes: 1200} }
	fate := func(seq uint64, ok bool) gStep { return gStep{Step: "fate", Seq: u64(seq), Delivered: bp(ok)} }
	read := func(p int, t int64) gStep { return gStep{Step: "read", Packet: ip(p), NowMS: t} }

	moved := player(1.5, 2, 0.5, 1000, "p42", 3)
	moved.State.Health, moved.State.Flags, moved.State.Name = 900, 3, "p42x"
	vel := player(1.75, 2, 0.5, 900, "p42x", 4)
	vel.State.Flags = 3
	vel.State.Vel = [3]f64{-31.5, 4, 0.25}
	far := vel
	far.State.Pos = [3]f64{-1999.99, 255.5, 1999.99}
	far.State.Yaw = -3.1
	// NPC 5 turns, gets a name and flags at 1200 ms: non-default groups of
	// the NPC class in an explicit mask; its yaw is far outside ±π.
	npcNamed := npc(5, -10.2, 30.4)
	npcNamed.State.Yaw, npcNamed.State.Name, npcNamed.State.Flags = 2e9, "wolf", 0xa5
	steps := []gStep{
		view(1000, player(1, 2, 0.5, 1000, "p42", 1), npc(5, -10, 30)), write(0, 1000), read(0, 1010), fate(0, true),
		view(1050, player(1.25, 2, 0.5, 1000, "p42", 2), npc(5, -10.05, 30.1)), write(1, 1050), read(1, 1060), fate(1, true),
		view(1100, moved, npc(5, -10.1, 30.2)), write(2, 1100), read(2, 1110), fate(2, true),
		view(1150, vel, npc(5, -10.15, 30.3)), write(3, 1150), fate(3, false),
		view(1200, vel, npcNamed), write(4, 1200), read(4, 1210), fate(4, true),
		view(1250, far, npc(5, -10.25, 30.5)), write(5, 1250), read(5, 1260), fate(5, true),
		view(1300, far), write(6, 1300), read(6, 1310), fate(6, true),
		view(1350, far, npc(6, 100, -100)), write(7, 1350), read(7, 1360), fate(7, true),
		view(1400, far, npc(6, 100, -100)), write(8, 1400), read(8, 1410),
	}
	var scen []gScenario
	out, err := runGhosts(steps)
	if err != nil {
		return doc{}, err
	}
	scen = append(scen, gScenario{"a player and NPCs: create, dead reckoning, explicit masks, a lost update, an absolute jump, kill, id reuse", out})

	// Loss and reordering: position updates coded against whichever pair the
	// client may hold.
	steps = []gStep{view(2000, npc(9, 0, 7)), write(0, 2000), read(0, 2010), fate(0, true)}
	for i := 1; i <= 7; i++ {
		t := int64(2000 + 50*i)
		steps = append(steps, view(t, npc(9, float64(3*float64(i))+float64(0.37*float64(i*i)), 7-float64(0.11*float64(i*i)))), write(uint64(i), t))
	}
	// Packets 3 and 6 are lost; 2 overtakes 1 and 5 overtakes 4.
	steps = append(steps, read(2, 2110), read(1, 2115), read(4, 2215), read(5, 2260), read(7, 2360),
		fate(1, true), fate(2, true), fate(3, false), fate(4, true), fate(5, true), fate(6, false), fate(7, true))
	for i := 8; i <= 9; i++ {
		t := int64(2000 + 50*i)
		steps = append(steps, view(t, npc(9, float64(3*float64(i))+float64(0.37*float64(i*i)), 7-float64(0.11*float64(i*i)))), write(uint64(i), t))
	}
	steps = append(steps, read(9, 2460), read(8, 2465))
	out, err = runGhosts(steps)
	if err != nil {
		return doc{}, err
	}
	scen = append(scen, gScenario{"an accelerating NPC under loss and reordering: windows sized for every reference pair the client may hold", out})
	return doc{
		Description: "Ghost sections: creates, updates with the default and explicit masks, every group encoding of the stock Player and NPC classes, prediction-relative positions (dead reckoning, windows under loss and reordering, absolute), kills and id reuse. Read each section with your mirror and compare the ghosts you hold.",
		Spec:        "docs/protocol.md § 6",
		Schema:      ghostSchema,
		Vectors:     scen,
	}, nil
}

func stockRegistry() (*ghost.Registry, map[int]*ghost.Class, error) {
	reg, err := ghost.NewRegistry(ghost.DefaultBounds())
	if err != nil {
		return nil, nil, err
	}
	p, n := ghost.PlayerClass(nil), ghost.NPCClass(nil)
	if err := reg.Register(p, n); err != nil {
		return nil, nil, err
	}
	return reg, map[int]*ghost.Class{1: p, 2: n}, nil
}

func toGhostState(s gState) (ghost.State, error) {
	name, err := ghost.MakeName(s.Name)
	if err != nil {
		return ghost.State{}, err
	}
	return ghost.State{
		Pos: [3]float64{float64(s.Pos[0]), float64(s.Pos[1]), float64(s.Pos[2])},
		Vel: [3]float64{float64(s.Vel[0]), float64(s.Vel[1]), float64(s.Vel[2])},
		Yaw: float64(s.Yaw), Health: s.Health, Flags: s.Flags, Name: name, Extra: s.Extra,
	}, nil
}

func fromGhostState(s ghost.State) gState {
	return gState{
		Pos: [3]f64{f64(s.Pos[0]), f64(s.Pos[1]), f64(s.Pos[2])},
		Vel: [3]f64{f64(s.Vel[0]), f64(s.Vel[1]), f64(s.Vel[2])},
		Yaw: f64(s.Yaw), Health: s.Health, Flags: s.Flags, Name: s.Name.String(), Extra: s.Extra,
	}
}

func runGhosts(in []gStep) ([]gStep, error) {
	sreg, sclasses, err := stockRegistry()
	if err != nil {
		return nil, err
	}
	creg, _, err := stockRegistry()
	if err != nil {
		return nil, err
	}
	tab, err := ghost.NewTable(sreg, ghost.DefaultConfig())
	if err != nil {
		return nil, err
	}
	mir, err := ghost.NewMirror(creg, ghost.DefaultMirrorConfig())
	if err != nil {
		return nil, err
	}
	var pkts [][]byte
	var nbits []int
	out := make([]gStep, len(in))
	for i, st := range in {
		st = gStep{Step: st.Step, NowMS: st.NowMS, View: st.View, Seq: st.Seq, MaxBytes: st.MaxBytes, Delivered: st.Delivered, Packet: st.Packet}
		now := ms(st.NowMS)
		switch st.Step {
		case "view":
			var v []ghost.ViewEntry
			for _, e := range st.View {
				id, err := parseU64(e.Entity)
				if err != nil {
					return nil, err
				}
				gs, err := toGhostState(e.State)
				if err != nil {
					return nil, err
				}
				v = append(v, ghost.ViewEntry{Entity: id, Class: sclasses[e.Class], Priority: e.Priority, State: gs})
			}
			if err := tab.SetView(now, v); err != nil {
				return nil, fmt.Errorf("step %d: %w", i, err)
			}
		case "write":
			seq, err := parseU64(st.Seq)
			if err != nil {
				return nil, err
			}
			w := bitstream.NewWriter(make([]byte, st.MaxBytes))
			if _, err := tab.Write(w, seq, now); err != nil {
				return nil, fmt.Errorf("step %d: %w", i, err)
			}
			st.Bits, st.Hex = w.BitLen(), hx(w.Bytes())
			pkts = append(pkts, append([]byte(nil), w.Bytes()...))
			nbits = append(nbits, w.BitLen())
		case "fate":
			seq, err := parseU64(st.Seq)
			if err != nil {
				return nil, err
			}
			tab.OnFate(notify.Fate{Seq: seq, Delivered: *st.Delivered})
		case "read":
			r := bitstream.NewReader(nil)
			r.ResetBits(pkts[*st.Packet], nbits[*st.Packet])
			if err := mir.Read(r, now); err != nil {
				return nil, fmt.Errorf("step %d: %w", i, err)
			}
			st.Ghosts = mirrorGhosts(mir)
		default:
			return nil, fmt.Errorf("step %d: unknown step %q", i, st.Step)
		}
		out[i] = st
	}
	return out, nil
}

func mirrorGhosts(m *ghost.Mirror) []gGhost {
	var gs []gGhost
	for g := range m.All() {
		gs = append(gs, gGhost{ID: g.ID, Entity: u64(g.Entity), Class: int(g.Class.ID), State: fromGhostState(g.State)})
	}
	slices.SortFunc(gs, func(a, b gGhost) int { return cmp.Compare(a.ID, b.ID) })
	return gs
}
