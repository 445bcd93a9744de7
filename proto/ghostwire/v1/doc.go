// Package ghostwirev1 is the generated Go code of ghostwire's protobuf
// messages (the .proto files beside it): what zones, connections and the
// directory exchange across processes. Do not edit the *.pb.go files;
// change the .proto and run `go generate ./proto/...`. Convert to and from
// the in-process types with package pbconv.
package ghostwirev1
