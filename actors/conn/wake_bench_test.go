package conn

import (
	"syscall"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
)

// BenchmarkShardWakes (informative: real goroutines and real time) is a
// pool's shards woken as the gateway's reader wakes them: 2 shards, each
// with a connection whose deadline stays where it is (a pending one's
// timeout, an hour away, as the tick-driven deadline of a node's shard
// stays between its zones' ticks), and every millisecond one post to
// each (to a stopped connection: the round does nothing else). An op is
// one millisecond of that. It reports, an op: the shards' timer settings
// (arms), their rounds, and the process's context switches (getrusage).
// Run it under cachegrind for the instructions of a wake-up and its park
// (the runtime's timer heap and poller included), or under perf stat with
// the futex and epoll_pwait tracepoints for the system calls.
func BenchmarkShardWakes(b *testing.B) {
	p := quietPool(b, 2)
	x := record(b, 1)
	idle := make([]*Conn, len(p.shards))
	for i := range p.shards {
		sess, _ := grantFor(b, x.req)
		if _, err := p.Open(Params{Handshake: sess, Player: uint64(i + 1), Timeout: time.Hour}); err != nil {
			b.Fatal(err)
		}
		idle[i] = &Conn{sh: p.shards[i], stopped: true, hidx: -1}
	}
	for p.Rounds()[RoundPosted] < uint64(len(p.shards)) { // the Opens handled
		time.Sleep(time.Millisecond)
	}
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	r0 := p.Rounds()
	for b.Loop() {
		for _, c := range idle {
			c.sh.post(c, msg.ViewReadyMsg)
		}
		time.Sleep(time.Millisecond)
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	r1 := p.Rounds()
	p.Close() // the shards' counts are theirs until then
	arms := 0
	for _, s := range p.shards {
		arms += s.arms
	}
	var rounds uint64
	for i := range r1 {
		rounds += r1[i] - r0[i]
	}
	n := float64(b.N)
	b.ReportMetric(float64(arms)/n, "arms/op")
	b.ReportMetric(float64(rounds)/n, "rounds/op")
	b.ReportMetric(float64(ru1.Nvcsw-ru0.Nvcsw+ru1.Nivcsw-ru0.Nivcsw)/n, "csw/op")
}
