package slo

import (
	"errors"
	"math"
	"strings"
	"testing"
)

var known = map[string]Kind{
	"rtt_p99":      Duration,
	"loss":         Ratio,
	"lost_moves":   Count,
	"view_err_p99": Distance,
}

func TestParseIssueExample(t *testing.T) {
	s, err := Parse("rtt_p99<150ms,loss<2%,lost_moves=0,view_err_p99<0.5m", known)
	if err != nil {
		t.Fatal(err)
	}
	want := []Target{
		{Metric: "rtt_p99", Op: Less, Value: 0.150, Kind: Duration},
		{Metric: "loss", Op: Less, Value: 0.02, Kind: Ratio},
		{Metric: "lost_moves", Op: Equal, Value: 0, Kind: Count},
		{Metric: "view_err_p99", Op: Less, Value: 0.5, Kind: Distance},
	}
	if len(s.Targets) != len(want) {
		t.Fatalf("got %d targets, want %d", len(s.Targets), len(want))
	}
	for i, w := range want {
		g := s.Targets[i]
		if g.Metric != w.Metric || g.Op != w.Op || g.Kind != w.Kind || math.Abs(g.Value-w.Value) > 1e-12 {
			t.Errorf("target %d = %+v, want %+v", i, g, w)
		}
	}
}

func TestParseUnitsAndOps(t *testing.T) {
	tests := []struct {
		name, spec string
		op         Op
		value      float64
	}{
		{"seconds", "rtt_p99<=1.5s", LessEq, 1.5},
		{"microseconds", "rtt_p99 < 500us", Less, 0.0005},
		{"fraction ratio", "loss<0.05", Less, 0.05},
		{"percent", "loss>=10%", GreaterEq, 0.10},
		{"centimetres", "view_err_p99<50cm", Less, 0.5},
		{"millimetres", "view_err_p99>5mm", Greater, 0.005},
		{"double equals", "lost_moves==0", Equal, 0},
		{"exponent", "lost_moves<1e3", Less, 1000},
		{"spaces around", "  loss  <  2 %  ", Less, 0.02},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse(tc.spec, known)
			if err != nil {
				t.Fatal(err)
			}
			g := s.Targets[0]
			if g.Op != tc.op || math.Abs(g.Value-tc.value) > 1e-12 {
				t.Fatalf("got %v %v, want %v %v", g.Op, g.Value, tc.op, tc.value)
			}
		})
	}
}

func TestParseErrorsNameTheTerm(t *testing.T) {
	tests := []struct {
		name, spec, term, reason string
	}{
		{"unknown metric", "rtt_p99<150ms,latency<3ms", "latency<3ms", "unknown metric"},
		{"duration without unit", "rtt_p99<150", "rtt_p99<150", "needs a unit"},
		{"wrong unit for kind", "loss<2ms", "loss<2ms", "ratio"},
		{"count with unit", "lost_moves=0m", "lost_moves=0m", "plain number"},
		{"no comparison", "rtt_p99", "rtt_p99", "no comparison"},
		{"no value", "loss<", "loss<", "no value"},
		{"no name", "<3", "<3", "no metric name"},
		{"not a number", "loss<abc%", "loss<abc%", "not a number"},
		{"stray comma", "loss<2%,", "", "empty term"},
		{"bang", "loss!2%", "loss!2%", "unknown comparison"},
		{"infinite", "lost_moves<1e999", "lost_moves<1e999", "finite"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.spec, known)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrSyntax) {
				t.Errorf("error %v does not wrap ErrSyntax", err)
			}
			var te *TermError
			if !errors.As(err, &te) {
				t.Fatalf("error %T is not a *TermError", err)
			}
			if strings.TrimSpace(te.Term) != tc.term {
				t.Errorf("term = %q, want %q", te.Term, tc.term)
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("error %q does not say %q", err, tc.reason)
			}
		})
	}
}

