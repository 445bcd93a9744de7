package msg

import "github.com/asynkron/protoactor-go/actor"

// Await waits for f and returns its answer, or its error (actor.ErrTimeout,
// actor.ErrDeadLetter) without reading the answer.
//
// Use it instead of f.Result(). protoactor's future stores a reply in its
// result field before it takes the future's lock, so a reply that comes
// after the timeout writes that field while the caller, already woken by
// the timeout, reads it in Result: a data race (seen under -race in a
// node's restore loop, whose zone answered late). The error is written
// under the lock by the timer, and a reply that wins the race is written
// before the lock that wakes the caller, so reading the answer only when
// there is no error is safe.
func Await(f *actor.Future) (any, error) {
	if err := f.Wait(); err != nil {
		return nil, err
	}
	return f.Result()
}
