package world

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestDefault(t *testing.T) {
	w := Default()
	if w.Len() != 4 {
		t.Fatalf("default world has %d zones, want 4", w.Len())
	}
	b := w.Bounds()
	if b.Min != [2]float64{-1000, -1000} || b.Max != [2]float64{1000, 1000} {
		t.Fatalf("bounds %v", b)
	}
	for _, z := range w.Zones() {
		if len(z.Neighbours) != 3 {
			t.Errorf("zone %s has neighbours %v, want the other 3 (edges and the diagonal)", z.ID, z.Neighbours)
		}
		if sx, sz := z.Size(); sx != 1000 || sz != 1000 {
			t.Errorf("zone %s is %g×%g", z.ID, sx, sz)
		}
	}
	if w.MinSide() != 1000 {
		t.Errorf("MinSide %g", w.MinSide())
	}
}

func TestZoneAt(t *testing.T) {
	w := Default()
	cases := []struct {
		name string
		x, z float64
		want string
		ok   bool
	}{
		{"inside x0z0", -500, -500, "x0z0", true},
		{"inside x1z1", 500, 500, "x1z1", true},
		{"origin belongs to the zone whose min it is", 0, 0, "x1z1", true},
		{"shared edge on x goes to the max side", 0, -10, "x1z0", true},
		{"world min corner", -1000, -1000, "x0z0", true},
		{"world max corner is inside", 1000, 1000, "x1z1", true},
		{"world max x edge", 1000, -1, "x1z0", true},
		{"outside", 1000.5, 0, "", false},
		{"outside below", 0, -1000.001, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			z, ok := w.ZoneAt(tc.x, tc.z)
			if ok != tc.ok || ok && z.ID != tc.want {
				t.Fatalf("ZoneAt(%g,%g) = %v,%v; want %q,%v", tc.x, tc.z, z, ok, tc.want, tc.ok)
			}
		})
	}
}

// Every point has exactly one owner: a dense scan over a 3×2 world.
func TestExactlyOneOwner(t *testing.T) {
	w, err := Grid("g", 3, 2, 10, [2]float64{0, 0})
	if err != nil {
		t.Fatal(err)
	}
	for x := -1.0; x <= 31; x += 0.5 {
		for z := -1.0; z <= 21; z += 0.5 {
			n := 0
			for i := range w.Zones() {
				if w.Owns(&w.Zones()[i], x, z) {
					n++
				}
			}
			inside := x >= 0 && x <= 30 && z >= 0 && z <= 20
			if inside && n != 1 || !inside && n != 0 {
				t.Fatalf("point [%g,%g] has %d owners (inside=%v)", x, z, n, inside)
			}
		}
	}
}

func TestRect(t *testing.T) {
	r := Rect{Min: [2]float64{0, 0}, Max: [2]float64{10, 20}}
	if r.Dist2(5, 5) != 0 || r.Dist2(10, 20) != 0 {
		t.Error("inside or on the edge is distance 0")
	}
	if got := r.Dist2(13, 24); got != 25 {
		t.Errorf("corner distance² = %g, want 25", got)
	}
	if got := r.Dist2(-2, 5); got != 4 {
		t.Errorf("side distance² = %g, want 4", got)
	}
	if !r.Contains(0, 0) || r.Contains(10, 5) {
		t.Error("Contains is half-open")
	}
}

func TestClamp(t *testing.T) {
	w := Default()
	if x, z := w.Clamp(5000, -5000); x != 1000 || z != -1000 {
		t.Errorf("Clamp = %g,%g", x, z)
	}
	if x, z := w.Clamp(3, 4); x != 3 || z != 4 {
		t.Errorf("Clamp of an inside point moved it to %g,%g", x, z)
	}
}