func TestParseEmpty(t *testing.T) {
	s, err := Parse("  ", known)
	if err != nil || len(s.Targets) != 0 {
		t.Fatalf("Parse(blank) = %+v, %v", s, err)
	}
	if _, ok := s.Evaluate(nil); !ok {
		t.Fatal("an empty spec must pass")
	}
}

func TestEvaluateNamesMissedTargets(t *testing.T) {
	s, err := Parse("rtt_p99<150ms,loss<2%,lost_moves=0,view_err_p99<0.5m", known)
	if err != nil {
		t.Fatal(err)
	}
	res, ok := s.Evaluate(map[string]float64{
		"rtt_p99": 0.212, "loss": 0.01, "lost_moves": 3, // view_err_p99 missing: no data
	})
	if ok {
		t.Fatal("gate passed with missed targets")
	}
	missed := Missed(res)
	var names []string
	for _, m := range missed {
		names = append(names, m.Target.Metric)
	}
	if got := strings.Join(names, ","); got != "rtt_p99,lost_moves,view_err_p99" {
		t.Fatalf("missed = %s", got)
	}
	if got := missed[0].String(); got != "rtt_p99 = 212ms, target < 150ms: MISSED" {
		t.Errorf("result line = %q", got)
	}
	if got := missed[2].String(); !strings.Contains(got, "n/a") {
		t.Errorf("missing metric line = %q, want n/a", got)
	}
	if !res[1].OK {
		t.Error("loss 1% < 2% should hold")
	}
}

func TestEvaluateBoundaries(t *testing.T) {
	tests := []struct {
		spec string
		v    float64
		ok   bool
	}{
		{"lost_moves<5", 5, false},
		{"lost_moves<=5", 5, true},
		{"lost_moves=5", 5, true},
		{"lost_moves>=5", 4.9, false},
		{"lost_moves>5", 5.1, true},
		{"lost_moves<5", math.NaN(), false},
	}
	for _, tc := range tests {
		s, err := Parse(tc.spec, known)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := s.Evaluate(map[string]float64{"lost_moves": tc.v}); ok != tc.ok {
			t.Errorf("%s with %v: ok = %v, want %v", tc.spec, tc.v, ok, tc.ok)
		}
	}
}

func TestKindFormat(t *testing.T) {
	tests := []struct {
		k    Kind
		v    float64
		want string
	}{
		{Duration, 0.15, "150ms"},
		{Ratio, 0.02, "2%"},
		{Distance, 0.5, "0.5m"},
		{Count, 3, "3"},
		{Count, math.NaN(), "n/a"},
	}
	for _, tc := range tests {
		if got := tc.k.Format(tc.v); got != tc.want {
			t.Errorf("%v.Format(%v) = %q, want %q", tc.k, tc.v, got, tc.want)
		}
	}
}

func TestParseTooLong(t *testing.T) {
	if _, err := Parse(strings.Repeat("loss<1%,", MaxSpecLen), known); !errors.Is(err, ErrSyntax) {
		t.Fatalf("err = %v", err)
	}
}

// FuzzParse: any spec parses or fails with ErrSyntax; a parsed spec
// re-parses from its targets' text to the same targets.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"rtt_p99<150ms,loss<2%,lost_moves=0,view_err_p99<0.5m", "loss>=0.5", "", "x<", "lost_moves<1e3", "rtt_p99<=1.5s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		s, err := Parse(spec, known)
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("error %v does not wrap ErrSyntax", err)
			}
			return
		}
		for _, tg := range s.Targets {
			again, err := Parse(tg.Text, known)
			if err != nil || len(again.Targets) != 1 || again.Targets[0].Value != tg.Value || again.Targets[0].Op != tg.Op {
				t.Fatalf("term %q re-parsed to %+v, %v", tg.Text, again, err)
			}
			if math.IsNaN(tg.Value) || math.IsInf(tg.Value, 0) {
				t.Fatalf("term %q gave value %v", tg.Text, tg.Value)
			}
		}
	})
}
