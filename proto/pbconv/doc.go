// Package pbconv converts between ghostwire's pure in-process types
// (zones/handoff messages, zones/sim replica batches, replication/move moves
// and control states, replication/ghost view entries) and their protobuf
// forms in proto/ghostwire/v1, so the cluster bridge changes only the
// transport: the zone actors and the handoff machine see the same values
// either way.
//
// Decoding functions (…FromProto) treat their input as untrusted: every
// field is range-checked (a move's stick outside ±127, a payload over 16
// bytes, a name over 31 bytes, more moves or interest ids than the bounds
// below), and a bad field is a *FieldError naming it, never a panic and
// never an allocation beyond the bounds. Floats are carried bit-exactly.
package pbconv