// TestClampMatchesMinMax holds Clamp (a point strictly inside returned
// by compares alone) to the min and max it used for every point, bit for
// bit: on and past each edge, NaN, the infinities, and signed zeros
// against bounds of +0 and −0, where Go's min and max choose the zero's
// sign and a compare does not.
func TestClampMatchesMinMax(t *testing.T) {
	neg0 := math.Copysign(0, -1)
	ref := func(w *World, x, z float64) (float64, float64) {
		b := w.Bounds()
		if math.IsNaN(x) {
			x = b.Min[0]
		}
		if math.IsNaN(z) {
			z = b.Min[1]
		}
		return min(max(x, b.Min[0]), b.Max[0]), min(max(z, b.Min[1]), b.Max[1])
	}
	worlds := map[string]Rect{
		"+0 to 100":     {Min: [2]float64{0, 0}, Max: [2]float64{100, 100}},
		"−0 to 100":     {Min: [2]float64{neg0, neg0}, Max: [2]float64{100, 100}},
		"−100 to +0":    {Min: [2]float64{-100, -100}, Max: [2]float64{0, 0}},
		"−100 to −0":    {Min: [2]float64{-100, -100}, Max: [2]float64{neg0, neg0}},
		"−1000 to 1000": {Min: [2]float64{-1000, -1000}, Max: [2]float64{1000, 1000}},
	}
	vals := []float64{0, neg0, 100, -100, 1000, -1000, 50, -50, 100.5, -100.5, math.Nextafter(100, 0),
		math.Nextafter(0, 1), math.Nextafter(0, -1), math.NaN(), math.Inf(1), math.Inf(-1), 5e300, -5e300}
	for name, r := range worlds {
		w, err := New(name, []Zone{{ID: "a", Rect: r}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, x := range vals {
			for _, z := range vals {
				gx, gz := w.Clamp(x, z)
				wx, wz := ref(w, x, z)
				if math.Float64bits(gx) != math.Float64bits(wx) || math.Float64bits(gz) != math.Float64bits(wz) {
					t.Errorf("%s: Clamp(%g, %g) = %g, %g (bits %x, %x), min and max give %g, %g (%x, %x)",
						name, x, z, gx, gz, math.Float64bits(gx), math.Float64bits(gz), wx, wz, math.Float64bits(wx), math.Float64bits(wz))
				}
			}
		}
	}
}

func TestValidationErrors(t *testing.T) {
	sq := func(id string, x0, z0, x1, z1 float64, nb ...string) Zone {
		return Zone{ID: id, Rect: Rect{Min: [2]float64{x0, z0}, Max: [2]float64{x1, z1}}, Neighbours: nb}
	}
	cases := []struct {
		name  string
		zones []Zone
		kinds []error
		text  string // a fragment the message must contain
	}{
		{"empty", nil, []error{ErrEmpty}, "no zones"},
		{"bad id", []Zone{sq("a b", 0, 0, 10, 10)}, []error{ErrBadID}, `zone "a b"`},
		{"duplicate id", []Zone{sq("a", 0, 0, 10, 10), sq("a", 10, 0, 20, 10)}, []error{ErrDuplicateID}, `zone "a"`},
		{"inverted", []Zone{sq("a", 10, 0, 0, 10)}, []error{ErrBadSize}, "max > min"},
		{"too thin", []Zone{sq("a", 0, 0, 0.5, 10)}, []error{ErrBadSize}, "0.5"},
		{"overlap", []Zone{sq("a", 0, 0, 10, 10), sq("b", 5, 0, 15, 10)}, []error{ErrOverlap}, `zones "a" and "b"`},
		{"gap in the middle", []Zone{sq("a", 0, 0, 10, 10), sq("b", 20, 0, 30, 10)}, []error{ErrGap}, "[10,0]-[20,10]"},
		{"missing corner (L shape)", []Zone{sq("a", 0, 0, 10, 10), sq("b", 10, 0, 20, 10), sq("c", 0, 10, 10, 20)}, []error{ErrGap}, "[10,10]-[20,20]"},
		{"unknown neighbour", []Zone{sq("a", 0, 0, 10, 10, "b", "zz"), sq("b", 10, 0, 20, 10)}, []error{ErrUnknownNeighbour}, `"zz"`},
		{"self neighbour", []Zone{sq("a", 0, 0, 10, 10, "a", "b"), sq("b", 10, 0, 20, 10)}, []error{ErrNotAdjacent}, "own neighbour"},
		{"asymmetric", []Zone{sq("a", 0, 0, 10, 10, "b"), sq("b", 10, 0, 20, 10, "c"), sq("c", 20, 0, 30, 10)}, []error{ErrAsymmetric, ErrMissingNeighbour}, "lists"},
		{"not adjacent", []Zone{sq("a", 0, 0, 10, 10, "b", "c"), sq("b", 10, 0, 20, 10), sq("c", 20, 0, 30, 10)}, []error{ErrNotAdjacent}, `zones "a" and "c"`},
		{"missing neighbour", []Zone{sq("a", 0, 0, 10, 10, "b"), sq("b", 0, 10, 10, 20), sq("c", 10, 0, 20, 10), sq("d", 10, 10, 20, 20)}, []error{ErrMissingNeighbour}, `zones "a" and "c"`},
		{"listed twice", []Zone{sq("a", 0, 0, 10, 10, "b", "b"), sq("b", 10, 0, 20, 10)}, []error{ErrDuplicateNeighbor}, "twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New("t", tc.zones)
			if err == nil {
				t.Fatal("New accepted an invalid map")
			}
			for _, k := range tc.kinds {
				if !errors.Is(err, k) {
					t.Errorf("error %q does not wrap %q", err, k)
				}
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Errorf("error %q does not mention %q", err, tc.text)
			}
			var ze *ZoneError
			if !errors.As(err, &ze) {
				t.Errorf("error %q has no *ZoneError", err)
			}
		})
	}
}

func TestNeighboursDerivedAndChecked(t *testing.T) {
	w, err := Grid("g", 3, 3, 100, [2]float64{0, 0})
	if err != nil {
		t.Fatal(err)
	}
	centre, _ := w.Zone("x1z1")
	if len(centre.Neighbours) != 8 {
		t.Errorf("centre of 3×3 has %v", centre.Neighbours)
	}
	corner, _ := w.Zone("x0z0")
	if want := []string{"x0z1", "x1z0", "x1z1"}; !slices.Equal(corner.Neighbours, want) {
		t.Errorf("corner neighbours %v, want %v", corner.Neighbours, want)
	}
	// Listing exactly the derived neighbours is accepted.
	again, err := New("g", w.Zones())
	if err != nil {
		t.Fatalf("re-validating the derived lists: %v", err)
	}
	if again.Len() != 9 {
		t.Fatal("lost zones")
	}
}

func TestParseRoundTrip(t *testing.T) {
	w := Default()
	data, err := w.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	w2, err := Parse(data)
	if err != nil {
		t.Fatalf("parse marshalled default: %v\n%s", err, data)
	}
	if w2.Name() != "default" || w2.Len() != 4 {
		t.Fatalf("round trip lost data: %s %d", w2.Name(), w2.Len())
	}
	for i, z := range w.Zones() {
		z2 := w2.Zones()[i]
		if z.ID != z2.ID || z.Rect != z2.Rect || !slices.Equal(z.Neighbours, z2.Neighbours) {
			t.Errorf("zone %d: %+v != %+v", i, z, z2)
		}
	}
}

func TestParseRejects(t *testing.T) {
	cases := []struct{ name, json, text string }{
		{"misspelt field", `{"zones":[{"id":"a","min":[0,0],"max":[10,10],"neighbors":[]}]}`, "unknown field"},
		{"trailing data", `{"zones":[{"id":"a","min":[0,0],"max":[10,10]}]} {}`, "trailing"},
		{"not json", `zones: []`, "decode"},
		{"no zones", `{"name":"x"}`, "no zones"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.json))
			if err == nil || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("Parse error %v, want one mentioning %q", err, tc.text)
			}
		})
	}
}

