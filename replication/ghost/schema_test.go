package ghost

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// RP-2 acceptance: two classes with one wire id fail at registration.
func TestRegisterRejectsDuplicateIDs(t *testing.T) {
	reg, err := NewRegistry(DefaultBounds())
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(PlayerClass(nil)); err != nil {
		t.Fatal(err)
	}
	twin := NPCClass(nil)
	twin.ID = PlayerClassID
	if err := reg.Register(twin); !errors.Is(err, ErrDuplicateClass) {
		t.Fatalf("duplicate id: %v, want ErrDuplicateClass", err)
	}
	if _, err := NewTable(reg, DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(NPCClass(nil)); !errors.Is(err, ErrFrozen) {
		t.Fatalf("register after NewTable: %v, want ErrFrozen", err)
	}
}

func TestClassValidation(t *testing.T) {
	enc := func(w *bitstream.Writer, s *State) error { return nil }
	dec := func(r *bitstream.Reader, s *State) error { return nil }
	chg := func(a, b *State) bool { return false }
	many := make([]Group, MaxGroups+1)
	for i := range many {
		many[i] = Group{Name: "g", Encode: enc, Decode: dec, Changed: chg}
	}
	for _, tc := range []struct {
		name string
		c    Class
	}{
		{"no groups", Class{ID: 5}},
		{"too many groups", Class{ID: 5, Groups: many}},
		{"two position groups", Class{ID: 5, Groups: []Group{PositionGroup(), PositionGroup()}}},
		{"group without a decoder", Class{ID: 5, Groups: []Group{{Name: "x", Encode: enc, Changed: chg}}}},
		{"default mask names a missing group", Class{ID: 5, Groups: []Group{PositionGroup()}, DefaultMask: 2}},
		{"negative weight", Class{ID: 5, Groups: []Group{PositionGroup()}, Weight: -1}},
		{"NaN weight", Class{ID: 5, Groups: []Group{PositionGroup()}, Weight: float32(math.NaN())}},
		{"negative MinInterval", Class{ID: 5, Groups: []Group{PositionGroup()}, MinInterval: -time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg, err := NewRegistry(DefaultBounds())
			if err != nil {
				t.Fatal(err)
			}
			c := tc.c
			if err := reg.Register(&c); !errors.Is(err, ErrClass) {
				t.Fatalf("Register: %v, want ErrClass", err)
			}
		})
	}
	// A custom class is a few lines: id, groups, default mask.
	reg, _ := NewRegistry(DefaultBounds())
	door := &Class{ID: 30, Name: "door", Groups: []Group{FlagsGroup(1)}}
	if err := reg.Register(door); err != nil {
		t.Fatal(err)
	}
	if door.DefaultMask != 1 || door.AllGroups() != 1 || door.NumGroups() != 1 {
		t.Fatalf("door: default %b all %b", door.DefaultMask, door.AllGroups())
	}
}

func TestBoundsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    func(b *Bounds)
	}{
		{"zero precision", func(b *Bounds) { b.Precision = 0 }},
		{"NaN bound", func(b *Bounds) { b.Min[1] = math.NaN() }},
		{"empty axis", func(b *Bounds) { b.Max[2] = b.Min[2] }},
		{"too many steps", func(b *Bounds) { b.Precision = 1e-9 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := DefaultBounds()
			tc.b(&b)
			if _, err := NewRegistry(b); !errors.Is(err, ErrConfig) {
				t.Fatalf("NewRegistry: %v, want ErrConfig", err)
			}
		})
	}
	reg, err := NewRegistry(DefaultBounds())
	if err != nil {
		t.Fatal(err)
	}
	if q := reg.q; q.bits != [3]uint{19, 16, 19} {
		t.Fatalf("default bounds take %v bits per axis, want 19 16 19 (x, height y, z)", q.bits)
	}
}

