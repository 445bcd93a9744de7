// Package metrics is botswarm's measurement core: cumulative counters and
// HDR histograms (github.com/HdrHistogram/hdrhistogram-go, 3 significant
// digits) kept per worker in a Shard, a Collector that sums the shards once
// a second into a time series, and the Report built at the end — every
// metric an SLO may name (Known), the five invariants judged from the
// counts, the SLO verdicts — written as JSON.
//
// Workers record under their shard's mutex, taken once per loop turn; the
// collector takes each mutex once a second. Recording allocates nothing.
package metrics
