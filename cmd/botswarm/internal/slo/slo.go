// Package slo parses and evaluates botswarm's service-level objectives:
// a comma-separated list of targets such as
//
//	rtt_p99<150ms,loss<2%,lost_moves=0,view_err_p99<0.5m
//
// Each target names a metric the swarm measures, a comparison and a value
// with a unit that fits the metric's kind (a duration for rtt_*, a ratio for
// loss, a distance for view_err_*, a plain number for counts). A run fails its
// gate when any target is missed, and the evaluation names each one, so a CI
// log says "rtt_p99 = 212ms, target < 150ms" instead of "exit status 1".
package slo

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kind is what a metric measures; it decides which units a target may use
// and how values print. Values are held in base units: seconds, fractions
// (1 = 100 %), metres, plain numbers.
type Kind uint8

const (
	Count    Kind = iota // a plain number: 0, 12, 3.5
	Duration             // seconds; targets say 150ms, 2s, 500us
	Ratio                // a fraction; targets say 2% or 0.02
	Distance             // metres; targets say 0.5m, 50cm, 5mm
)

func (k Kind) String() string {
	switch k {
	case Count:
		return "count"
	case Duration:
		return "duration"
	case Ratio:
		return "ratio"
	case Distance:
		return "distance"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Format prints v (in base units) the way a target of this kind is written.
func (k Kind) Format(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	switch k {
	case Duration:
		return time.Duration(v * float64(time.Second)).Round(time.Microsecond).String()
	case Ratio:
		return strconv.FormatFloat(v*100, 'g', 4, 64) + "%"
	case Distance:
		return strconv.FormatFloat(v, 'g', 3, 64) + "m"
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// Op is a comparison.
type Op uint8

const (
	Less Op = iota
	LessEq
	Equal
	GreaterEq
	Greater
)

func (o Op) String() string {
	return [...]string{"<", "<=", "=", ">=", ">"}[o]
}

// holds reports whether value op target.
func (o Op) holds(value, target float64) bool {
	switch o {
	case Less:
		return value < target
	case LessEq:
		return value <= target
	case Equal:
		return value == target
	case GreaterEq:
		return value >= target
	}
	return value > target
}

// Target is one parsed term.
type Target struct {
	Metric string
	Op     Op
	Value  float64 // base units
	Kind   Kind
	Text   string // the term as written, trimmed
}

func (t Target) String() string { return t.Metric + " " + t.Op.String() + " " + t.Kind.Format(t.Value) }

// Spec is a parsed SLO: all targets must hold.
type Spec struct {
	Targets []Target
}

// ErrSyntax is wrapped by every Parse error.
var ErrSyntax = errors.New("slo: bad spec")

// TermError names the term Parse could not accept and why.
type TermError struct {
	Term   string // as written
	Reason string
}

func (e *TermError) Error() string { return fmt.Sprintf("slo: term %q: %s", e.Term, e.Reason) }
func (e *TermError) Unwrap() error { return ErrSyntax }

// MaxSpecLen bounds what Parse reads: a spec is a flag, not a document.
const MaxSpecLen = 4096

// Parse reads spec against the metrics the swarm knows (name → kind).
// The empty spec is valid and has no targets.
func Parse(spec string, known map[string]Kind) (Spec, error) {
	if len(spec) > MaxSpecLen {
		return Spec{}, fmt.Errorf("%w: longer than %d bytes", ErrSyntax, MaxSpecLen)
	}
	var s Spec
	if strings.TrimSpace(spec) == "" {
		return s, nil
	}
	for raw := range strings.SplitSeq(spec, ",") {
		term := strings.TrimSpace(raw)
		if term == "" {
			return Spec{}, &TermError{Term: raw, Reason: "empty term (stray comma?)"}
		}
		t, err := parseTerm(term, known)
		if err != nil {
			return Spec{}, err
		}
		s.Targets = append(s.Targets, t)
	}
	return s, nil
}

func parseTerm(term string, known map[string]Kind) (Target, error) {
	i := strings.IndexAny(term, "<>=!")
	if i < 0 {
		return Target{}, &TermError{Term: term, Reason: "no comparison (use <, <=, =, >=, >)"}
	}
	name := strings.TrimSpace(term[:i])
	rest := term[i:]
	var op Op
	switch {
	case strings.HasPrefix(rest, "<="):
		op, rest = LessEq, rest[2:]
	case strings.HasPrefix(rest, ">="):
		op, rest = GreaterEq, rest[2:]
	case strings.HasPrefix(rest, "=="):
		op, rest = Equal, rest[2:]
	case strings.HasPrefix(rest, "<"):
		op, rest = Less, rest[1:]
	case strings.HasPrefix(rest, ">"):
		op, rest = Greater, rest[1:]
	case strings.HasPrefix(rest, "="):
		op, rest = Equal, rest[1:]
	default:
		return Target{}, &TermError{Term: term, Reason: "unknown comparison (use <, <=, =, >=, >)"}
	}
	if name == "" {
		return Target{}, &TermError{Term: term, Reason: "no metric name before the comparison"}
	}
	kind, ok := known[name]
	if !ok {
		return Target{}, &TermError{Term: term, Reason: "unknown metric " + strconv.Quote(name) + " (known: " + knownList(known) + ")"}
	}
	val := strings.TrimSpace(rest)
	if val == "" {
		return Target{}, &TermError{Term: term, Reason: "no value after the comparison"}
	}
	v, err := parseValue(val, kind)
	if err != nil {
		return Target{}, &TermError{Term: term, Reason: err.Error()}
	}
	return Target{Metric: name, Op: op, Value: v, Kind: kind, Text: term}, nil
}

func parseValue(s string, k Kind) (float64, error) {
	num, unit := splitNumber(s)
	if num == "" {
		return 0, fmt.Errorf("value %q is not a number", s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("value %q is not a finite number", s)
	}
	switch k {
	case Duration:
		scale, ok := map[string]float64{"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}[unit]
		if !ok {
			return 0, fmt.Errorf("a duration needs a unit: ns, us, ms, s, m, h (got %q)", s)
		}
		return f * scale, nil
	case Ratio:
		switch unit {
		case "%":
			return f / 100, nil
		case "":
			return f, nil
		}
		return 0, fmt.Errorf("a ratio is a percentage (2%%) or a fraction (0.02), got %q", s)
	case Distance:
		scale, ok := map[string]float64{"mm": 1e-3, "cm": 1e-2, "m": 1, "km": 1e3}[unit]
		if !ok {
			return 0, fmt.Errorf("a distance needs a unit: mm, cm, m, km (got %q)", s)
		}
		return f * scale, nil
	}
	if unit != "" {
		return 0, fmt.Errorf("a count takes a plain number, got %q", s)
	}
	return f, nil
}

// splitNumber splits "150ms" into "150" and "ms".
func splitNumber(s string) (num, unit string) {
	i := 0
	for i < len(s) {
		c := s[i]
		if (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' ||
			((c == 'e' || c == 'E') && i > 0 && i+1 < len(s) && (s[i+1] >= '0' && s[i+1] <= '9' || s[i+1] == '-' || s[i+1] == '+')) {
			i++
			continue
		}
		break
	}
	return s[:i], strings.TrimSpace(s[i:])
}

func knownList(known map[string]Kind) string {
	return strings.Join(slices.Sorted(maps.Keys(known)), ", ")
}

// Result is one target's verdict.
type Result struct {
	Target Target
	Value  float64 // measured, base units; NaN when the run produced no value
	OK     bool
}

// String reads "rtt_p99 = 212ms, target < 150ms: MISSED".
func (r Result) String() string {
	verdict := "ok"
	if !r.OK {
		verdict = "MISSED"
	}
	return fmt.Sprintf("%s = %s, target %s %s: %s", r.Target.Metric, r.Target.Kind.Format(r.Value),
		r.Target.Op, r.Target.Kind.Format(r.Target.Value), verdict)
}

// Evaluate checks every target against values (metric → base units).
// A metric missing from values, or NaN (nothing was measured, e.g. no
// round trip completed), misses its target: an SLO cannot pass on no data.
func (s Spec) Evaluate(values map[string]float64) (results []Result, ok bool) {
	ok = true
	for _, t := range s.Targets {
		v, have := values[t.Metric]
		if !have {
			v = math.NaN()
		}
		r := Result{Target: t, Value: v, OK: have && !math.IsNaN(v) && t.Op.holds(v, t.Value)}
		ok = ok && r.OK
		results = append(results, r)
	}
	return results, ok
}

// Missed returns the results that did not hold.
func Missed(results []Result) []Result {
	var m []Result
	for _, r := range results {
		if !r.OK {
			m = append(m, r)
		}
	}
	return m
}
