package netsim

import "fmt"

// Pipe is a bidirectional link: two independent directions, each with its own impairment and
// its own random stream. Use NewPipe; the zero Pipe holds nil links. Not safe for concurrent use.
type Pipe struct {
	AtoB, BtoA *Link
}

// NewPipe returns a pipe whose AtoB direction is impaired by ab and BtoA by ba. The directions
// draw from independent random streams even when ab.Seed == ba.Seed.
func NewPipe(ab, ba Config) (*Pipe, error) {
	a, err := newLink(ab, streamAtoB)
	if err != nil {
		return nil, fmt.Errorf("netsim: pipe A→B: %w", err)
	}
	b, err := newLink(ba, streamBtoA)
	if err != nil {
		return nil, fmt.Errorf("netsim: pipe B→A: %w", err)
	}
	return &Pipe{AtoB: a, BtoA: b}, nil
}