// Every shipped group round-trips, and Changed ignores differences below
// the wire's resolution.
func TestGroupsRoundTrip(t *testing.T) {
	names := bitstream.NewStringTable(4)
	names.Set(0, "wolf")
	for _, tc := range []struct {
		name  string
		g     Group
		st    State
		check func(got, want State) bool
		noise func(s *State) // changes nothing on the wire
	}{
		{"yaw", YawGroup(10), State{Yaw: -2.5},
			func(a, b State) bool { return math.Abs(math.Remainder(a.Yaw-b.Yaw, 2*math.Pi)) <= math.Pi/1024 },
			func(s *State) { s.Yaw += 2 * math.Pi }},
		{"velocity", VelGroup(32, 10), State{Vel: [3]float64{-3, 0.5, 31}},
			func(a, b State) bool {
				for i := range 3 {
					if math.Abs(a.Vel[i]-b.Vel[i]) > 32.0/1023 {
						return false
					}
				}
				return true
			},
			func(s *State) { s.Vel[0] += 1e-4 }},
		{"health", HealthGroup(0, 1000), State{Health: 777},
			func(a, b State) bool { return a.Health == b.Health }, nil},
		{"table name", NameGroup(names), State{Name: MustName("wolf")},
			func(a, b State) bool { return a.Name == b.Name }, nil},
		{"literal name", NameGroup(names), State{Name: MustName("Zed the Unready")},
			func(a, b State) bool { return a.Name == b.Name }, nil},
		{"flags", FlagsGroup(12), State{Flags: 0xabc},
			func(a, b State) bool { return a.Flags == b.Flags }, nil},
		{"extra", ExtraGroup(4), State{Extra: [4]uint32{0, 1, 1 << 20, math.MaxUint32}},
			func(a, b State) bool { return a.Extra == b.Extra }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w bitstream.Writer
			buf := make([]byte, 64)
			w.Reset(buf)
			if err := tc.g.Encode(&w, &tc.st); err != nil {
				t.Fatal(err)
			}
			var r bitstream.Reader
			r.ResetBits(w.Bytes(), w.BitLen())
			var got State
			if err := tc.g.Decode(&r, &got); err != nil {
				t.Fatal(err)
			}
			if r.Remaining() != 0 {
				t.Fatalf("%d bits left over", r.Remaining())
			}
			if !tc.check(got, tc.st) {
				t.Fatalf("got %+v, want %+v", got, tc.st)
			}
			if tc.noise != nil {
				n := tc.st
				tc.noise(&n)
				if tc.g.Changed(&tc.st, &n) {
					t.Fatal("a change below the wire resolution counts as changed")
				}
			}
			if tc.g.Changed(&tc.st, &State{}) == (tc.st == State{}) {
				t.Fatal("Changed misses a real change")
			}
		})
	}
}

func TestNames(t *testing.T) {
	if _, err := MakeName("p\xff1"); !errors.Is(err, ErrNameNotUTF8) {
		t.Errorf("MakeName of a name not UTF-8: %v, want ErrNameNotUTF8", err)
	}
	if n, err := MakeName("名前"); err != nil || n.String() != "名前" {
		t.Errorf("MakeName of a UTF-8 name: %q %v", n.String(), err)
	}
	if _, err := MakeName("0123456789012345678901234567890123"); !errors.Is(err, ErrNameTooLong) {
		t.Fatalf("long name: %v", err)
	}
	n := MustName("Zed")
	if n.String() != "Zed" || n.Len() != 3 {
		t.Fatalf("name %q len %d", n.String(), n.Len())
	}
}

