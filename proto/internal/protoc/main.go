// Command protoc is the repository's protobuf compiler front end: it parses
// and links .proto files in pure Go (github.com/bufbuild/protocompile) and
// hands the result to the protoc-gen-go plugin pinned in go.mod
// (`go tool protoc-gen-go`) exactly as protoc would, over the plugin
// protocol on stdin/stdout. So `go generate ./...` needs nothing but the Go
// toolchain and the module proxy: no protoc binary, no Debian package, and
// the same generator version on every machine (CI and the verify target
// regenerate and diff).
//
//	go run ./internal/protoc -I . -out . ghostwire/v1/*.proto
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/pluginpb"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "protoc:", err)
		os.Exit(1)
	}
}

func run() error {
	fs := flag.NewFlagSet("protoc", flag.ContinueOnError)
	include := fs.String("I", ".", "import root: .proto paths are relative to it")
	out := fs.String("out", ".", "directory the generated files are written under")
	param := fs.String("param", "paths=source_relative", "parameter passed to protoc-gen-go")
	plugin := fs.String("plugin", "go tool protoc-gen-go", "plugin command, split on spaces")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: protoc [flags] file.proto...\n\nCompiles .proto files in pure Go and runs protoc-gen-go on them.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	files := fs.Args()
	if len(files) == 0 {
		fs.Usage()
		return errors.New("no .proto files given")
	}
	for i, f := range files {
		// Names are import-root relative, with forward slashes, as in imports.
		rel, err := filepath.Rel(*include, f)
		if err != nil {
			rel = f
		}
		files[i] = filepath.ToSlash(rel)
	}
	sort.Strings(files)

	c := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{*include}}),
		SourceInfoMode: protocompile.SourceInfoStandard, // comments go into the generated code
	}
	linked, err := c.Compile(context.Background(), files...)
	if err != nil {
		return err
	}

	// The request lists every file the plugin may need, dependencies first.
	req := &pluginpb.CodeGeneratorRequest{FileToGenerate: files}
	if *param != "" {
		req.Parameter = proto.String(*param)
	}
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		imps := fd.Imports()
		for i := range imps.Len() {
			add(imps.Get(i).FileDescriptor)
		}
		req.ProtoFile = append(req.ProtoFile, protodesc.ToFileDescriptorProto(fd))
	}
	for _, f := range linked {
		add(f)
	}
	in, err := proto.Marshal(req)
	if err != nil {
		return err
	}
	args := strings.Fields(*plugin)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("run %s: %w", *plugin, err)
	}
	var resp pluginpb.CodeGeneratorResponse
	if err := proto.Unmarshal(stdout, &resp); err != nil {
		return fmt.Errorf("decode %s response: %w", *plugin, err)
	}
	if resp.Error != nil {
		return fmt.Errorf("%s: %s", *plugin, resp.GetError())
	}
	for _, f := range resp.File {
		if f.GetInsertionPoint() != "" {
			return fmt.Errorf("%s: insertion points are not supported (%s)", *plugin, f.GetName())
		}
		path := filepath.Join(*out, filepath.FromSlash(f.GetName()))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(f.GetContent()), 0o644); err != nil {
			return err
		}
	}
	return nil
}
