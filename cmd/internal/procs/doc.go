// Package procs sizes the Go scheduler to a server's load: it sets
// GOMAXPROCS between 1 and the runtime's default from the process's own
// CPU use, sampled a few times a second.
//
// Why: a zoned's work arrives in thousands of small hand-offs a second
// (read batches to the connection shards, ticks to the zone runners,
// views back). Every goroutine made ready while another P is idle makes
// the runtime wake an idle thread to spin for it; at a load well under
// the machine's cores most of those wake-ups find nothing, and each costs
// a futex call, an interprocessor interrupt and two context switches. On
// the 2-core host of docs/benchmarks.md a node of 2,000 players used
// 0.34 ms of CPU a player-second with two Ps and 0.28 with one, with a
// shorter tick tail too (the forty-third capacity pass). So the sizer
// runs the node on the fewest Ps its load fits, and gives it more as soon
// as the load needs them.
//
// The policy (Sizer) is pure and takes time and CPU readings as
// arguments; Run samples the process (getrusage) and applies its
// decisions. An operator who sets GOMAXPROCS in the environment turns
// the sizer off: that number stays.
package procs