// The position the client sees is within half a centimetre of the server's.
func TestPositionQuantization(t *testing.T) {
	reg, err := NewRegistry(DefaultBounds())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range [][3]float64{{-2000, -256, -2000}, {2000, 256, 2000}, {1.234567, 0.005, -999.995}, {0, 0, 0}} {
		q := reg.QuantizePos(p)
		for a := range 3 {
			if math.Abs(q[a]-p[a]) > reg.PosMaxError() {
				t.Fatalf("%v quantized to %v", p, q)
			}
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func(c *Config)
	}{
		{"zero MaxGhosts", func(c *Config) { c.MaxGhosts = 0 }},
		{"MaxGhosts beyond 2^20", func(c *Config) { c.MaxGhosts = MaxMaxGhosts + 1 }},
		{"packet beyond 1200 bytes", func(c *Config) { c.MaxPacketBytes = 1201 }},
		{"packets in flight not a power of two", func(c *Config) { c.MaxPacketsInFlight = 100 }},
		{"too few records", func(c *Config) { c.MaxRecordsInFlight = 10 }},
		{"records beyond 16-bit position indices", func(c *Config) { c.MaxRecordsInFlight = maxPoolNodes + 1 }},
		{"zero StaleUnit", func(c *Config) { c.StaleUnit = 0 }},
		{"zero MaxStaleness", func(c *Config) { c.MaxStaleness = 0 }},
		{"zero MaxMisses", func(c *Config) { c.MaxMisses = 0 }},
		{"sub-millisecond resend", func(c *Config) { c.ResendInterval = time.Microsecond }},
		{"negative deadline", func(c *Config) { c.ConfirmDeadline = -1 }},
		// The slots' 16-bit times (msWindow): each names its bound.
		{"MaxStaleness past MaxInterval", func(c *Config) { c.MaxStaleness = MaxInterval + time.Millisecond }},
		{"ResendInterval past MaxInterval", func(c *Config) { c.ResendInterval = MaxInterval + time.Nanosecond }},
		{"ConfirmDeadline past MaxInterval", func(c *Config) { c.ConfirmDeadline = time.Minute }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.cfg(&c)
			err := c.Validate()
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("Validate: %v", err)
			}
			if strings.Contains(tc.name, "MaxInterval") && !strings.Contains(err.Error(), "MaxInterval 30s") {
				t.Fatalf("Validate: %v: the bound is not named", err)
			}
			if _, err := NewTable(newRegistryOf(t), c); !errors.Is(err, ErrConfig) {
				t.Fatalf("NewTable: %v", err)
			}
		})
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	// The bounds themselves are taken; the slots' window is well past them.
	c := DefaultConfig()
	c.MaxStaleness, c.ResendInterval, c.ConfirmDeadline = MaxInterval, MaxInterval, MaxInterval
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if MaxInterval >= msWindow*time.Millisecond {
		t.Fatalf("MaxInterval %v is not below the slots' window %v", MaxInterval, msWindow*time.Millisecond)
	}
}

// newRegistryOf is a registry of the given classes (none: the NPC class).
func newRegistryOf(t *testing.T, cs ...*Class) *Registry {
	t.Helper()
	reg, err := NewRegistry(DefaultBounds())
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) == 0 {
		cs = append(cs, NPCClass(bitstream.NewStringTable(4)))
	}
	if err := reg.Register(cs...); err != nil {
		t.Fatal(err)
	}
	return reg
}

// NewTable refuses what a slot cannot hold — a class's MinInterval past
// MaxInterval (its times are 16-bit ms: msWindow), a registry of more than
// 256 classes (the class index is a byte) — with an error, and takes the
// bounds themselves.
func TestNewTableBounds(t *testing.T) {
	slow := func(d time.Duration) *Class {
		return &Class{ID: 9, Name: "slow", Groups: []Group{PositionGroup()}, MinInterval: d}
	}
	if _, err := NewTable(newRegistryOf(t, slow(MaxInterval+time.Millisecond)), DefaultConfig()); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "MaxInterval") {
		t.Fatalf("MinInterval past MaxInterval: %v", err)
	}
	if _, err := NewTable(newRegistryOf(t, slow(MaxInterval)), DefaultConfig()); err != nil {
		t.Fatalf("MinInterval at MaxInterval: %v", err)
	}
	classes := func(n int) []*Class {
		var cs []*Class
		for i := range n {
			cs = append(cs, &Class{ID: uint16(i + 1), Name: "c", Groups: []Group{PositionGroup()}})
		}
		return cs
	}
	if _, err := NewTable(newRegistryOf(t, classes(maxTableClasses+1)...), DefaultConfig()); !errors.Is(err, ErrConfig) {
		t.Fatalf("%d classes: %v", maxTableClasses+1, err)
	}
	reg := newRegistryOf(t, classes(maxTableClasses)...)
	tab, err := NewTable(reg, DefaultConfig())
	if err != nil {
		t.Fatalf("%d classes: %v", maxTableClasses, err)
	}
	// The last class's ghosts take its index, not class 0's.
	last := reg.classes[maxTableClasses-1]
	if err := tab.SetView(time.Second, []ViewEntry{{Entity: 1, Class: last, Priority: 1}}); err != nil {
		t.Fatal(err)
	}
	if id, _ := tab.GhostID(1); tab.classOf(tab.slotOf(id)) != last {
		t.Fatalf("ghost of class %d reads class %q", maxTableClasses-1, tab.classOf(tab.slotOf(id)).Name)
	}
}