func TestLoadExamples(t *testing.T) {
	w, err := Load(filepath.Join("testdata", "two-by-two.json"))
	if err != nil {
		t.Fatal(err)
	}
	d := Default()
	for i, z := range d.Zones() {
		if w.Zones()[i].ID != z.ID || w.Zones()[i].Rect != z.Rect || !slices.Equal(w.Zones()[i].Neighbours, z.Neighbours) {
			t.Errorf("testdata/two-by-two.json zone %d differs from Default: %+v", i, w.Zones()[i])
		}
	}
	if _, err := Load(filepath.Join("testdata", "strip.json")); err != nil {
		t.Fatal(err)
	}
	_, err = Load(filepath.Join("testdata", "bad-overlap.json"))
	if !errors.Is(err, ErrOverlap) || !strings.Contains(err.Error(), "bad-overlap.json") {
		t.Fatalf("bad-overlap.json: %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestSingleZone(t *testing.T) {
	w, err := New("one", []Zone{{ID: "only", Rect: Rect{Max: [2]float64{100, 100}}}})
	if err != nil {
		t.Fatal(err)
	}
	if z, ok := w.ZoneAt(50, 50); !ok || z.ID != "only" || len(z.Neighbours) != 0 {
		t.Fatalf("%v %v", z, ok)
	}
}
