// Package hostcheck tells a quiet core from a shared one, so that a
// benchmark reading can be judged against the minute it was taken in.
//
// Our hosts are virtual machines; a core is most likely one hardware thread
// of a physical core that another tenant's thread shares. When that
// sibling is busy, code that issues several instructions a cycle (BenchmarkPack1000,
// the packet path) slows, by 1.6× and more, while its own CPU time still
// counts every cycle, and code bound by one long dependency chain does not
// slow at all. The two loops here are those two kinds: run
//
//	go test -run '^$' -bench . -count 3 ./bench/hostcheck
//
// beside a benchmark; a Wide figure well above its quiet value (≈ 1.04
// ns/iter on the 2.6 GHz EPYC of docs/benchmarks.md's Machine table) while
// Chain holds steady says the readings of that minute are the host's, not
// the code's.
package hostcheck
