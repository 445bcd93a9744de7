// Package conformance builds the protocol's conformance vectors: the JSON
// files under docs/vectors that let a client written in another language
// test every layer of docs/protocol.md offline, from bit-stream encodings to
// whole AEAD-sealed datagrams of a connection, before it ever talks to a
// server.
//
// Every vector comes from the real encoders and decoders of replication/…,
// driven with fixed inputs, fixed keys and fixed randomness, so the files
// are deterministic. Files returns them; `go generate` writes them
// (gen.go), and TestVectorsUpToDate fails when the code and the committed
// files differ by one byte. The other tests replay each file's inputs from
// the JSON through the decoders and encoders, and check the spec's formulas
// (nonces, associated data, CRC bytes, the Walk step) independently of the
// code that produced them.
//
// Pure, like the rest of replication/: no sockets, goroutines or clock;
// only gen.go (a build-ignored main) writes files.
package conformance

//go:generate go run gen.go
