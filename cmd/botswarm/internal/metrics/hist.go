package metrics

import (
	"math"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Hist is an HDR histogram of integer samples in a fixed recording unit
// (microseconds, micrometres) that reports in a display unit (ms, m).
// Recording is O(1) and allocation-free; values above the range are clamped
// to it and counted, so one absurd sample neither panics nor vanishes.
//
// Not safe for concurrent use: each worker records into its own and the
// collector merges them.
type Hist struct {
	h       *hdrhistogram.Histogram
	scale   float64 // display value = recorded / scale
	unit    string
	clamped uint64
}

// SigFigs is the histograms' precision: 3 significant digits, i.e. every
// percentile is within 0.1 % of the true sample.
const SigFigs = 3

// NewHist returns a histogram for samples in [0, max] recording units,
// displayed as value/scale in unit.
func NewHist(max int64, scale float64, unit string) *Hist {
	return &Hist{h: hdrhistogram.New(1, max, SigFigs), scale: scale, unit: unit}
}

// Record adds one sample (negative counts as 0).
func (h *Hist) Record(v int64) {
	if v < 0 {
		v = 0
	}
	if hi := h.h.HighestTrackableValue(); v > hi {
		v = hi
		h.clamped++
	}
	_ = h.h.RecordValue(v) // in range by construction
}

// Count is the number of samples.
func (h *Hist) Count() int64 { return h.h.TotalCount() }

// Merge adds every sample of o (same range) into h.
func (h *Hist) Merge(o *Hist) {
	h.h.Merge(o.h)
	h.clamped += o.clamped
}

// Reset empties h, keeping its memory.
func (h *Hist) Reset() {
	h.h.Reset()
	h.clamped = 0
}

// Quantile returns the q-quantile (0..1) in display units, NaN when empty.
func (h *Hist) Quantile(q float64) float64 {
	if h.h.TotalCount() == 0 {
		return math.NaN()
	}
	return float64(h.h.ValueAtQuantile(q*100)) / h.scale
}

// Max returns the largest sample in display units, NaN when empty.
func (h *Hist) Max() float64 {
	if h.h.TotalCount() == 0 {
		return math.NaN()
	}
	return float64(h.h.Max()) / h.scale
}

// Summary is a histogram as the JSON report carries it: the usual
// percentiles and the non-empty buckets, enough to redraw the distribution.
type Summary struct {
	Unit    string  `json:"unit"`
	Count   int64   `json:"count"`
	Min     float64 `json:"min"`
	Mean    float64 `json:"mean"`
	StdDev  float64 `json:"stddev"`
	P50     float64 `json:"p50"`
	P90     float64 `json:"p90"`
	P99     float64 `json:"p99"`
	P999    float64 `json:"p999"`
	Max     float64 `json:"max"`
	Clamped uint64  `json:"clamped,omitempty"` // samples above the range, recorded as its top
	// Buckets are [upper bound, count] of every non-empty bucket, ascending.
	Buckets [][2]float64 `json:"buckets"`
}

// Summarize returns h's summary. Empty histograms give zero percentiles and
// no buckets (JSON cannot hold NaN).
func (h *Hist) Summarize() Summary {
	s := Summary{Unit: h.unit, Count: h.h.TotalCount(), Clamped: h.clamped, Buckets: [][2]float64{}}
	if s.Count == 0 {
		return s
	}
	s.Min = float64(h.h.Min()) / h.scale
	s.Max = float64(h.h.Max()) / h.scale
	s.Mean = h.h.Mean() / h.scale
	s.StdDev = h.h.StdDev() / h.scale
	s.P50 = h.Quantile(0.50)
	s.P90 = h.Quantile(0.90)
	s.P99 = h.Quantile(0.99)
	s.P999 = h.Quantile(0.999)
	for _, b := range h.h.Distribution() {
		if b.Count > 0 {
			s.Buckets = append(s.Buckets, [2]float64{float64(b.To) / h.scale, float64(b.Count)})
		}
	}
	return s
}

// CDF returns the empirical distribution from a summary's buckets:
// xs[i] is a bucket's upper bound, ps[i] the fraction of samples ≤ it.
func (s Summary) CDF() (xs, ps []float64) {
	var n float64
	for _, b := range s.Buckets {
		n += b[1]
	}
	if n == 0 {
		return nil, nil
	}
	var acc float64
	for _, b := range s.Buckets {
		acc += b[1]
		xs = append(xs, b[0])
		ps = append(ps, acc/n)
	}
	return xs, ps
}
