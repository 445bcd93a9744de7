package world

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
)

// Kinds of validation problems; every error New returns wraps one or more of
// them (errors.Is).
var (
	ErrEmpty             = errors.New("no zones")
	ErrBadID             = errors.New("bad zone id")
	ErrDuplicateID       = errors.New("duplicate zone id")
	ErrBadSize           = errors.New("bad zone size")
	ErrOverlap           = errors.New("zones overlap")
	ErrGap               = errors.New("gap between zones")
	ErrUnknownNeighbour  = errors.New("unknown neighbour")
	ErrAsymmetric        = errors.New("asymmetric neighbours")
	ErrNotAdjacent       = errors.New("listed neighbour does not touch")
	ErrMissingNeighbour  = errors.New("touching zone not listed as neighbour")
	ErrDuplicateNeighbor = errors.New("neighbour listed twice")
	ErrUnknownSpawn      = errors.New("bad spawn zone")
)

// ZoneError is one validation problem: Kind is one of the Err… values, Zone
// the zone it is about, Other a second zone when the problem is between two.
type ZoneError struct {
	Kind   error
	Zone   string
	Other  string
	Detail string
}

func (e *ZoneError) Error() string {
	s := e.Kind.Error()
	switch {
	case e.Zone != "" && e.Other != "":
		s = fmt.Sprintf("zones %q and %q: %s", e.Zone, e.Other, s)
	case e.Zone != "":
		s = fmt.Sprintf("zone %q: %s", e.Zone, s)
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

func (e *ZoneError) Unwrap() error { return e.Kind }

// maxProblems bounds the report: a map with thousands of errors needs the
// first few, not a megabyte of text.
const maxProblems = 32

type problems []error

func (p *problems) add(kind error, zone, other, detail string) {
	if len(*p) < maxProblems {
		*p = append(*p, &ZoneError{Kind: kind, Zone: zone, Other: other, Detail: detail})
	}
}

func validID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for _, c := range []byte(id) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// validate checks w.zones, fills derived neighbours, bounds and the index.
func (w *World) validate() error {
	var p problems
	if len(w.zones) == 0 {
		return &ZoneError{Kind: ErrEmpty}
	}
	if len(w.zones) > MaxZones {
		return &ZoneError{Kind: ErrBadSize, Detail: fmt.Sprintf("%d zones, at most %d", len(w.zones), MaxZones)}
	}
	w.index = make(map[string]int, len(w.zones))
	geomOK := true
	for i, z := range w.zones {
		if !validID(z.ID) {
			p.add(ErrBadID, z.ID, "", "want 1-64 characters from [A-Za-z0-9_-]")
		} else if _, dup := w.index[z.ID]; dup {
			p.add(ErrDuplicateID, z.ID, "", "")
		} else {
			w.index[z.ID] = i
		}
		sx, sz := z.Size()
		switch {
		case !finite(z.Min[0]) || !finite(z.Min[1]) || !finite(z.Max[0]) || !finite(z.Max[1]):
			p.add(ErrBadSize, z.ID, "", "coordinates must be finite, got "+z.Rect.String())
			geomOK = false
		case !(sx >= MinZoneSize) || !(sz >= MinZoneSize):
			p.add(ErrBadSize, z.ID, "", fmt.Sprintf("%g × %g m, each side must be at least %g m (is max > min?)", sx, sz, MinZoneSize))
			geomOK = false
		}
	}
	if !geomOK {
		return errors.Join(p...)
	}

	w.bounds = w.zones[0].Rect
	for _, z := range w.zones[1:] {
		w.bounds.Min[0] = min(w.bounds.Min[0], z.Min[0])
		w.bounds.Min[1] = min(w.bounds.Min[1], z.Min[1])
		w.bounds.Max[0] = max(w.bounds.Max[0], z.Max[0])
		w.bounds.Max[1] = max(w.bounds.Max[1], z.Max[1])
	}

	// Pairwise geometry: overlaps and the true neighbour sets.
	touching := make([][]string, len(w.zones))
	overlap := false
	for i := range w.zones {
		for j := i + 1; j < len(w.zones); j++ {
			a, b := &w.zones[i], &w.zones[j]
			switch {
			case a.overlaps(b.Rect):
				p.add(ErrOverlap, a.ID, b.ID, a.Rect.String()+" and "+b.Rect.String())
				overlap = true
			case a.touches(b.Rect):
				touching[i] = append(touching[i], b.ID)
				touching[j] = append(touching[j], a.ID)
			}
		}
	}
	if !overlap {
		w.findGaps(&p)
	}

	// Neighbours: derive the omitted lists, check the given ones.
	for i := range w.zones {
		z := &w.zones[i]
		want := touching[i]
		sort.Strings(want)
		if z.Neighbours == nil {
			z.Neighbours = want
			if z.Neighbours == nil {
				z.Neighbours = []string{} // a single-zone world: listed as none, not "derive"
			}
			continue
		}
		seen := map[string]bool{}
		for _, n := range z.Neighbours {
			switch {
			case seen[n]:
				p.add(ErrDuplicateNeighbor, z.ID, n, "")
			case n == z.ID:
				p.add(ErrNotAdjacent, z.ID, n, "a zone is not its own neighbour")
			case !w.known(n):
				p.add(ErrUnknownNeighbour, z.ID, n, "")
			case !slices.Contains(want, n):
				p.add(ErrNotAdjacent, z.ID, n, "")
			}
			seen[n] = true
		}
		for _, n := range want {
			if !seen[n] {
				p.add(ErrMissingNeighbour, z.ID, n, "omit \"neighbours\" to derive them")
			}
		}
		slices.Sort(z.Neighbours)
	}
	// Symmetry, for lists that were given (derived ones are symmetric).
	for _, z := range w.zones {
		for _, n := range z.Neighbours {
			j, ok := w.index[n]
			if !ok {
				continue
			}
			if !slices.Contains(w.zones[j].Neighbours, z.ID) && slices.Contains(touching[w.index[z.ID]], n) {
				// Touching but only one side lists it: report once, as asymmetric.
				p.add(ErrAsymmetric, z.ID, n, fmt.Sprintf("%q lists %q but not the reverse", z.ID, n))
			}
		}
	}
	if len(p) > 0 {
		return errors.Join(p...)
	}
	return nil
}

// maxGapCells bounds the compressed grid the gap check walks; beyond it the
// check falls back to comparing areas.
const maxGapCells = 1 << 22

// findGaps reports parts of the bounding rectangle no zone covers. It needs
// no overlaps. Coordinate compression: the distinct zone edges cut the
// bounds into cells, each either fully covered by one zone or not at all.
func (w *World) findGaps(p *problems) {
	xs, zs := w.edges(0), w.edges(1)
	nx, nz := len(xs)-1, len(zs)-1
	if nx*nz > maxGapCells {
		var area float64
		for _, z := range w.zones {
			sx, sz := z.Size()
			area += sx * sz
		}
		bx, bz := w.bounds.Size()
		if math.Abs(area-bx*bz) > 1e-9*bx*bz {
			p.add(ErrGap, "", "", fmt.Sprintf("zones cover %g m² of the %g m² bounding rectangle %s", area, bx*bz, w.bounds))
		}
		return
	}
	covered := make([]bool, nx*nz)
	for _, z := range w.zones {
		i0, i1 := sort.SearchFloat64s(xs, z.Min[0]), sort.SearchFloat64s(xs, z.Max[0])
		j0, j1 := sort.SearchFloat64s(zs, z.Min[1]), sort.SearchFloat64s(zs, z.Max[1])
		for j := j0; j < j1; j++ {
			for i := i0; i < i1; i++ {
				covered[j*nx+i] = true
			}
		}
	}
	for j := range nz {
		for i := range nx {
			if !covered[j*nx+i] {
				r := Rect{Min: [2]float64{xs[i], zs[j]}, Max: [2]float64{xs[i+1], zs[j+1]}}
				p.add(ErrGap, "", "", "no zone covers "+r.String())
			}
		}
	}
}

// edges returns the sorted distinct coordinates of zone edges on axis a.
func (w *World) edges(a int) []float64 {
	e := make([]float64, 0, 2*len(w.zones))
	for _, z := range w.zones {
		e = append(e, z.Min[a], z.Max[a])
	}
	slices.Sort(e)
	return slices.Compact(e)
}

func (w *World) known(id string) bool { _, ok := w.index[id]; return ok }
