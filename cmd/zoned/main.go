// Command zoned runs a ghostwire zone server.
//
// The zone server (gateway, connection actors, zone actors and the embedded
// NATS server) is not built yet: today zoned only says so. The replication
// core it will run on lives in ../../replication.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	fs := flag.NewFlagSet("zoned", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: zoned\n\nzoned will run a whole ghostwire world on this machine.\nIt is not built yet; see README.md for what exists today.\n")
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			return
		}
		os.Exit(2)
	}
	fmt.Println("zoned: not yet — the zone server is under construction; the replication core is in replication/ (run `make test`).")
}
