// Package proto holds the protobuf definitions of everything that crosses a
// process boundary in a ghostwire cluster: zone handoff, border replica
// batches, the zone → connection view and control feeds, player input
// forwarding, directory records (zone owner leases, player records, nodes)
// and the admin API. The .proto sources are in ghostwire/v1; the generated
// Go code (package ghostwirev1) is committed beside them, and pbconv
// converts between it and the pure in-process types (zones/handoff,
// zones/sim, replication/move, replication/ghost).
//
// Regenerate with `go generate ./proto/...` (or `make generate`): it needs
// only the Go toolchain. internal/protoc parses the .proto files in pure Go
// (github.com/bufbuild/protocompile) and runs protoc-gen-go, pinned as a
// `tool` in go.mod, through the standard plugin protocol. A protoc binary
// would have to come from the OS (Debian's protobuf-compiler is 3.21, other
// systems differ), so the generated files would depend on the machine;
// this way they depend on go.mod alone, and `make verify` can regenerate
// and diff on any machine.
package proto

//go:generate go run ./internal/protoc -I . -out . ghostwire/v1/admin.proto ghostwire/v1/cluster.proto ghostwire/v1/common.proto ghostwire/v1/directory.proto ghostwire/v1/handoff.proto ghostwire/v1/input.proto ghostwire/v1/replica.proto ghostwire/v1/view.proto