// Tables and mirrors are created on many goroutines (one ghost manager actor
// per connection) from one shared Registry; under -race this fails if
// freezing the registry is a plain write.
func TestRegistrySharedAcrossGoroutines(t *testing.T) {
	reg, err := NewRegistry(DefaultBounds())
	if err != nil {
		t.Fatal(err)
	}
	names := bitstream.NewStringTable(4)
	if err := reg.Register(PlayerClass(names), NPCClass(names)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 8)
	for i := 0; i < 8; i++ {
		go func() {
			if _, err := NewTable(reg, DefaultConfig()); err != nil {
				done <- err
				return
			}
			_, err := NewMirror(reg, DefaultMirrorConfig())
			done <- err
		}()
	}
	for i := 0; i < 8; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if err := reg.Register(&Class{ID: 99, Name: "late"}); err == nil {
		t.Error("Register after NewTable succeeded; the registry must be frozen")
	}
}

// roundHalfAway is math.Round, bit for bit, wherever the package calls it.
func TestRoundHalfAwayIsMathRound(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	check := func(x float64) {
		t.Helper()
		if got, want := roundHalfAway(x), int64(math.Round(x)); got != want {
			t.Fatalf("roundHalfAway(%v) = %d, math.Round says %d", x, got, want)
		}
	}
	for _, x := range []float64{0, -0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999999999999994, -0.49999999999999994,
		1 << 52, -(1 << 52), 1<<52 + 1, 1<<53 - 1, 4503599627370495.5, -4503599627370495.5, math.Nextafter(0.5, 0),
		math.Nextafter(1.5, 2), 1 << 61, -(1 << 61), 1e-300, -1e-300} {
		check(x)
	}
	for range 2_000_000 {
		scale := math.Pow(2, float64(rng.IntN(62)))
		x := (rng.Float64()*2 - 1) * scale
		check(x)
		check(math.Floor(x) + 0.5) // exact halves
		check(math.Nextafter(math.Floor(x)+0.5, math.Inf(1)))
		check(math.Nextafter(math.Floor(x)+0.5, math.Inf(-1)))
	}
}

// ExtraGroup's one-write encoding is the bits of a gamma code per value,
// for every count of values and sizes up to 2^32 − 1 (those take the code
// by code path), and like it writes nothing when the group does not fit.
func TestExtraGroupEncodesGammaCodes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	for it := range 20000 {
		n := 1 + it%4
		g := ExtraGroup(n)
		var s State
		for i := range s.Extra {
			switch r.IntN(4) {
			case 0:
				s.Extra[i] = 0
			case 1:
				s.Extra[i] = uint32(r.IntN(1 << 10))
			case 2:
				s.Extra[i] = uint32(r.IntN(1 << 20))
			default:
				s.Extra[i] = r.Uint32()
			}
		}
		size := r.IntN(24)
		var a, b [32]byte
		var wa, wb bitstream.Writer
		wa.Reset(a[:size])
		wb.Reset(b[:size])
		wa.WriteBits(1, 3) // not byte-aligned
		wb.WriteBits(1, 3)
		errA, errB := g.Encode(&wa, &s), writeGammas(&wb, s.Extra[:n])
		// The bits written (a failed write may leave bits past the
		// position: nothing reads them).
		nb := wa.BitLen()
		last := byte(1)<<(nb%8) - 1
		if (errA == nil) != (errB == nil) || nb != wb.BitLen() || !bytes.Equal(a[:nb/8], b[:nb/8]) || a[nb/8]&last != b[nb/8]&last {
			t.Fatalf("extra %v (n %d, %d bytes): wrote %d bits %x (%v), codes one by one %d bits %x (%v)",
				s.Extra[:n], n, size, nb, a[:size], errA, wb.BitLen(), b[:size], errB)
		}
	}
}
